"""The planner: search hardware × count × layout × pricing for a scenario and recommend one option, with reasons.

Training: every allowed GPU type is searched (``search.evaluate_training``); for each type and GPU count the
fastest fitting layout is kept; its job time is tokens / throughput, its cost the seeds' rate × hours × GPUs
(rent) or the amortised owned cost per GPU-hour (own). The rate is the cheapest valid offer of the pricing kind
(``catalog.find_price``: fresh before stale); a spot job takes Daly's expected time with preemptions, checkpoints
and restarts (``economics.spot``), which the deadline is checked against; mode ``cheapest`` makes one option per
kind (rent kinds and owning) and lets the cheapest win; mode ``hybrid`` charges the fleet's blended GPU-hour of
the cheapest owned baseline for the demand profile (``economics.hybrid``); with ``pricing.data_provider`` an offer
elsewhere pays the data's egress once. The recommendation is the cheapest option that meets the
deadline and budget (ties: faster); if none does, the binding constraint and the closest option are reported.

Inference: every GPU type × TP size is sized to carry the request rate within the latency SLOs
(``search.evaluate_inference``); cost is per month of service at ``hours_per_day`` at the cheapest kind's hourly
rate (spot preemptions and egress are not modelled for serving); the recommendation is the cheapest that meets the
budget. An occasional job (``inference.batch_job``) is costed per run instead: the fleet sized to finish a run within
``run_within_h`` is paid for its start-up plus requests / sustained throughput, times the runs a month
(``plan.serving.batch_run``), with owned hardware's TCO spread over those hours. Every plan ends with the Deployment
Decision Tree (``plan.deployment``).

Explanations are computed from the same numbers (``explain.py``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any, cast

import numpy as np

from scaleright.catalog import Catalog, find_price
from scaleright.catalog.prices import RENT_KINDS, price_data_errors, provider_key
from scaleright.errors import InputError, ScalerightError, UnknownNameError
from scaleright.estimate.calibration import DEFAULT_CALIBRATION, Calibration, arch_factors
from scaleright.estimate.comm import system_of
from scaleright.estimate.framework import framework_of
from scaleright.estimate.memory.profiles import resolve_profile
from scaleright.estimate.memory.states import optimizer_bytes_per_param, state_format
from scaleright.plan import economics as econ
from scaleright.plan.economics._units import DAYS_PER_MONTH
from scaleright.plan.economics.defaults import ownership_defaults, site_of
from scaleright.plan.scenario import Scenario
from scaleright.plan.search import (
    SEARCH_LIMITS,
    InferCandidate,
    evaluate_inference,
    evaluate_training,
    gpu_counts,
    layout_dict,
    time_breakdown,
    tp_domain,
)
from scaleright.workload import count_params, load_model

__all__ = ["PlanResult", "plan", "price_for"]



@dataclass
class PlanResult:
    """Everything a plan found. ``as_dict`` keys are a stable contract: scenario, recommendation, options,
    pareto, explanations, curve (Utilisation Efficiency Curve points, each with its gpu), search (counts, wall time,
    skipped GPU types), infeasible (binding constraint and closest option, or None) and all_options (the best
    option per GPU type and count), deployment_decision (rent / buy / hybrid / on-prem / multi-provider with the
    numbers behind each branch, ``plan.deployment``)."""

    scenario: dict
    recommendation: dict | None
    options: list[dict]
    pareto: list[dict]
    explanations: list[dict]
    curve: list[dict] = field(default_factory=list)
    search: dict = field(default_factory=dict)
    infeasible: dict | None = None
    all_options: list[dict] = field(default_factory=list)  # best per (gpu, count), for charts
    deployment_decision: dict | None = None  # the Deployment Decision Tree, computed (plan.deployment)

    def as_dict(self) -> dict:
        return {
            "scenario": self.scenario, "recommendation": self.recommendation, "options": self.options,
            "pareto": self.pareto, "explanations": self.explanations, "curve": self.curve, "search": self.search,
            "infeasible": self.infeasible, "all_options": self.all_options,
            "deployment_decision": self.deployment_decision,
        }  # fmt: skip


def _ownership_inputs(scn: Scenario, gpu) -> dict[str, float]:
    """Ops, server share, facility upgrade and cost of capital for owning ``gpu``: the scenario's, else the cited
    default for the GPU's site (``economics.defaults``)."""
    p = scn.pricing
    given = {"ops_overhead_usd_per_gpu_hour": p.ops_overhead_usd_per_gpu_hour,
             "server_share_usd_per_gpu": p.server_share_usd_per_gpu, "facility_upgrade_usd": p.facility_upgrade_usd,
             "cost_of_capital_per_year": p.cost_of_capital_per_year}
    defaults = ownership_defaults(gpu.form_factor)
    return {k: (defaults[k] if v is None else float(v)) for k, v in given.items()}  # fmt: skip


def _ownership(scn: Scenario, gpu, purchase_usd: float, gpus) -> econ.OwnershipCosts:
    p = scn.pricing
    return econ.OwnershipCosts(
        gpus=gpus, purchase_usd_per_gpu=purchase_usd, tdp_w=gpu.tdp_w or 0.0,
        electricity_usd_per_kwh=p.electricity_usd_per_kwh, depreciation_years=p.depreciation_years,
        hours_per_day=p.hours_per_day, horizon_months=p.horizon_months, pue=p.pue, load_fraction=p.load_fraction,
        resale_fraction=p.resale_fraction, **_ownership_inputs(scn, gpu),
    )  # fmt: skip


