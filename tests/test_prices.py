"""Offer selection: the cheapest valid offer a buyer would take, fresh offers first, stale ones flagged, a spot price
above the same provider's on-demand price refused as a data error, and a missing price named with how to add one.

Expected values are read off the rows written in each test (or off ``validation/reference/gpu_prices.csv``), never
from ``find_price`` itself.
"""

from __future__ import annotations

import csv
import datetime
from pathlib import Path

import pytest

from scaleright.catalog import Catalog, find_price
from scaleright.catalog.prices import KINDS, MAX_PRICE_AGE_DAYS, PriceRow, price_data_errors, provider_key
from scaleright.errors import InputError
from scaleright.plan.planner import plan
from scaleright.plan.scenario import load_scenario, parse_scenario
from tests.cli_helpers import price_catalog

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "validation" / "reference" / "gpu_prices.csv"
TODAY = datetime.date(2026, 12, 1)


_cat = price_catalog


@pytest.fixture(scope="module")
def builtin() -> Catalog:
    return Catalog.load()


def test_the_cheapest_fresh_offer_wins_over_a_cheaper_stale_one(tmp_path):
    cat = _cat(tmp_path / "c", [
        ("rtx-4090", "on-demand", 0.10, "", "", "usd_per_gpu_hour", "Old Cloud", "", "2025-01-05"),  # 695 days
        ("rtx-4090", "on-demand", 0.40, "", "", "usd_per_gpu_hour", "B Cloud", "", "2026-11-20"),
        ("rtx-4090", "on-demand", 0.30, "", "", "usd_per_gpu_hour", "A Cloud us-east-1", "", "2026-10-01"),
        ("rtx-4090", "on-demand", "", 0.2, 0.6, "usd_per_gpu_hour", "Range", "", "2026-11-01"),  # midpoint 0.40
        ("rtx-4090", "on-demand", 0.01, "", "", "usd_per_gpu", "wrong unit", "", "2026-11-30"),
    ])  # fmt: skip
    row = find_price("4090", "on-demand", catalog=cat, today=TODAY)
    assert (row.usd, row.provider, row.region, row.date) == (0.30, "A Cloud us-east-1", "us-east-1", "2026-10-01")
    assert row.age_days == (TODAY - datetime.date(2026, 10, 1)).days and row.stale is False
    # with a two-year window the 2025 offer is fresh too, and cheapest
    old = find_price("4090", "on-demand", catalog=cat, today=TODAY, max_age_days=730)
    assert (old.usd, old.stale) == (0.10, False)


def test_when_every_offer_is_stale_the_cheapest_is_returned_and_marked(tmp_path):
    cat = _cat(tmp_path / "c", [
        ("l4", "spot", 0.5, "", "", "usd_per_gpu_hour", "p", "", "2025-03"),
        ("l4", "spot", "", 0.2, 0.4, "usd_per_gpu_hour", "q", "", "2024"),
        ("l4", "spot", 0.25, "", "", "usd_per_gpu_hour", "r", "", ""),  # undated
    ])  # fmt: skip
    row = find_price("L4", "spot", catalog=cat, today=TODAY)
    assert row.usd == 0.25 and row.stale is True and row.age_days is None
    # a bare year is as old as it can be: 2024 counts from 1 January 2024
    assert PriceRow(gpu_id="l4", kind="spot", usd=1, unit="usd_per_gpu_hour", date="2024", source="s").age_on(
        TODAY) == (TODAY - datetime.date(2024, 1, 1)).days
    mid = find_price("L4", "spot", catalog=_cat(tmp_path / "d", [("l4", "spot", "", 0.2, 0.4, "usd_per_gpu_hour",
                                                                  "q", "", "2026-11")]), today=TODAY)  # fmt: skip
    assert mid.usd == pytest.approx(0.3) and mid.price_basis == "midpoint of low/high" and mid.stale is False


