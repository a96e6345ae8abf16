"""Inputs ``benchmarks/fuzz.py`` found ending in warnings and a late error instead of one line naming the field:
a depreciation life of 5e-324 years (the purchase count overflows) and a serving rate of 5e-324 requests/s (every
arrival time infinite). Each is now refused at the boundary, and the smallest sensible value still runs."""

from __future__ import annotations

import pytest

from cli_helpers import assert_one_line, run_main
from scaleright.errors import CatalogFileError
from scaleright.plan.scenario import parse_scenario

SERVE = ["serve", "simulate", "--model", "gpt2", "--gpu", "h100-sxm", "--input-len", "128", "--output-len", "16",
         "--requests", "40"]  # fmt: skip


def _owned(years: float) -> dict:
    return {"model": "llama-3.2-1b", "task": "pretrain", "training": {"tokens": 1e8},
            "pricing": {"mode": "own", "depreciation_years": years}}  # fmt: skip


@pytest.mark.parametrize("years", [5e-324, 1e-6, 0.08])
def test_a_depreciation_life_under_a_month_is_refused(years):
    with pytest.raises(CatalogFileError, match=r"^s\.yaml: pricing\.depreciation_years: .* shorter than a month"):
        parse_scenario(_owned(years), source="s.yaml")


def test_a_depreciation_life_of_a_month_is_allowed():
    assert parse_scenario(_owned(1 / 12)).pricing.depreciation_years == 1 / 12


@pytest.mark.parametrize("rate", ["5e-324", "1e-300", "9e-7"])
def test_a_rate_below_one_request_per_eleven_days_is_one_line(rate, tmp_path, monkeypatch, capsys):
    code, out, err = run_main([*SERVE, "--rate", rate, "--report", str(tmp_path / "r.html")], monkeypatch, capsys)
    assert_one_line(code, out, err, r"^error: --rate must be >= 1e-06")
    assert not (tmp_path / "r.html").exists()


def test_the_smallest_rate_runs_and_reports_without_warnings(tmp_path, monkeypatch, capsys):
    code, _, err = run_main([*SERVE, "--rate", "1e-6", "--report", str(tmp_path / "r.html"), "--json"], monkeypatch,
                            capsys)  # fmt: skip
    assert code == 0 and err == "", err
    assert (tmp_path / "r.html").stat().st_size > 0


@pytest.mark.parametrize(("change", "pattern"), [
    ({"precision": None}, r"recommendation\.precision: null; allowed: fp32, bf16"),
    ({"layout": {}}, r"recommendation\.layout\.tp: missing"),
])
def test_export_fills_no_null_precision_or_missing_layout_with_a_default(change, pattern, tmp_path, monkeypatch,
                                                                         capsys):  # fmt: skip
    """``export`` of a plan whose recommendation has ``precision: null`` wrote a bf16 vLLM command, and one with an
    empty layout a tp=1 pp=1 Megatron launch (fuzz inputs 5523 and 8779, seed 0)."""
    import json

    plan = {"scenario": {"name": "p", "model": "gpt2", "task": "pretrain", "training": {"seq_len": 2048,
                                                                                         "global_batch": 16}},
            "recommendation": {"gpu": "h100-sxm", "gpus": 1, "precision": "bf16",
                               "layout": {"tp": 1, "pp": 1, "dp": 1, "cp": 1}} | change}  # fmt: skip
    f = tmp_path / "plan.json"
    f.write_text(json.dumps(plan))
    assert_one_line(*run_main(["export", str(f), "--to", "megatron"], monkeypatch, capsys), pattern)
