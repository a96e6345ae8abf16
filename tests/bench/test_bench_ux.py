"""The harness as a user meets it (issue #12 item 6): progress on stderr during long runs, a warning when repetitions
disagree beyond the stated spread (coefficient of variation above 10 %) or when ranks oversubscribe CPU cores or
GPUs, no scaling-efficiency figure from a single world size, and every command saying what it stored where.

The pure parts are checked against hand-derived values; two tiny CPU sweeps check the command end to end."""

from __future__ import annotations

import io
import json
import math
import os

import pytest

from scaleright.bench import resources
from scaleright.bench.comm import comm_warnings
from scaleright.bench.infer import infer_warnings
from scaleright.bench.progress import PROGRESS_ENV, Reporter, least_advanced
from scaleright.bench.scaling import scaling_line
from scaleright.bench.stats import SPREAD_CV_LIMIT, coefficient_of_variation, spread_warning
from scaleright.bench.train import train_warnings

# ---- spread of repetitions -----------------------------------------------------------------------------------------


def test_the_stated_spread_limit_is_ten_percent():
    assert SPREAD_CV_LIMIT == 0.10


@pytest.mark.parametrize("values, expected", [
    ([1.0, 2.0, 3.0], 0.5),  # sample sd 1 (n - 1), mean 2
    ([5.0, 5.0, 5.0, 5.0], 0.0),
    ([9.0, 11.0], math.sqrt(2) / 10),  # sd sqrt(((-1)^2 + 1^2) / 1), mean 10
])  # fmt: skip
def test_coefficient_of_variation_is_sample_sd_over_mean(values, expected):
    assert coefficient_of_variation(values) == pytest.approx(expected)


@pytest.mark.parametrize("values", [[], [1.0], [0.0, 0.0]])
def test_no_coefficient_of_variation_without_two_values_and_a_positive_mean(values):
    assert coefficient_of_variation(values) is None


def test_a_spread_warning_only_above_the_limit_and_naming_what_and_how_much():
    assert spread_warning(0.10, 5, "step time") is None  # at the limit: no warning
    assert spread_warning(None, 1, "step time") is None
    w = spread_warning(0.23, 5, "world_size=2 step time")
    assert w is not None and w.startswith("world_size=2 step time: the 5 repetitions disagree")
    assert "23%" in w and "above 10%" in w and "\n" not in w


def test_train_and_infer_warnings_come_from_the_runs_spread():
    quiet = {"world_size": 1, "steps": 4, "step_time_s_cv": 0.04, "shared_hardware": None}
    noisy = {"world_size": 2, "steps": 4, "step_time_s_cv": 0.3, "shared_hardware": None}
    assert train_warnings([quiet]) == []
    [w] = train_warnings([quiet, noisy])
    assert w.startswith("world_size=2 step time: the 4 repetitions disagree") and "30%" in w
    runs = [{"batch_size": 4, "prefill_time_s_cv": 0.5, "decode_time_s_cv": 0.01}]
    [w] = infer_warnings(runs, repeats=3)
    assert w.startswith("batch 4 prefill time: the 3 repetitions disagree") and "50%" in w


def test_comm_warns_once_per_run_naming_the_worst_row():
    rows = [{"op": "all-reduce", "size_bytes": 1000, "time_s_cv": 0.02},
            {"op": "all-reduce", "size_bytes": 4000, "time_s_cv": 0.4},
            {"op": "all-gather", "size_bytes": 4000, "time_s_cv": 0.2}]  # fmt: skip
    [w] = comm_warnings([{"status": "ok", "world_size": 2, "rows": rows, "shared_hardware": None}], iters=10)
    assert "in 2 of 3 (op, size) rows" in w and "worst all-reduce 4,000 B at 40%" in w


# ---- oversubscription ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, expected", [
    ({"ranks_per_node": 4, "device_type": "cpu", "cpus": 2}, "4 ranks on 2 usable CPU cores"),
    ({"ranks_per_node": 2, "device_type": "cpu", "cpus": 2}, None),
    ({"ranks_per_node": 2, "device_type": "cpu", "threads_per_rank": 2, "cpus": 2},
     "2 ranks x 2 threads each on 2 usable CPU cores"),
    ({"ranks_per_node": 1, "device_type": "cpu", "threads_per_rank": 4, "cpus": 2},
     "1 rank x 4 threads each on 2 usable CPU cores"),
    ({"ranks_per_node": 4, "device_type": "cuda", "gpus_per_node": 2}, "4 ranks on 2 GPUs per node"),
    ({"ranks_per_node": 2, "device_type": "cuda", "gpus_per_node": 8}, None),
])  # fmt: skip
def test_oversubscription(kwargs, expected):
    assert resources.oversubscription(**kwargs) == expected


