"""Serverless as a pricing kind (issue 11, items 1 and 6): Modal's per-second rows are ``serverless`` offers, never a
pricing mode's (on-demand, cheapest); the batch-job and service comparisons take the GPU's cheapest serverless
catalog offer when the scenario gives no price, with provider, date and source, and say so in one line when there is
none. Expected prices are read off ``validation/reference/gpu_prices.csv`` (or the rows a test writes) and the bills
are the closed forms of ``economics.batch`` worked by hand, never taken from the code under test.
"""

from __future__ import annotations

import csv
import datetime
from pathlib import Path

import pytest
import yaml

from scaleright.catalog import Catalog, find_price, list_prices
from scaleright.catalog.prices import RENT_KINDS, PriceRow, price_data_errors
from scaleright.catalog.prices_import import prices_csv
from scaleright.errors import InputError
from scaleright.plan.planner import plan
from scaleright.plan.scenario import load_scenario, parse_scenario
from tests.cli_helpers import price_catalog as _cat
from tests.cli_helpers import run_main

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "validation" / "reference" / "gpu_prices.csv"
EXAMPLE = ROOT / "examples" / "batch-job-occasional.yaml"
TODAY = datetime.date(2026, 12, 1)
MODAL = "Modal (serverless; CPU/RAM extra)"


def _modal_ref() -> dict[str, float]:
    """The reference CSV's Modal rows: csv GPU name -> USD per GPU-hour."""
    with open(REF, newline="") as f:
        return {r["gpu"]: float(r["usd"]) for r in csv.DictReader(f) if r["provider_or_market"] == MODAL}


@pytest.fixture(scope="module")
def builtin() -> Catalog:
    return Catalog.load()


# ---- the catalog ------------------------------------------------------------------------------------------------


def test_modals_rows_are_serverless_offers_with_their_date_and_source(builtin):
    ref = _modal_ref()
    assert ref == {"A100 40GB": 2.1, "A100 80GB": 2.5, "L4": 0.8, "H100 SXM5": 3.95}
    got = {r.gpu_id: r for r in list_prices(kind="serverless", catalog=builtin)}
    assert {g: r.usd for g, r in got.items()} == {"a100-40gb": 2.1, "a100-80gb": 2.5, "l4": 0.8, "h100-sxm": 3.95}
    for r in got.values():
        assert r.provider == MODAL and r.date == "2026-09-09" and "RENTING_A_GPU.md" in r.source
        assert "CPU and RAM billed extra" in r.notes
    row = find_price("h100-sxm", "serverless", catalog=builtin, today=TODAY)
    # 2026-09-09 to 2026-12-01: 21 days left of September + 31 + 30 + 1 = 83 days, under the 180-day limit
    assert (row.usd, row.provider, row.age_days, row.stale) == (3.95, MODAL, 83, False)


def test_plain_on_demand_never_picks_a_serverless_row(builtin, tmp_path):
    assert not [r for r in list_prices(kind="on-demand", catalog=builtin) if "modal" in r.provider.lower()]
    with pytest.raises(InputError, match="no on-demand price for GPU 'h100-sxm' from provider 'Modal'"):
        find_price("h100-sxm", "on-demand", catalog=builtin, provider="Modal")
    cat = _cat(tmp_path / "c", [
        ("l4", "serverless", 0.10, "", "", "usd_per_gpu_hour", "Cheap Serverless", "", "2026-11-01"),
        ("l4", "on-demand", 0.70, "", "", "usd_per_gpu_hour", "VM Cloud", "", "2026-11-01"),
    ])  # fmt: skip
    assert find_price("l4", "on-demand", catalog=cat, today=TODAY).usd == 0.70
    assert find_price("l4", "serverless", catalog=cat, today=TODAY).usd == 0.10


def test_a_missing_serverless_price_says_how_to_add_one(builtin):
    with pytest.raises(InputError, match=r"no serverless price for GPU 'mi300x'.*'mi300x,serverless,<usd>,.*"
                                         r"pricing\.serverless_usd_per_gpu_hour"):  # fmt: skip
        find_price("mi300x", "serverless", catalog=builtin)


def test_serverless_is_neither_the_on_demand_reference_nor_a_data_error(tmp_path):
    cat = _cat(tmp_path / "c", [
        # P has no on-demand: its serverless $2 is not a reference for its spot $3
        ("a100-80gb", "serverless", 2.0, "", "", "usd_per_gpu_hour", "P", "", "2026-11-01"),
        ("a100-80gb", "spot", 3.0, "", "", "usd_per_gpu_hour", "P", "", "2026-11-01"),
        # Q's serverless above its on-demand is how serverless is priced, not an error
        ("a100-80gb", "on-demand", 1.0, "", "", "usd_per_gpu_hour", "Q", "", "2026-11-01"),
        ("a100-80gb", "serverless", 4.0, "", "", "usd_per_gpu_hour", "Q", "", "2026-11-01"),
        # R's spot above its on-demand is still the data error
        ("a100-80gb", "on-demand", 1.0, "", "", "usd_per_gpu_hour", "R", "", "2026-11-01"),
        ("a100-80gb", "spot", 2.0, "", "", "usd_per_gpu_hour", "R", "", "2026-11-01"),
    ])  # fmt: skip
    errors = [e for e in price_data_errors(catalog=cat) if e.startswith("a100-80gb")]
    assert len(errors) == 1 and "'R'" in errors[0]
    assert find_price("a100-80gb", "serverless", catalog=cat, today=TODAY).usd == 2.0


