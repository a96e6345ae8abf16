"""The planner: search hardware × count × layout × pricing for a scenario and recommend one option, with reasons.

Training: every allowed GPU type is searched (``search.evaluate_training``); for each type and GPU count the
fastest fitting layout is kept; its job time is tokens / throughput, its cost the seeds' rate × hours × GPUs
(rent) or the amortised owned cost per GPU-hour (own). The recommendation is the cheapest option that meets the
deadline and budget (ties: faster); if none does, the binding constraint and the closest option are reported.

Inference: every GPU type × TP size is sized to carry the request rate within the latency SLOs
(``search.evaluate_inference``); cost is per month of service at ``hours_per_day``; the recommendation is the
cheapest that meets the budget.

Explanations are computed from the same numbers (``explain.py``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from scaleright.catalog import Catalog, find_price
from scaleright.errors import InputError, ScalerightError, UnknownNameError
from scaleright.estimate.calibration import DEFAULT_CALIBRATION, Calibration
from scaleright.estimate.comm import system_of
from scaleright.plan import economics as econ
from scaleright.plan.economics._units import DAYS_PER_MONTH
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
    option per GPU type and count)."""

    scenario: dict
    recommendation: dict | None
    options: list[dict]
    pareto: list[dict]
    explanations: list[dict]
    curve: list[dict] = field(default_factory=list)
    search: dict = field(default_factory=dict)
    infeasible: dict | None = None
    all_options: list[dict] = field(default_factory=list)  # best per (gpu, count), for charts

    def as_dict(self) -> dict:
        return {
            "scenario": self.scenario, "recommendation": self.recommendation, "options": self.options,
            "pareto": self.pareto, "explanations": self.explanations, "curve": self.curve, "search": self.search,
            "infeasible": self.infeasible, "all_options": self.all_options,
        }  # fmt: skip


def _ownership(scn: Scenario, gpu, purchase_usd: float, gpus) -> econ.OwnershipCosts:
    p = scn.pricing
    return econ.OwnershipCosts(
        gpus=gpus, purchase_usd_per_gpu=purchase_usd, tdp_w=gpu.tdp_w or 0.0,
        electricity_usd_per_kwh=p.electricity_usd_per_kwh, depreciation_years=p.depreciation_years,
        hours_per_day=p.hours_per_day, horizon_months=p.horizon_months,
        server_share_usd_per_gpu=p.server_share_usd_per_gpu,
        facility_upgrade_usd=p.facility_upgrade_usd, pue=p.pue, load_fraction=p.load_fraction,
        ops_overhead_usd_per_gpu_hour=p.ops_overhead_usd_per_gpu_hour, resale_fraction=p.resale_fraction,
    )  # fmt: skip


def price_for(scn: Scenario, gpu, cat: Catalog, kind: str) -> tuple[float | None, str]:
    """(price, source) of ``gpu`` for ``kind`` (a rent kind or purchase), overrides first; (None, why) if none."""
    overrides = scn.pricing.purchase_usd_per_gpu if kind == "purchase" else scn.pricing.price_usd_per_gpu_hour
    for name, v in overrides.items():
        try:
            if cat.gpu(name).id == gpu.id:
                return float(v), "scenario override"
        except ScalerightError:
            raise InputError(f"pricing: unknown GPU {name!r} in price overrides") from None
    try:
        row = find_price(gpu.id, kind, catalog=cat)
    except ScalerightError as exc:
        return None, str(exc)
    basis = f" ({row.price_basis})" if row.price_basis and row.price_basis != "usd" else ""
    return float(cast(float, row.price)), f"{row.provider or 'catalog'} {row.date or ''}{basis}: {row.source[:80]}"


def _rate(scn: Scenario, gpu, cat: Catalog, gpus):
    """USD per GPU-hour for the scenario's pricing mode (array over ``gpus`` for owned hardware)."""
    mode = scn.pricing.mode
    if mode != "own":
        price, src = price_for(scn, gpu, cat, mode)
        return (None, src) if price is None else (np.full(np.shape(gpus), price, dtype=float), src)
    purchase, src = price_for(scn, gpu, cat, "purchase")
    if purchase is None:
        return None, src
    if not gpu.tdp_w:
        return None, f"{gpu.id} has no TDP in the catalog (needed for owned power cost)"
    own = np.asarray(econ.owned_cost_per_gpu_hour_usd(costs=_ownership(scn, gpu, purchase,
                                                                      np.asarray(gpus, dtype=float))), dtype=float)
    if not np.isfinite(own).all():  # e.g. a tiny hours_per_day: the purchase buys (almost) no GPU-hours
        p = scn.pricing
        return None, (f"owned cost per GPU-hour is not finite (pricing.hours_per_day={p.hours_per_day:g}, "
                      f"horizon_months={p.horizon_months:g}, purchase ${purchase:,.0f})")  # fmt: skip
    return own, f"owned: purchase ${purchase:,.0f} ({src})"