@pytest.mark.parametrize("text, cpus", [("200000 100000\n", 2), ("150000 100000", 2), ("50000 100000", 1),
                                        ("max 100000", None), ("garbage", None)])  # fmt: skip
def test_a_cgroup_quota_caps_the_usable_cpus(tmp_path, text, cpus):
    f = tmp_path / "cpu.max"
    f.write_text(text)
    assert resources._quota_cpus(f) == cpus
    # the CPUs this process may run on, read here from the OS (not from usable_cpus itself)
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert resources.usable_cpus(f) == (min(cpus, affinity) if cpus else affinity)


# ---- the scaling line ----------------------------------------------------------------------------------------------


def test_one_world_size_gives_no_efficiency_figure():
    line = scaling_line({1: {"speedup": 1.0, "scaling_efficiency": 1.0}})
    assert "100" not in line and "needs two or more world sizes (measured: N=1)" in line


def test_a_shared_world_size_is_marked_not_meaningful():
    curve = {1: {"scaling_efficiency": 1.0}, 4: {"scaling_efficiency": 0.53}}
    line = scaling_line(curve, {4: "4 ranks on 2 usable CPU cores"})
    assert line == ("scaling efficiency (speedup / (N / N_base)): N=1: 100%, "
                    "N=4: 53% (not meaningful: 4 ranks on 2 usable CPU cores)")  # fmt: skip


# ---- progress ------------------------------------------------------------------------------------------------------


def test_the_reporter_prints_each_phase_and_at_most_one_detail_per_interval():
    now = [0.0]
    out = io.StringIO()
    rep = Reporter("bench infer", every_s=10.0, stream=out, clock=lambda: now[0])
    rep.phase("batch 1 (1 of 2)")
    for t, detail in ((1.0, "repetition 1 of 4"), (5.0, "repetition 2 of 4"), (11.0, "repetition 3 of 4"),
                      (12.0, "repetition 4 of 4"), (30.0, None)):  # fmt: skip
        now[0] = t
        rep.tick(detail)
    now[0] = 31.0
    rep.phase("batch 4 (2 of 2)")
    assert out.getvalue().splitlines() == [
        "[   0.0 s] bench infer: batch 1 (1 of 2)",
        "[  11.0 s] bench infer: batch 1 (1 of 2): repetition 3 of 4",
        "[  30.0 s] bench infer: batch 1 (1 of 2): repetition 4 of 4",  # nothing new, but still alive
        "[  31.0 s] bench infer: batch 4 (2 of 2)",
    ]


@pytest.mark.parametrize("env, shown", [("1", True), ("0", False), ("", False)])  # "": stderr is not a terminal here
def test_progress_is_shown_on_a_terminal_or_when_asked(monkeypatch, capsys, env, shown):
    monkeypatch.setenv(PROGRESS_ENV, env)
    Reporter("bench train").phase("world_size=1 (1 of 1)")
    assert ("bench train: world_size=1 (1 of 1)" in capsys.readouterr().err) is shown


def test_the_least_advanced_rank_is_named():
    beacons = {0: {"seq": 9, "label": "step 3: forward"}, 1: {"seq": 7, "label": "step 2: backward"},
               2: {"seq": "x", "label": "bad"}}  # fmt: skip
    assert least_advanced(beacons) == "rank 1: step 2: backward"
    assert least_advanced({}) is None


