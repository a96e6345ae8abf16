"""How the parent reads a finished run directory: the cause of a failure, the hung rank, teardown crashes."""

from __future__ import annotations

import json

import pytest

from scaleright.bench import BenchRunError
from scaleright.bench.launch import REMOTE, diagnose


def beacon(run_dir, rank, seq, label):
    (run_dir / f"rank{rank}.progress").write_text(json.dumps({"pid": 999999, "seq": seq, "label": label}))


def test_earliest_failure_is_the_cause(tmp_path):
    for rank, t, err in ((0, 2.0, "RuntimeError: Connection closed by peer"), (1, 1.0, "ValueError: boom")):
        (tmp_path / f"rank{rank}.error.json").write_text(json.dumps(
            {"rank": rank, "cause": "crash", "error": err, "phase": "step 3: backward", "time": t}))
    with pytest.raises(BenchRunError, match=r"^rank 1 crashed at world_size=2 during 'step 3: backward': ValueError"):
        diagnose(tmp_path, world_size=2, returncode=1, timed_out=False, timeout_s=10, multi_node=False)


def test_hang_names_the_least_advanced_rank(tmp_path):
    beacon(tmp_path, 0, 12, "step 0: backward")
    beacon(tmp_path, 1, 10, "step 0: start")
    beacon(tmp_path, 2, 12, "step 0: backward")
    with pytest.raises(BenchRunError, match=r"^rank 1 hung at world_size=3: made no progress past 'step 0: start' "
                                            r"\(other ranks reached 'step 0: backward'\) within --timeout-s=5;") as e:
        diagnose(tmp_path, world_size=3, returncode=-9, timed_out=True, timeout_s=5, multi_node=False)
    assert (e.value.rank, e.value.cause) == (1, "hang")


def test_hang_before_a_rank_started_names_it(tmp_path):
    beacon(tmp_path, 0, 2, "init_process_group")
    with pytest.raises(BenchRunError, match=r"^rank 1 hung at world_size=2: never started"):
        diagnose(tmp_path, world_size=2, returncode=-9, timed_out=True, timeout_s=5, multi_node=False)


def test_teardown_crash_after_every_rank_finished_still_counts(tmp_path):
    (tmp_path / "result.json").write_text(json.dumps({"ranks": [{"rank": 1}, {"rank": 0}]}))
    beacon(tmp_path, 0, 30, "done")
    beacon(tmp_path, 1, 30, "done")
    got = diagnose(tmp_path, world_size=2, returncode=1, timed_out=False, timeout_s=5, multi_node=False)
    assert [r["rank"] for r in got] == [0, 1]


def test_exit_without_any_report_quotes_the_log(tmp_path):
    with pytest.raises(BenchRunError, match="torchrun exited with code 1 at world_size=2 and no local rank reported "
                                            "a cause; last log line: Segmentation fault"):
        diagnose(tmp_path, world_size=2, returncode=1, timed_out=False, timeout_s=5, multi_node=False,
                 log_tail="Segmentation fault")


def test_node_without_rank_zero_is_remote(tmp_path):
    assert diagnose(tmp_path, world_size=8, returncode=0, timed_out=False, timeout_s=5, multi_node=True) == REMOTE
