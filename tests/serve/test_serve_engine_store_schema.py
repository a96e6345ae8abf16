"""A stored engine profile outlives the scaleright that wrote it.

The story: ``calibrate --serving --name`` wrote profiles before ``EngineProfile`` had ``fused_elementwise``,
``max_num_seqs``, ``sequence_overhead_s``, ``dequantize_above_rows``, ``gemm_accumulate``, ``overlaps_pipeline_stages``
and ``moe_dispatch``. Such a file, written out here by hand with only the fields of the store's first version, still
loads: each field it predates takes the value of the engine it was fitted from (its ``provenance.base``), the output
says so once, and ``serve simulate`` and ``calibrate show`` run it. The base values expected are the engines' documented
behaviour, written out: TensorRT-LLM fuses its elementwise kernels and ``trtllm-build`` builds for 2048 sequences;
llama.cpp dequantises quantised GEMMs of more than ``MMQ_MAX_BATCH_SIZE`` = 32 rows and accumulates its fp16 GEMMs in
fp16 (cuBLAS ``CUBLAS_COMPUTE_16F``), TensorRT-LLM in fp32; no shipped engine has per-sequence host time; TensorRT-LLM
keeps pp micro-batches in flight under pipeline parallelism (``PyExecutor._executor_loop_pp``), llama.cpp's layer split
runs its GPUs in turn; TensorRT-LLM's fused MoE expands and finalizes, llama.cpp's ``mul_mat_id`` copies f32 rows. A
field of the wrong type or range, a field of the first version missing, a base that does not exist and a key this
version does not know are each one line naming the file and the field (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scaleright.catalog import get_gpu
from scaleright.errors import InputError
from scaleright.estimate.engines import EngineProfile, get_engine
from scaleright.serve.simulate import simulate
from scaleright.workload import load_model
from tests.cli_helpers import assert_one_line, run_main

SIM = ["--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--input-len", "100", "--output-len", "5", "--rate", "4",
       "--requests", "20", "--seed", "3"]
NEW_FIELDS = ("fused_elementwise", "max_num_seqs", "sequence_overhead_s", "dequantize_above_rows", "gemm_accumulate",
              "overlaps_pipeline_stages", "moe_dispatch")


def old_profile(name: str, base: str, **profile) -> dict:
    """A stored profile as the store's first version wrote it: no field added to EngineProfile since."""
    p = {"name": name, "iteration_overhead_s": 0.8e-3, "hbm_fraction": 0.62, "gemm_efficiency_factor": 1.0,
         "quantised_kv_precision": "fp8", "frontend_latency_s": 0.004, "custom_all_reduce": True, "status": "fitted",
         "grounded_in": ["bench serve runs 1, 2: mean TTFT, TPOT and ITL"],
         "note": f"Fitted by calibrate_serving.fit_engine from {base!r} on 2 run(s) (in-sample)."}
    prov = {"created_utc": "2026-12-01T17:00:00Z", "base": base, "runs": [1, 2], "runs_sha256": "0" * 64,
            "engines": ["tensorrt_llm 0.14.0"], "gpus": ["h100-sxm"],
            "fitted": ["iteration_overhead_s", "hbm_fraction", "frontend_latency_s"],
            "before": {"iteration_overhead_s": 0.5e-3, "hbm_fraction": 0.575, "frontend_latency_s": 0.004},
            "after": {"iteration_overhead_s": 0.8e-3, "hbm_fraction": 0.62, "frontend_latency_s": 0.004},
            "on_bound": [], "median_abs_pct_error_before": 12.0, "median_abs_pct_error_after": 3.0,
            "in_sample": True}  # fmt: skip
    return {"profile": {**p, **profile}, "provenance": prov}


@pytest.fixture
def engines(tmp_path, monkeypatch) -> Path:
    """An empty engine store (``<calibration dir>/engines``) of this test's own."""
    monkeypatch.setenv("SCALERIGHT_CALIBRATION_DIR", str(tmp_path / "cal"))
    d = tmp_path / "cal" / "engines"
    d.mkdir(parents=True)
    return d


def write(d: Path, body: dict) -> Path:
    path = d / f"{body['profile']['name']}.json"
    path.write_text(json.dumps(body, indent=2))
    return path