def test_a_spot_price_above_the_same_providers_on_demand_is_a_data_error_never_chosen(tmp_path):
    cat = _cat(tmp_path / "c", [
        ("a100-80gb", "on-demand", 2.0, "", "", "usd_per_gpu_hour", "GCP A2-Ultra", "", "2026-10-01"),
        ("a100-80gb", "spot", 3.0, "", "", "usd_per_gpu_hour", "GCP us-central1", "", "2026-11-01"),  # > 2.0
        ("a100-80gb", "spot", 5.0, "", "", "usd_per_gpu_hour", "Other", "", "2026-11-01"),  # no Other on-demand
    ])  # fmt: skip
    errors = [e for e in price_data_errors(catalog=cat) if e.startswith("a100-80gb")]  # user rows over built-in
    assert len(errors) == 1 and "$3/h" in errors[0] and "GCP us-central1" in errors[0] and "$2/h" in errors[0]
    assert find_price("a100-80gb", "spot", catalog=cat, today=TODAY).usd == 5.0


def test_the_h100_spot_list_price_of_the_issue_is_flagged_and_real_spot_offers_win(builtin):
    # validation/reference/gpu_prices.csv, read here: the H100 SXM spot rows and GCP's on-demand
    with open(REF, newline="") as f:
        ref = [r for r in csv.DictReader(f) if r["kind"] == "rent_spot" and r["gpu"].startswith("H100")]
    gcp_spot = [float(r["usd"]) for r in ref if r["provider_or_market"] == "GCP us-central1"]
    assert gcp_spot == [6.571]
    assert any("6.571" in e and "GCP us-central1" in e for e in price_data_errors(catalog=builtin))
    row = find_price("h100-sxm", "spot", catalog=builtin, today=TODAY)
    fresh = [float(r["usd"]) for r in ref if r["usd"] and r["date_of_source"] >= "2026-06-04"
             and r["provider_or_market"] != "GCP us-central1"]  # 180 days before TODAY
    assert row.usd == min(fresh) == 1.15 and row.provider.startswith("Vast.ai")


def test_a_gpu_without_a_price_is_named_with_how_to_add_one(builtin):
    with pytest.raises(InputError, match=r"no on-demand price for GPU 'mi300x'; kinds with a price: purchase; add "
                                         r"a row 'mi300x,on-demand,<usd>,.*prices\.csv.*--catalog DIR.*"
                                         r"pricing\.price_usd_per_gpu_hour"):  # fmt: skip
        find_price("MI300X", "on-demand", catalog=builtin)
    with pytest.raises(InputError, match=r"price kind 'reserved-2y' is not one of on-demand, spot, marketplace, "
                                         r"reserved, reserved-1y, reserved-3y, committed, serverless, "
                                         r"purchase"):  # fmt: skip
        find_price("H100", "reserved-2y", catalog=builtin)


@pytest.mark.parametrize(("provider", "region"), [
    ("GCP us-central1", "us-central1"), ("AWS us-east-1", "us-east-1"), ("Azure eastus", "eastus"),
    ("AWS Capacity Blocks ap-southeast-4", "ap-southeast-4"), ("Azure East US", "East US"), ("GCP Iowa", "Iowa"),
    ("Lambda", ""), ("RunPod Secure (via SkyPilot catalog)", ""), ("Verda (ex-DataCrunch)", ""),
])  # fmt: skip
def test_region_is_read_off_the_provider_where_it_is_named(provider, region):
    assert PriceRow(gpu_id="l4", kind="spot", usd=1, unit="usd_per_gpu_hour", provider=provider, source="s",
                    sku="a3-highgpu-1g").region == region  # fmt: skip


def test_provider_key_groups_a_providers_tiers_and_regions():
    assert provider_key("GCP us-central1") == provider_key("GCP A3-High Spot") == "gcp"
    assert provider_key("RunPod (community)") == provider_key("RunPod Secure") == "runpod"
    assert provider_key("Vast.ai interruptible (median bid)") == "vast.ai"


