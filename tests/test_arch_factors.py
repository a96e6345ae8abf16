"""Vendor and generation factors (issue #9 item 7): one table keyed by exact architecture, grounded in the
component measurements, and an ``uncalibrated`` flag wherever a family has none.

The reference is ``validation/reference/components/{gemm_efficiency,hbm_bandwidth}.csv`` read here on its own:
every figure of the table must be a row of those files (achieved / datasheet peak as the row states it).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scaleright.catalog import get_gpu
from scaleright.catalog.store import list_gpus
from scaleright.cli.main import app
from scaleright.estimate.calibration import ARCH_TABLE, DEFAULT_CALIBRATION, PART_TABLE, arch_factors
from scaleright.estimate.layer import roofline
from scaleright.estimate.layout import Layout
from scaleright.estimate.train import estimate_train
from scaleright.workload import load_model

COMPONENTS = Path(__file__).resolve().parents[1] / "validation" / "reference" / "components"


def _fractions(name: str, column: str) -> list[float]:
    with open(COMPONENTS / name, newline="") as f:
        return [float(r[column]) / 100 for r in csv.DictReader(f) if r[column].strip()]


GEMM = _fractions("gemm_efficiency.csv", "pct_of_peak_percent_derived")
HBM = _fractions("hbm_bandwidth.csv", "pct_of_datasheet_percent_derived")


@pytest.mark.parametrize("key", sorted({**ARCH_TABLE, **PART_TABLE}))
def test_every_table_figure_is_a_measured_row(key):
    gemm, hbm, _ = {**ARCH_TABLE, **PART_TABLE}[key]
    if gemm is not None:
        assert any(abs(gemm - x) < 6e-4 for x in GEMM), (key, gemm)
    if hbm is not None:
        assert any(abs(hbm - x) < 6e-4 for x in HBM), (key, hbm)


def test_named_families_are_in_the_table():
    for key in ("volta", "ampere-ga100", "ada-ad102", "hopper", "blackwell", "cdna2", "cdna3", "cdna4", "gaudi2",
                "gaudi3", "tpu", "trainium"):  # fmt: skip
        assert key in ARCH_TABLE


def test_unmeasured_families_are_flagged_not_given_hopper_factors():
    hopper = arch_factors(get_gpu("h100-sxm"))
    assert hopper.calibrated and hopper.note == ""
    for gid in ("tpu-v5e", "trn1", "v100-32gb", "gaudi3", "mi355x"):
        a = arch_factors(get_gpu(gid))
        assert not a.calibrated and "uncalibrated" in a.note
        assert (a.gemm_efficiency, a.memory_efficiency) != (hopper.gemm_efficiency, hopper.memory_efficiency)
    assert arch_factors(get_gpu("mi300x")).gemm_efficiency == pytest.approx(668.4 / 1300, abs=1e-3)


def test_every_catalog_gpu_has_ceilings_at_most_one():
    for g in list_gpus():
        a = arch_factors(g)
        assert 0 < a.gemm_efficiency <= 1 and 0 < a.memory_efficiency <= 1, g.id
        prec = "bf16" if g.dense_tflops.get("bf16") else "fp16"
        if not g.dense_tflops.get(prec):
            continue
        rl = roofline(g, prec, DEFAULT_CALIBRATION)
        assert rl.tensor <= rl.peak and rl.attention <= rl.peak16
        assert rl.hbm <= g.hbm_bandwidth_tb_per_s * 1e12


def test_estimates_carry_the_flag_in_every_output():
    spec = load_model("llama-3.1-8b")
    lay = Layout(tp=1, pp=1, dp=8, zero=3, micro_batch=1, global_batch=8)
    tpu = estimate_train(spec, gpu=get_gpu("tpu-v5p"), layout=lay, seq_len=4096)
    assert tpu.calibrated is False and tpu.as_dict()["calibrated"] is False and tpu.as_dict()["calibration_note"]
    assert estimate_train(spec, gpu=get_gpu("h100-sxm"), layout=lay, seq_len=4096).as_dict()["calibrated"] is True
    base = ["--model", "llama-3.1-8b", "--gpu", "tpu-v5p", "--gpus", "8"]
    r = CliRunner().invoke(app, ["estimate", "train", *base, "--zero", "3", "--global-batch", "8", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["calibrated"] is False
    r = CliRunner().invoke(app, ["estimate", "train", *base, "--zero", "3", "--global-batch", "8"])
    assert "uncalibrated" in r.output
    r = CliRunner().invoke(app, ["estimate", "infer", *base, "--input-len", "512", "--output-len", "128", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["calibrated"] is False