def test_an_old_profile_takes_the_fields_it_predates_from_its_base_engine(engines):
    write(engines, old_profile("old-trt", "trtllm"))
    write(engines, old_profile("old-gguf", "llama.cpp", quantised_kv_precision="fp16", custom_all_reduce=False))
    p = get_engine("old-trt")
    # what the file holds is what was fitted
    assert (p.iteration_overhead_s, p.hbm_fraction, p.frontend_latency_s) == (0.8e-3, 0.62, 0.004)
    # what it predates is TensorRT-LLM's as documented: fused kernels, max_batch_size 2048, no per-sequence host time
    assert (p.fused_elementwise, p.max_num_seqs, p.sequence_overhead_s, p.dequantize_above_rows) == (True, 2048, 0.0,
                                                                                                       None)
    g = get_engine("old-gguf")
    assert (g.fused_elementwise, g.max_num_seqs, g.dequantize_above_rows) == (False, 256, 32)
    assert (p.gemm_accumulate, g.gemm_accumulate) == ("fp32", "fp16")
    assert (p.overlaps_pipeline_stages, g.overlaps_pipeline_stages) == (True, False)
    # TensorRT-LLM's CUTLASS fused MoE expands and finalizes; llama.cpp's mul_mat_id copies f32 rows
    assert (p.moe_dispatch, g.moe_dispatch) == ("expand-finalize", "copy-rows-f32")


def test_serve_simulate_runs_an_old_profile_and_says_once_what_came_from_the_base(engines, monkeypatch, capsys):
    path = write(engines, old_profile("old-trt", "trtllm"))
    code, out, err = run_main(["serve", "simulate", *SIM, "--engine", "old-trt", "--json"], monkeypatch, capsys)
    assert code == 0, err
    notes = [line for line in err.splitlines() if line.startswith("note: engine profile")]
    assert notes == [f"note: engine profile {path} was stored before fused_elementwise, max_num_seqs, "
                     "sequence_overhead_s, dequantize_above_rows, gemm_accumulate, overlaps_pipeline_stages, "
                     "moe_dispatch existed: "
                     "fused_elementwise=True, max_num_seqs=2048, sequence_overhead_s=0.0, dequantize_above_rows=None, "
                     "gemm_accumulate='fp32', overlaps_pipeline_stages=True, moe_dispatch='expand-finalize' taken "
                     "from its base, the built-in engine 'trtllm', not fitted (refit it with calibrate --serving "
                     "--name old-trt --force)"]
    # the same simulation as the file's factors and TensorRT-LLM's documented behaviour, passed as an object
    by_hand = EngineProfile(
        name="old-trt", iteration_overhead_s=0.8e-3, hbm_fraction=0.62, gemm_efficiency_factor=1.0,
        quantised_kv_precision="fp8", frontend_latency_s=0.004, custom_all_reduce=True, fused_elementwise=True,
        status="fitted", grounded_in=(), note="", max_num_seqs=2048, sequence_overhead_s=0.0,
        moe_dispatch="expand-finalize")
    want = simulate(load_model("llama-3.1-8b"), gpu=get_gpu("h100-sxm"), input_len=100, output_len=5, rate=4,
                    requests=20, seed=3, engine=by_hand)  # fmt: skip
    d = json.loads(out)
    assert d["engine"] == "old-trt" and d["ttft_ms"] == pytest.approx(want.ttft_ms, rel=1e-12)
    assert d["itl_ms"] == pytest.approx(want.itl_ms, rel=1e-12)


def test_calibrate_show_and_list_print_an_old_profile(engines, monkeypatch, capsys):
    write(engines, old_profile("old-trt", "trtllm"))
    code, out, err = run_main(["calibrate", "show", "old-trt", "--serving"], monkeypatch, capsys)
    assert code == 0, err
    assert "Engine profile 'old-trt' (fitted from trtllm" in out and "8.00e-04" in out and "0.62" in out
    assert len([line for line in err.splitlines() if line.startswith("note: engine profile")]) == 1
    code, out, err = run_main(["calibrate", "list", "--json"], monkeypatch, capsys)
    assert code == 0, err
    [e] = json.loads(out)["engine_profiles"]
    assert e["ok"] and e["from_base"] == list(NEW_FIELDS) and e["profile"]["max_num_seqs"] == 2048


def test_a_profile_fitted_from_a_stored_one_takes_the_fields_through_it(engines):
    write(engines, old_profile("old-trt", "trtllm"))
    write(engines, old_profile("older", "old-trt", iteration_overhead_s=1e-3))
    p = get_engine("older")
    assert p.iteration_overhead_s == 1e-3 and p.max_num_seqs == 2048 and p.fused_elementwise is True


