"""The HTML report of a plan: self-contained, well-formed, escaped, one SVG per chart, and true to the result.

Results come from the real planner on small scenarios (a 1B LoRA on three GPU types, an 8B inference service,
and the LoRA with an impossible deadline), so the report is tested against the dict shape the planner emits.
"""

from __future__ import annotations

import html
import math
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from scaleright import charts
from scaleright.plan import report
from scaleright.plan.planner import plan
from scaleright.plan.report import render_html, write_html
from scaleright.plan.scenario import parse_scenario

GPUS = ["h100-sxm", "rtx-4090", "l40s"]
VOID = {"meta", "br", "hr", "img", "input", "link", "col", "area", "base", "wbr", "source", "track", "embed"}
SVG_RE = re.compile(r"<svg\b.*?</svg>", re.S)


def _lora(**constraints) -> dict:
    return {"name": "1B LoRA", "model": "llama-3.2-1b", "task": "lora", "training": {"tokens": 1e8},
            "constraints": {"gpu_types": GPUS, "max_gpus": 16} | constraints}  # fmt: skip


def _result(data: dict) -> dict:
    return plan(parse_scenario(data)).as_dict()


@pytest.fixture(scope="module")
def training() -> dict:
    return _result(_lora())


@pytest.fixture(scope="module")
def inference() -> dict:
    return _result({"name": "8B chat", "model": "llama-3.1-8b", "task": "inference",
                    "inference": {"requests_per_s": 5, "input_len": 1000, "output_len": 300, "tpot_slo_s": 0.05},
                    "constraints": {"gpu_types": GPUS, "max_gpus": 16}})  # fmt: skip


@pytest.fixture(scope="module")
def infeasible() -> dict:
    return _result(_lora(deadline_h=0.001))


