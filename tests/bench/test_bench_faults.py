"""Faulty ranks (crash, hang past --timeout-s, out of memory) give one line naming the rank and the cause, exit 2,
and keep the world sizes that finished before in the database. Faults are injected with the hidden test switch
SCALERIGHT_BENCH_FAULT (``bench/faults.py``)."""

from __future__ import annotations

import re

import pytest

from scaleright.bench import RunStore
from scaleright.bench.faults import parse_faults
from scaleright.errors import InputError

pytest.importorskip("torch")

CASES = [
    ("crash:rank1", 120, r"rank 1 crashed at world_size=2 during 'step 0: start': RuntimeError: injected crash"),
    ("oom:rank1", 120, r"rank 1 ran out of memory at world_size=2 during 'step 0: start': .*can't allocate memory"),
    ("hang:rank1", 12, r"rank 1 hung at world_size=2: made no progress past 'step 0: start' \(other ranks reached "
                       r"'step 0: .*'\) within --timeout-s=12; killed the process group"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("fault", "timeout_s", "message"), CASES, ids=[c[0].split(":")[0] for c in CASES])
def test_fault_names_rank_and_cause_and_keeps_finished_world_sizes(cli, tmp_path, fault, timeout_s, message):
    db = tmp_path / "runs.sqlite"
    proc = cli("bench", "train", "--nproc", "1,2", "--strategy", "ddp", "--device", "cpu", "--steps", 2,
               "--warmup", 1, "--timeout-s", timeout_s, "--db", db, "--json",
               env={"SCALERIGHT_BENCH_FAULT": fault}, timeout=timeout_s + 120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    assert re.search(message, lines[0]), lines[0]
    assert proc.stdout == ""
    runs = RunStore(db).list("train")
    assert [(r["layout"]["world_size"], r["status"]) for r in runs] == [(1, "ok"), (2, "failed")]
    assert runs[0]["metrics"]["tokens_per_s"] > 0
    assert runs[1]["error"] == lines[0].removeprefix("error: ")


def test_fault_switch_syntax():
    assert [(f.kind, f.rank) for f in parse_faults("crash:rank1|hang:rank0")] == [("crash", 1), ("hang", 0)]
    assert parse_faults(None) == [] and parse_faults("") == []
    with pytest.raises(InputError, match="KIND:rankN"):
        parse_faults("explode:rank1")