def test_a_profile_written_now_takes_nothing_from_its_base(engines):
    body = old_profile("new-trt", "trtllm", fused_elementwise=False, max_num_seqs=64, sequence_overhead_s=5e-5,
                       dequantize_above_rows=None)  # fmt: skip
    write(engines, body)
    p = get_engine("new-trt")
    assert (p.fused_elementwise, p.max_num_seqs, p.sequence_overhead_s) == (False, 64, 5e-5)


@pytest.mark.parametrize("field, value, message", [
    ("max_num_seqs", "256", r"max_num_seqs='256' must be an integer >= 1$"),
    ("max_num_seqs", 0, r"max_num_seqs=0 must be an integer >= 1$"),
    ("max_num_seqs", True, r"max_num_seqs=True must be an integer >= 1$"),
    ("max_num_seqs", 2**21, r"max_num_seqs must be <= 1,?048,?576"),
    ("sequence_overhead_s", -1e-6, r"sequence_overhead_s=-1e-06 must be a finite number in \[0, 0\.001\]$"),
    ("sequence_overhead_s", 0.01, r"sequence_overhead_s=0\.01 must be a finite number in \[0, 0\.001\]$"),
    ("sequence_overhead_s", "fast", r"sequence_overhead_s='fast' must be a finite number in \[0, 0\.001\]$"),
    ("dequantize_above_rows", 0, r"dequantize_above_rows=0 must be an integer >= 1 or null$"),
    ("dequantize_above_rows", 32.5, r"dequantize_above_rows=32\.5 must be an integer >= 1 or null$"),
    ("fused_elementwise", "yes", r"fused_elementwise='yes' must be true or false$"),
    ("custom_all_reduce", 1, r"custom_all_reduce=1 must be true or false$"),
    ("gemm_accumulate", "fp8", r"gemm_accumulate='fp8' not allowed; allowed: fp32, fp16$"),
    ("overlaps_pipeline_stages", 1, r"overlaps_pipeline_stages=1 must be true or false$"),
    ("moe_dispatch", "alltoall", r"moe_dispatch='alltoall' not allowed; allowed: permute, expand-finalize, gather, "
                                 r"copy-rows-f32$"),
])  # fmt: skip
def test_a_bad_value_is_one_line_naming_the_file_and_the_field(engines, monkeypatch, capsys, field, value, message):
    write(engines, old_profile("bad", "trtllm", **{field: value}))
    assert_one_line(*run_main(["serve", "simulate", *SIM, "--engine", "bad"], monkeypatch, capsys),
                    r"^error: engine profile .*/engines/bad\.json: " + message)


def test_a_key_this_version_does_not_know_is_refused(engines, monkeypatch, capsys):
    # a newer scaleright's factor: simulating without it would be another engine than the one fitted
    write(engines, old_profile("future", "trtllm", speculative_acceptance=0.7))
    assert_one_line(*run_main(["serve", "simulate", *SIM, "--engine", "future"], monkeypatch, capsys),
                    r"^error: engine profile .*future\.json: unknown field speculative_acceptance: not a factor this "
                    r"scaleright models \(a newer version wrote it\?\); upgrade scaleright, or refit it with "
                    r"calibrate --serving --name future --force$")  # fmt: skip


def _without(body: dict, *keys: str) -> dict:
    return {**body, "profile": {k: v for k, v in body["profile"].items() if k not in keys}}


@pytest.mark.parametrize("make, message", [
    # a field of the store's first version absent: a damaged file, not an old one
    (lambda: _without(old_profile("x", "trtllm"), "hbm_fraction"), r"x\.json: missing hbm_fraction$"),
    (lambda: {**old_profile("x", "trtllm"), "provenance": {}},
     r"x\.json: missing fused_elementwise, max_num_seqs, sequence_overhead_s, dequantize_above_rows, "
     r"gemm_accumulate, overlaps_pipeline_stages, moe_dispatch \(stored before they existed\) and its provenance "
     r"names no base engine to take them from; refit it with calibrate --serving --name x --force$"),
    (lambda: old_profile("x", "no-such-engine"),
     r"x\.json: its base engine 'no-such-engine' \(provenance\.base\) is neither built-in nor stored"),
    (lambda: old_profile("x", "x"), r"x\.json: its chain of base profiles returns to .*x\.json"),
    (lambda: {**old_profile("x", "trtllm"), "provenance": {**old_profile("x", "trtllm")["provenance"],
                                                           "fitted": ["sequence_overhead_s"]}},
     r"x\.json: missing sequence_overhead_s, which its provenance lists as fitted$"),
])  # fmt: skip
def test_a_file_the_base_cannot_complete_is_one_line(engines, make, message):
    write(engines, make())
    with pytest.raises(InputError, match=r"^engine profile .*" + message):
        get_engine("x")
