"""The Deployment Decision Tree, computed (issue 11 item 7): the seed's branches (Multi-GPU vs Single-GPU Scaling
Economics: The 2026 Guide, "Operational decision tree") reproduced on its own RTX 4090 inputs, each branch's
deciding number and flip by hand, and the tree in the plan (JSON key ``deployment_decision``)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from scaleright.errors import CatalogFileError
from scaleright.plan import economics as econ
from scaleright.plan.economics._units import DAYS_PER_MONTH
from scaleright.plan.planner import plan
from scaleright.plan.scenario import load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parent.parent

# seed A: "selling a US$1,200 RTX 4090 for US$600 after two years", "US$0.18 per hour to rent"; the card's
# depreciation alone (as in tests/test_economics.py: host and power left out): $600 over 24 months = $25 a month
CARD = econ.OwnershipCosts(gpus=1, purchase_usd_per_gpu=1200, resale_fraction=0.5, tdp_w=0,
                           electricity_usd_per_kwh=0, depreciation_years=2, hours_per_day=6, horizon_months=24)
RENT = 0.18
FIXED = 600 / 24  # $/GPU-month


def _card_tree(hours_per_day: float, **kw) -> dict:
    costs = CARD.__class__(**{**CARD.__dict__, "hours_per_day": hours_per_day})

    def fixed(n: int) -> float:
        return n * FIXED

    base = econ.cheapest_baseline(demand_gpus=[1], slot_h=[hours_per_day * DAYS_PER_MONTH], fixed_usd_per_month=fixed,
                                  running_usd_per_gpu_hour=0.0, rent_usd_per_gpu_hour=RENT)  # fmt: skip
    args = dict(hours_per_day=hours_per_day, horizon_months=24, gpus=1, rent_usd_per_gpu_hour=RENT,
                owned_usd_per_gpu_hour=float(econ.owned_cost_per_gpu_hour_usd(costs=costs)),
                owned_running_usd_per_gpu_hour=0.0,
                break_even_hours_per_day=float(econ.break_even_hours_per_day(costs=costs, rent_usd_per_gpu_hour=RENT)),
                break_even_months=float(econ.break_even_months(costs=costs, rent_usd_per_gpu_hour=RENT)),
                capex_usd=1200.0, fixed_usd_per_gpu_month=FIXED, baseline=base, peak_gpus=1) | kw  # fmt: skip
    return econ.deployment_decision(**args)


def _branch(d: dict, name: str) -> dict:
    return next(b for b in d["branches"] if b["branch"] == name)


def test_the_seed_rtx4090_buys_at_6_h_a_day_and_rents_at_4():
    """Seed: "Daily usage [under 4 h]: Rent" and "Daily usage 4-6 h for >= 18 months: Buy. The initial investment
    pays off after two years." On its card: break-even $25/month / ($0.18 x 30.42 days) = 4.57 h/day; at 6 h/day
    the $600 pays back after 600 / (0.18 x 6 x 30.42) = 18.3 months (the seed's ">= 18 months")."""
    be_h = FIXED / (RENT * 365 / 12)
    buy = _card_tree(6.0)
    assert buy["decision"] == "buy"
    assert buy["numbers"]["break_even_hours_per_day"] == pytest.approx(be_h)
    assert be_h == pytest.approx(4.57, abs=0.01)
    assert buy["numbers"]["break_even_months"] == pytest.approx(600 / (0.18 * 6 * 365 / 12))
    assert buy["numbers"]["break_even_months"] == pytest.approx(18.3, abs=0.05)
    assert "4.6 h/day" in _branch(buy, "buy")["flips_when"]  # falls below the break-even
    rent = _card_tree(4.0)
    assert rent["decision"] == "rent"
    assert "4.6 h/day" in _branch(rent, "rent")["flips_when"]
    # owning's true cost at 4 h/day: $25 / (4 x 30.42 h) = $0.205 per GPU-hour, the rent that would flip it
    assert _branch(rent, "rent")["numbers"]["owned_usd_per_gpu_hour"] == pytest.approx(25 / (4 * 365 / 12))
    assert "$0.21/GPU-hour" in _branch(rent, "rent")["flips_when"]


def test_data_that_must_stay_on_premises_rules_renting_out_and_prices_the_premium():
    d = _card_tree(4.0, data_on_premises=True)
    assert d["decision"] == "on-prem"
    prem = _branch(d, "on-prem")["numbers"]["premium_usd_per_gpu_hour"]
    assert prem == pytest.approx(25 / (4 * 365 / 12) - 0.18)


def test_the_hybrid_branch_owns_the_cards_busy_past_the_load_duration_threshold():
    """The monthly jobs of examples/hybrid-fleet.yaml (1, 2, 8 and 16 GPUs for 300, 200, 60, 24 h) with a card of
    F = $26.67 a month and a margin of $0.34 - $0.07 rent over running: cards busy over F / margin = 99.6 h a month
    are owned, which is 2 (busy 584 and 284 h); the third is busy 84 h."""
    fixed, running, rent = 1200 * 0.8 / 36, 0.450 * 0.8 * 1.58 * 0.127, 0.34
    base = econ.cheapest_baseline(demand_gpus=[1, 2, 8, 16], slot_h=[300, 200, 60, 24],
                                  fixed_usd_per_month=lambda n: n * fixed, running_usd_per_gpu_hour=running,
                                  rent_usd_per_gpu_hour=rent)  # fmt: skip
    d = econ.deployment_decision(hours_per_day=4, horizon_months=36, gpus=1, rent_usd_per_gpu_hour=rent,
                                 owned_usd_per_gpu_hour=1.0, owned_running_usd_per_gpu_hour=running,
                                 break_even_hours_per_day=math.inf, break_even_months=math.inf, capex_usd=1200,
                                 fixed_usd_per_gpu_month=fixed, baseline=base, peak_gpus=16)  # fmt: skip
    assert d["decision"] == "hybrid"
    h = _branch(d, "hybrid")["numbers"]
    assert h["owned_gpus"] == 2
    assert h["own_if_busy_hours_per_month"] == pytest.approx(fixed / (rent - running))
    assert h["own_if_busy_hours_per_month"] == pytest.approx(99.6, abs=0.05)


@pytest.mark.parametrize(("data_gb", "decision", "saving"), [
    (500, "multi-provider", (3.0 - 2.0) * 100 - 500 * 0.09),  # $100 cheaper GPU-hours, $45 egress: saves $55
    (2000, "rent", (3.0 - 2.0) * 100 - 2000 * 0.09),  # $180 egress: loses $80, stay at the data's provider
])  # fmt: skip
def test_renting_away_from_the_data_pays_only_when_the_price_gap_beats_the_egress(data_gb, decision, saving):
    d = _card_tree(4.0, home_rent_usd_per_gpu_hour=3.0, away_rent_usd_per_gpu_hour=2.0, rented_gpu_hours=100,
                   egress_usd=data_gb * 0.09, data_gb=data_gb)  # fmt: skip
    assert d["decision"] == decision
    mp = _branch(d, "multi-provider")["numbers"]
    assert mp["saving_usd"] == pytest.approx(saving)
    assert mp["egress_break_even_usd_per_gb"] == pytest.approx(100 / data_gb)  # $100 of gap over the data


def test_the_multi_gpu_branch_states_the_outlay():
    d = _card_tree(6.0, gpus=4, capex_usd=4 * 1200.0)
    b = _branch(d, "multi-gpu")
    assert b["applies"] and b["numbers"]["capex_usd"] == 4800 and "$4,800" in b["because"]


# --- in the plan -----------------------------------------------------------------------------------------------


def test_the_home_lab_plan_rents_and_agrees_with_its_capex_opex_explanation():
    res = plan(load_scenario(ROOT / "examples" / "home-lab-4090.yaml"))
    d = res.as_dict()["deployment_decision"]
    [cap] = [e["data"] for e in res.explanations if e["topic"] == "capex_opex"]
    assert d["decision"] == "rent"  # 6 h/day of a full build against $0.18/h: break-even near 18 h/day
    assert d["numbers"]["break_even_hours_per_day"] == pytest.approx(cap["break_even_hours_per_day"])
    assert d["numbers"]["break_even_hours_per_day"] > 6
    assert any(e["topic"] == "deployment_decision" for e in res.explanations)


def test_on_premises_data_turns_the_home_lab_on_prem():
    d = yaml.safe_load((ROOT / "examples" / "home-lab-4090.yaml").read_text())
    d["pricing"]["data_sensitivity"] = "on-premises"
    assert plan(parse_scenario(d)).deployment_decision["decision"] == "on-prem"


def test_the_hybrid_example_decides_hybrid_with_the_plans_own_baseline():
    res = plan(load_scenario(ROOT / "examples" / "hybrid-fleet.yaml"))
    d = res.deployment_decision
    assert d["decision"] == "hybrid"
    assert d["numbers"]["owned_gpus"] == res.recommendation["owned_gpus"] == 2


def test_a_monthly_batch_job_rents():
    res = plan(load_scenario(ROOT / "examples" / "batch-job-occasional.yaml"))
    d = res.deployment_decision
    assert d["decision"] == "rent"
    assert d["numbers"]["hours_per_day"] == pytest.approx(res.recommendation["batch_job"]["use_hours_per_day"])


def test_an_unknown_data_sensitivity_is_one_line():
    d = yaml.safe_load((ROOT / "examples" / "home-lab-4090.yaml").read_text())
    d["pricing"]["data_sensitivity"] = "secret"
    with pytest.raises(CatalogFileError) as exc:
        parse_scenario(d)
    assert "pricing.data_sensitivity" in str(exc.value) and "on-premises" in str(exc.value)
    assert "\n" not in str(exc.value)


def test_when_not_even_full_use_repays_the_capital_the_flip_is_owning_at_24_h_a_day():
    # $200 of capital per GPU-month, no running cost: owned 24 h/day costs 200 / 730 = $0.274 per GPU-hour
    d = _card_tree(4.0, fixed_usd_per_gpu_month=200.0, break_even_hours_per_day=math.inf,
                   break_even_months=math.inf)  # fmt: skip
    assert "$0.27/GPU-hour (owning's true cost at 24 h/day)" in _branch(d, "rent")["flips_when"]
    busy = _branch(d, "hybrid")["numbers"]["own_if_busy_hours_per_month"]
    assert busy == pytest.approx(200 / 0.18)  # 1,111 h: more than a month
    assert "no GPU is worth owning" in _branch(d, "hybrid")["flips_when"]


def test_the_multi_provider_example_goes_elsewhere_and_names_the_egress_that_would_stop_it():
    from scaleright.catalog import Catalog, find_price

    scn = load_scenario(ROOT / "examples" / "multi-provider-data-at-aws.yaml")
    res = plan(scn)
    d = res.deployment_decision
    cat = Catalog.load()
    home = find_price("h100-sxm", "on-demand", catalog=cat, provider="AWS", today=scn.pricing.prices_as_of).price
    away = find_price("h100-sxm", "on-demand", catalog=cat, today=scn.pricing.prices_as_of).price
    gpu_h = res.recommendation["gpus"] * res.recommendation["time_h"]
    mp = _branch(d, "multi-provider")["numbers"]
    assert mp["egress_usd"] == pytest.approx(500 * 0.09)  # $0.09/GB x 500 GB, once
    assert mp["saving_usd"] == pytest.approx((home - away) * gpu_h - 45.0)
    assert mp["egress_break_even_usd_per_gb"] == pytest.approx((home - away) * gpu_h / 500)
    # the example's point (its header): the cheaper offer elsewhere saves more than the egress, so the tree leaves
    assert mp["saving_usd"] > 0 and (home - away) * gpu_h > 45.0
    assert d["decision"] == "multi-provider"


def test_on_premises_decides_even_without_a_purchase_price():
    d = yaml.safe_load((ROOT / "examples" / "lora-7b-one-gpu.yaml").read_text())
    d.setdefault("pricing", {})["data_sensitivity"] = "on-premises"
    res = plan(parse_scenario(d))
    gpu = res.recommendation["gpu"]
    plain = plan(load_scenario(ROOT / "examples" / "lora-7b-one-gpu.yaml")).deployment_decision
    if plain["decision"] is None:  # the catalog has no purchase price for the recommended GPU
        assert res.deployment_decision["decision"] == "on-prem"
        assert "purchase price" in res.deployment_decision["text"] and gpu in res.deployment_decision["text"]
    else:
        assert res.deployment_decision["decision"] == "on-prem"


@settings(max_examples=80, deadline=None, derandomize=True)
@given(gpus=st.integers(1, 8), purchase=st.floats(500, 40_000), host=st.floats(0, 10_000),
       facility=st.floats(0, 50_000), rent=st.floats(0.1, 8.0), hours=st.floats(0.5, 24.0),
       months=st.floats(6, 60), ops=st.floats(0, 3))  # fmt: skip
def test_on_a_flat_profile_the_cheapest_baseline_is_the_break_even_rule(gpus, purchase, host, facility, rent, hours,
                                                                        months, ops):  # fmt: skip
    """Module docstring of economics.decision: the same GPUs busy the same hours own all or nothing, and own all
    exactly when the use reaches the rent-vs-buy break-even hours per day."""
    def costs(n: int) -> econ.OwnershipCosts:
        return econ.OwnershipCosts(gpus=n, purchase_usd_per_gpu=purchase, server_share_usd_per_gpu=host,
                                   facility_upgrade_usd=facility, tdp_w=700, electricity_usd_per_kwh=0.127, pue=1.5,
                                   ops_overhead_usd_per_gpu_hour=ops, depreciation_years=4, resale_fraction=0.2,
                                   hours_per_day=hours, horizon_months=months)  # fmt: skip

    def fixed(n: int) -> float:
        c = costs(n)
        return float(econ.net_capex_usd(costs=c) + econ.capital_charge_usd(costs=c)) / months

    running = float(econ.owned_running_cost_usd_per_gpu_hour(costs=costs(gpus)))
    base = econ.cheapest_baseline(demand_gpus=[gpus], slot_h=[hours * DAYS_PER_MONTH], fixed_usd_per_month=fixed,
                                  running_usd_per_gpu_hour=running, rent_usd_per_gpu_hour=rent)  # fmt: skip
    be = float(econ.break_even_hours_per_day(costs=costs(gpus), rent_usd_per_gpu_hour=rent))
    assume(not math.isfinite(be) or abs(hours - be) > 1e-6 * be)  # exact ties may go either way
    # cost(N) for N >= 1 is the facility plus a line in N, so the minimum is N = 0 or N = all; all wins exactly when
    # owning the block beats renting it, which is the break-even
    assert base["owned_gpus"] in (0, gpus)
    assert (base["owned_gpus"] == gpus) == (math.isfinite(be) and hours > be)
