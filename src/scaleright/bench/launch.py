"""Start the ranks with torchrun (``python -m torch.distributed.run``), watch them, name the rank that failed.

torchrun is PyTorch's own launcher (docs: "torchrun (Elastic Launch)"): one node uses ``--standalone`` (a local
rendezvous on a free port); several nodes use the c10d rendezvous, ``--nnodes N --rdzv-backend c10d
--rdzv-endpoint HOST:PORT --rdzv-id ID`` on every node. Global ranks are assigned by the rendezvous; the node that
hosts global rank 0 receives ``result.json`` (``bench/rank.py``).

Hang timeout: the parent polls every rank's progress beacon (``bench/progress.py``) and stops the job when a rank
that has not marked ``done`` made no progress for ``timeout_s`` seconds (a rank that has not started yet counts
from the launch). The least-advanced rank is named as the one that hung; the others wait for it in a collective.
Once every local rank marked ``done`` no timeout applies; torchrun gets ``DONE_GRACE_S`` to exit, then is stopped
and the results still count.

Stopping (timeout, Ctrl-C): torchrun runs in its own session; the parent sends SIGTERM to torchrun's process group,
then SIGKILL to it and to each worker's own process group (torchrun starts workers with ``start_new_session=True``;
their pids are in the beacons), and waits until they are gone. SIGINT is ignored while it does.

Attribution: a rank that raises writes ``rank{r}.error.json``; a rank killed by a signal or leaving through a bare
``os._exit`` writes nothing, so its exit status is read from torchrun's failure summary in ``torchrun.log`` (``rank
: R (local_rank: L)`` / ``exitcode : -9 (pid: P)``). The cause is chosen in this order: a rank that died of a
signal other than SIGTERM/SIGABRT or exited non-zero without a record; the earliest record that is not a lost
connection; a SIGABRT; the earliest lost-connection record ("Connection reset by peer": a consequence, the peer
died first); a SIGTERM (torchrun stops the survivors with SIGTERM once one rank failed).

Temporary files: each world size gets a fresh run directory (``scaleright-bench-*`` in the temp dir, holding
``owner.pid``); torchrun and the workers get ``TMPDIR`` inside it, so torchrun's own ``torchelastic_*`` folders go
with it. The directory is removed when the job ends, by a reaper process if the parent dies (``bench/lifeline.py``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel

from scaleright.bench.config import LaunchSpec
from scaleright.bench.errors import BenchRunError
from scaleright.bench.lifeline import (
    LAUNCHER_ENV,
    OWNER_FILE,
    RUN_DIR_PREFIX,
    TORCHRUN_PID_FILE,
    Reaper,
    environ_has,
    pid_alive,
    sweep_stale,
)
from scaleright.bench.progress import least_advanced, read_progress
from scaleright.bench.rank import DIR_ENV

__all__ = ["Launch", "torchrun_command", "rank_configs", "job_env", "worker_config", "run_ranks", "diagnose",
           "torchrun_failures", "REMOTE"]

KEEP_ENV = "SCALERIGHT_BENCH_KEEP"  # set to keep the run directory (config, beacons, torchrun.log) for debugging
REMOTE: Final = "remote"  # marker: this node's ranks finished; global rank 0 lives on another node
POLL_S = 0.2  # how often the parent reads the beacons
DONE_GRACE_S = 60.0  # after every local rank marked done, torchrun's teardown gets this long
STOP_GRACE_S = 5.0  # SIGTERM -> SIGKILL


@dataclass(frozen=True)
class Launch:
    """One torchrun invocation: a worker module at one world size."""

    module: str  # e.g. scaleright.bench.worker
    nproc_per_node: int
    spec: LaunchSpec
    env: tuple[tuple[str, str], ...] = ()  # extra environment for torchrun and its workers

    @property
    def world_size(self) -> int:
        """Ranks in the job."""
        return self.nproc_per_node * self.spec.nnodes


def torchrun_command(launch: Launch) -> list[str]:
    """The exact argv that starts the job (the run directory is passed in ``SCALERIGHT_BENCH_DIR``).

    The rendezvous id gets the per-node process count appended (``ID-n4``), so every node computes the same id for
    the same world size and consecutive world sizes never share a rendezvous."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(launch.nproc_per_node)]
    s = launch.spec
    if s.rdzv_endpoint:
        rdzv_id = f"{s.rdzv_id}-n{launch.nproc_per_node}"
        cmd += ["--nnodes", str(s.nnodes), "--node-rank", str(s.node_rank), "--rdzv-backend", "c10d",
                "--rdzv-endpoint", s.rdzv_endpoint, "--rdzv-id", rdzv_id]
    else:
        cmd += ["--standalone", "--nnodes", "1"]
    cmd += ["--max-restarts", "0", "--module", launch.module]
    return cmd