def test_a_quoted_serverless_range_prices_at_its_midpoint_never_zero(tmp_path):
    """A row with usd_low and usd_high only is a usable offer (PriceRow's docstring): the comparison takes the
    midpoint of the quoted range, (1.0 + 3.0) / 2 = $2.00/GPU-hour, not $0 for the missing usd."""
    from scaleright.plan.scenario import Pricing
    from scaleright.plan.serving import serverless_price

    cat = _cat(tmp_path / "c", [
        ("l4", "serverless", "", 1.0, 3.0, "usd_per_gpu_hour", "Range Serverless", "", "2026-11-01"),
    ])  # fmt: skip
    o = serverless_price(Pricing(prices_as_of=TODAY), "l4", cat)
    assert o["usd_per_gpu_hour"] == pytest.approx(2.0)


def test_a_serverless_row_round_trips_through_an_imported_prices_csv(tmp_path):
    row = PriceRow(gpu_id="h100-sxm", kind="serverless", usd=3.5, unit="usd_per_gpu_hour", provider="Modal",
                   date="2026-11-20", source="modal.com/pricing", notes="GPU only")  # fmt: skip
    d = tmp_path / "c"
    d.mkdir()
    (d / "prices.csv").write_text(prices_csv([row]))
    cat = Catalog.load(d)  # merged: the user's Modal row overrides the built-in Modal h100-sxm row (same provider)
    back = [r for r in cat.prices if r.gpu_id == "h100-sxm" and r.kind == "serverless"]
    assert [(r.usd, r.provider, r.date, r.source) for r in back] == [(3.5, "Modal", "2026-11-20", "modal.com/pricing")]
    assert find_price("l4", "serverless", catalog=cat, today=TODAY).usd == 0.8  # the other Modal rows stay


def test_the_catalog_listing_shows_the_kind(monkeypatch, capsys):
    code, out, _ = run_main(["catalog", "prices", "--kind", "serverless", "--json"], monkeypatch, capsys)
    assert code == 0
    rows = yaml.safe_load(out)
    assert {(r["gpu_id"], r["kind"]) for r in rows} == {(g, "serverless") for g in ("a100-40gb", "a100-80gb", "l4",
                                                                                    "h100-sxm")}


# ---- training: cheapest does not rent serverless ----------------------------------------------------------------


def test_cheapest_training_weighs_no_serverless_offer_even_the_cheapest(tmp_path):
    """The serverless price leaves out the CPU and RAM a VM price includes (catalog.prices), so a training job
    under mode cheapest never rents it, even at $0.01 against a $0.70 VM."""
    assert "serverless" not in RENT_KINDS and "on-demand" in RENT_KINDS
    cat = _cat(tmp_path / "c", [
        ("l4", "serverless", 0.01, "", "", "usd_per_gpu_hour", "S", "", "2026-11-01"),
        ("l4", "on-demand", 0.70, "", "", "usd_per_gpu_hour", "V", "", "2026-11-01"),
    ])  # fmt: skip
    scn = {"model": "llama-3.1-8b", "task": "lora", "training": {"tokens": 1e7, "seq_len": 1024, "global_batch": 8},
           "constraints": {"gpu_types": ["l4"], "max_gpus": 1},
           "pricing": {"mode": "cheapest", "prices_as_of": "2026-12-01"}}  # fmt: skip
    res = plan(parse_scenario(scn), catalog=cat)
    assert {o["pricing_kind"] for o in res.all_options} == {"on-demand"}  # no purchase row: no owned option
    assert res.recommendation is not None and res.recommendation["price_usd_per_gpu_hour"] == 0.70


# ---- batch jobs and services ------------------------------------------------------------------------------------


def _batch(pricing: dict, gpu: str = "h100-sxm") -> dict:
    d = yaml.safe_load(EXAMPLE.read_text())
    d["inference"]["batch_job"] |= {"startup_s": 600}
    d["pricing"] = {"mode": "on-demand", "price_usd_per_gpu_hour": {gpu: 2.0}, "prices_as_of": "2026-12-01"} | pricing
    d["constraints"] = {"gpu_types": [gpu], "max_gpus": 16}
    return d