def test_every_kind_a_buyer_can_get_is_a_price_kind_and_a_pricing_mode():
    from scaleright.plan.scenario import PRICING_MODES

    for k in ("on-demand", "spot", "marketplace", "reserved-1y", "reserved-3y", "committed", "purchase"):
        assert k in KINDS
    for m in ("on-demand", "spot", "marketplace", "reserved-1y", "reserved-3y", "own", "cheapest"):
        assert m in PRICING_MODES
    assert MAX_PRICE_AGE_DAYS == 180


# ---- in the plan ------------------------------------------------------------------------------------------------

CONTRACT = ("pricing_kind", "price_usd_per_gpu_hour", "price_provider", "price_date", "price_source")


def test_the_issue_batch_job_takes_a_real_spot_offer_and_says_where_it_comes_from():
    res = plan(load_scenario(ROOT / "examples" / "batch-job-occasional.yaml")).as_dict()
    rec = res["recommendation"]
    for o in [rec, *res["options"]]:
        assert all(k in o for k in CONTRACT), o.keys()
        assert o["pricing_kind"] == "spot"
    h100 = [o for o in res["all_options"] if o["gpu"] == "h100-sxm"]
    assert h100 and all(o["price_usd_per_gpu_hour"] <= 2.25 for o in h100)  # the $1.15-2.25 spot rows, not $6.57


def _lora(**pricing) -> dict:
    return {"model": "llama-3.1-8b", "task": "lora", "training": {"tokens": 1e7, "seq_len": 1024, "global_batch": 8},
            "constraints": {"gpu_types": ["mi300x", "l4"], "max_gpus": 1}, "pricing": pricing}  # fmt: skip


def test_mi300x_skipped_for_lack_of_a_price_is_named_in_the_plan_with_how_to_add_one():
    res = plan(parse_scenario(_lora()))
    skip = {s["gpu"]: s["reason"] for s in res.search["skipped"]}
    assert "no on-demand price" in skip["mi300x"] and "prices.csv" in skip["mi300x"]
    assert res.recommendation is not None and res.recommendation["gpu"] == "l4"


def test_an_offer_older_than_the_scenarios_limit_is_flagged_stale_in_the_plan():
    fresh = plan(parse_scenario(_lora())).recommendation
    stale = plan(parse_scenario(_lora(max_price_age_days=0))).recommendation
    assert fresh is not None and stale is not None
    assert stale["price_stale"] is True and stale["price_age_days"] > 0
    assert "stale" in stale["price_source"] or stale["price_stale"]


def test_cheapest_mode_weighs_every_kind_and_owned_options_carry_their_true_cost():
    scn = _lora(mode="cheapest") | {"constraints": {"gpu_types": ["rtx-4090"], "max_gpus": 1}}
    res = plan(parse_scenario(scn)).as_dict()
    l4 = [o for o in res["all_options"] if o["gpu"] == "rtx-4090"]
    kinds = {o["pricing_kind"] for o in l4}
    assert {"on-demand", "spot", "marketplace", "own"} <= kinds  # the kinds the catalog prices an RTX 4090 in
    assert res["recommendation"]["cost_usd"] == min(o["cost_usd"] for o in res["all_options"])
    for o in l4:
        if o["pricing_kind"] == "own":
            assert o["true_cost_usd_per_gpu_hour"] == o["price_usd_per_gpu_hour"]


# ---- multi-provider: egress -------------------------------------------------------------------------------------


def _moving(data_gb: float) -> dict:
    return {"model": "llama-3.1-8b", "task": "lora", "training": {"tokens": 3e8, "seq_len": 1024, "global_batch": 8},
            "constraints": {"gpu_types": ["h100-sxm"], "max_gpus": 1},
            "pricing": {"data_provider": "AWS", "data_gb": data_gb}}  # fmt: skip


