"""One way to print a number: the terminal plan and the HTML report agree (issue 12: "$5 … 5 kWh" in one,
"$5.36 … 4.56 kWh" in the other)."""

from __future__ import annotations

import math
import re

import pytest

from scaleright import fmt
from scaleright.plan.planner import plan
from scaleright.plan.report import render_html
from scaleright.plan.scenario import parse_scenario
from tests.cli_helpers import run_main


@pytest.mark.parametrize(("x", "number", "usd"), [
    (5.3612, "5.36", "$5.36"), (4.5611, "4.56", "$4.56"), (1234.4, "1,234", "$1,234"), (0.012345, "0.0123", "$0.0123"),
    (0, "0", "$0"), (None, "—", "—"), (math.nan, "—", "—"), (math.inf, "—", "—"), (True, "—", "—"),
])  # fmt: skip
def test_number_and_usd(x, number, usd):
    assert fmt.number(x) == number
    assert fmt.usd(x) == usd


def test_percent_and_milliseconds_read_fractions_and_seconds():
    assert fmt.percent(0.413) == "41%" and fmt.percent(None) == "—"
    assert fmt.ms(0.0443) == "44.3" and fmt.ms(0.08437) == "84.4" and fmt.ms(math.nan) == "—"


def test_terminal_and_html_print_the_recommendation_with_the_same_figures(tmp_path, monkeypatch, capsys):
    data = {"name": "LoRA", "model": "llama-3.2-1b", "task": "lora", "training": {"tokens": 1e8},
            "constraints": {"gpu_types": ["h100-sxm", "l40s"], "max_gpus": 8}}  # fmt: skip
    rec = plan(parse_scenario(data)).as_dict()["recommendation"]
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "name: LoRA\nmodel: llama-3.2-1b\ntask: lora\ntraining: {tokens: 1.0e+8}\n"
        "constraints: {gpu_types: [h100-sxm, l40s], max_gpus: 8}\n"
    )
    code, out, err = run_main(["plan", str(scenario)], monkeypatch, capsys)
    assert code == 0, err
    line = " ".join(out[out.index("Recommendation:"):out.index("Best option")].split())  # rich wraps long lines
    html = re.sub(r"<[^>]+>", " ", render_html(plan(parse_scenario(data)).as_dict()))
    for shown in (fmt.usd(rec["cost_usd"]), fmt.number(rec["energy_kwh"]), fmt.number(rec["time_h"])):
        assert shown in line and shown in html