# ---- end to end on CPU ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_bench_train_warns_about_shared_cores_and_says_what_it_stored(tmp_path, monkeypatch, run_cli):
    pytest.importorskip("torch")
    monkeypatch.setenv(PROGRESS_ENV, "1")  # stderr is not a terminal here
    monkeypatch.setattr(resources, "usable_cpus", lambda *a: 1)  # as if the machine had one core
    db = tmp_path / "runs.sqlite"
    code, out, err = run_cli("bench", "train", "--nproc", "1,2", "--model", "tiny", "--device", "cpu", "--steps", 2,
                             "--warmup", 0, "--db", db)
    assert code == 0, err
    assert "bench train: world_size=1 (1 of 2)" in err and "bench train: world_size=2 (2 of 2)" in err
    assert "warning: world_size=2: 2 ranks on 1 usable CPU core: the ranks time-shared the hardware" in err
    assert "warning: world_size=1: " not in err.replace("step time", "")  # one rank on one core: not shared
    flat = " ".join(out.split())
    assert "N=2:" in flat and "(not meaningful: 2 ranks on 1 usable CPU core)" in flat
    assert f"stored run ids 1, 2 in {db}" in err


@pytest.mark.slow
def test_bench_train_at_one_world_size_prints_no_efficiency(tmp_path, monkeypatch, run_cli):
    pytest.importorskip("torch")
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    db = tmp_path / "runs.sqlite"
    code, out, err = run_cli("bench", "train", "--nproc", "1", "--model", "tiny", "--device", "cpu", "--steps", 2,
                             "--warmup", 0, "--db", db, "--json")
    assert code == 0, err
    assert "bench train:" not in err  # stderr is not a terminal and $SCALERIGHT_PROGRESS is unset: no progress
    data = json.loads(out)
    assert isinstance(data["warnings"], list) and data["runs"][0]["shared_hardware"] is None
    assert "step_time_s_cv" in data["runs"][0]
    assert f"stored run id 1 in {db}" in err
    code, out, err = run_cli("bench", "train", "--nproc", "1", "--model", "tiny", "--device", "cpu", "--steps", 2,
                             "--warmup", 0, "--db", db)
    assert code == 0, err
    flat = " ".join(out.split())
    assert "needs two or more world sizes (measured: N=1)" in flat and "100%" not in flat


@pytest.mark.slow
def test_bench_infer_shows_progress_and_what_it_stored(tmp_path, monkeypatch, run_cli):
    pytest.importorskip("torch")
    monkeypatch.setenv(PROGRESS_ENV, "1")
    db = tmp_path / "runs.sqlite"
    code, out, err = run_cli("bench", "infer", "--model", "tiny", "--device", "cpu", "--batch-sizes", "1,2",
                             "--prompt-len", 8, "--gen-len", 4, "--repeats", 2, "--warmup", 0, "--db", db, "--json")
    assert code == 0, err
    data = json.loads(out)
    assert "warnings" in data and all("prefill_time_s_cv" in r for r in data["runs"])
    assert "bench infer: batch 1 (1 of 2)" in err and "bench infer: batch 2 (2 of 2)" in err
    assert f"stored run ids 1, 2 in {db}" in err


# ---- the scaling report of stored runs -----------------------------------------------------------------------------


def _report_text(db) -> str:
    from rich.console import Console

    from scaleright.bench import RunStore, scaling_report
    from scaleright.bench.report import render_table

    console = Console(record=True, width=200)
    console.print(render_table(scaling_report(RunStore(db).list(kind="train"))))
    return console.export_text()


def test_the_report_gives_no_efficiency_for_one_world_size(tmp_path, make_run):
    from scaleright.bench import RunStore

    db = tmp_path / "runs.sqlite"
    RunStore(db).add(**make_run(0, world_size=1))
    text = _report_text(db)
    assert "100%" not in text and "1.00x" not in text
    assert "one world size: speedup and efficiency need two or more" in text


def test_the_report_marks_a_world_size_whose_ranks_shared_the_cores(tmp_path, make_run):
    from scaleright.bench import RunStore

    db = tmp_path / "runs.sqlite"
    store = RunStore(db)
    store.add(**make_run(0, world_size=1, tokens_per_s=1000.0))
    shared = make_run(0, world_size=4, tokens_per_s=2000.0)
    shared["metrics"]["shared_hardware"] = "4 ranks on 2 usable CPU cores"
    store.add(**shared)
    text = _report_text(db)
    assert "50%" in text  # 2000 / 1000 / (4 / 1)
    assert "4 *" in text and "* N=4: 4 ranks on 2 usable CPU cores; its ranks time-shared the hardware" in text