def _allowed_gpus(scn: Scenario, cat: Catalog):
    c = scn.constraints
    gpus = [cat.gpu(n) for n in c.gpu_types] if c.gpu_types else list(cat.gpus.values())
    gpus = list({g.id: g for g in gpus}.values())  # an id and its alias name one GPU
    if c.interconnect != "any":
        gpus = [g for g in gpus if g.intra_node_link == c.interconnect]
    if not gpus:
        raise InputError(f"constraints: no GPU left after gpu_types={c.gpu_types} and interconnect={c.interconnect}")
    return gpus


def _energy(scn: Scenario, gpu, gpus, hours):
    p = scn.pricing
    kwh = econ.energy_kwh(gpus=gpus, tdp_w=gpu.tdp_w or 0.0, load_fraction=p.load_fraction, hours=hours, pue=p.pue)
    return kwh, econ.co2e_kg(energy_kwh=kwh, grid_kg_per_kwh=p.grid_kg_co2e_per_kwh)


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
    return scn.model_dump() | {
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
    n_eval = n_fit = 0
    for i, g in enumerate(gpus_allowed):
        if progress:
            progress(i, len(gpus_allowed), g.id)
        system = system_of(g, gpus_per_node=scn.constraints.gpus_per_node)
        counts = gpu_counts(system.gpus_per_node, scn.constraints.max_gpus)
        rate, src = _rate(scn, g, cat, counts)
        if rate is None:
            skipped.append({"gpu": g.id, "reason": f"no {scn.pricing.mode} price: {src}"})
            continue
        cand = evaluate_training(spec, gpu=g, system=system, counts=counts, seq_len=tr.seq_len,
                                 global_batch=tr.global_batch, precision=tr.precision, task=scn.task,
                                 optimizer=tr.optimizer, lora_rank=tr.lora_rank, cal=cal)  # fmt: skip
        n_eval += cand.n_evaluated
        n_fit += cand.n_fit
        if cand.n_fit == 0:
            skipped.append({"gpu": g.id, "reason": cand.note or "no layout fits in memory at any allowed count"})
            continue
        per_gpu_cands[g.id] = (g, cand, dict(zip(counts, rate.tolist(), strict=True)), src)
        a = cand.arrays
        hours = tokens / a["tokens_per_s"] / 3600.0
        # per count the fastest; on exact ties the larger micro-batch (fewer kernel launches, not timed)
        order = np.lexsort((-a["micro_batch"], hours, a["gpus"]))
        first = np.ones(order.size, dtype=bool)
        first[1:] = a["gpus"][order][1:] != a["gpus"][order][:-1]
        js = order[first]
        n_j = a["gpus"][js]
        price_j = np.asarray([per_gpu_cands[g.id][2][int(n)] for n in n_j], dtype=float)
        econ_j = _train_econ(scn, g, n_j, hours[js], price_j, tokens)  # one call per GPU type, arrays over counts
        for k, j in enumerate(js.tolist()):
            options_all.append(_train_option(scn, g, cand, j, float(hours[j]), float(price_j[k]), src,
                                             {key: float(v[k]) for key, v in econ_j.items()}))  # fmt: skip
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
    search = {"layouts_evaluated": n_eval, "layouts_fit": n_fit, "wall_s": wall, "cpu_s": cpu,
              "gpu_types": len(gpus_allowed),
              "skipped": skipped, "layouts_per_s": n_eval / wall if wall > 0 else None,
              "limits": SEARCH_LIMITS}  # fmt: skip
    res = PlanResult(
        scenario=_scenario_dict(scn, spec, {"tokens": tokens}), recommendation=rec, options=options,
        pareto=_pareto(options_all), explanations=[], search=search, infeasible=infeasible, all_options=options_all,
    )  # fmt: skip
    explain_training(res, scn, spec, cat, per_gpu_cands)
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
    """Cost, cost per 1M tokens, energy and emissions of training options (arrays over the options)."""
    cost = np.asarray(econ.cost_per_job_usd(gpus=gpus, price_usd_per_gpu_hour=price, time_h=hours), dtype=float)
    kwh, co2 = _energy(scn, g, gpus, hours)
    per_1m = econ.training_cost_usd_per_1m_tokens(tokens=tokens, cost_usd=cost)
    return {k: np.asarray(v, dtype=float) + 0 * cost for k, v in
            (("cost_usd", cost), ("cost_per_1m_tokens_usd", per_1m), ("energy_kwh", kwh), ("co2e_kg", co2))}


def _train_option(scn, g, cand, j, hours, price, src, ec: dict[str, float]) -> dict:
    a = cand.arrays
    n = int(a["gpus"][j])
    return {
        "gpu": g.id, "gpus": n, "layout": layout_dict(a, j), "time_h": hours, "cost_usd": ec["cost_usd"],
        "cost_per_1m_tokens_usd": ec["cost_per_1m_tokens_usd"],
        "energy_kwh": ec["energy_kwh"], "co2e_kg": ec["co2e_kg"], "price_usd_per_gpu_hour": price, "price_source": src,
        "precision": cand.precision, "tokens_per_s": float(a["tokens_per_s"][j]), "mfu": float(a["mfu"][j]),
        "step_time_s": float(a["step_time_s"][j]), "memory_gb_per_gpu": float(a["memory_gb"][j]),
        "gpu_memory_gb": g.memory_gb, "time_breakdown_s": time_breakdown(a, j),
        "memory_breakdown_gb": {k: float(a[f"mem_{k}"][j]) for k in ("weights", "gradients", "optimizer",
                                                                      "activations", "overhead")},
    }  # fmt: skip


def _plan_inference(scn, spec, cat, cal, progress) -> PlanResult:
    from scaleright.plan.explain import explain_inference

    inf = scn.inference
    p = scn.pricing
    rate = inf.requests_per_s if inf.requests_per_s is not None else inf.requests_per_day / (p.hours_per_day * 3600)
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
            c = evaluate_inference(spec, gpu=g, system=system, tp=t, rate_rps=rate, input_len=inf.input_len,
                                   output_len=inf.output_len, precision=inf.precision, kv_precision=inf.kv_precision,
                                   ttft_slo_s=inf.ttft_slo_s, tpot_slo_s=inf.tpot_slo_s,
                                   max_gpus=scn.constraints.max_gpus, cal=cal)  # fmt: skip
            evaluated[g.id].append(c)
            if not c.fits:
                continue
            r, src = _rate(scn, g, cat, c.gpus)
            if r is None:
                skipped.append({"gpu": g.id, "reason": f"no {p.mode} price: {src}"})
                break
            price = float(np.asarray(r))
            usd_h = c.gpus * price
            cost_month = usd_h * hours_month
            out_tps = rate * inf.output_len
            kwh, co2 = _energy(scn, g, c.gpus, hours_month)
            options_all.append({
                "gpu": g.id, "gpus": c.gpus, "layout": {"tp": c.tp, "pp": 1, "replicas": c.replicas,
                                                        "batch_per_replica": c.batch_per_replica},
                "time_h": hours_month, "service_hours_per_month": hours_month, "cost_usd": cost_month,
                "cost_per_1m_tokens_usd": float(econ.inference_cost_usd_per_1m_tokens(
                    tokens_per_s=out_tps, usd_per_hour=usd_h, utilisation=1.0)),
                "energy_kwh": float(kwh), "co2e_kg": float(co2), "price_usd_per_gpu_hour": price,
                "price_source": src, "usd_per_hour": usd_h, "ttft_s": c.ttft_s, "tpot_s": c.tpot_s,
                "e2e_latency_s": c.e2e_latency_s, "utilisation": c.utilisation,
                "capacity_requests_per_s": c.capacity_requests_per_s, "max_batch": c.max_batch,
                "gpu_memory_gb": g.memory_gb, "memory_gb_per_gpu": sum(c.memory_breakdown_gb.values()),
                "memory_breakdown_gb": c.memory_breakdown_gb,
            })  # fmt: skip
        if not any(c.fits for c in evaluated[g.id]) and evaluated[g.id]:
            skipped.append({"gpu": g.id, "reason": evaluated[g.id][-1].reason})
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
        scenario=_scenario_dict(scn, spec, {"requests_per_s": rate}), recommendation=rec, options=options,
        pareto=pareto, explanations=[], infeasible=infeasible, all_options=options_all,
        search={"layouts_evaluated": n_eval, "layouts_fit": len(options_all), "wall_s": wall, "skipped": skipped,
                "gpu_types": len(gpus_allowed), "layouts_per_s": n_eval / wall if wall > 0 else None,
                "limits": SEARCH_LIMITS},
    )  # fmt: skip
    explain_inference(res, scn, spec, cat, evaluated, rate)
    return res