def _offer(scn: Scenario, gpu, cat: Catalog, kind: str, provider: str | None = None) -> tuple[dict | None, str]:
    """The offer for ``gpu`` and ``kind`` (a rent kind or purchase) as the plan's price fields, overrides first:
    (``{price, price_provider, price_region, price_date, price_age_days, price_stale, price_source}``, a one-line
    source), or (None, why there is none and how to add one)."""
    p = scn.pricing
    overrides = p.purchase_usd_per_gpu if kind == "purchase" else p.price_usd_per_gpu_hour
    for name, v in overrides.items():
        try:
            if cat.gpu(name).id == gpu.id:
                return {"price": float(v), "price_provider": "scenario override", "price_region": "",
                        "price_date": None, "price_age_days": None, "price_stale": False,
                        "price_source": "scenario override"}, "scenario override"  # fmt: skip
        except ScalerightError:
            raise InputError(f"pricing: unknown GPU {name!r} in price overrides") from None
    try:
        row = find_price(gpu.id, kind, catalog=cat, max_age_days=p.max_price_age_days, provider=provider,
                         today=p.prices_as_of)  # fmt: skip
    except ScalerightError as exc:
        return None, str(exc)
    basis = f" ({row.price_basis})" if row.price_basis and row.price_basis != "usd" else ""
    stale = f", stale: {row.age_days} days old" if row.stale and row.age_days is not None else (
        ", stale: undated" if row.stale else "")
    src = f"{row.provider or 'catalog'} {row.date or 'undated'}{basis}{stale}: {row.source[:80]}"
    return {"price": float(cast(float, row.price)), "price_provider": row.provider, "price_region": row.region,
            "price_date": row.date, "price_age_days": row.age_days, "price_stale": bool(row.stale),
            "price_source": row.source}, src  # fmt: skip


def price_for(scn: Scenario, gpu, cat: Catalog, kind: str) -> tuple[float | None, str]:
    """(price, source) of ``gpu`` for ``kind`` (a rent kind or purchase), overrides first; (None, why) if none."""
    offer, src = _offer(scn, gpu, cat, kind)
    return (None, src) if offer is None else (offer["price"], src)


@dataclass(frozen=True)
class _Priced:
    """One way to pay for a GPU type: the kind (a rent kind or ``own``), USD per GPU-hour over the searched
    counts, a one-line source and the offer's fields for the plan's options."""

    kind: str
    rate: np.ndarray
    src: str
    offer: dict


def _rate(scn: Scenario, gpu, cat: Catalog, gpus, kind: str | None = None):
    """(USD per GPU-hour, source) for ``kind`` (default: the scenario's mode; an array over ``gpus`` for owned
    hardware), or (None, why)."""
    priced, why = _priced(scn, gpu, cat, gpus, kind or scn.pricing.mode)
    return (None, why) if priced is None else (priced.rate, priced.src)


def _priced(scn: Scenario, gpu, cat: Catalog, gpus, kind: str) -> tuple[_Priced | None, str]:
    if kind == "hybrid":
        return _hybrid(scn, gpu, cat, gpus)
    if kind != "own":
        return _priced_from(scn, gpu, cat, gpus, kind, None)
    offer, src = _offer(scn, gpu, cat, "purchase")
    if offer is None:
        return None, src
    purchase = offer["price"]
    if not gpu.tdp_w:
        return None, f"{gpu.id} has no TDP in the catalog (needed for owned power cost)"
    own = np.asarray(econ.owned_cost_per_gpu_hour_usd(costs=_ownership(scn, gpu, purchase,
                                                                      np.asarray(gpus, dtype=float))), dtype=float)
    if not np.isfinite(own).all():  # e.g. a tiny hours_per_day: the purchase buys (almost) no GPU-hours
        p = scn.pricing
        return None, (f"owned cost per GPU-hour is not finite (pricing.hours_per_day={p.hours_per_day:g}, "
                      f"horizon_months={p.horizon_months:g}, purchase ${purchase:,.0f})")  # fmt: skip
    src = f"owned: purchase ${purchase:,.0f} ({src})"
    fields = {"pricing_kind": "own", "purchase_usd_per_gpu": purchase, "ownership_site": site_of(gpu.form_factor),
              "ownership_inputs": _ownership_inputs(scn, gpu)} | {k: v for k, v in offer.items() if k != "price"}
    return _Priced("own", own, src, fields), src


def _hybrid(scn: Scenario, gpu, cat: Catalog, gpus) -> tuple[_Priced | None, str]:
    """Mode hybrid: the cheapest owned baseline of ``gpu`` for the scenario's demand profile, bursts rented at
    ``pricing.burst_kind`` (``economics.hybrid``); every GPU-hour of the fleet then costs the month's cost over the
    month's demanded GPU-hours, the rate a job of the fleet is charged."""
    p = scn.pricing
    burst, bsrc = _offer(scn, gpu, cat, p.burst_kind)
    if burst is None:
        return None, f"bursts ({p.burst_kind}): {bsrc}"
    purchase, psrc = _offer(scn, gpu, cat, "purchase")
    if purchase is None:
        return None, f"baseline (purchase): {psrc}"
    if not gpu.tdp_w:
        return None, f"{gpu.id} has no TDP in the catalog (needed for owned power cost)"
    if p.demand_gpus_by_hour is not None:
        demand, slot_h = np.asarray(p.demand_gpus_by_hour, dtype=float), np.full(24, DAYS_PER_MONTH)
    else:
        jobs = p.monthly_jobs or []
        demand = np.asarray([j.gpus for j in jobs], dtype=float)
        slot_h = np.asarray([j.hours for j in jobs], dtype=float)

    def fixed(n: int) -> float:
        c = _ownership(scn, gpu, purchase["price"], n)
        return float(econ.net_capex_usd(costs=c) + econ.capital_charge_usd(costs=c)) / p.horizon_months

    running = float(econ.owned_running_cost_usd_per_gpu_hour(costs=_ownership(scn, gpu, purchase["price"], 1)))
    h = econ.cheapest_baseline(demand_gpus=demand, slot_h=slot_h, fixed_usd_per_month=fixed,
                               running_usd_per_gpu_hour=running, rent_usd_per_gpu_hour=burst["price"])  # fmt: skip
    blended = h["cost_usd_per_month"] / h["demand_gpu_hours"]
    n = h["owned_gpus"]
    owned_true = (fixed(n) + running * h["owned_gpu_hours"]) / h["owned_gpu_hours"] if n else None
    src = (f"hybrid: own {n}, rent bursts {p.burst_kind} at ${burst['price']:g}/h ({bsrc}); purchase "
           f"${purchase['price']:,.0f} ({psrc})")  # fmt: skip
    fields = {"pricing_kind": "hybrid", "owned_gpus": n, "rented_gpu_hours": h["rented_gpu_hours"],
              "true_cost_usd_per_gpu_hour": owned_true, "burst_kind": p.burst_kind,
              "burst_price_usd_per_gpu_hour": burst["price"], "purchase_usd_per_gpu": purchase["price"],
              "hybrid": h | {"burst_preemption_modelled": False, "rate": "fleet cost / demanded GPU-hours"}} | {
        k: v for k, v in burst.items() if k != "price"}  # fmt: skip
    return _Priced("hybrid", np.full(np.shape(gpus), blended, dtype=float), src, fields), src


