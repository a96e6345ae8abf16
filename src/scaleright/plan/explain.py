"""Reasons for a plan, in the seed articles' terms, each computed from the search's numbers.

Training: the memory wall (smallest GPU count that fits, and the split it forces), the Parallelism Selector
(best data / tensor / pipeline / hybrid layout at the recommended count, side by side), the interconnect check
(share of the step spent in tensor-parallel all-reduce on PCIe-only vs NVLink GPUs), the Utilisation Efficiency
Curve (scaling efficiency and cost per job against GPU count, economically optimal count marked), Capex vs Opex
at the stated utilisation, and what would change the decision (price, deadline, hours per day).
Inference: memory wall, replicas vs tensor parallelism, SLO headroom, Capex vs Opex, API break-even price.

Each explanation is ``{"topic", "title", "text", "data"}``: ``text`` is one or two sentences with the numbers,
``data`` the numbers themselves (for JSON users and the HTML report's charts).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from scaleright.estimate.comm import system_of
from scaleright.estimate.layout import RECOMPUTE, layout_text
from scaleright.fmt import number as fmt_number
from scaleright.fmt import usd as format_usd  # one money format for the terminal, JSON texts and the HTML report
from scaleright.plan import economics as econ
from scaleright.plan.economics.defaults import COST_OF_CAPITAL_SOURCE, site_of
from scaleright.plan.search import family

__all__ = ["explain_training", "explain_inference"]

# Wording thresholds (presentation, not model): an overhead is named when it takes over 0.5 % of a step; an option
# counts as "faster" for "what would change the decision" when it saves over 10 % of the time.
NOTABLE_SHARE = 0.005
MEANINGFULLY_FASTER = 0.10


def _gpus(n: int) -> str:
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def _x(topic: str, title: str, text: str, **data) -> dict:
    return {"topic": topic, "title": title, "text": text, "data": data}


_LAYOUT_KEYS = ("tp", "pp", "dp", "cp", "ep", "etp", "zero", "dp_shard", "virtual_stages", "offload_optimizer",
                "offload_activations")


def _at(a: dict, i: int, *extra: str) -> dict:
    """Layout fields of entry ``i`` of the search arrays (``recompute`` by name) for ``layout_text``."""
    d: dict[str, Any] = {k: int(a[k][i]) for k in _LAYOUT_KEYS + tuple(x for x in extra if x != "recompute")}
    if "recompute" in extra:
        d["recompute"] = RECOMPUTE[int(a["recompute"][i])]
    return d


def _capex_opex(scn, gpu, n: int, cat, rent_price: float | None) -> dict | None:
    from scaleright.plan.planner import _ownership, price_for

    purchase, src = price_for(scn, gpu, cat, "purchase")
    if purchase is None or rent_price is None or not gpu.tdp_w:
        return None
    costs = _ownership(scn, gpu, purchase, n)
    owned_h = float(econ.owned_cost_per_gpu_hour_usd(costs=costs))
    be_h = float(econ.break_even_hours_per_day(costs=costs, rent_usd_per_gpu_hour=rent_price))
    hours = np.arange(1, 25, dtype=float)
    grid = econ.capex_opex_matrix(costs=costs, rent_usd_per_gpu_hour=rent_price, hours_per_day=hours,
                                  horizon_months=[scn.pricing.horizon_months])  # fmt: skip
    tco = econ.tco_usd(costs=costs)
    be_m = float(econ.break_even_months(costs=costs, rent_usd_per_gpu_hour=rent_price))
    utils = np.array([0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0])
    true_cost = np.asarray(econ.true_cost_per_gpu_hour_usd(costs=costs, utilisation=utils), dtype=float)
    parity_u = float(econ.utilisation_for_true_cost(costs=costs, usd_per_gpu_hour=rent_price))
    from scaleright.plan.planner import _ownership_inputs

    return {
        "gpu": gpu.id, "gpus": n, "purchase_usd_per_gpu": purchase, "purchase_source": src,
        "rent_usd_per_gpu_hour": rent_price, "owned_usd_per_gpu_hour": owned_h, "break_even_hours_per_day": be_h,
        "break_even_months": be_m, "utilisation_for_rent_parity": parity_u,
        "owned_running_usd_per_gpu_hour": float(econ.owned_running_cost_usd_per_gpu_hour(costs=costs)),
        "true_cost_curve": {"utilisation": utils.tolist(), "usd_per_gpu_hour": true_cost.tolist()},
        "ownership_inputs": _ownership_inputs(scn, gpu),
        "cost_of_capital_source": ("scenario" if scn.pricing.cost_of_capital_per_year is not None
                                   else "default: " + COST_OF_CAPITAL_SOURCE[site_of(gpu.form_factor)]),
        "hours_per_day": hours.tolist(), "own_usd": np.asarray(grid["own_usd"])[:, 0].tolist(),
        "rent_usd": np.asarray(grid["rent_usd"])[:, 0].tolist(), "horizon_months": scn.pricing.horizon_months,
        "tco_breakdown_usd": {k: float(np.asarray(v)) for k, v in tco.items()},
        "stated_hours_per_day": scn.pricing.hours_per_day,
    }  # fmt: skip


def _rent_to_compare(scn, gpu, cat, rec: dict) -> float | None:
    """The rent that owning is weighed against: the recommendation's own rent, or, when it owns hardware (mode
    own, hybrid, or an owned option of mode cheapest), the cheapest on-demand offer."""
    from scaleright.plan.planner import price_for

    if rec.get("pricing_kind", scn.pricing.mode) in ("own", "hybrid"):
        return price_for(scn, gpu, cat, "on-demand")[0]
    return rec["price_usd_per_gpu_hour"]


def _capex_entry(cap: dict | None, scn, gpu, cat, rent) -> dict:
    """The Capex vs Opex explanation, or why it cannot be computed."""
    from scaleright.plan.planner import price_for

    if cap:
        return _x("capex_opex", "Capex vs Opex", _capex_text(cap), **cap)
    purchase, why = price_for(scn, gpu, cat, "purchase")
    if purchase is None:
        reason = f"no purchase price for {gpu.id} ({why}); add pricing.purchase_usd_per_gpu"
    elif rent is None:
        reason = f"no on-demand rent price for {gpu.id} to compare with; add pricing.price_usd_per_gpu_hour"
    else:
        reason = f"{gpu.id} has no TDP in the catalog, so its power cost is unknown"
    return _x("capex_opex", "Capex vs Opex", f"Not computed: {reason}.", unavailable=reason)


def _capex_text(c: dict) -> str:
    be = c["break_even_hours_per_day"]
    h = c["stated_hours_per_day"]
    verdict = "buying is cheaper" if math.isfinite(be) and h >= be else "renting is cheaper"
    running = c.get("owned_running_usd_per_gpu_hour", 0.0)
    be_s = (f"{be:.1f} h/day" if math.isfinite(be) else
            f"never (rent at or below the owned running cost, ${running:.2f}/GPU-hour)"
            if c["rent_usd_per_gpu_hour"] <= running else "never (not even 24 h/day repays the capital)")  # fmt: skip
    months = c.get("break_even_months", math.inf)
    pay = (f"; at {fmt_number(h)} h/day owning pays back after {months:.1f} months" if math.isfinite(months) else
           f"; at {fmt_number(h)} h/day owning never pays back")  # fmt: skip
    o = c.get("ownership_inputs") or {}
    parts = (f" True cost counts ops ${o['ops_overhead_usd_per_gpu_hour']:g}/GPU-hour, host "
             f"${o['server_share_usd_per_gpu']:,.0f}/GPU, facility ${o['facility_upgrade_usd']:,.0f}, capital "
             f"{o['cost_of_capital_per_year']:.2%}/year ({c.get('cost_of_capital_source', 'scenario')})."
             if o else "")  # fmt: skip
    return (f"Owning {c['gpus']} x {c['gpu']} at {fmt_number(h)} h/day over {c['horizon_months']:g} months costs "
            f"${c['owned_usd_per_gpu_hour']:.2f} per GPU-hour against ${c['rent_usd_per_gpu_hour']:.2f} to rent: "
            f"{verdict}. Break-even: {be_s}{pay}.{parts}")  # fmt: skip


def explain_training(res, scn, spec, cat, per_gpu) -> None:
    """Append training explanations and the utilisation curve to ``res``."""

    ex = res.explanations
    rec = res.recommendation or (res.infeasible or {}).get("closest")
    if rec is None or rec["gpu"] not in per_gpu:
        ex.append(_x("memory_wall", "Memory wall", (res.infeasible or {}).get("message", "nothing fits")))
        return
    gpu, cand, rates, _src = per_gpu[rec["gpu"]]
    a = cand.arrays
    tokens = res.scenario["tokens"]
    hours = tokens / a["tokens_per_s"] / 3600.0
    # ---- memory wall ------------------------------------------------------------------------------------------
    n_min = int(a["gpus"].min())
    at_min = np.flatnonzero(a["gpus"] == n_min)
    j = int(at_min[np.argmin(hours[at_min])])
    states_one = (a["mem_weights"][j] + a["mem_gradients"][j] + a["mem_optimizer"][j])
    lay_min = {k: int(a[k][j]) for k in ("tp", "pp", "dp", "zero")}
    if n_min == 1:
        rc = RECOMPUTE[int(a["recompute"][j])]
        how = "" if rc == "none" else f" with {rc} recomputation"
        text = (f"{spec.name} fits on one {gpu.id} ({a['memory_gb'][j]:.1f} of {gpu.memory_gb:.1f} GB{how}): no "
                "split is forced; more GPUs are a speed choice.")  # fmt: skip
    else:
        forced = family(**lay_min)
        text = (f"{spec.name} ({res.scenario['model_params_total'] / 1e9:.1f} B parameters, {scn.task}) does not fit "
                f"on one {gpu.id} ({gpu.memory_gb:.1f} GB): the smallest count that fits is {n_min} GPUs, where the "
                f"fastest fitting layout is {forced} ({layout_text(_at(a, j, 'micro_batch'))}) with "
                f"{states_one:.1f} GB of weights, gradients and optimizer states per GPU.")  # fmt: skip
    ex.append(_x("memory_wall", "Memory wall", text, smallest_gpus=n_min, gpu=gpu.id, gpu_memory_gb=gpu.memory_gb,
                 memory_gb_per_gpu_at_smallest=float(a["memory_gb"][j])))  # fmt: skip
    # ---- parallelism selector ---------------------------------------------------------------------------------
    n = rec["gpus"]
    at_n = np.flatnonzero(a["gpus"] == n)
    fams: dict[str, int] = {}
    f: Any  # a family name here, a table row in the interconnect check below
    for i in at_n:
        f = family(int(a["tp"][i]), int(a["pp"][i]), int(a["dp"][i]), int(a["zero"][i]))
        if f not in fams or hours[i] < hours[fams[f]]:
            fams[f] = int(i)
    table = [{"family": f, "layout": layout_text(_at(a, i)),
              "time_h": float(hours[i]), "step_time_s": float(a["step_time_s"][i]), "mfu": float(a["mfu"][i])}
             for f, i in sorted(fams.items(), key=lambda kv: hours[kv[1]])]  # fmt: skip
    chosen = family(rec["layout"]["tp"], rec["layout"]["pp"], rec["layout"]["dp"], rec["layout"]["zero"])
    others = [t for t in table if t["family"] != chosen]
    why = f"{chosen} ({layout_text(rec['layout'])}) is the fastest way to use {n} x {gpu.id}"
    if others:
        o = others[0]
        why += f"; the best alternative, {o['family']} ({o['layout']}), is {o['time_h'] / rec['time_h']:.2f}x slower"
    tb = rec["time_breakdown_s"]
    step = rec["step_time_s"]
    comm = {k: v / step for k, v in tb.items() if k.endswith("comm") or k == "bubble"}
    top = max(comm.items(), key=lambda kv: kv[1]) if comm else None
    if top and top[1] > NOTABLE_SHARE:
        why += f". Its largest overhead is {top[0].replace('_', ' ')} at {top[1]:.0%} of the step"
    ex.append(_x("parallelism_selector", "Parallelism Selector", why + ".", families=table))
    # ---- interconnect check -----------------------------------------------------------------------------------
    rows = []
    for gid, (g2, c2, _r, _s) in per_gpu.items():
        a2 = c2.arrays
        tpm = a2["tp"] > 1
        if not tpm.any():
            continue
        h2 = tokens / a2["tokens_per_s"] / 3600
        k = int(np.flatnonzero(tpm)[np.argmin(h2[tpm])])
        fabric = system_of(g2, gpus_per_node=scn.constraints.gpus_per_node).tiers[0].kind
        rows.append({"gpu": gid, "link": g2.intra_node_link, "intra_node_gb_per_s": g2.intra_node_gb_per_s_per_gpu,
                     "fabric": fabric, "tp": int(a2["tp"][k]),
                     "tp_comm_share": float(a2["t_tp_comm"][k] / a2["step_time_s"][k])})  # fmt: skip
    if rows:
        pcie = [r for r in rows if r["link"] == "pcie"]
        fast = [r for r in rows if r["link"] != "pcie"]
        if pcie and fast:
            p, f = max(pcie, key=lambda r: r["tp_comm_share"]), min(fast, key=lambda r: r["tp_comm_share"])
            staged = " without P2P, staged through host memory" if p["fabric"] == "pcie-host" else ""
            text = (f"Tensor parallelism pays for its all-reduces on the intra-node link: on PCIe-only {p['gpu']} "
                    f"({p['intra_node_gb_per_s']:g} GB/s{staged}) the best tp={p['tp']} layout spends "
                    f"{p['tp_comm_share']:.0%} of each step in TP communication, against {f['tp_comm_share']:.0%} on "
                    f"{f['gpu']} ({f['link']}, {f['intra_node_gb_per_s']:g} GB/s).")  # fmt: skip
        else:
            r = max(rows, key=lambda r: r["tp_comm_share"])
            text = (f"With tensor parallelism, up to {r['tp_comm_share']:.0%} of a step goes to TP all-reduce "
                    f"({r['gpu']}, {r['link']} {r['intra_node_gb_per_s']:g} GB/s, tp={r['tp']}).")
        ex.append(_x("interconnect", "Interconnect check", text, rows=rows))
    # ---- utilisation efficiency curve -------------------------------------------------------------------------
    counts = sorted({int(x) for x in a["gpus"]})
    best_t, best_i = [], []
    for c in counts:
        idx = np.flatnonzero(a["gpus"] == c)
        best_i.append(int(idx[np.argmin(hours[idx])]))
        best_t.append(float(hours[best_i[-1]]))
    base_n, base_t = counts[0], best_t[0]
    price = np.asarray([rates[c] for c in counts])
    curve = econ.utilisation_curve(gpus=np.asarray(counts, dtype=float) / base_n,
                                   speedup=base_t / np.asarray(best_t), single_gpu_time_h=base_t,
                                   price_usd_per_gpu_hour=price * base_n, deadline_h=scn.constraints.deadline_h)
    opt = curve["optimal_index"]
    res.curve = [
        {"gpu": gpu.id, "gpus": c, "time_h": t, "speedup": float(curve["speedup"][i]),
         "scaling_efficiency": float(curve["scaling_efficiency"][i]), "cost_usd": float(curve["cost_usd"][i]),
         "meets_deadline": bool(curve["meets_deadline"][i]), "optimal": i == opt}
        for i, (c, t) in enumerate(zip(counts, best_t, strict=True))
    ]  # fmt: skip
    last = res.curve[-1]
    text = (f"On {gpu.id}, going from {base_n} to {last['gpus']} GPUs gives {last['speedup']:.1f}x "
            f"(scaling efficiency {last['scaling_efficiency']:.0%}); cost per job goes from "
            f"{format_usd(res.curve[0]['cost_usd'])} to {format_usd(last['cost_usd'])}.")  # fmt: skip
    if last["scaling_efficiency"] > 1.0:  # more than linear: the layouts compared are not the same, say which
        def at(i: int) -> str:
            return layout_text(_at(a, i, "micro_batch", "recompute"))

        b, e = best_i[0], best_i[-1]
        paid = [what for what, key, worse in (
            ("a pipeline bubble", "pp", lambda x, y: x > y), ("more tensor-parallel traffic", "tp", lambda x, y: x > y),
            ("more recompute", "recompute", lambda x, y: x > y),
            ("a smaller micro-batch", "micro_batch", lambda x, y: x < y),
        ) if worse(int(a[key][b]), int(a[key][e]))]  # fmt: skip
        text += (f" Above 100 % because the fastest layout at {_gpus(base_n)} ({at(b)}) is not the one at "
                 f"{last['gpus']} ({at(e)})" + (f": the baseline pays for {' and '.join(paid)}." if paid else "."))
    if opt is not None:
        o = res.curve[opt]
        dl = scn.constraints.deadline_h
        text += (f" The economically optimal count{' meeting the ' + format(dl, 'g') + ' h deadline' if dl else ''} "
                 f"is {_gpus(o['gpus'])} ({format_usd(o['cost_usd'])}, {o['time_h']:.3g} h).")  # fmt: skip
    ex.append(_x("utilisation_curve", "Utilisation Efficiency Curve", text, gpu=gpu.id, base_gpus=base_n,
                 points=res.curve))  # fmt: skip
    # ---- capex vs opex ------------------------------------------------------------------------------------------
    rent = _rent_to_compare(scn, gpu, cat, rec)
    cap = _capex_opex(scn, gpu, n, cat, rent)
    ex.append(_capex_entry(cap, scn, gpu, cat, rent))
    # ---- what would change the decision -------------------------------------------------------------------------
    if res.recommendation:
        changes = []
        alts = [o for o in res.options if o["gpu"] != rec["gpu"]]
        ok_alts = [o for o in alts if scn.constraints.deadline_h is None or o["time_h"] <= scn.constraints.deadline_h]
        if ok_alts:
            r2 = min(ok_alts, key=lambda o: o["cost_usd"])
            p_star = r2["cost_usd"] / (rec["gpus"] * rec["time_h"])
            changes.append(f"{r2['gpus']} x {r2['gpu']} ({format_usd(r2['cost_usd'])}, {r2['time_h']:.3g} h) becomes "
                           f"cheaper if {rec['gpu']} costs over ${p_star:.2f}/GPU-hour "
                           f"(now ${rec['price_usd_per_gpu_hour']:.2f})")  # fmt: skip
        faster = [o for o in res.all_options if o["time_h"] < rec["time_h"] * (1 - MEANINGFULLY_FASTER)]
        if faster:
            f = min(faster, key=lambda o: o["cost_usd"])
            changes.append(f"a deadline under {rec['time_h']:.3g} h needs e.g. {f['gpus']} x {f['gpu']} "
                           f"({f['time_h']:.3g} h, {format_usd(f['cost_usd'])})")  # fmt: skip
        if cap and math.isfinite(cap["break_even_hours_per_day"]):
            changes.append(f"buying beats renting above {cap['break_even_hours_per_day']:.1f} h/day of use")
        ex.append(_x("what_would_change", "What would change the decision",
                     "; ".join(changes) + "." if changes else "No nearby alternative changes the choice.",
                     changes=changes))  # fmt: skip
    ex.append(_x("eco", "Eco-Efficiency Scorecard",
                 f"The recommended job uses {rec['energy_kwh']:,.0f} kWh ({rec['co2e_kg']:,.0f} kg CO2e at "
                 f"{scn.pricing.grid_kg_co2e_per_kwh:g} kg/kWh, PUE {scn.pricing.pue:g}).",
                 rows=[{"gpu": o["gpu"], "energy_kwh": o["energy_kwh"], "co2e_kg": o["co2e_kg"],
                        "kwh_per_1m_tokens": o["energy_kwh"] / tokens * 1e6} for o in res.options]))  # fmt: skip


def explain_inference(res, scn, spec, cat, evaluated, rate, cal=None) -> None:
    """Append inference explanations to ``res``."""

    ex = res.explanations
    rec = res.recommendation or (res.infeasible or {}).get("closest")
    if rec is None:
        ex.append(_x("memory_wall", "Memory wall", (res.infeasible or {}).get("message", "nothing fits")))
        return
    cands = evaluated[rec["gpu"]]
    fitting_tp = [c.tp for c in cands if c.max_batch >= 1]
    min_tp = min(fitting_tp) if fitting_tp else None
    gpu = cat.gpu(rec["gpu"])
    ex.append(_x("memory_wall", "Memory wall",
                 f"{spec.name} with {scn.inference.precision} weights "
                 + ("fits on one " + gpu.id if min_tp == 1 else f"needs tp={min_tp} on {gpu.id}")
                 + f"; at tp={rec['layout']['tp']} each replica holds up to {rec['max_batch']} sequences of "
                   f"{scn.inference.input_len + scn.inference.output_len} tokens in its KV cache.",
                 smallest_tp=min_tp))  # fmt: skip
    rows = [{"tp": c.tp, "fits": c.fits, "replicas": c.replicas, "gpus": c.gpus,
             "requests_per_s_per_gpu": (c.capacity_requests_per_s / c.gpus) if c.gpus else 0.0,
             "tpot_s": c.tpot_s, "ttft_s": c.ttft_s, "reason": c.reason} for c in cands]  # fmt: skip
    ok = [r for r in rows if r["gpus"]]
    if ok:
        best = max(ok, key=lambda r: r["requests_per_s_per_gpu"])
        text = (f"Per GPU, tp={best['tp']} carries the most load ({best['requests_per_s_per_gpu']:.3g} req/s per GPU "
                f"within the SLOs); the plan uses {rec['layout']['replicas']} replica(s) of tp={rec['layout']['tp']}. "
                "Replicas add throughput when the model fits; tensor parallelism is for models that do not fit or "
                "for latency.")  # fmt: skip
        ex.append(_x("replicas_vs_tp", "Replicas vs tensor parallelism", text, rows=rows))
    slo = []
    pct = "p99 " if rec.get("sizing") == "simulated" else ""
    if scn.inference.ttft_slo_s:
        slo.append(f"{pct}TTFT {rec['ttft_s'] * 1e3:.0f} ms of {scn.inference.ttft_slo_s * 1e3:.0f} ms")
    if scn.inference.tpot_slo_s:
        slo.append(f"{pct}TPOT {rec['tpot_s'] * 1e3:.1f} ms of {scn.inference.tpot_slo_s * 1e3:.1f} ms")
    ex.append(_x("slo", "Latency SLOs",
                 (", ".join(slo) if slo else "No SLO set") + f"; the deployment runs at {rec['utilisation']:.0%} of "
                 f"its capacity ({rec['capacity_requests_per_s']:.3g} req/s for {rate:.3g} req/s offered).",
                 utilisation=rec["utilisation"]))  # fmt: skip
    ex.extend(_serving_explanations(res, scn, spec, gpu, rec, rate, cal))
    out_tps = rate * scn.inference.output_len
    be = float(econ.api_break_even_usd_per_1m_tokens(tokens_per_s=out_tps, usd_per_hour=rec["usd_per_hour"],
                                                      utilisation=1.0))  # fmt: skip
    if "batch_job" in rec:  # a batch job pays for its runs only (economics.batch): its cost per token per run
        be = rec["batch_job"]["usd_per_1m_output_tokens"]
    # the deployment's full capacity in output tokens/s (what it could serve at 100 % utilisation)
    cap_tps = rec["capacity_requests_per_s"] * scn.inference.output_len
    full = float(econ.api_break_even_usd_per_1m_tokens(tokens_per_s=cap_tps, usd_per_hour=rec["usd_per_hour"],
                                                        utilisation=1.0))  # fmt: skip
    text = (f"Self-hosting costs ${be:.3g} per 1M output tokens at this load (${full:.3g} if the GPUs were kept "
            f"fully busy): an API priced above that is dearer, below it the API wins.")
    data: dict[str, Any] = {"api_break_even_usd_per_1m_tokens": be, "full_utilisation_usd_per_1m_tokens": full}
    inf = scn.inference
    api_out, api_in = inf.api_usd_per_1m_output_tokens, inf.api_usd_per_1m_input_tokens
    if api_in is not None and api_out is None:
        text += " (No API comparison: inference.api_usd_per_1m_input_tokens needs api_usd_per_1m_output_tokens.)"
    if api_out is not None:
        api = float(econ.api_usd_per_1m_output_tokens_blended(
            api_usd_per_1m_input_tokens=api_in or 0.0, api_usd_per_1m_output_tokens=api_out,
            input_len=inf.input_len, output_len=inf.output_len))  # fmt: skip
        need = float(econ.utilisation_needed_for_api_parity(tokens_per_s=cap_tps, usd_per_hour=rec["usd_per_hour"],
                                                            api_usd_per_1m_tokens=api))  # fmt: skip
        now = rec["batch_job"]["busy_share"] if "batch_job" in rec else rec["utilisation"]
        verdict = ("never: even fully busy, self-hosting costs more" if not math.isfinite(need) else
                   f"{need:.0%} utilisation (now {now:.0%}): self-hosting is {'cheaper' if now >= need else 'dearer'}")
        priced = (f"${api_out:g}/1M output + ${api_in:g}/1M input tokens, ${api:.3g} per 1M output tokens at "
                  f"{inf.input_len}:{inf.output_len} prompt:completion" if api_in is not None else f"${api_out:g}/1M")
        text += f" Against the API's {priced}, parity needs {verdict}."
        utils = np.array([0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0])
        curve = np.asarray(econ.inference_cost_usd_per_1m_tokens(tokens_per_s=cap_tps, usd_per_hour=rec["usd_per_hour"],
                                                                 utilisation=utils), dtype=float)  # fmt: skip
        data |= {"api_usd_per_1m_tokens": api, "utilisation_needed_for_api_parity": need,
                 "api_usd_per_1m_output_tokens": api_out, "api_usd_per_1m_input_tokens": api_in,
                 "self_host_cost_curve": {"utilisation": utils.tolist(), "usd_per_1m_output_tokens": curve.tolist()}}
    ex.append(_x("api_break_even", "Self-host vs API", text, **data))
    ex.append(_efficiency_ladder(scn, spec, gpu, rec, rate))
    rent = _rent_to_compare(scn, gpu, cat, rec)
    cap = _capex_opex(scn, gpu, rec["gpus"], cat, rent)
    ex.append(_capex_entry(cap, scn, gpu, cat, rent))


def _serving_explanations(res, scn, spec, gpu, rec, rate, cal) -> list[dict]:
    """How the fleet was sized by simulation, and what each lever saves (``plan.serving``)."""
    from scaleright.estimate.calibration import DEFAULT_CALIBRATION
    from scaleright.plan.serving import DEFAULT_TPOT_P99_MS, MAX_SIMULATED, levers

    inf = scn.inference
    out = []
    n_sim = res.search.get("simulated", 0)
    if rec.get("sizing") != "simulated":
        why = ("no TTFT SLO is set (inference.ttft_slo_s): the simulated capacity is the highest rate within a p99 "
               "TTFT limit, so the fleet is sized by the steady-state model" if not inf.ttft_slo_s else
               f"the cheapest option stayed a steady-state estimate after {n_sim} simulations (at most "
               f"{MAX_SIMULATED} a plan)")  # fmt: skip
        out.append(_x("simulated_sizing", "Sized by simulation", f"Not simulated: {why}.", simulated=n_sim))
        return out
    assumed = [f"TPOT {DEFAULT_TPOT_P99_MS / 1e3:g} s" for _ in [0] if not inf.tpot_slo_s]
    pattern = {"constant": "Poisson" if inf.burstiness == 1 else f"gamma (burstiness {inf.burstiness:g})",
               "diurnal": f"diurnal (peak {1 + inf.diurnal_amplitude:g}x the mean)",
               "trace": f"the trace {inf.trace}"}[inf.arrival]  # fmt: skip
    text = (f"One {gpu.id} replica at tp={rec['layout']['tp']} ({inf.engine} profile) carries "
            f"{rec['replica_capacity']:.3g} req/s with p99 TTFT and p99 TPOT within the SLOs"
            + (f" (no SLO set for {', '.join(assumed)}: assumed)" if assumed else "")
            + f"; {rec['layout']['replicas']} replica(s) meet them at {rec['sized_at_requests_per_s']:.3g} req/s "
              f"({pattern} arrivals, {inf.headroom:.0%} headroom over the {'peak ' if inf.arrival == 'diurnal' else ''}"
              f"rate), simulated: p99 TTFT {rec['ttft_s'] * 1e3:.0f} ms, p99 TPOT {rec['tpot_s'] * 1e3:.1f} ms, GPUs "
              f"busy {rec['gpu_busy_share']:.0%} of the time. {n_sim} option(s) were simulated, cheapest first; the "
              "others in the table are steady-state estimates.")  # fmt: skip
    out.append(_x("simulated_sizing", "Sized by simulation", text, simulated=n_sim, headroom=inf.headroom,
                  replica_capacity_requests_per_s=rec["replica_capacity"]))  # fmt: skip
    system = system_of(gpu, gpus_per_node=scn.constraints.gpus_per_node)
    rows = levers(spec, inf, gpu, system, rec["layout"]["tp"], cal or DEFAULT_CALIBRATION, rate=rate, rec=rec,
                  max_gpus=scn.constraints.max_gpus)  # fmt: skip
    done = [r for r in rows if r["usd_per_month_saved"] is not None]
    def n(x: float) -> str:
        return f"{x:,.0f}" if float(x).is_integer() else f"{x:,.1f}"

    def saving(x: float) -> str:
        return f"saves {format_usd(x)}/month" if x >= 0 else f"costs {format_usd(-x)}/month more"

    parts = [f"{r['lever']} {n(r['gpus_with'])} GPUs against {n(r['gpus_without'])} ({r['compared_with']}): "
             f"{saving(r['usd_per_month_saved'])}" for r in done]  # fmt: skip
    skipped = [f"{r['lever']} ({r['reason']})" for r in rows if r["usd_per_month_saved"] is None]
    out.append(_x("serving_levers", "Serving levers",
                  ("Simulated on the recommended GPU and layout, same SLOs and headroom: " + "; ".join(parts) + "."
                   if parts else "No lever could be simulated.")
                  + (f" Not computed: {'; '.join(skipped)}." if skipped else ""), levers=rows))  # fmt: skip
    return out


def _efficiency_ladder(scn, spec, gpu, rec, rate) -> dict:
    """The seeds' Inference Efficiency Ladder on the recommended GPU, each rung computed: cost per 1M output tokens
    and GPUs needed for the offered rate, climbing from one request at a time in 16-bit to batching, 8-bit weights,
    an 8-bit KV cache and 4-bit weights (rungs the GPU cannot run are skipped with the reason)."""
    from scaleright.errors import InputError
    from scaleright.plan.search import evaluate_inference

    inf = scn.inference
    system = system_of(gpu, gpus_per_node=scn.constraints.gpus_per_node)
    eight = "fp8" if gpu.dense_tflops.get("fp8") else "int8"
    rungs = [("one request at a time, 16-bit", "bf16", "bf16", 1), ("+ continuous batching", "bf16", "bf16", None),
             (f"+ {eight} weights", eight, "bf16", None), (f"+ {eight} KV cache", eight, eight, None),
             ("+ int4 weights", "int4", eight, None)]  # fmt: skip
    price = rec["price_usd_per_gpu_hour"]
    rows: list[dict[str, Any]] = []
    for label, wp, kvp, cap in rungs:
        try:
            c = evaluate_inference(spec, gpu=gpu, system=system, tp=rec["layout"]["tp"], rate_rps=rate,
                                   input_len=inf.input_len, output_len=inf.output_len, precision=wp, kv_precision=kvp,
                                   ttft_slo_s=inf.ttft_slo_s, tpot_slo_s=inf.tpot_slo_s, max_gpus=1 << 30,
                                   batch_limit=cap)  # fmt: skip
        except InputError as exc:
            rows.append({"rung": label, "gpus": None, "usd_per_1m_output_tokens": None, "reason": str(exc)})
            continue
        if not c.gpus:
            rows.append({"rung": label, "gpus": None, "usd_per_1m_output_tokens": None, "reason": c.reason})
            continue
        usd_h = c.gpus * price
        rows.append({"rung": label, "gpus": c.gpus, "batch_per_replica": c.batch_per_replica,
                     "usd_per_1m_output_tokens": usd_h * 1e6 / (rate * inf.output_len * 3600), "reason": None})
    done = [r for r in rows if r["gpus"]]
    text = "; ".join(f"{r['rung']}: {r['gpus']} GPU{'s' if r['gpus'] != 1 else ''}, "
                     f"${r['usd_per_1m_output_tokens']:.3g}/1M tokens" for r in done)  # fmt: skip
    return _x("efficiency_ladder", "Inference Efficiency Ladder",
              f"On {gpu.id} (tp={rec['layout']['tp']}) for {rate:.3g} req/s: {text}." if done else
              "No rung of the ladder carries the load within the SLOs.", rungs=rows)  # fmt: skip