def test_a_batch_job_without_a_serverless_price_takes_modals_catalog_offer():
    rec = plan(parse_scenario(_batch({}))).as_dict()["recommendation"]
    b, n = rec["batch_job"], rec["gpus"]
    work_h = 200_000 / rec["capacity_requests_per_s"] / 3600
    # the serverless bill: every worker's GPUs for the work plus one billed 600 s cold start, at Modal's $3.95
    assert b["serverless_usd_per_run"] == pytest.approx(n * 3.95 * (work_h + 600 / 3600))
    assert b["serverless_usd_per_month"] == pytest.approx(b["serverless_usd_per_run"])  # one run a month
    o = b["serverless_offer"]
    assert (o["usd_per_gpu_hour"], o["provider"], o["date"], o["age_days"], o["stale"]) == (3.95, MODAL,
                                                                                          "2026-09-09", 83, False)
    assert "RENTING_A_GPU.md" in o["source"]
    text = next(e["text"] for e in plan(parse_scenario(_batch({}))).explanations if e["topic"] == "batch_job")
    assert "$3.95/GPU-hour (Modal (serverless; CPU/RAM extra), 2026-09-09)" in text


def test_the_scenarios_serverless_price_overrides_the_catalog():
    rec = plan(parse_scenario(_batch({"serverless_usd_per_gpu_hour": 4.0}))).recommendation
    work_h = 200_000 / rec["capacity_requests_per_s"] / 3600
    assert rec["batch_job"]["serverless_usd_per_run"] == pytest.approx(rec["gpus"] * 4.0 * (work_h + 600 / 3600))
    assert rec["batch_job"]["serverless_offer"]["provider"] == "scenario override"


def test_a_stale_serverless_offer_is_flagged():
    res = plan(parse_scenario(_batch({"max_price_age_days": 30})))  # Modal's row is 83 days old on 2026-12-01
    o = res.recommendation["batch_job"]["serverless_offer"]
    assert o["stale"] is True and o["age_days"] == 83
    assert "STALE: 83 days old" in next(e["text"] for e in res.explanations if e["topic"] == "batch_job")


def test_a_gpu_with_no_serverless_offer_says_so_in_one_line():
    res = plan(parse_scenario(_batch({}, gpu="h100-pcie")))
    b = res.recommendation["batch_job"]
    assert b["serverless_usd_per_run"] is None and b["serverless_offer"]["usd_per_gpu_hour"] is None
    assert b["serverless_note"].startswith("not priced: no serverless price for GPU 'h100-pcie'")
    assert "\n" not in b["serverless_note"] and "pricing.serverless_usd_per_gpu_hour" in b["serverless_note"]


def _service(gpu: str) -> dict:
    return {"model": "llama-3.1-8b", "task": "inference",
            "inference": {"requests_per_s": 0.01, "input_len": 1000, "output_len": 300, "tpot_slo_s": 0.05},
            "constraints": {"gpu_types": [gpu]},
            "pricing": {"price_usd_per_gpu_hour": {gpu: 1.0}, "prices_as_of": "2026-12-01"}}  # fmt: skip


def test_a_sporadic_service_is_weighed_against_modals_serverless_price():
    res = plan(parse_scenario(_service("a100-80gb")))
    s = res.recommendation["serverless"]
    assert s["always_on_usd_per_month"] == pytest.approx(res.recommendation["gpus"] * 1.0 * 730)
    assert s["serverless_usd_per_month"] == pytest.approx(2.5 * s["serverless_gpu_hours_per_month"])  # Modal $2.50
    assert s["serverless_offer"]["provider"] == MODAL and s["serverless_offer"]["date"] == "2026-09-09"
    text = next(e["text"] for e in res.explanations if e["topic"] == "serverless")
    assert text.startswith("Serverless at $2.5/GPU-hour (Modal (serverless; CPU/RAM extra), 2026-09-09)")


def test_a_service_on_a_gpu_without_a_serverless_offer_says_so():
    res = plan(parse_scenario(_service("l40s")))
    s = res.recommendation["serverless"]
    assert s["serverless_usd_per_month"] is None and s["serverless_gpu_hours_per_month"] > 0
    text = next(e["text"] for e in res.explanations if e["topic"] == "serverless")
    assert text.startswith("Serverless not priced: no serverless price for GPU 'l40s'") and "\n" not in text


def test_the_example_plan_shows_a_catalog_priced_serverless_comparison():
    scn = load_scenario(EXAMPLE)
    assert scn.pricing.serverless_usd_per_gpu_hour is None
    res = plan(scn).as_dict()
    rec = res["recommendation"]
    assert rec["batch_job"]["serverless_offer"]["provider"] == MODAL
    expected = {"a100-40gb": 2.1, "a100-80gb": 2.5, "l4": 0.8, "h100-sxm": 3.95}  # the reference CSV's Modal rows
    for o in res["all_options"]:
        got = o["batch_job"]["serverless_offer"]["usd_per_gpu_hour"]
        assert got == expected.get(o["gpu"]), o["gpu"]
