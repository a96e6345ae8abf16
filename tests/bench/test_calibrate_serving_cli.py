"""``scaleright calibrate --serving`` and ``scaleright compare --serving`` are the bench commands
``bench calibrate-serving`` and ``bench compare-serving`` under the issue's spelling: on the same run database of
synthetic serve runs (metrics simulated under hand-chosen engine factors, see ``test_serve_calibrate``) they print
the same bytes, and an option that does not apply to the chosen mode is one line, exit 2."""

from __future__ import annotations

import json

import pytest
from test_serve_calibrate import RUN_SHAPES, V0, _synthetic_run

from scaleright.bench.db import RunStore


@pytest.fixture(scope="module")
def serve_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("serve") / "runs.sqlite"
    store = RunStore(db)
    for i, shape in enumerate(RUN_SHAPES):
        r = _synthetic_run(i + 1, **shape)
        store.add(kind="serve", model=r["model"], layout=r["layout"], metrics=r["metrics"],
                  hardware={"fingerprint": "synthetic"}, software={})  # fmt: skip
    return db


@pytest.mark.parametrize("new, old, args", [
    (["calibrate", "--serving"], ["bench", "calibrate-serving"], ["--json"]),
    (["calibrate", "--serving"], ["bench", "calibrate-serving"], ["--run-ids", "1,2"]),
    (["compare", "--serving"], ["bench", "compare-serving"], ["--json", "--engine", "sglang"]),
    (["compare", "--serving"], ["bench", "compare-serving"], ["--run-ids", "3"]),
])
def test_serving_spelling_prints_what_the_bench_command_prints(cli, serve_db, new, old, args):
    before = serve_db.read_bytes()
    got = cli(*new, "--db", serve_db, *args)
    want = cli(*old, "--db", serve_db, *args)
    assert got.returncode == want.returncode == 0, got.stderr + want.stderr
    assert got.stdout == want.stdout and got.stderr == want.stderr
    assert got.stdout.strip()
    assert serve_db.read_bytes() == before  # read-only


def test_calibrate_serving_out_writes_the_same_fit(cli, serve_db, tmp_path):
    out = tmp_path / "fitted.json"
    proc = cli("calibrate", "--serving", "--db", serve_db, "--out", out, "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert json.loads(out.read_text()) == data
    # the hand-chosen frontend latency of the synthetic runs (20 ms), recovered
    assert data["profile"]["frontend_latency_s"] == pytest.approx(0.02, rel=0.05) and data["runs"] == [1, 2, 3]


def test_calibrate_serving_fits_the_host_time_per_sequence_of_vllm_v0_runs(cli, tmp_path):
    # the synthetic runs measured under 100 µs of host work per sequence per iteration, stored as bench serve stores
    # a run against a vLLM 0.6.3 server (V0's engine loop): calibrate --serving fits the term without being asked
    db = tmp_path / "runs.sqlite"
    store = RunStore(db)
    for i, shape in enumerate(RUN_SHAPES):
        r = _synthetic_run(i + 1, V0, **shape)
        store.add(kind="serve", model=r["model"], layout=r["layout"], metrics=r["metrics"],
                  hardware={"fingerprint": "synthetic", "engine": "vllm", "engine_version": "0.6.3"},
                  software={})  # fmt: skip
    proc = cli("calibrate", "--serving", "--db", db, "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert "sequence_overhead_s" in data["fitted"] and data["on_bound"] == []
    assert data["profile"]["sequence_overhead_s"] == pytest.approx(100e-6, rel=0.15)
    proc = cli("calibrate", "--serving", "--db", db)
    assert proc.returncode == 0, proc.stderr
    assert [line for line in proc.stdout.splitlines() if "sequence_overhead_s" in line]  # a row of the table


@pytest.mark.parametrize("args, line", [
    # (calibrate --serving --name NAME [--force] stores the fitted engine profile: serve/test_serve_engine_store.py)
    (["compare", "--serving", "--fingerprint", "f"],
     "error: --fingerprint applies only to train runs; not with --serving"),
    (["calibrate", "--name", "x", "--gpu", "h100-sxm", "--run-ids", "1"], "error: --run-ids applies only to --serving"),
    (["calibrate", "--name", "x", "--gpu", "h100-sxm", "--out", "f.json"], "error: --out applies only to --serving"),
    (["compare", "--gpu", "h100-sxm", "--engine", "vllm"], "error: --engine applies only to --serving"),
    (["calibrate", "--gpu", "h100-sxm"], "error: --name is required for train runs (the calibration profile to "
     "save); or pass --serving to fit the engine profile to serve runs"),
    (["compare"], "error: --gpu is required for train runs (the catalog accelerator they used); or pass --serving "
     "for serve runs"),
])
def test_an_option_of_the_other_mode_is_one_line(cli, serve_db, args, line):
    proc = cli(*args, "--db", serve_db)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [line]