@pytest.mark.parametrize("data_gb", [100.0, 20_000.0])
def test_a_job_goes_to_the_cheapest_provider_once_egress_is_paid(data_gb):
    res = plan(parse_scenario(_moving(data_gb)))
    opts = res.all_options
    away = [o for o in opts if not o["price_provider"].startswith("AWS")]
    home = [o for o in opts if o["price_provider"].startswith("AWS")]
    assert away and home
    for o in away:  # $0.09/GB (AWS data transfer out, the default) x the data, once per job
        assert o["egress_usd"] == pytest.approx(0.09 * data_gb)
        assert o["cost_usd"] == pytest.approx(o["gpus"] * o["price_usd_per_gpu_hour"] * o["time_h"] + 0.09 * data_gb)
    for o in home:
        assert o["egress_usd"] == 0.0
        assert o["cost_usd"] == pytest.approx(o["gpus"] * o["price_usd_per_gpu_hour"] * o["time_h"])
    rec = res.recommendation
    assert rec is not None and rec["cost_usd"] == min(o["cost_usd"] for o in opts)
    # 100 GB moves for $9 and the cheaper GPU-hour wins; 20 TB ($1,800) keeps the job where its data is
    assert rec["price_provider"].startswith("AWS") == (data_gb == 20_000.0)


def test_data_size_and_place_go_together():
    from scaleright.errors import CatalogFileError

    scn = _moving(10.0)
    del scn["pricing"]["data_provider"]
    with pytest.raises(CatalogFileError, match=r"pricing\.data_gb and pricing\.data_provider go together"):
        parse_scenario(scn)


def test_the_plan_says_which_offer_it_used_and_which_rows_it_refused():
    res = plan(load_scenario(ROOT / "examples" / "batch-job-occasional.yaml"))
    [x] = [e for e in res.explanations if e["topic"] == "prices"]
    rec = res.recommendation
    assert rec is not None
    assert rec["price_provider"] in x["text"] and rec["price_date"] in x["text"]
    assert "6.571" in x["text"] and "data error" in x["text"]
    assert res.search["price_data_errors"] == x["data"]["price_data_errors"]
    # a plan without an h100-sxm in it does not report the h100-sxm row
    quiet = plan(parse_scenario(_lora()))
    assert quiet.search["price_data_errors"] == []


def test_prices_as_of_an_earlier_day_replay_the_offers_known_then(tmp_path):
    cat = _cat(tmp_path / "c", [
        ("l4", "on-demand", 0.9, "", "", "usd_per_gpu_hour", "p", "", "2026-01-10"),
        ("l4", "on-demand", 0.5, "", "", "usd_per_gpu_hour", "q", "", "2026-06-01"),
    ])  # fmt: skip
    assert find_price("l4", "on-demand", catalog=cat, today=datetime.date(2026, 3, 1)).usd == 0.9
    assert find_price("l4", "on-demand", catalog=cat, today=datetime.date(2026, 7, 1)).usd == 0.5
    with pytest.raises(InputError, match="dated on or before 2025-12-31"):
        find_price("l4", "on-demand", catalog=cat, today=datetime.date(2025, 12, 31))
    # in a scenario: pricing.prices_as_of, and the plan's JSON keeps it as a date string
    scn = _lora(prices_as_of="2026-04-01")
    scn["constraints"] = {"gpu_types": ["h100-sxm"], "max_gpus": 1}
    scn["pricing"]["mode"] = "spot"
    res = plan(parse_scenario(scn))
    rec = res.recommendation
    assert rec is not None and rec["price_date"] <= "2026-04-01" and rec["price_age_days"] >= 0
    assert res.scenario["pricing"]["prices_as_of"] == "2026-04-01"


def test_each_catalog_has_its_own_data_errors_however_many_are_loaded(tmp_path):
    """More catalogs than the kept tables, each read twice: every one reports its own flagged row."""
    cats = [_cat(tmp_path / f"c{i}", [
        ("a100-80gb", "on-demand", 2.0, "", "", "usd_per_gpu_hour", "GCP A2-Ultra", "", "2026-10-01"),
        ("a100-80gb", "spot", 3.0 + i, "", "", "usd_per_gpu_hour", "GCP us-central1", "", "2026-11-01"),
    ]) for i in range(10)]  # fmt: skip
    for _ in range(2):
        for i, cat in enumerate(cats):
            errors = [e for e in price_data_errors(catalog=cat) if e.startswith("a100-80gb")]
            assert len(errors) == 1 and f"${3 + i}/h" in errors[0], (i, errors)