def _pricings(scn: Scenario, gpu, cat: Catalog, gpus) -> tuple[list[_Priced], str]:
    """Every way the scenario lets the buyer pay for ``gpu``: its mode, or (mode ``cheapest``) each rent kind with
    an offer (not serverless: plan.serving weighs it; catalog.prices says why) and owning; ordered by price per
    GPU-hour at the first count. (list, why empty)."""
    kinds = [*RENT_KINDS, "own"] if scn.pricing.mode == "cheapest" else [scn.pricing.mode]
    found, why = [], []
    for k in kinds:
        pr, reason = _priced(scn, gpu, cat, gpus, k)
        if pr is None:
            why.append(reason if len(kinds) == 1 else f"{k}: {reason}")
        else:
            found.append(pr)
    found = [x for pr in found for x in _with_egress(scn, gpu, cat, gpus, pr)]
    found.sort(key=lambda pr: float(np.ravel(pr.rate)[0]) if np.size(pr.rate) else 0.0)
    return found, "; ".join(why[:1] if len(kinds) == 1 else why)


def _with_egress(scn: Scenario, gpu, cat: Catalog, gpus, pr: _Priced) -> list[_Priced]:
    """Multi-provider: a rented offer away from ``pricing.data_provider`` first moves ``data_gb`` out at
    ``egress_usd_per_gb`` (a one-off per job, ``egress_usd``); the data provider's own cheapest offer of that
    kind, if it has one, is a second way to pay with no egress. Owned and overridden prices are left alone."""
    p = scn.pricing
    if p.data_provider is None or pr.kind in ("own", "hybrid") or pr.offer.get("price_provider") == "scenario override":
        return [pr]
    home = provider_key(p.data_provider)
    if provider_key(pr.offer.get("price_provider") or "") == home:
        return [replace(pr, offer=pr.offer | {"egress_usd": 0.0})]
    away = replace(pr, offer=pr.offer | {"egress_usd": p.data_gb * p.egress_usd_per_gb})
    local, _ = _priced_from(scn, gpu, cat, gpus, pr.kind, p.data_provider)
    return [away] + ([replace(local, offer=local.offer | {"egress_usd": 0.0})] if local is not None else [])


def _priced_from(scn: Scenario, gpu, cat: Catalog, gpus, kind: str,
                 provider: str | None) -> tuple[_Priced | None, str]:  # fmt: skip
    """A rent ``kind``'s cheapest offer (of ``provider`` only, when given) as USD per GPU-hour over ``gpus``."""
    offer, src = _offer(scn, gpu, cat, kind, provider=provider)
    if offer is None:
        return None, src
    rate = np.full(np.shape(gpus), offer["price"], dtype=float)
    return _Priced(kind, rate, src, {"pricing_kind": kind} | {k: v for k, v in offer.items() if k != "price"}), src


def _spot_hours(scn: Scenario, a: dict, j: int, n: int, gpus_per_node: int, hours: float) -> tuple[float, dict]:
    """Expected wall-clock hours of a spot training job (``economics.spot``, Daly 2006) and the numbers behind
    it. Any preempted instance stops the whole job: the job's preemption rate is the per-instance rate times the
    instances (nodes) it spans. A checkpoint holds one copy of the weights and optimizer state (a GPU's share
    times the GPUs that split it: tp x pp, and dp where ZeRO shards it: optimizer from stage 1, weights at 3),
    written in parallel by the instances, each at ``checkpoint_write_gb_per_s``; a restart reads it back at that
    throughput, plus any re-acquiring time given. LoRA / QLoRA: the frozen base is never rewritten, so a checkpoint
    holds the adapters' optimizer state (their bf16 weights, a sixth of that with Adam, are left out); a restart
    still reads the base back."""
    p = scn.pricing
    nodes = math.ceil(n / gpus_per_node)
    rate = p.spot_preemptions_per_hour * nodes
    mtbf_h = 1.0 / rate if rate > 0 else math.inf
    split = int(a["tp"][j]) * int(a["pp"][j])
    dp, zero = int(a["dp"][j]), int(a["zero"][j])
    weights_gb = float(a["mem_weights"][j]) * split * (dp if zero >= 3 else 1)
    optimizer_gb = float(a["mem_optimizer"][j]) * split * (dp if zero >= 1 else 1)
    tr = scn.training
    if tr is not None and scn.task not in ("lora", "qlora") and tr.precision != "fp32":
        # an optimizer-side gradient buffer (DeepSpeed's fp32 gradient partition, states.StateFormat
        # optimizer_extra_b) is held with the optimizer state but never saved
        fmt = state_format(resolve_profile(framework_of(tr.framework), zero=zero, precision=tr.precision).states)
        if fmt.optimizer_extra_b:
            opt_b = optimizer_bytes_per_param(tr.optimizer) - (4.0 if fmt.fp32_weights else 0.0)
            optimizer_gb *= opt_b / (opt_b + fmt.optimizer_extra_b)
    state_gb = optimizer_gb if scn.task in ("lora", "qlora") else weights_gb + optimizer_gb
    state_gb_per_node = state_gb / nodes
    write_h = state_gb_per_node / p.checkpoint_write_gb_per_s / 3600.0
    read_h = (weights_gb + optimizer_gb) / nodes / p.checkpoint_write_gb_per_s / 3600.0
    restart_h = read_h + p.spot_reprovision_s / 3600.0
    interval = p.checkpoint_interval_h
    tau = interval if interval is not None else float(econ.optimal_checkpoint_interval_h(
        checkpoint_write_h=write_h, mtbf_h=mtbf_h))  # fmt: skip
    expected = float(econ.spot_expected_time_h(solve_time_h=hours, mtbf_h=mtbf_h, checkpoint_write_h=write_h,
                                                restart_h=restart_h, interval_h=interval))  # fmt: skip
    return expected, {
        "preemption_free_time_h": hours, "expected_time_h": expected, "preemptions_per_hour": rate,
        "expected_preemptions": float(econ.spot_expected_preemptions(expected_time_h=expected, mtbf_h=mtbf_h)),
        "checkpoint_interval_h": min(tau, hours), "checkpoint_write_s": write_h * 3600.0,
        "restart_s": restart_h * 3600.0, "checkpoint_gb": state_gb, "checkpoint_gb_per_node": state_gb_per_node,
    }  # fmt: skip