class _Balance(HTMLParser):
    """Records every start/end tag mismatch (void elements excepted)."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs) -> None:
        pass

    def handle_endtag(self, tag) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()


def _assert_balanced(doc: str) -> None:
    p = _Balance()
    p.feed(doc)
    p.close()
    assert not p.errors, p.errors[:5]
    assert not p.stack, f"unclosed: {p.stack}"


def _charts_expected(res: dict) -> int:
    training = res["scenario"]["task"] != "inference"
    has_capex = any(e["topic"] == "capex_opex" and "own_usd" in e["data"] for e in res["explanations"])
    has_memory = bool((res["recommendation"] or {}).get("memory_breakdown_gb"))
    # scaling curve (training), memory breakdown, Pareto + radar, rent vs buy
    return training + has_memory + 2 + has_capex


@pytest.mark.parametrize("which", ["training", "inference", "infeasible"])
def test_report_is_balanced_well_formed_markup(which, request) -> None:
    doc = render_html(request.getfixturevalue(which))
    assert doc.startswith("<!DOCTYPE html>")
    _assert_balanced(doc)
    ET.fromstring(doc.split("\n", 1)[1])  # the whole document is also well-formed XML


@pytest.mark.parametrize("which", ["training", "inference"])
def test_one_svg_per_chart_each_with_a_title_and_axis_text(which, request) -> None:
    res = request.getfixturevalue(which)
    svgs = SVG_RE.findall(render_html(res))
    assert len(svgs) == _charts_expected(res)
    for s in svgs:
        root = ET.fromstring(s)
        assert root[0].tag == "title" and root[0].text
        assert len(root.findall(".//text")) >= 4  # axis labels, ticks or legend entries


def test_training_report_has_curve_pareto_memory_and_radar(training) -> None:
    titles = [ET.fromstring(s)[0].text for s in SVG_RE.findall(render_html(training))]
    assert any(t.startswith("Scaling curve") for t in titles)
    assert any(t.startswith("Cost against training time") for t in titles)
    assert any(t.startswith("Memory per GPU") for t in titles)
    assert any(t.startswith("Radar") for t in titles)


def test_inference_report_draws_memory_but_no_scaling_curve(inference) -> None:
    doc = render_html(inference)
    assert "kv_cache" in doc or "KV cache" in doc
    assert "Scaling curve" not in doc
    assert "time per output token (ms, log)" in doc


def test_report_loads_nothing_from_outside(training, inference) -> None:
    for doc in (render_html(training), render_html(inference)):
        assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", doc, re.I)
        assert "<script" not in doc.lower() and "@import" not in doc and "url(" not in doc
        assert "<link" not in doc.lower() and "<img" not in doc.lower()


@pytest.mark.parametrize("which", ["training", "inference"])
def test_recommendation_gpu_and_cost_appear(which, request) -> None:
    res = request.getfixturevalue(which)
    rec = res["recommendation"]
    doc = render_html(res)
    assert rec is not None
    assert f"{rec['gpus']} × {rec['gpu']}" in doc
    c = rec["cost_usd"]
    money = f"${c:,.0f}" if c >= 1000 else f"${c:,.2f}" if c >= 1 else f"${c:.3g}"  # the report's stated format
    assert money in doc


def test_infeasible_deadline_names_the_binding_constraint(infeasible) -> None:
    inf = infeasible["infeasible"]
    assert infeasible["recommendation"] is None and inf["binding"] == "deadline"
    doc = render_html(infeasible)
    assert "No option meets the constraints." in doc
    assert "Binding constraint: <b>deadline</b>" in doc
    assert "no option finishes within 0.001 h" in doc
    assert "Closest option" in doc and inf["closest"]["gpu"] in doc


def test_scenario_text_is_escaped(training) -> None:
    res = training | {"scenario": training["scenario"] | {"name": "<script>alert(1)</script> & co"}}
    doc = render_html(res)
    assert "<script>" not in doc
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co" in doc
    _assert_balanced(doc)


def test_missing_and_non_finite_numbers_show_a_dash(training) -> None:
    rec = training["recommendation"] | {"cost_usd": math.nan, "energy_kwh": None, "co2e_kg": math.inf, "mfu": None}
    res = training | {"recommendation": rec, "curve": [], "explanations": []}
    doc = render_html(res)
    _assert_balanced(doc)
    assert not re.search(r"\b(nan|inf|None)\b", re.sub(r"<[^>]+>", " ", doc).replace("inference", ""))
    assert "<b>—</b><span>cost per job</span>" in doc
    assert "no purchase price" in doc  # rent vs buy skipped, with the reason


def test_write_html_writes_the_rendered_report(training, tmp_path: Path) -> None:
    out = tmp_path / "plan.html"
    write_html(training, out)
    assert out.read_text(encoding="utf-8") == render_html(training)


def test_public_api_is_render_and_write() -> None:
    assert report.__all__ == ["render_html", "write_html"]


def test_summary_comes_first_and_states_the_recommendation(training) -> None:
    doc = render_html(training)
    rec = training["recommendation"]
    summary = re.search(r'<p class="summary">(.*?)</p>', doc, re.S)
    assert summary and doc.index('class="summary"') < doc.index("<h2>")
    text = re.sub(r"<[^>]+>", "", summary.group(1))
    assert f"{rec['gpus']} × {rec['gpu']}" in text and report.format_usd(rec["cost_usd"]) in text
    assert text.startswith("Rent (on-demand)") and "What would change it:" in text
    # the best option per GPU type comes before the scenario, the charts and the explanations
    assert doc.index("Best option per GPU type") < doc.index("<h2>Scenario") < doc.index("<h2>Charts")


def test_infeasible_summary_names_the_binding_constraint(infeasible) -> None:
    text = re.sub(r"<[^>]+>", "", re.search(r'<p class="summary">(.*?)</p>', render_html(infeasible), re.S).group(1))
    assert text.startswith("No option meets the constraints") and infeasible["infeasible"]["binding"] in text


def test_each_pareto_marker_carries_its_numbers_as_hover_text(training) -> None:
    [pareto] = [s for s in SVG_RE.findall(render_html(training)) if "Cost against" in s]
    tips = [t.text for t in ET.fromstring(pareto).iter("title")][1:]  # the first is the chart's own title
    assert len(tips) == len([o for o in training["all_options"] if o.get("time_h") and o.get("cost_usd")])
    o = training["all_options"][0]
    assert f"{o['gpus']} × {o['gpu']}" in tips[0] and report.format_usd(o["cost_usd"]) in tips[0]


def test_twenty_gpu_types_get_twenty_colours_and_eighty_get_distinct_colour_and_marker_pairs() -> None:
    styles = charts.styles([f"gpu-{i}" for i in range(80)])
    assert len({styles[f"gpu-{i}"][0] for i in range(20)}) == 20
    assert len(set(styles.values())) == 80
    assert all(styles[f"gpu-{i}"][1] != styles[f"gpu-{i + 1}"][1] for i in range(79))  # neighbours differ in shape


def test_a_one_point_scaling_curve_and_a_one_type_radar_become_sentences(training) -> None:
    one = dict(training, curve=training["curve"][:1], options=training["options"][:1])
    doc = render_html(one)
    titles = [ET.fromstring(s)[0].text for s in SVG_RE.findall(doc)]
    assert not any(t.startswith(("Scaling curve", "Radar")) for t in titles)
    assert f"only one GPU count ({training['curve'][0]['gpus']}) has an option" in doc
    assert "Radar: one GPU type" in doc


def test_the_deployment_decision_tree_has_its_own_section_with_every_branch(training) -> None:
    d = training["deployment_decision"]
    doc = render_html(training)
    assert "<h2>Deployment Decision Tree</h2>" in doc
    section = doc.split("<h2>Deployment Decision Tree</h2>", 1)[1].split("<h2>", 1)[0]
    for b in d["branches"]:
        assert b["branch"] in section and html.escape(b["seed_rule"], quote=False) in section
    _assert_balanced(doc)


def test_no_decision_no_section(training) -> None:
    assert "Deployment Decision Tree</h2>" not in render_html(training | {"deployment_decision": None})
