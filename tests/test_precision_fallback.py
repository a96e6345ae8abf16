"""A part without a tensor rate for the requested precision runs its nearest fallback, and the plan says so.

Volta (V100) and Turing (T4) have fp16 tensor cores and no bf16 (NVIDIA Volta/Turing whitepapers); Ampere (A100)
has no fp8 (fp8 arrived with Hopper/Ada); TPUs have bf16 and no fp16 (Google Cloud TPU chip tables).
"""

from __future__ import annotations

import pytest

from scaleright.catalog import Catalog
from scaleright.plan.planner import plan
from scaleright.plan.scenario import parse_scenario


@pytest.fixture(scope="module")
def cat() -> Catalog:
    return Catalog.load()


@pytest.mark.parametrize(
    "gid, asked, runs",
    [("v100-32gb", "bf16", "fp16"), ("t4", "bf16", "fp16"), ("a100-80gb", "fp8", "bf16"), ("v100-32gb", "fp8", "fp16"),
     ("tpu-v5e", "fp16", "bf16"), ("h100-sxm", "fp4", "fp8"), ("h100-sxm", "bf16", "bf16"), ("b200", "fp4", "fp4")],
)
def test_the_fallback_is_the_nearest_wider_format_the_part_has(cat, gid, asked, runs):
    ran, note = cat.gpu(gid).tensor_precision(asked)
    assert ran == runs
    if asked == runs:
        assert note is None
    else:  # one line naming the part, what it lacks and what ran instead
        assert note == f"{gid} has no {asked} tensor rate: runs in {runs} instead"


def test_a_part_with_no_fallback_says_what_it_has(cat):
    ran, note = cat.gpu("tpu-v5e").tensor_precision("fp32")  # Google lists no fp32 rate for TPU v5e
    assert ran is None and note is not None and "no fp32 tensor rate" in note and "bf16" in note and "\n" not in note


def _scenario(precision: str, gpus: list[str], task: str = "pretrain") -> dict:
    price = {g: 1.0 for g in gpus}
    if task == "inference":
        return {"name": "t", "model": "llama-3.2-1b", "task": "inference",
                "inference": {"requests_per_s": 1.0, "input_len": 512, "output_len": 128, "precision": precision},
                "constraints": {"max_gpus": 8, "gpu_types": gpus},
                "pricing": {"mode": "on-demand", "price_usd_per_gpu_hour": price}}  # fmt: skip
    return {"name": "t", "model": "llama-3.2-1b", "task": task,
            "training": {"dataset_tokens": 1.0e8, "seq_len": 2048, "global_batch": 32, "precision": precision},
            "constraints": {"max_gpus": 8, "gpu_types": gpus},
            "pricing": {"mode": "on-demand", "price_usd_per_gpu_hour": price}}  # fmt: skip


def test_training_plan_records_and_prints_the_fallback(cat):
    res = plan(parse_scenario(_scenario("bf16", ["v100-32gb", "h100-sxm"])), catalog=cat)
    by_gpu = {o["gpu"]: o for o in res.all_options}
    assert by_gpu["v100-32gb"]["precision"] == "fp16"
    assert by_gpu["v100-32gb"]["precision_note"] == "v100-32gb has no bf16 tensor rate: runs in fp16 instead"
    assert by_gpu["h100-sxm"]["precision"] == "bf16" and by_gpu["h100-sxm"]["precision_note"] is None
    assert res.search["precision_notes"] == ["v100-32gb has no bf16 tensor rate: runs in fp16 instead"]


def test_fp8_training_on_an_a100_runs_bf16_and_is_no_faster_than_bf16(cat):
    """Before, an A100 asked for fp8 was skipped; now it trains in bf16, exactly as a bf16 request would."""
    fp8 = plan(parse_scenario(_scenario("fp8", ["a100-80gb"])), catalog=cat)
    bf16 = plan(parse_scenario(_scenario("bf16", ["a100-80gb"])), catalog=cat)
    assert fp8.recommendation is not None and fp8.recommendation["precision"] == "bf16"
    assert fp8.recommendation["time_h"] == pytest.approx(bf16.recommendation["time_h"])
    assert fp8.search["precision_notes"] == ["a100-80gb has no fp8 tensor rate: runs in bf16 instead"]


def test_serving_plan_notes_weights_that_multiply_wider(cat):
    res = plan(parse_scenario(_scenario("fp8", ["a100-80gb", "h100-sxm"], task="inference")), catalog=cat)
    notes = {o["gpu"]: o["precision_note"] for o in res.all_options}
    assert notes["a100-80gb"] == "a100-80gb has no fp8 tensor rate: fp8 weights multiply in bf16"
    assert notes["h100-sxm"] is None


def test_catalog_table_says_which_parts_lack_a_rate(monkeypatch, capsys):
    """`scaleright catalog gpus` no longer shows the V100's fp16 125 under bf16: the cell says it has none and what
    a plan runs instead."""
    from cli_helpers import run_main

    monkeypatch.setenv("COLUMNS", "250")
    code, out, _ = run_main(["catalog", "gpus"], monkeypatch, capsys)
    assert code == 0
    v100 = next(line for line in out.splitlines() if "v100-32gb" in line)
    assert "none, runs fp16" in v100 and "125" not in v100
    a100 = next(line for line in out.splitlines() if "a100-80gb " in line)
    assert "312.0" in a100 and "none, runs bf16" in a100  # bf16 rate; no fp8
