"""The Deployment Decision Tree for a plan's recommendation (``economics.decision``), from the plan's own numbers.

For the recommended GPU type and count: the rent (the recommendation's own, or the cheapest on-demand offer when it
owns hardware), the purchase price and the scenario's ownership inputs give owning's true cost at the stated use,
the break-even hours per day and months (``economics.rent_vs_buy``); the demand profile gives the cheapest owned
baseline (``economics.hybrid``). The profile is the scenario's (mode hybrid), else the recommendation's GPUs busy
for its hours: a batch job's runs (``inference.batch_job``), a diurnal service's hourly fleet (replicas of the
recommended layout following rate x (1 + amplitude x sin(2 pi t / 24 h)) x (1 + headroom)), or
``pricing.hours_per_day`` of every day. With ``pricing.data_provider`` the data provider's own offer is weighed
against the cheapest elsewhere plus egress.
"""

from __future__ import annotations

import math

import numpy as np

from scaleright.catalog.prices import RENT_KINDS as _RENTED  # not serverless (catalog.prices says why)
from scaleright.plan import economics as econ
from scaleright.plan.economics._units import DAYS_PER_MONTH

__all__ = ["decide"]


def _profile(scn, rec: dict, use_h: float, rate: float | None) -> tuple[np.ndarray, np.ndarray]:
    """(GPUs busy per slot, hours per slot in a month): module docstring."""
    p, inf = scn.pricing, scn.inference
    if p.mode == "hybrid" and p.demand_gpus_by_hour is not None:
        return np.asarray(p.demand_gpus_by_hour, dtype=float), np.full(24, DAYS_PER_MONTH)
    if p.mode == "hybrid" and p.monthly_jobs:
        return (np.asarray([j.gpus for j in p.monthly_jobs], dtype=float),
                np.asarray([j.hours for j in p.monthly_jobs], dtype=float))  # fmt: skip
    if inf is not None and inf.batch_job is None and inf.arrival == "diurnal" and rate:
        from scaleright.plan.serving import hourly_rates  # a serving plan's: a training plan never loads it

        lay = rec["layout"]
        cap = rec["capacity_requests_per_s"] / lay["replicas"]
        replicas = [max(1, math.ceil(r * (1 + inf.headroom) / cap - 1e-9)) for r in hourly_rates(inf, rate)]
        return np.asarray(replicas, dtype=float) * lay["tp"], np.full(24, use_h / 24 * DAYS_PER_MONTH)
    return np.asarray([float(rec["gpus"])]), np.asarray([use_h * DAYS_PER_MONTH])


def decide(res, scn, cat) -> dict | None:
    """``economics.decision.deployment_decision`` for ``res``'s recommendation (or closest option), or a dict with
    ``decision`` None and the reason when a price or the TDP is missing; None when the plan has no option."""
    from scaleright.plan.planner import _offer, _ownership, _ownership_inputs, price_for

    rec = res.recommendation or (res.infeasible or {}).get("closest")
    if rec is None:
        return None
    gpu = cat.gpu(rec["gpu"])
    p = scn.pricing
    use = (rec.get("batch_job") or {}).get("use_hours_per_day", p.hours_per_day)
    pscn = scn.model_copy(update={"pricing": p.model_copy(update={"hours_per_day": use})})
    kind = rec.get("pricing_kind") if rec.get("pricing_kind") in _RENTED else (
        p.burst_kind if p.mode == "hybrid" else "on-demand")  # fmt: skip
    rent = rec["price_usd_per_gpu_hour"] if rec.get("pricing_kind") in _RENTED else price_for(pscn, gpu, cat, kind)[0]
    purchase, why = price_for(pscn, gpu, cat, "purchase")
    missing = (f"no purchase price: {why}" if purchase is None else
               f"no {kind} rent for {gpu.id}; add pricing.price_usd_per_gpu_hour" if rent is None else
               f"{gpu.id} has no TDP in the catalog (owned power cost unknown)" if not gpu.tdp_w else None)
    if missing and p.data_sensitivity == "on-premises":  # a constraint: it decides without a price
        return {"decision": "on-prem", "text": f"on-prem: the data must stay on premises (pricing.data_sensitivity); "
                f"owning's cost not computed: {missing}.", "branches": [], "numbers": {}}  # fmt: skip
    if missing:
        return {"decision": None, "text": f"Not computed: {missing}.", "branches": [], "numbers": {}}
    assert purchase is not None and rent is not None
    n = int(rec["gpus"])
    costs = _ownership(pscn, gpu, purchase, n)

    def fixed(k: int) -> float:
        c = _ownership(pscn, gpu, purchase, k)
        return float(econ.net_capex_usd(costs=c) + econ.capital_charge_usd(costs=c)) / p.horizon_months

    running = float(econ.owned_running_cost_usd_per_gpu_hour(costs=costs))
    demand, slot_h = _profile(scn, rec, use, res.scenario.get("requests_per_s"))
    baseline = econ.cheapest_baseline(demand_gpus=demand, slot_h=slot_h, fixed_usd_per_month=fixed,
                                      running_usd_per_gpu_hour=running, rent_usd_per_gpu_hour=rent)  # fmt: skip
    # the outlay up front: the GPUs, their hosts and the site's facility upgrade
    own_in = _ownership_inputs(pscn, gpu)
    one_purchase = n * (purchase + own_in["server_share_usd_per_gpu"]) + own_in["facility_upgrade_usd"]
    rented_h = n * (rec["time_h"] if scn.task != "inference" else rec["service_hours_per_month"])
    home = away = None
    if p.data_provider is not None and kind in _RENTED:
        h_offer, _ = _offer(pscn, gpu, cat, kind, provider=p.data_provider)
        a_offer, _ = _offer(pscn, gpu, cat, kind)
        home = None if h_offer is None else h_offer["price"]
        away = None if a_offer is None else a_offer["price"]
    out = econ.deployment_decision(
        hours_per_day=use, horizon_months=p.horizon_months, gpus=n, rent_usd_per_gpu_hour=rent,
        owned_usd_per_gpu_hour=float(econ.owned_cost_per_gpu_hour_usd(costs=costs)),
        owned_running_usd_per_gpu_hour=running,
        break_even_hours_per_day=float(econ.break_even_hours_per_day(costs=costs, rent_usd_per_gpu_hour=rent)),
        break_even_months=float(econ.break_even_months(costs=costs, rent_usd_per_gpu_hour=rent)),
        capex_usd=one_purchase, fixed_usd_per_gpu_month=fixed(n) / n, baseline=baseline,
        peak_gpus=int(demand.max()), data_on_premises=p.data_sensitivity == "on-premises",
        rented_gpu_hours=rented_h, home_rent_usd_per_gpu_hour=home, away_rent_usd_per_gpu_hour=away,
        egress_usd=p.data_gb * p.egress_usd_per_gb, data_gb=p.data_gb,
    )  # fmt: skip
    out["numbers"] |= {"gpu": gpu.id, "gpus": n, "rent_kind": kind, "rent_usd_per_gpu_hour": rent,
                       "purchase_usd_per_gpu": purchase, "profile_gpus": demand.tolist(),
                       "profile_slot_h": slot_h.tolist()}  # fmt: skip
    return out