def rank_configs(launch: Launch, config: dict) -> list[dict]:
    """What each local rank of this node will run with (for ``--dry-run``)."""
    out = []
    n = launch.nproc_per_node
    for local in range(n):
        device, backend = {"cuda": (f"cuda:{local}", "nccl"), "cpu": ("cpu", "gloo")}.get(
            config.get("device", "auto"), (f"cuda:{local} if available, else cpu", "nccl on cuda, gloo on cpu"))
        global_rank = "assigned by rendezvous" if launch.spec.nnodes > 1 else local
        out.append({"local_rank": local, "rank": global_rank, "world_size": launch.world_size, "device": device,
                    "backend": backend, "env": dict(launch.env), "config": config})
    return out


def job_env(launch: Launch, run_dir: str, launcher_pid: str) -> dict[str, str]:
    """What the job gets on top of the parent's environment: the launch's own variables, the run directory, the
    launcher's pid (the workers' watchdog follows it) and a ``TMPDIR`` inside the run directory."""
    return {**dict(launch.env), DIR_ENV: run_dir, LAUNCHER_ENV: launcher_pid, "TMPDIR": f"{run_dir}/tmp"}


def worker_config(cfg: BaseModel, nproc_per_node: int) -> dict:
    """The config the workers of one world size read: the sweep's config narrowed to this ``nproc``."""
    return cfg.model_copy(update={"nproc": (nproc_per_node,)}).model_dump(mode="json")