def _allowed_gpus(scn: Scenario, cat: Catalog):
    c = scn.constraints
    gpus = [cat.gpu(n) for n in c.gpu_types] if c.gpu_types else list(cat.gpus.values())
    gpus = list({g.id: g for g in gpus}.values())  # an id and its alias name one GPU
    if c.interconnect != "any":
        gpus = [g for g in gpus if g.intra_node_link == c.interconnect]
    if not gpus:
        raise InputError(f"constraints: no GPU left after gpu_types={c.gpu_types} and interconnect={c.interconnect}")
    return gpus


def _infer_precision_note(gpu, precision: str) -> str | None:
    """One line when ``gpu`` has no tensor rate for the serving ``precision`` and its GEMMs run wider (the weights
    stay stored in ``precision``); None when it runs natively. int4 and the GGUF types are weight-only by design,
    not a fallback."""
    from scaleright.estimate.infer import compute_precision
    from scaleright.workload.precision import is_gguf

    ran = compute_precision(gpu, precision)
    if precision in ("int4", "fp32") or is_gguf(precision) or ran == precision:
        return None
    return f"{gpu.id} has no {precision} tensor rate: {precision} weights multiply in {ran}"


def _precision_notes(options: list[dict]) -> list[str]:
    """The distinct precision-fallback notes of ``options``, in order (printed with the plan)."""
    return list(dict.fromkeys(o["precision_note"] for o in options if o.get("precision_note")))


def _energy(scn: Scenario, gpu, gpus, hours):
    p = scn.pricing
    kwh = econ.energy_kwh(gpus=gpus, tdp_w=gpu.tdp_w or 0.0, load_fraction=p.load_fraction, hours=hours, pue=p.pue)
    return kwh, econ.co2e_kg(energy_kwh=kwh, grid_kg_per_kwh=p.grid_kg_co2e_per_kwh)


def _explain_prices(res: PlanResult, scn: Scenario, cat: Catalog) -> None:
    """The offers behind the plan: the recommendation's (kind, provider, region, date, age, source), how many
    options rest on a stale offer, and the catalog rows refused as data errors (``price_data_errors``)."""
    rec = res.recommendation or (res.infeasible or {}).get("closest")
    considered = {o["gpu"] for o in res.all_options} | {x["gpu"] for x in res.search.get("skipped", [])}
    errors = [e for e in price_data_errors(catalog=cat) if e.split(" ", 1)[0] in considered]
    res.search["price_data_errors"] = errors
    stale = sorted({o["gpu"] for o in res.all_options if o.get("price_stale")})
    parts = []
    if rec is not None and rec.get("price_provider") == "scenario override":
        what = "a true cost of " if rec["pricing_kind"] == "own" else ""
        parts.append(f"{rec['gpu']} {rec['pricing_kind']} at {what}${rec['price_usd_per_gpu_hour']:.3g}/GPU-hour, "
                     "from the scenario's price override.")  # fmt: skip
    elif rec is not None and rec.get("pricing_kind"):
        where = ", ".join(x for x in (rec.get("price_region"), rec.get("price_date") or "undated") if x)
        age = rec.get("price_age_days")
        flag = (f", STALE: {age} days old (limit {scn.pricing.max_price_age_days:g})" if rec.get("price_stale")
                and age is not None else ", STALE: undated" if rec.get("price_stale") else "")  # fmt: skip
        parts.append(f"{rec['gpu']} {rec['pricing_kind']} at ${rec['price_usd_per_gpu_hour']:.3g}/GPU-hour from "
                     f"{rec.get('price_provider') or 'the scenario'} ({where}{flag}); source: "
                     f"{rec.get('price_source', '')}.")  # fmt: skip
    if stale:
        parts.append(f"Options resting on a stale offer: {', '.join(stale)}; refresh them in DIR/prices.csv.")
    if errors:
        parts.append(f"{len(errors)} catalog row(s) refused as data errors: {errors[0]}.")
    if parts:
        res.explanations.append({"topic": "prices", "title": "Prices", "text": " ".join(parts),
                                 "data": {"stale_gpus": stale, "price_data_errors": errors}})  # fmt: skip


def _explain_deployment(res: PlanResult, scn: Scenario, cat: Catalog) -> None:
    """The Deployment Decision Tree for the recommendation (``plan.deployment``): a JSON key and an explanation."""
    from scaleright.plan.deployment import decide

    d = decide(res, scn, cat)
    res.deployment_decision = d
    if d is not None:
        res.explanations.append({"topic": "deployment_decision", "title": "Deployment Decision Tree",
                                 "text": d["text"], "data": d})  # fmt: skip


