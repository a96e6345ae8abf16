"""No benchmark process or temporary folder outlives the command: Ctrl-C of ``scaleright bench train`` stops
torchrun and every worker, prints the runs stored so far and exits 130; ``kill -9`` of it leaves no worker running
and no run directory (the reaper of ``bench/lifeline.py``); a stale run directory whose owner is gone is swept.

The job is held in place with the hidden fault switch ``hang:rank1`` (rank 1 sleeps in its first timed step, rank 0
waits for it in a collective) and a long ``--timeout-s``, so only the signal under test can end it. Every process of
a run is found through its environment: the CLI runs with ``TMPDIR`` set to a folder of this test, which every child
inherits.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scaleright.bench import RunStore, RunStoreError
from scaleright.bench.lifeline import OWNER_FILE, pid_alive, sweep_stale

FAULT_ENV = "SCALERIGHT_BENCH_FAULT"
WAIT_S = 240  # generous: the machine running the tests may be loaded


def _wait_for(condition, what: str, timeout_s: float = WAIT_S, proc: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = condition()
        if got:
            return got
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the CLI exited with {proc.returncode} while waiting for {what}")
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def _processes_with(marker: str) -> list[int]:
    """Pids of live processes whose environment mentions ``marker`` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in env and pid_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def _stored(db: Path, kind: str = "train") -> list[dict]:
    """The runs of ``kind`` in ``db`` so far ([] while the CLI is still creating it)."""
    try:
        return RunStore(db).list(kind) if db.exists() else []
    except RunStoreError:
        return []


def _hung_world_size_2(tmp: Path) -> Path | None:
    """The run directory of the world-size-2 job once rank 1 sits in its injected hang, else None."""
    for run_dir in tmp.glob("scaleright-bench-*"):
        labels = {}
        for rank in (0, 1):
            try:
                labels[rank] = json.loads((run_dir / f"rank{rank}.progress").read_bytes().strip())["label"]
            except (OSError, ValueError):
                return None
        if labels[1] == "step 0: start" and labels[0].startswith("step 0"):
            return run_dir
    return None


def _start(tmp_path: Path, nproc: str, *extra: str) -> tuple[subprocess.Popen, Path, Path]:
    tmp, db = tmp_path / "tmp", tmp_path / "runs.sqlite"
    tmp.mkdir()
    env = {**os.environ, FAULT_ENV: "hang:rank1", "TMPDIR": str(tmp)}
    out, err = open(tmp_path / "stdout", "w"), open(tmp_path / "stderr", "w")  # noqa: SIM115 - closed below
    with out, err:
        proc = subprocess.Popen([sys.executable, "-m", "scaleright", "bench", "train", "--nproc", nproc,
                                 "--device", "cpu", "--steps", "2", "--warmup", "1", "--timeout-s", "3600",
                                 "--db", str(db), *extra], env=env, stdout=out, stderr=err)
    return proc, tmp, db


def _nothing_left(tmp: Path) -> None:
    _wait_for(lambda: not _processes_with(str(tmp)), "every process of the run to exit", timeout_s=60)
    _wait_for(lambda: not any(tmp.iterdir()), "the run directory to be removed", timeout_s=60)


@pytest.mark.slow
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_ctrl_c_stops_every_process_prints_stored_runs_and_exits_130(tmp_path, as_json):
    proc, tmp, db = _start(tmp_path, "1,2", *(["--json"] if as_json else []))
    try:
        _wait_for(lambda: _stored(db), "world size 1 to be stored", proc=proc)
        _wait_for(lambda: _hung_world_size_2(tmp), "world size 2 to be running", proc=proc)
        assert len(_processes_with(str(tmp))) >= 4  # the CLI, torchrun, two workers (and the reaper)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 130
    finally:
        proc.kill()
        proc.wait()
    out, err = (tmp_path / "stdout").read_text(), (tmp_path / "stderr").read_text()
    assert "Traceback" not in err, err
    [run] = RunStore(db).list("train")  # the interrupted world size is not stored
    assert (run["layout"]["world_size"], run["status"]) == (1, "ok")
    if as_json:
        printed = json.loads(out)
        assert printed["interrupted"] is True
        assert [(r["run_id"], r["world_size"], r["status"]) for r in printed["runs"]] == [(run["id"], 1, "ok")]
    else:
        assert out.strip().splitlines()[-1] == (
            "interrupted: stopped the benchmark and its processes; stored before the interrupt: "
            f"run id {run['id']} (world_size=1)")
    _nothing_left(tmp)