def _signal_pgroup(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _stop(proc: subprocess.Popen, run_dir: Path) -> None:
    """SIGTERM torchrun's group, then SIGKILL it and every worker's group; wait (bounded) until they are gone."""
    main = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None  # a second Ctrl-C must not cut this short
    try:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            _signal_pgroup(proc.pid, sig)
            try:
                proc.wait(timeout=STOP_GRACE_S)
                break
            except subprocess.TimeoutExpired:
                continue
        workers = [int(b["pid"]) for b in read_progress(run_dir).values() if str(b.get("pid", "")).isdigit()]
        workers = [p for p in workers if pid_alive(p) and environ_has(p, DIR_ENV, str(run_dir))]
        for pid in workers:
            _signal_pgroup(pid, signal.SIGKILL)
        deadline = time.monotonic() + STOP_GRACE_S
        while any(pid_alive(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        if main:
            signal.signal(signal.SIGINT, old)


@dataclass
class _Watch:
    """What the parent saw while the job ran."""

    timed_out: bool = False
    died_at: dict[int, float] | None = None  # rank -> wall time its process was first seen gone


def _supervise(proc: subprocess.Popen, run_dir: Path, launch: Launch,
               on_progress: Callable[[str | None], None] | None = None) -> _Watch:
    """Wait for torchrun, applying the progress timeout and the done grace (module doc); ``on_progress`` gets the
    least-advanced rank's beacon (``rank R: label``) at every poll."""
    timeout_s, expected = launch.spec.timeout_s, launch.nproc_per_node
    start = time.monotonic()
    seen: dict[int, tuple[object, float]] = {}  # rank -> (seq, monotonic time that seq was first seen)
    died_at: dict[int, float] = {}
    done_since: float | None = None
    while True:
        try:
            proc.wait(timeout=POLL_S)
            return _Watch(died_at=died_at)
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        beacons = read_progress(run_dir)
        if on_progress is not None:
            on_progress(least_advanced(beacons) if beacons else "starting the ranks")
        for r, b in beacons.items():
            if r not in seen or seen[r][0] != b.get("seq"):
                seen[r] = (b.get("seq"), now)
            pid = b.get("pid")
            if r not in died_at and b.get("label") != "done" and isinstance(pid, int) and pid > 0 \
                    and not pid_alive(pid):
                died_at[r] = time.time()
        pending = [r for r, b in beacons.items() if b.get("label") != "done"]
        if len(beacons) >= expected and not pending:
            done_since = done_since if done_since is not None else now
            if now - done_since > DONE_GRACE_S:
                _stop(proc, run_dir)
                return _Watch(died_at=died_at)
            continue
        last = [seen[r][1] for r in pending] + ([start] if len(beacons) < expected else [])
        if now - min(last) > timeout_s:
            _stop(proc, run_dir)
            return _Watch(timed_out=True, died_at=died_at)


def run_ranks(launch: Launch, config: dict, *,
              on_progress: Callable[[str | None], None] | None = None) -> list[dict] | Literal["remote"]:
    """Run the job; return the per-rank results (sorted by rank), or ``REMOTE`` on a node without rank 0.
    ``on_progress``: called while it runs with the least-advanced rank's beacon (``bench/progress.py``).

    Raises ``BenchRunError`` naming the failed rank and the cause. On any other exception (``KeyboardInterrupt``
    from Ctrl-C) every process of the job is stopped before it propagates. The run directory is removed either way.
    """
    sweep_stale()
    run_dir = Path(tempfile.mkdtemp(prefix=RUN_DIR_PREFIX))
    (run_dir / OWNER_FILE).write_text(str(os.getpid()))
    reaper = Reaper(run_dir, dir_env=DIR_ENV)
    try:
        (run_dir / "config.json").write_text(json.dumps(config))
        (run_dir / "tmp").mkdir()
        env = {**os.environ, **job_env(launch, str(run_dir), str(os.getpid()))}
        log_path = run_dir / "torchrun.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(torchrun_command(launch), env=env, stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                (run_dir / TORCHRUN_PID_FILE).write_text(str(proc.pid))
                watch = _supervise(proc, run_dir, launch, on_progress)
            except BaseException:  # Ctrl-C in the parent: leave no rank behind
                _stop(proc, run_dir)
                raise
        log_text = log_path.read_text(errors="replace")
        return diagnose(run_dir, world_size=launch.world_size, returncode=proc.returncode,
                        timed_out=watch.timed_out, timeout_s=launch.spec.timeout_s, multi_node=launch.spec.nnodes > 1,
                        log_tail=_last_meaningful_line(log_text), log_text=log_text, died_at=watch.died_at)
    finally:
        if os.environ.get(KEEP_ENV):
            (run_dir / OWNER_FILE).unlink(missing_ok=True)  # kept on purpose: not for the reaper or the sweep
            print(f"scaleright: kept run directory {run_dir}", file=sys.stderr)
        else:
            shutil.rmtree(run_dir, ignore_errors=True)
        reaper.close()


def _last_meaningful_line(log_text: str) -> str:
    """The last log line that is not a separator or blank (torchrun frames its summary in ===== lines)."""
    return next((ln.strip() for ln in reversed(log_text.splitlines()) if ln.strip().strip("=*-")), "")


_FAILURE = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank:\s*(\d+)\)\s*\n\s*exitcode\s*:\s*(-?\d+)\s*\(pid:\s*(\d+)\)")


def torchrun_failures(log_text: str) -> dict[int, dict]:
    """``{rank: {"local_rank", "exitcode", "pid"}}`` from torchrun's failure summary (``ChildFailedError``);
    exitcode ``-N`` means killed by signal N."""
    return {int(m.group(1)): {"local_rank": int(m.group(2)), "exitcode": int(m.group(3)), "pid": int(m.group(4))}
            for m in _FAILURE.finditer(log_text)}


# What a rank raises when a peer died first: the consequence, not the cause (gloo, NCCL, sockets).
_PEER_LOST = re.compile(r"closed by peer|reset by peer|broken pipe|socket closed|connection refused|"
                        r"remote process exited|communicator was aborted|ECONNRESET|EPIPE", re.IGNORECASE)

_SIGNAL_WORDS = {
    signal.SIGKILL: "was killed by SIGKILL (the kernel's out-of-memory killer sends this)",
    signal.SIGSEGV: "crashed with a segmentation fault (SIGSEGV)",
    signal.SIGBUS: "crashed with a bus error (SIGBUS)",
    signal.SIGILL: "crashed on an illegal instruction (SIGILL)",
    signal.SIGFPE: "crashed with a floating-point exception (SIGFPE)",
    signal.SIGABRT: "aborted (SIGABRT)",
    signal.SIGTERM: "was terminated (SIGTERM)",
    signal.SIGINT: "was interrupted (SIGINT)",
}


def _signal_words(num: int) -> str:
    try:
        sig = signal.Signals(num)
    except ValueError:
        return f"was killed by signal {num}"
    return _SIGNAL_WORDS.get(sig, f"was killed by {sig.name}")


def _record_message(rec: dict, at: str) -> str:
    rank, phase, cause = rec["rank"], rec.get("phase", "?"), rec.get("cause", "crash")
    if cause == "oom":
        return f"rank {rank} ran out of memory {at} during '{phase}': {rec['error']}"
    if cause == "interrupt":
        return f"rank {rank} was interrupted (KeyboardInterrupt) {at} during '{phase}'"
    if cause == "exit":
        code = rec.get("code")
        return f"rank {rank} called sys.exit({'' if code is None else repr(code)}) {at} during '{phase}'"
    return f"rank {rank} crashed {at} during '{phase}': {rec['error']}"


def _blame(records: dict[int, dict], failures: dict[int, dict], beacons: dict[int, dict],
           died_at: dict[int, float], at: str, world_size: int) -> BenchRunError | None:
    """The failure that caused the others, in the order of the module doc; None when nothing is known."""
    silent = {r: f["exitcode"] for r, f in failures.items() if r not in records and f["exitcode"] != 0}

    def when(r: int) -> tuple[float, int]:
        return (died_at.get(r, float("inf")), r)

    def silent_error(r: int) -> BenchRunError:
        code, after = silent[r], beacons.get(r, {}).get("label", "start")
        if code < 0:
            what, cause = _signal_words(-code), ("killed" if -code == signal.SIGKILL else "signal")
        else:
            what, cause = f"exited with code {code} without an error", "exit"
        return BenchRunError(f"rank {r} {what} {at} after '{after}'", rank=r, cause=cause, world_size=world_size)

    def record_error(rec: dict) -> BenchRunError:
        return BenchRunError(_record_message(rec, at), rank=rec["rank"], cause=rec.get("cause", "crash"),
                             world_size=world_size)

    soft = (-signal.SIGTERM, -signal.SIGABRT)
    hard = sorted((r for r, c in silent.items() if c not in soft), key=when)
    own = sorted((x for x in records.values() if not _PEER_LOST.search(x.get("error", ""))), key=lambda x: x["time"])
    aborts = sorted((r for r, c in silent.items() if c == -signal.SIGABRT), key=when)
    lost = sorted((x for x in records.values() if _PEER_LOST.search(x.get("error", ""))), key=lambda x: x["time"])
    terms = sorted((r for r, c in silent.items() if c == -signal.SIGTERM), key=when)
    if hard:
        return silent_error(hard[0])
    if own:
        return record_error(own[0])
    if aborts:
        return silent_error(aborts[0])
    if lost:
        return record_error(lost[0])
    if terms:
        return silent_error(terms[0])
    return None


def diagnose(run_dir: Path, *, world_size: int, returncode: int | None, timed_out: bool, timeout_s: float,
             multi_node: bool, log_tail: str = "", log_text: str = "",
             died_at: dict[int, float] | None = None) -> list[dict] | Literal["remote"]:
    """Results, ``REMOTE``, or the ``BenchRunError`` that explains why there are none (see module doc)."""
    at = f"at world_size={world_size}"
    beacons = read_progress(run_dir)
    result = run_dir / "result.json"
    local_done = bool(beacons) and all(b.get("label") == "done" for b in beacons.values())
    if local_done and (multi_node or len(beacons) == world_size):  # a crash in teardown after every rank finished
        if result.exists():
            return sorted(json.loads(result.read_text())["ranks"], key=lambda r: r["rank"])
        if multi_node:
            return REMOTE
    records: dict[int, dict] = {}
    for path in run_dir.glob("rank*.error.json"):
        try:
            rec = json.loads(path.read_text())
            records[int(rec["rank"])] = rec
        except (ValueError, KeyError, TypeError):
            continue
    if not timed_out:
        failures = torchrun_failures(log_text)
        blamed = _blame(records, failures, beacons, died_at or {}, at, world_size)
        if blamed is not None:
            raise blamed
    elif records:  # a rank failed, and the others then waited for it until the timeout
        raise _blame(records, {}, beacons, {}, at, world_size)  # type: ignore[misc]
    if timed_out:
        missing = sorted(set(range(world_size)) - set(beacons)) if not multi_node else []
        if missing:
            who, where = missing, "never started"
        else:
            active = {r: b for r, b in beacons.items() if b.get("label") != "done"} or beacons
            low = min(b["seq"] for b in active.values())
            who = sorted(r for r, b in active.items() if b["seq"] == low)
            where = f"made no progress past '{beacons[who[0]]['label']}'"
            ahead = {b["label"] for r, b in beacons.items() if b["seq"] > low}
            if ahead:
                where += f" (other ranks reached '{sorted(ahead)[0]}')"
        ranks = f"rank {who[0]}" if len(who) == 1 else "ranks " + ", ".join(map(str, who))
        raise BenchRunError(f"{ranks} hung {at}: {where} within --timeout-s={timeout_s:g}; killed the process group",
                            rank=who[0], cause="hang", world_size=world_size)
    if result.exists() and returncode == 0:
        return sorted(json.loads(result.read_text())["ranks"], key=lambda r: r["rank"])
    if returncode == 0 and multi_node:
        return REMOTE
    hint = " (the failing rank may be on another node)" if multi_node else ""
    raise BenchRunError(f"torchrun exited with code {returncode} {at} and no local rank reported a cause{hint}; "
                        f"last log line: {log_tail.strip()[:300]}", cause="crash", world_size=world_size)