def _pareto(opts: list[dict], key: str = "time_h") -> list[dict]:
    """Options not beaten on both ``key`` (time, or TPOT for serving) and cost, sorted by ``key``."""
    front, best_cost = [], math.inf
    for o in sorted(opts, key=lambda o: (o[key], o["cost_usd"])):
        if o["cost_usd"] < best_cost - 1e-9:
            front.append(o)
            best_cost = o["cost_usd"]
    return front


def _choose(opts: list[dict], scn: Scenario) -> tuple[dict | None, dict | None]:
    """(recommendation, infeasibility report)."""
    if not opts:
        return None, {"binding": "memory", "message": "no option fits in GPU memory with the allowed GPUs and counts"}
    c = scn.constraints
    dl = c.deadline_h
    budget = c.budget_usd
    ok_dl = [o for o in opts if dl is None or o["time_h"] <= dl]
    ok = [o for o in ok_dl if budget is None or o["cost_usd"] <= budget]
    if ok:
        # cheapest; options within float noise (relative 1e-9) of it are ties, and the fastest of those wins
        # (an absolute tolerance would tie whole sub-cent jobs)
        cheapest = min(o["cost_usd"] for o in ok)
        return min((o for o in ok if o["cost_usd"] <= cheapest * (1 + 1e-9)), key=lambda o: o["time_h"]), None
    if not ok_dl:
        fastest = min(opts, key=lambda o: o["time_h"])
        return None, {"binding": "deadline", "closest": fastest,
                      "message": f"no option finishes within {dl:g} h; the fastest, {fastest['gpus']} x "
                                 f"{fastest['gpu']}, takes {fastest['time_h']:.3g} h at ${fastest['cost_usd']:,.0f}"}
    cheapest = min(ok_dl, key=lambda o: o["cost_usd"])
    return None, {"binding": "budget", "closest": cheapest,
                  "message": f"no option meeting the deadline costs under ${budget:,.0f}; the cheapest, "
                             f"{cheapest['gpus']} x {cheapest['gpu']}, costs ${cheapest['cost_usd']:,.0f}"}


def _scenario_dict(scn: Scenario, spec, extra: dict) -> dict:
    c = count_params(spec)
    return scn.model_dump(mode="json") | {  # JSON types: prices_as_of is a date
        "defaults_used": scn.defaults_used(), "model_params_total": c.total, "model_params_active": c.active,
    } | extra  # fmt: skip


def _check_price_overrides(scn: Scenario, cat: Catalog) -> None:
    """Every GPU named in a price override exists, checked before the search (it was checked only when a price
    was needed, so an override of a GPU that no option reached was silently ignored)."""
    p = scn.pricing
    for key, overrides in (("price_usd_per_gpu_hour", p.price_usd_per_gpu_hour),
                           ("purchase_usd_per_gpu", p.purchase_usd_per_gpu)):  # fmt: skip
        for name in overrides:
            try:
                cat.gpu(name)
            except UnknownNameError as exc:
                raise InputError(f"pricing.{key}: {exc}") from None


def plan(scn: Scenario, *, catalog: Catalog | None = None, cal: Calibration = DEFAULT_CALIBRATION,
         progress=None) -> PlanResult:  # fmt: skip
    """Search and recommend for ``scn`` (see module docstring). ``progress(i, n, label)`` is called per GPU type."""
    cat = catalog if catalog is not None else Catalog.load()
    _check_price_overrides(scn, cat)
    spec = load_model(scn.model, catalog=cat)
    if scn.task == "inference":
        return _plan_inference(scn, spec, cat, cal, progress)
    return _plan_training(scn, spec, cat, cal, progress)


