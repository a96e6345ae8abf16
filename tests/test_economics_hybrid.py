"""Hybrid fleets (own a baseline, rent the bursts): the cheapest baseline against the load-duration-curve rule and
a hand-computed month, and the planner's hybrid mode on examples/hybrid-fleet.yaml."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleright.errors import CatalogFileError, InputError
from scaleright.plan import economics as econ
from scaleright.plan.planner import plan
from scaleright.plan.scenario import load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parent.parent
JOBS_GPUS, JOBS_HOURS = [1, 2, 8, 16], [300.0, 200.0, 60.0, 24.0]  # examples/hybrid-fleet.yaml
# an RTX 4090 bought at $1,200 (the seed's price), 20 % resold after 3 years, no host, facility or ops (home lab)
F_PER_GPU_MONTH = 1200 * (1 - 0.2) / 36
# the plan also charges a home lab's cost of capital, the US 10-year Treasury yield (4.58 %, FRED DGS10, 2024-12-31),
# on the average invested: the card falling from $1,200 to its 20 % resale, (1,200 + 240) / 2 = $720
F_PLAN_PER_GPU_MONTH = F_PER_GPU_MONTH + 0.0458 / 12 * (1200 + 0.2 * 1200) / 2
RUNNING = 0.450 * 0.8 * 1.58 * 0.127  # 450 W x load 0.8 x PUE 1.58 x $0.127/kWh
RENT = 0.34  # RunPod Community's RTX 4090 on-demand, the cheapest fresh offer in the catalog


def test_a_hand_computed_month_owns_the_cards_busy_over_100_hours():
    # the k-th card is busy H_k = 584, 284, 84 (x6), 24 (x8) hours a month; owning it pays when
    # (rent - running) x H_k >= F, i.e. H_k >= 99.6 h: own 2
    assert F_PER_GPU_MONTH / (RENT - RUNNING) == pytest.approx(99.6, abs=0.05)
    h = econ.cheapest_baseline(demand_gpus=JOBS_GPUS, slot_h=JOBS_HOURS,
                               fixed_usd_per_month=lambda n: n * F_PER_GPU_MONTH, running_usd_per_gpu_hour=RUNNING,
                               rent_usd_per_gpu_hour=RENT)  # fmt: skip
    owned_h, rented_h = 300 + 2 * 200 + 2 * 60 + 2 * 24, 6 * 60 + 14 * 24
    assert (h["owned_gpus"], h["owned_gpu_hours"], h["rented_gpu_hours"]) == (2, owned_h, rented_h)
    assert h["cost_usd_per_month"] == pytest.approx(2 * F_PER_GPU_MONTH + RUNNING * owned_h + RENT * rented_h)
    assert h["all_rent_usd_per_month"] == pytest.approx(RENT * 1564)
    assert h["all_own_usd_per_month"] == pytest.approx(16 * F_PER_GPU_MONTH + RUNNING * 1564)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.integers(0, 12), min_size=1, max_size=24).filter(any),
       st.floats(0.5, 5.0), st.floats(10.0, 3000.0), st.floats(0.0, 0.5))  # fmt: skip
def test_the_search_matches_the_load_duration_rule(demand, rent, fixed, running):
    hours = np.full(len(demand), 30.4)
    h = econ.cheapest_baseline(demand_gpus=demand, slot_h=hours, fixed_usd_per_month=lambda n: n * fixed,
                               running_usd_per_gpu_hour=running, rent_usd_per_gpu_hour=rent)  # fmt: skip
    d = np.asarray(demand)
    busy = [float(hours[d >= k].sum()) for k in range(1, d.max() + 1)]  # H_k, falling in k
    rule = sum(1 for hk in busy if (rent - running) * hk > fixed * (1 + 1e-12))
    ties = sum(1 for hk in busy if abs((rent - running) * hk - fixed) <= 1e-9 * fixed)
    assert rule <= h["owned_gpus"] <= rule + ties


def test_bad_profiles_are_refused_by_name():
    with pytest.raises(InputError, match="demand_gpus: whole GPUs"):
        econ.cheapest_baseline(demand_gpus=[1.5], slot_h=[1.0], fixed_usd_per_month=lambda n: 0.0,
                               running_usd_per_gpu_hour=0, rent_usd_per_gpu_hour=1)  # fmt: skip
    base = {"model": "gpt2", "task": "pretrain", "training": {"tokens": 1e6}}
    with pytest.raises(CatalogFileError, match="mode hybrid needs exactly one demand profile"):
        parse_scenario(base | {"pricing": {"mode": "hybrid"}})
    with pytest.raises(CatalogFileError, match=r"pricing\.monthly_jobs is the demand profile of mode hybrid"):
        parse_scenario(base | {"pricing": {"monthly_jobs": [{"gpus": 1, "hours": 2}]}})
    with pytest.raises(CatalogFileError, match=r"pricing\.demand_gpus_by_hour: .*at least 24"):
        parse_scenario(base | {"pricing": {"mode": "hybrid", "demand_gpus_by_hour": [1, 2]}})
    with pytest.raises(CatalogFileError, match=r"pricing\.monthly_jobs\.0\.gpus: Field required"):
        parse_scenario(base | {"pricing": {"mode": "hybrid", "monthly_jobs": [{"gpu": 1, "hours": 2}]}})


def test_the_hybrid_example_owns_two_cards_and_rents_the_bursts():
    res = plan(load_scenario(ROOT / "examples" / "hybrid-fleet.yaml"))
    rec = res.recommendation
    assert rec is not None and rec["pricing_kind"] == "hybrid"
    assert (rec["owned_gpus"], rec["rented_gpu_hours"]) == (2, 6 * 60 + 14 * 24)
    month = 2 * F_PLAN_PER_GPU_MONTH + RUNNING * 868 + RENT * 696
    assert rec["price_usd_per_gpu_hour"] == pytest.approx(month / 1564, rel=1e-9)  # the fleet's blended GPU-hour
    assert rec["cost_usd"] == pytest.approx(rec["gpus"] * rec["price_usd_per_gpu_hour"] * rec["time_h"], rel=1e-9)
    assert rec["true_cost_usd_per_gpu_hour"] == pytest.approx((2 * F_PLAN_PER_GPU_MONTH + RUNNING * 868) / 868)
    for k in ("price_provider", "price_date", "price_source"):
        assert rec[k]  # the burst offer's


def test_a_daily_profile_is_a_typical_day_repeated_over_the_month():
    base = {"model": "gpt2", "task": "pretrain", "training": {"tokens": 1e7},
            "constraints": {"gpu_types": ["rtx-4090"], "max_gpus": 1}}  # fmt: skip
    day = [0] * 8 + [4] * 10 + [1] * 6  # 4 GPUs for 10 h, 1 for 6 h
    rec = plan(parse_scenario(base | {"pricing": {"mode": "hybrid", "demand_gpus_by_hour": day,
                                                  "depreciation_years": 3}})).recommendation  # fmt: skip
    assert rec is not None
    days = 365 / 12
    busy = [16 * days, 10 * days, 10 * days, 10 * days]  # H_k: GPU 1 busy 16 h a day, GPUs 2-4 10 h
    own = sum(1 for hk in busy if (RENT - RUNNING) * hk > F_PLAN_PER_GPU_MONTH)
    assert rec["owned_gpus"] == own
    assert rec["rented_gpu_hours"] == pytest.approx(sum(busy[own:]))
