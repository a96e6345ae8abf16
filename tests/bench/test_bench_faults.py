"""Faulty ranks give one line naming the rank and the cause, exit 2, keep the world sizes that finished before in
the database (and print them with ``--json``), and leave no process or temporary folder behind. Faults are injected
with the hidden test switch SCALERIGHT_BENCH_FAULT (``bench/faults.py``): exceptions, a hang, an out-of-memory,
and the deaths a rank cannot report itself (SIGKILL as the OOM killer sends it, a segfault, a silent ``os._exit``).
The other rank's consequential "Connection closed by peer" is never blamed."""

from __future__ import annotations

import json
import re

import pytest

from scaleright.bench import RunStore
from scaleright.bench.faults import KINDS, parse_faults
from scaleright.errors import InputError

pytest.importorskip("torch")

HANG_TIMEOUT_S = 30  # counted from the hung rank's last progress, so a slow start on a loaded machine is not a hang

SWEEP_CASES = [
    ("crash:rank1", 120, r"rank 1 crashed at world_size=2 during 'step 0: start': RuntimeError: injected crash"),
    ("oom:rank1", 120, r"rank 1 ran out of memory at world_size=2 during 'step 0: start': .*can't allocate memory"),
    ("hang:rank1", HANG_TIMEOUT_S,
     rf"rank 1 hung at world_size=2: made no progress past 'step 0: start' \(other ranks reached "
     rf"'step 0: .*'\) within --timeout-s={HANG_TIMEOUT_S}; killed the process group"),
]


def _single_error_line(proc) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    return lines[0].removeprefix("error: ")


def _no_temp_left(tmp_dir) -> None:
    assert sorted(p.name for p in tmp_dir.iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize(("fault", "timeout_s", "message"), SWEEP_CASES, ids=[c[0].split(":")[0] for c in SWEEP_CASES])
def test_fault_names_rank_and_cause_and_keeps_finished_world_sizes(cli, tmp_path, fault, timeout_s, message):
    db, tmp = tmp_path / "runs.sqlite", tmp_path / "tmp"
    tmp.mkdir()
    proc = cli("bench", "train", "--nproc", "1,2", "--strategy", "ddp", "--device", "cpu", "--steps", 2,
               "--warmup", 1, "--timeout-s", timeout_s, "--db", db, "--json",
               env={"SCALERIGHT_BENCH_FAULT": fault, "TMPDIR": str(tmp)}, timeout=timeout_s + 240)
    error = _single_error_line(proc)
    assert re.search(message, error), error
    runs = RunStore(db).list("train")
    assert [(r["layout"]["world_size"], r["status"]) for r in runs] == [(1, "ok"), (2, "failed")]
    assert runs[0]["metrics"]["tokens_per_s"] > 0
    assert runs[1]["error"] == error
    out = json.loads(proc.stdout)  # --json still prints the world size that finished, and the failed one
    assert [(r["run_id"], r["world_size"], r["status"]) for r in out["runs"]] == [
        (runs[0]["id"], 1, "ok"), (runs[1]["id"], 2, "failed")]
    assert out["runs"][0]["tokens_per_s"] == runs[0]["metrics"]["tokens_per_s"]
    assert out["error"] == error and out["scaling_efficiency"] == {"1": 1.0}
    _no_temp_left(tmp)


DEATHS = [
    ("sigkill:rank1", r"rank 1 was killed by SIGKILL \(the kernel's out-of-memory killer sends this\) at "
                      r"world_size=2 after 'step 0: start'"),
    ("segv:rank1", r"rank 1 crashed with a segmentation fault \(SIGSEGV\) at world_size=2 after 'step 0: start'"),
    ("exit:rank1", r"rank 1 exited with code 3 without an error at world_size=2 after 'step 0: start'"),
    ("exit:rank0", r"rank 0 exited with code 3 without an error at world_size=2 after 'step 0: start'"),
    ("keyboardinterrupt:rank1", r"rank 1 was interrupted \(KeyboardInterrupt\) at world_size=2 during 'step 0: start'"),
    ("systemexit:rank1", r"rank 1 called sys.exit\(4\) at world_size=2 during 'step 0: start'"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("fault", "message"), DEATHS, ids=[c[0] for c in DEATHS])
def test_a_rank_that_dies_is_named_not_the_peer_that_lost_it(cli, tmp_path, fault, message):
    db, tmp = tmp_path / "runs.sqlite", tmp_path / "tmp"
    tmp.mkdir()
    proc = cli("bench", "train", "--nproc", "2", "--device", "cpu", "--steps", 2, "--warmup", 1, "--timeout-s", 120,
               "--db", db, env={"SCALERIGHT_BENCH_FAULT": fault, "TMPDIR": str(tmp)}, timeout=300)
    error = _single_error_line(proc)
    assert re.fullmatch(message, error), error
    assert "peer" not in error
    [run] = RunStore(db).list("train")
    assert (run["status"], run["error"]) == ("failed", error)
    _no_temp_left(tmp)


def test_fault_switch_syntax():
    assert [(f.kind, f.rank) for f in parse_faults("crash:rank1|hang:rank0")] == [("crash", 1), ("hang", 0)]
    assert [f.kind for f in parse_faults("|".join(f"{k}:rank0" for k in KINDS))] == list(KINDS)
    assert parse_faults(None) == [] and parse_faults("") == []
    with pytest.raises(InputError, match="KIND:rankN"):
        parse_faults("explode:rank1")