def _plan_training(scn, spec, cat, cal, progress) -> PlanResult:
    from scaleright.plan.explain import explain_training

    tr = scn.training
    tokens = tr.total_tokens
    t0, c0 = time.perf_counter(), time.process_time()
    gpus_allowed = _allowed_gpus(scn, cat)
    options_all, skipped, per_gpu_cands = [], [], {}
    n_eval = n_fit = n_fit_offload = 0
    for i, g in enumerate(gpus_allowed):
        if progress:
            progress(i, len(gpus_allowed), g.id)
        system = system_of(g, gpus_per_node=scn.constraints.gpus_per_node)
        counts = gpu_counts(system.gpus_per_node, scn.constraints.max_gpus)
        pricings, why = _pricings(scn, g, cat, counts)
        if not pricings:
            skipped.append({"gpu": g.id, "reason": f"no {scn.pricing.mode} price: {why}"})
            continue
        cand = evaluate_training(spec, gpu=g, system=system, counts=counts, seq_len=tr.seq_len,
                                 global_batch=tr.global_batch, precision=tr.precision, task=scn.task,
                                 optimizer=tr.optimizer, lora_rank=tr.lora_rank, cal=cal,
                                 framework=framework_of(tr.framework, field="training.framework"),
                                 allow_offload=scn.constraints.allow_offload)  # fmt: skip
        n_eval += cand.n_evaluated
        n_fit += cand.n_fit
        n_fit_offload += cand.n_fit_offload
        if cand.n_fit == 0:
            skipped.append({"gpu": g.id, "reason": cand.note or "no layout fits in memory at any allowed count"})
            continue
        per_gpu_cands[g.id] = (g, cand, dict(zip(counts, pricings[0].rate.tolist(), strict=True)), pricings[0].src)
        a = cand.arrays
        hours = tokens / a["tokens_per_s"] / 3600.0
        # per count the fastest; on exact ties the larger micro-batch (fewer kernel launches, not timed)
        order = np.lexsort((-a["micro_batch"], hours, a["gpus"]))
        first = np.ones(order.size, dtype=bool)
        first[1:] = a["gpus"][order][1:] != a["gpus"][order][:-1]
        js = order[first]
        n_j = a["gpus"][js].astype(int)
        arch = arch_factors(g)  # what every option of this GPU type records (computed once, not per option)
        fw = framework_of(tr.framework, field="training.framework")
        # the memory accounting each option's figures assumed: the framework's at the option's ZeRO stage
        accounting = {z: resolve_profile(fw, zero=z, precision=cand.precision).as_dict() for z in range(4)}
        same = {"framework": fw.name, "memory_accounting": accounting, "calibrated": arch.calibrated,
                "calibration_note": arch.note}
        for pr in pricings:
            price_j = np.asarray([pr.rate[counts.index(int(n))] for n in n_j], dtype=float)
            spots: list[dict | None] = [None] * len(js)
            h_j = hours[js].astype(float)
            if pr.kind == "spot":  # expected hours with preemptions, checkpoints and restarts, per option
                for k, j in enumerate(js.tolist()):
                    h_j[k], spots[k] = _spot_hours(scn, a, j, int(n_j[k]), system.gpus_per_node, float(hours[j]))
            econ_j = _train_econ(scn, g, n_j, h_j, price_j, tokens)  # arrays over the counts: one call per kind
            for k, j in enumerate(js.tolist()):
                o = _train_option(g, cand, j, float(h_j[k]), float(price_j[k]), pr.src,
                                  {key: float(v[k]) for key, v in econ_j.items()}, same) | pr.offer  # fmt: skip
                if o.get("egress_usd"):
                    o["cost_usd"] += o["egress_usd"]
                    o["cost_per_1m_tokens_usd"] = float(econ.training_cost_usd_per_1m_tokens(tokens=tokens,
                                                                                             cost_usd=o["cost_usd"]))
                if pr.kind == "own":
                    o["true_cost_usd_per_gpu_hour"] = float(price_j[k])
                if spots[k] is not None:
                    o["spot"] = spots[k]
                options_all.append(o)
    if progress:
        progress(len(gpus_allowed), len(gpus_allowed), "done")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rec, infeasible = _choose(options_all, scn)
    if not options_all and skipped and all(x["reason"].startswith("no ") and " price" in x["reason"] for x in skipped):
        infeasible = {"binding": "price", "message": f"no allowed GPU has a {scn.pricing.mode} price "
                      f"(first: {skipped[0]['gpu']}, {skipped[0]['reason']}); add pricing.price_usd_per_gpu_hour "
                      "(or purchase_usd_per_gpu for mode own)"}  # fmt: skip
    best_per_gpu: dict[str, Any] = {}
    for o in options_all:
        cur = best_per_gpu.get(o["gpu"])
        if cur is None or _better(o, cur, scn):
            best_per_gpu[o["gpu"]] = o
    options = sorted(best_per_gpu.values(), key=lambda o: (o["cost_usd"], o["time_h"]))
    search = {"layouts_evaluated": n_eval, "layouts_fit": n_fit, "layouts_fit_offload": n_fit_offload,
              "wall_s": wall, "cpu_s": cpu,
              "gpu_types": len(gpus_allowed),
              "skipped": skipped, "layouts_per_s": n_eval / wall if wall > 0 else None,
              "limits": SEARCH_LIMITS, "precision_notes": _precision_notes(options)}  # fmt: skip
    res = PlanResult(
        scenario=_scenario_dict(scn, spec, {"tokens": tokens}), recommendation=rec, options=options,
        pareto=_pareto(options_all), explanations=[], search=search, infeasible=infeasible, all_options=options_all,
    )  # fmt: skip
    explain_training(res, scn, spec, cat, per_gpu_cands)
    _explain_prices(res, scn, cat)
    _explain_deployment(res, scn, cat)
    return res


def _better(o: dict, cur: dict, scn: Scenario) -> bool:
    """Best option of one GPU type: meets the deadline if any does, then cheapest, then fastest."""
    dl = scn.constraints.deadline_h
    ok_o = dl is None or o["time_h"] <= dl
    ok_c = dl is None or cur["time_h"] <= dl
    if ok_o != ok_c:
        return ok_o
    if not ok_o:
        return o["time_h"] < cur["time_h"]
    return (o["cost_usd"], o["time_h"]) < (cur["cost_usd"], cur["time_h"])


def _train_econ(scn, g, gpus, hours, price, tokens) -> dict[str, np.ndarray]:
    """Cost, cost per 1M tokens, energy and emissions of training options (arrays over the options: the economics
    functions validate their inputs once per call, not once per option)."""
    cost = np.asarray(econ.cost_per_job_usd(gpus=gpus, price_usd_per_gpu_hour=price, time_h=hours), dtype=float)
    kwh, co2 = _energy(scn, g, gpus, hours)
    per_1m = econ.training_cost_usd_per_1m_tokens(tokens=tokens, cost_usd=cost)
    return {k: np.asarray(v, dtype=float) + 0 * cost for k, v in
            (("cost_usd", cost), ("cost_per_1m_tokens_usd", per_1m), ("energy_kwh", kwh), ("co2e_kg", co2))}


def _train_option(g, cand, j, hours, price, src, ec: dict[str, float], same: dict[str, Any]) -> dict:
    """Option ``j`` of ``cand`` as the plan's dict; ``same`` holds what every option of the GPU type records (the
    framework behaviour the step time assumes, the memory accounting per ZeRO stage, whether the architecture has
    measured ceilings)."""
    a = cand.arrays
    n = int(a["gpus"][j])
    return {
        "gpu": g.id, "gpus": n, "layout": layout_dict(a, j), "time_h": hours, "cost_usd": ec["cost_usd"],
        "cost_per_1m_tokens_usd": ec["cost_per_1m_tokens_usd"],
        "energy_kwh": ec["energy_kwh"], "co2e_kg": ec["co2e_kg"], "price_usd_per_gpu_hour": float(price),
        "price_source": src,
        "precision": cand.precision, "precision_note": cand.note,  # the note says when a fallback ran
        "tokens_per_s": float(a["tokens_per_s"][j]), "mfu": float(a["mfu"][j]),
        "step_time_s": float(a["step_time_s"][j]), "memory_gb_per_gpu": float(a["memory_gb"][j]),
        "gpu_memory_gb": g.memory_gb, "time_breakdown_s": time_breakdown(a, j),
        "memory_breakdown_gb": {k: float(a[f"mem_{k}"][j]) for k in ("weights", "gradients", "optimizer",
                                                                      "gathered", "activations", "overhead")},
    } | same | {"memory_accounting": dict(same["memory_accounting"][int(a["zero"][j])])}  # fmt: skip