@pytest.mark.slow
def test_kill_9_of_the_cli_leaves_no_worker_and_no_run_directory(tmp_path):
    proc, tmp, _db = _start(tmp_path, "2")
    try:
        run_dir = _wait_for(lambda: _hung_world_size_2(tmp), "world size 2 to be running", proc=proc)
        workers = [int(json.loads((run_dir / f"rank{r}.progress").read_bytes().strip())["pid"]) for r in (0, 1)]
        assert all(pid_alive(p) for p in workers)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    _nothing_left(tmp)
    assert not any(pid_alive(p) for p in workers)


def test_sweep_removes_only_run_directories_whose_owner_is_gone(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    stale, live, kept = (tmp_path / f"scaleright-bench-{n}" for n in ("stale", "live", "kept"))
    for d in (stale, live, kept):
        d.mkdir()
        (d / "rank0.progress").write_text("{}")
    (stale / OWNER_FILE).write_text(str(dead_pid))
    (live / OWNER_FILE).write_text(str(os.getpid()))  # kept has no owner file: SCALERIGHT_BENCH_KEEP
    assert sweep_stale(str(tmp_path)) == [stale]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scaleright-bench-kept", "scaleright-bench-live"]


# A middle process that starts a child following it with one lifeline mechanism, prints the child's pid, then waits;
# the child shares its stdout and prints "ready" once it follows.
MIDDLE = r"""
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]])
print(child.pid, flush=True)
time.sleep(3600)
"""
FOLLOWERS = {
    "pdeathsig": "import signal, time\nfrom scaleright.bench.lifeline import set_parent_death_signal\n"
                 "assert set_parent_death_signal(signal.SIGKILL)\nprint('ready', flush=True)\ntime.sleep(3600)",
    "watchdog": "import os, time\nfrom scaleright.bench.lifeline import watch_parent\n"
                "watch_parent(lambda: os._exit(0))\nprint('ready', flush=True)\ntime.sleep(3600)",
}


def _read_lines(fd: int, n: int, *, timeout_s: float) -> list[str]:
    """The first ``n`` lines written to ``fd``, waiting at most ``timeout_s`` in all."""
    data, deadline = b"", time.monotonic() + timeout_s
    while data.count(b"\n") < n:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(fd, 4096) if ready else b""
        if not chunk:
            raise AssertionError(f"got only {data!r} within {timeout_s} s")
        data += chunk
    return [ln.strip() for ln in data.decode().splitlines()[:n]]


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc are Linux")
@pytest.mark.parametrize("how", sorted(FOLLOWERS))
def test_a_process_following_its_parent_dies_with_it(how):
    middle = subprocess.Popen([sys.executable, "-c", MIDDLE, FOLLOWERS[how]], stdout=subprocess.PIPE)
    try:
        lines = set(_read_lines(middle.stdout.fileno(), 2, timeout_s=WAIT_S))
        assert "ready" in lines, lines
        child = int(next(ln for ln in lines if ln.isdigit()))
        assert pid_alive(child)
        middle.kill()
        middle.wait()
        _wait_for(lambda: not pid_alive(child), f"the {how} follower to exit", timeout_s=60)
    finally:
        middle.kill()
        middle.wait()
        middle.stdout.close()


@pytest.mark.slow
def test_ctrl_c_of_bench_infer_prints_the_stored_batch_sizes_and_exits_130(tmp_path):
    db = tmp_path / "runs.sqlite"
    # batch 1 takes about a second; batch 8192 takes minutes, so the interrupt lands inside it
    proc = subprocess.Popen([sys.executable, "-m", "scaleright", "bench", "infer", "--device", "cpu",
                             "--batch-sizes", "1,8192", "--prompt-len", "16", "--gen-len", "16", "--warmup", "0",
                             "--repeats", "50", "--db", str(db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        _wait_for(lambda: _stored(db, "infer"), "batch size 1 to be stored", proc=proc)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err
    [run] = RunStore(db).list("infer")
    assert out.strip().splitlines()[-1] == (
        "interrupted: stopped the benchmark and its processes; stored before the interrupt: "
        f"run id {run['id']} (batch_size=1)")
