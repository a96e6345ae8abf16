"""Real collective and inference benchmarks on CPU: shapes of the results, bandwidth formulas, storage."""

from __future__ import annotations

import json

import pytest

from scaleright.bench import RunStore, gpt_spec, run_infer_bench

pytest.importorskip("torch")


@pytest.mark.slow
def test_comm_bench_two_ranks_reports_time_algbw_and_busbw(cli, tmp_path):
    db = tmp_path / "runs.sqlite"
    proc = cli("bench", "comm", "--nproc", "2", "--sizes", "4KB,1MB", "--device", "cpu", "--iters", 3,
               "--warmup", 1, "--db", db, "--json")
    assert proc.returncode == 0, proc.stderr
    [run] = json.loads(proc.stdout)["runs"]
    assert run["world_size"] == 2 and run["backend"] == "gloo"
    assert [(r["op"], r["size_bytes"]) for r in run["rows"]] == [
        (op, size) for op in ("all-reduce", "all-gather", "reduce-scatter") for size in (4000, 10**6)]
    for r in run["rows"]:
        assert r["algbw_gb_per_s"] == pytest.approx(r["size_bytes"] / r["time_s_median"] / 1e9)
        # nccl-tests doc/PERFORMANCE.md at n = 2: all-reduce 2(n-1)/n = 1, all-gather and reduce-scatter (n-1)/n = 0.5
        factor = {"all-reduce": 1.0, "all-gather": 0.5, "reduce-scatter": 0.5}[r["op"]]
        assert r["busbw_gb_per_s"] == pytest.approx(r["algbw_gb_per_s"] * factor)
    [stored] = RunStore(db).list("comm")
    assert stored["metrics"]["rows"] == run["rows"] and stored["layout"]["world_size"] == 2


def test_infer_bench_reports_prefill_and_decode_per_batch_size(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite")
    out = run_infer_bench({"model": gpt_spec("tiny"), "batch_sizes": (1, 4), "prompt_len": 16, "gen_len": 8,
                           "device": "cpu", "warmup": 1, "repeats": 2}, store=store)
    assert [r["batch_size"] for r in out["runs"]] == [1, 4]
    for r in out["runs"]:
        assert r["prefill_tokens_per_s"] == pytest.approx(r["batch_size"] * 16 / r["prefill_time_s_median"])
        assert r["decode_tokens_per_s"] == pytest.approx(r["batch_size"] * 8 / r["decode_time_s_median"])
        assert r["time_per_output_token_s"] == pytest.approx(r["decode_time_s_median"] / 8)
    stored = store.list("infer")
    assert [s["layout"]["batch_size"] for s in stored] == [1, 4]
    assert stored[0]["model"]["params"] == gpt_spec("tiny").params
    assert [s["metrics"]["decode_tokens_per_s"] for s in stored] == [r["decode_tokens_per_s"] for r in out["runs"]]