def _size_by_simulation(scn, spec, cat, cal, options_all, skipped, rate, hours_month) -> int:
    """Re-size the cheapest options with the serving simulator (``plan.serving``), cheapest first, until the
    cheapest option is a simulated one or ``MAX_SIMULATED`` were run; an option the simulation rejects leaves the
    list (its reason in ``skipped``). Returns the number simulated."""
    from scaleright.plan.serving import MAX_SIMULATED, simulate_option

    inf = scn.inference
    if not inf.ttft_slo_s:  # without a TTFT limit a finite trial cannot tell a growing queue from a long one
        return 0
    if inf.batch_job is not None:  # a batch job is costed by its throughput (plan.serving.batch_run)
        return 0
    n = 0
    while n < MAX_SIMULATED and options_all:
        o = min(options_all, key=lambda x: (x["cost_usd"], x["tpot_s"]))
        if o["sizing"] == "simulated":
            break
        n += 1
        g = cat.gpu(o["gpu"])
        system = system_of(g, gpus_per_node=scn.constraints.gpus_per_node)
        try:
            sim = simulate_option(spec, inf, g, system, o["layout"]["tp"], cal, rate=rate, max_batch=o["max_batch"],
                                  max_gpus=scn.constraints.max_gpus)  # fmt: skip
        except ScalerightError as exc:
            sim = {"fits": False, "reason": str(exc)}
        if not sim["fits"]:
            options_all.remove(o)
            skipped.append({"gpu": o["gpu"], "reason": f"tp={o['layout']['tp']}: simulated: {sim['reason']}"})
            continue
        gpus = sim["gpus"]
        usd_h = gpus * o["price_usd_per_gpu_hour"]
        kwh, co2 = _energy(scn, g, gpus, hours_month)
        cap = max(sim["replicas"] * sim["replica_capacity"], sim["sized_at_requests_per_s"])
        o.update({
            "gpus": gpus, "layout": {"tp": o["layout"]["tp"], "pp": 1, "replicas": sim["replicas"],
                                     "batch_per_replica": sim["batch"]},
            "cost_usd": usd_h * hours_month, "usd_per_hour": usd_h,
            "cost_per_1m_tokens_usd": float(econ.inference_cost_usd_per_1m_tokens(
                tokens_per_s=rate * inf.output_len, usd_per_hour=usd_h, utilisation=1.0)),
            "energy_kwh": float(kwh), "co2e_kg": float(co2), "ttft_s": sim["ttft_p99_s"],
            "tpot_s": sim["tpot_p99_s"], "e2e_latency_s": sim["e2e_p99_s"], "capacity_requests_per_s": cap,
            "utilisation": rate / cap, "gpu_busy_share": sim["gpu_busy_share"],
            "replica_capacity_requests_per_s": sim["replica_capacity"], "replica_capacity": sim["replica_capacity"],
            "sized_at_requests_per_s": sim["sized_at_requests_per_s"], "sizing": "simulated",
            "latency_percentile": "p99",
            "serving_charts": sim.get("serving_charts"), "gpus_against_load": sim.get("gpus_against_load"),
        })  # fmt: skip
    return n


def _plan_inference(scn, spec, cat, cal, progress) -> PlanResult:
    from scaleright.plan.explain import explain_inference
    from scaleright.plan.serving import (
        batch_costs,
        batch_explanation,
        batch_run,
        peak_rate,
        serverless_explanation,
        serverless_price,
        serverless_service,
        trace_rate,
    )

    inf = scn.inference
    p = scn.pricing
    bj = inf.batch_job  # an occasional job: costed per run (plan.serving.batch_run), not per day of service
    if inf.arrival == "trace":
        rate = trace_rate(inf.trace)
    elif bj is not None:
        rate = bj.requests_per_run / (bj.run_within_h * 3600)
    else:
        rate = inf.requests_per_s if inf.requests_per_s is not None else inf.requests_per_day / (p.hours_per_day * 3600)
    peak = peak_rate(inf, rate)  # what the fleet must carry (diurnal: the daily peak)
    if not math.isfinite(rate):
        raise InputError(f"inference.requests_per_day={inf.requests_per_day:g} in pricing.hours_per_day="
                         f"{p.hours_per_day:g} h is not a finite request rate; raise hours_per_day")  # fmt: skip
    hours_month = p.hours_per_day * DAYS_PER_MONTH
    t0 = time.perf_counter()
    gpus_allowed = _allowed_gpus(scn, cat)
    evaluated: dict[str, list[InferCandidate]]
    options_all, skipped, evaluated = [], [], {}
    for i, g in enumerate(gpus_allowed):
        if progress:
            progress(i, len(gpus_allowed), g.id)
        system = system_of(g, gpus_per_node=scn.constraints.gpus_per_node)
        tps = [t for t in (1, 2, 4, 8, 16) if t <= tp_domain(system) and spec.heads % t == 0
               and (spec.mla or spec.kv_heads % t == 0 or t % spec.kv_heads == 0)]  # fmt: skip
        evaluated[g.id] = []
        for t in tps:
            c = evaluate_inference(spec, gpu=g, system=system, tp=t, rate_rps=peak, input_len=inf.input_len,
                                   output_len=inf.output_len, precision=inf.precision, kv_precision=inf.kv_precision,
                                   ttft_slo_s=inf.ttft_slo_s, tpot_slo_s=inf.tpot_slo_s,
                                   max_gpus=scn.constraints.max_gpus, cal=cal)  # fmt: skip
            evaluated[g.id].append(c)
            if not c.fits:
                continue
            run = batch_run(inf, p, c) if bj is not None else None
            # owned hardware doing a batch job is used only for its runs: its TCO is spread over those hours
            pscn = scn if run is None else scn.model_copy(update={"pricing": p.model_copy(
                update={"hours_per_day": run["use_hours_per_day"]})})  # fmt: skip
            pricings, why = _pricings(pscn, g, cat, c.gpus)
            if not pricings:
                skipped.append({"gpu": g.id, "reason": f"no {p.mode} price: {why}"})
                break
            pr = pricings[0]  # serving is priced per hour of service: the cheapest kind per GPU-hour
            price, src = float(np.asarray(pr.rate)), pr.src
            if run is not None and pr.kind == "spot":  # a batch run on spot: preempted replicas restart
                run = batch_run(inf, p, c, spot=True, gpus_per_node=system.gpus_per_node)
            usd_h = c.gpus * price
            paid_h = hours_month if run is None else run["run_h"] * run["runs_per_month"]
            cost_month = usd_h * paid_h
            out_tps = rate * inf.output_len
            kwh, co2 = _energy(scn, g, c.gpus, paid_h)
            batch = None if run is None else batch_costs(
                run, gpus=c.gpus, usd_per_gpu_hour=price,
                output_tokens_per_run=run["requests_per_run"] * inf.output_len,
                serverless=serverless_price(p, g.id, cat))  # fmt: skip
            options_all.append({
                "gpu": g.id, "gpus": c.gpus, "layout": {"tp": c.tp, "pp": 1, "replicas": c.replicas,
                                                        "batch_per_replica": c.batch_per_replica},
                "time_h": hours_month if run is None else run["run_h"], "service_hours_per_month": paid_h,
                "cost_usd": cost_month,
                "cost_per_1m_tokens_usd": float(econ.inference_cost_usd_per_1m_tokens(
                    tokens_per_s=out_tps, usd_per_hour=usd_h, utilisation=1.0)) if batch is None
                    else batch["usd_per_1m_output_tokens"],
                "energy_kwh": float(kwh), "co2e_kg": float(co2), "price_usd_per_gpu_hour": price,
                "price_source": src, "usd_per_hour": usd_h, "ttft_s": c.ttft_s, "tpot_s": c.tpot_s,
                "e2e_latency_s": c.e2e_latency_s, "utilisation": c.utilisation,
                "capacity_requests_per_s": c.capacity_requests_per_s, "max_batch": c.max_batch,
                "gpu_memory_gb": g.memory_gb, "memory_gb_per_gpu": sum(c.memory_breakdown_gb.values()),
                "memory_breakdown_gb": c.memory_breakdown_gb, "precision_note": _infer_precision_note(g, inf.precision),
                "sizing": "steady-state",
            } | pr.offer | ({"true_cost_usd_per_gpu_hour": price} if pr.kind == "own" else {})
              | ({"batch_job": batch} if batch is not None else {}))  # fmt: skip
        if not any(c.fits for c in evaluated[g.id]) and evaluated[g.id]:
            skipped.append({"gpu": g.id, "reason": evaluated[g.id][-1].reason})
    n_sim = _size_by_simulation(scn, spec, cat, cal, options_all, skipped, rate, hours_month)
    wall = time.perf_counter() - t0
    n_eval = sum(len(c.curve.get("batch", [])) or 1 for v in evaluated.values() for c in v)
    budget = scn.constraints.budget_usd
    ok = [o for o in options_all if budget is None or o["cost_usd"] <= budget]
    rec = min(ok, key=lambda o: (o["cost_usd"], o["tpot_s"])) if ok else None
    infeasible = None
    if rec is None:
        if options_all:
            cheapest = min(options_all, key=lambda o: o["cost_usd"])
            infeasible = {"binding": "budget", "closest": cheapest,
                          "message": f"no option costs under ${budget:,.0f} a month; the cheapest, {cheapest['gpus']}"
                                     f" x {cheapest['gpu']}, costs ${cheapest['cost_usd']:,.0f}"}  # fmt: skip
        else:
            reasons = "; ".join(f"{s['gpu']}: {s['reason']}" for s in skipped[:4])
            infeasible = {"binding": "latency SLO or memory", "message": f"no GPU type meets the SLOs: {reasons}"}
    best: dict[str, dict[str, Any]] = {}
    for o in options_all:
        if (o["gpu"] not in best
                or (o["cost_usd"], o["tpot_s"]) < (best[o["gpu"]]["cost_usd"], best[o["gpu"]]["tpot_s"])):
            best[o["gpu"]] = o
    options = sorted(best.values(), key=lambda o: o["cost_usd"])
    pareto = _pareto(options_all, key="tpot_s")
    res = PlanResult(
        scenario=_scenario_dict(scn, spec, {"requests_per_s": rate, "peak_requests_per_s": peak}),
        recommendation=rec, options=options,
        pareto=pareto, explanations=[], infeasible=infeasible, all_options=options_all,
        search={"layouts_evaluated": n_eval, "layouts_fit": len(options_all), "wall_s": wall, "skipped": skipped,
                "gpu_types": len(gpus_allowed), "layouts_per_s": n_eval / wall if wall > 0 else None,
                "limits": SEARCH_LIMITS, "precision_notes": _precision_notes(options), "simulated": n_sim},
    )  # fmt: skip
    # a batch job's hardware is used for its runs only: the Capex vs Opex explanation weighs that use
    use = (rec or {}).get("batch_job", {}).get("use_hours_per_day")
    xscn = scn if use is None else scn.model_copy(update={"pricing": p.model_copy(update={"hours_per_day": use})})
    explain_inference(res, xscn, spec, cat, evaluated, rate, cal=cal)
    if rec is not None and "batch_job" in rec:
        res.explanations.append(batch_explanation(rec))
    sls = serverless_service(scn, rec, rate, cat) if rec is not None else None
    if rec is not None and sls is not None:
        rec["serverless"] = sls
        res.explanations.append(serverless_explanation(sls))
    _explain_prices(res, scn, cat)
    _explain_deployment(res, scn, cat)
    return res
