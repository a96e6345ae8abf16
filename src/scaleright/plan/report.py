"""The plan as one self-contained HTML file: inline CSS, charts as inline SVG drawn here, no JavaScript, no fetches.

Input is ``PlanResult.as_dict()`` (``planner.py``; explanation ``data`` from ``explain.py``). Sections: a two-sentence
summary; the recommendation (or the binding constraint and the closest option); the best option per GPU type; the
Deployment Decision Tree (each branch, the number that decides it and what flips it); the scenario and the defaults
it used; charts — scaling curve (training), cost vs time Pareto front, memory per GPU
(training), rent vs buy, a radar per GPU type (a chart with one point or one polygon is replaced by a sentence
saying so); for inference, the serving simulation of the recommended fleet (latency CDF, utilisation and queue
over time, GPU cost against load; ``_serving_section``, charts from ``serve.report``); the explanations; tables
of the Pareto front, the skipped GPU types and the price sources. Markers carry their numbers as hover text (SVG
``<title>``); each GPU type has its own colour and marker shape.

Every number shown is read from the result; only chart scales, the radar's normalisation and the cost-against-load
curve (the result's GPUs at each load times the option's price and service hours) are computed here.
All text is escaped; None, NaN and inf print as "—".
"""

from __future__ import annotations

import math
from pathlib import Path

import scaleright
from scaleright import charts as ch
from scaleright import fmt
from scaleright.charts import DASH, X0, X1, Y0, Y1, H
from scaleright.estimate.layout import layout_text

__all__ = ["render_html", "write_html"]

# ---- formatting ---------------------------------------------------------------------------------------------------
_ok = fmt.is_number
format_usd = fmt.usd  # the name explanations import
_e = ch.esc


def _num(x: object, spec: str = ".3g") -> str:
    """``fmt.number`` (three significant figures); another format ``spec`` where a chart tick needs one."""
    if spec == ".3g" or not _ok(x):
        return fmt.number(x)
    return format(x, spec)


def _opt(x: object, unit: str) -> str:
    """An optional limit: "none" when unset."""
    return f"{_num(x)} {unit}" if _ok(x) else "none"


_pct = fmt.percent


def _layout(lay: dict) -> str:
    """Compact layout (``layout_text``); a dash when there is none."""
    return layout_text(lay) if lay else DASH


def _option_tip(o: dict, training: bool) -> str:
    """Hover text of one option's marker: what it is and the numbers it is placed by."""
    head = f"{o.get('gpus')} × {o.get('gpu')}, {_layout(o.get('layout') or {})}"
    if training:
        return f"{head}: {_num(o.get('time_h'))} h, {format_usd(o.get('cost_usd'))} per job, MFU {_pct(o.get('mfu'))}"
    return (f"{head}: TPOT {_num((o.get('tpot_s') or math.nan) * 1e3)} ms, {format_usd(o.get('cost_usd'))} per "
            f"month, utilisation {_pct(o.get('utilisation'))}")

# ---- charts -------------------------------------------------------------------------------------------------------
def _curve_chart(curve: list[dict], gpu: str) -> str:
    pts = [p for p in curve if _ok(p.get("gpus")) and _ok(p.get("speedup")) and p["speedup"] > 0]
    n = [p["gpus"] for p in pts]
    ideal = [c / n[0] for c in n]
    sx = ch.scale(*ch.span(n, 2), X0, X1, 2)
    ylo, yhi = ch.span([p["speedup"] for p in pts] + ideal, 2)
    sy = ch.scale(ylo, yhi, Y0, Y1, 2)
    ehi = max([1.2] + [p["scaling_efficiency"] * 1.1 for p in pts if _ok(p.get("scaling_efficiency"))])
    se = ch.scale(0, ehi, Y0, Y1)
    out = ch.axes(sx, sy, ch.ticks(*ch.span(n, 2), 2), ch.ticks(ylo, yhi, 2), "GPUs (log2 scale)",
                "speedup over the smallest count (×, log2)", xfmt=lambda v: f"{v:g}", yfmt=lambda v: f"{v:g}×")
    for v in ch.ticks(0, ehi):
        out += [ch.line(X1, se(v), X1 + 4, se(v)), ch.text(X1 + 7, se(v) + 4, _pct(v), "start", fill="#ff7f0e")]
    out.append(ch.text(X1 + 50, Y1 - 4, "efficiency", "end", fill="#ff7f0e"))
    out.append(ch.path([(sx(c), sy(i)) for c, i in zip(n, ideal, strict=True)], "#888", 1.5, "6 4"))
    out.append(ch.path([(sx(p["gpus"]), sy(p["speedup"])) for p in pts], "#1f77b4"))
    eff = [p for p in pts if _ok(p.get("scaling_efficiency"))]
    out.append(ch.path([(sx(p["gpus"]), se(p["scaling_efficiency"])) for p in eff], "#ff7f0e", 2, "2 3"))
    for p in pts:
        out.append(ch.dot(sx(p["gpus"]), sy(p["speedup"]), "#1f77b4" if p.get("meets_deadline", True) else "#fff", 4,
                        "#1f77b4"))  # fmt: skip
        if p.get("optimal"):
            out += [ch.dot(sx(p["gpus"]), sy(p["speedup"]), "none", 9, "#2ca02c"),
                    ch.text(sx(p["gpus"]) - 12, sy(p["speedup"]) - 10, f"optimal: {p['gpus']} GPUs", "end",
                          fill="#2ca02c", font_weight="600")]
    miss = [("misses deadline", "#1f77b4", "ring")] if any(not p.get("meets_deadline", True) for p in pts) else []
    out += ch.legend([("speedup", "#1f77b4", "line"), ("ideal (linear)", "#888", "dash"),
                    ("efficiency (right)", "#ff7f0e", "dash"), ("optimal count", "#2ca02c", "ring"), *miss],
                   x=X1 + 48)  # fmt: skip
    return ch.svg(f"Scaling curve on {gpu}: speedup and scaling efficiency against GPU count", out)


def _key(o: dict) -> tuple:
    return o.get("gpu"), o.get("gpus"), tuple(sorted((o.get("layout") or {}).items()))


def _pareto_chart(res: dict, styles: dict[str, tuple[str, str]], training: bool) -> str:
    xk, xmul = ("time_h", 1.0) if training else ("tpot_s", 1e3)
    opts = [o for o in res["all_options"] if _ok(o.get(xk)) and _ok(o.get("cost_usd")) and o[xk] > 0
            and o["cost_usd"] > 0]  # fmt: skip
    xs, ys = [o[xk] * xmul for o in opts], [o["cost_usd"] for o in opts]
    (xlo, xhi), (ylo, yhi) = ch.span(xs, 10), ch.span(ys, 10)
    sx, sy = ch.scale(xlo, xhi, X0, X1, 10), ch.scale(ylo, yhi, Y0, Y1, 10)
    out = ch.axes(sx, sy, ch.ticks(xlo, xhi, 10), ch.ticks(ylo, yhi, 10),
                "time to train (h, log)" if training else "time per output token (ms, log)",
                "cost per job (USD, log)" if training else "cost per month (USD, log)", yfmt=ch.usd_tick)  # fmt: skip
    c = res["scenario"].get("constraints") or {}
    for lim, vert, name in ((c.get("deadline_h") if training else None, True, "deadline"),
                            (c.get("budget_usd"), False, "budget")):  # fmt: skip
        if _ok(lim) and (xlo < lim < xhi if vert else ylo < lim < yhi):
            out.append(ch.line(sx(lim), Y1, sx(lim), Y0, "#d62728", 1.5, "4 3") if vert
                       else ch.line(X0, sy(lim), X1, sy(lim), "#d62728", 1.5, "4 3"))  # fmt: skip
            out.append(ch.text(sx(lim) + 4, Y1 + 12, name, "start", fill="#d62728") if vert
                       else ch.text(X1 - 4, sy(lim) - 4, name, "end", fill="#d62728"))  # fmt: skip
    front = {_key(o) for o in res["pareto"]}
    fpts = sorted((o[xk] * xmul, o["cost_usd"]) for o in opts if _key(o) in front)
    if fpts:
        out.append(ch.path([(sx(x), sy(y)) for x, y in fpts], "#222", 1.5))
    for o, x, y in zip(opts, xs, ys, strict=True):
        col, shape = styles.get(o["gpu"], ("#777", "circle"))
        out.append(ch.dot(sx(x), sy(y), col, 4.5, "#222" if _key(o) in front else "none", 0.85, shape,
                        _option_tip(o, training)))  # fmt: skip
        if _key(o) in front:  # the front's points are named on the chart; the others by hover and legend
            out.append(ch.text(sx(x) + 7, sy(y) - 7, f"{o['gpus']}×{o['gpu']}", "start", font_size="10", fill="#333"))
    rec = res["recommendation"]
    if rec and _ok(rec.get(xk)) and rec[xk] > 0 and _ok(rec.get("cost_usd")) and rec["cost_usd"] > 0:
        out.append(ch.dot(sx(rec[xk] * xmul), sy(rec["cost_usd"]), "none", 10, "#2ca02c"))
    seen = [g for g in styles if any(o["gpu"] == g for o in opts)]
    out += ch.legend([(g, styles[g][0], "dot" if styles[g][1] == "circle" else styles[g][1]) for g in seen]
                   + [("Pareto front", "#222", "line"),
                                                            ("recommended", "#2ca02c", "ring")])  # fmt: skip
    what = "training time" if training else "time per output token"
    return ch.svg(f"Cost against {what} for every GPU type and count, Pareto front highlighted", out)


MEM_COLOURS = {"weights": "#1f77b4", "gradients": "#ff7f0e", "optimizer": "#2ca02c", "activations": "#9467bd",
               "overhead": "#7f7f7f"}  # fmt: skip


def _memory_chart(opt: dict) -> str:
    parts = {k: v for k, v in opt["memory_breakdown_gb"].items() if _ok(v) and v > 0}
    cap = opt.get("gpu_memory_gb")
    total = sum(parts.values())
    h = 170
    sx = ch.scale(0, max(total, cap if _ok(cap) else 0) * 1.12 or 1.0, X0, X1)
    yb, yt = 110, 60
    out = [ch.text((X0 + X1) / 2, yb + 44, "memory per GPU (GB)", font_weight="600")]
    for v in ch.ticks(0, max(total, cap if _ok(cap) else 0) * 1.12 or 1.0):
        out += [ch.line(sx(v), yt - 10, sx(v), yb + 6, "#e6e9ef"), ch.text(sx(v), yb + 22, _num(v))]
    x = 0.0
    for k, v in parts.items():
        col = MEM_COLOURS.get(k, "#bcbd22")
        out.append(f'<rect x="{sx(x):.1f}" y="{yt}" width="{sx(x + v) - sx(x):.1f}" height="{yb - yt}" fill="{col}">'
                   f"<title>{_e(k)}: {_num(v)} GB</title></rect>")  # fmt: skip
        if sx(x + v) - sx(x) > 36:
            out.append(ch.text((sx(x) + sx(x + v)) / 2, (yt + yb) / 2 + 4, _num(v), fill="#fff"))
        x += v
    if _ok(cap):
        out += [ch.line(sx(cap), yt - 22, sx(cap), yb + 8, "#d62728", 2, "5 3"),
                ch.text(sx(cap) - 4, yt - 12, f"GPU memory {_num(cap)} GB", "end", fill="#d62728")]
    out += ch.legend([(f"{k} {_num(v)} GB", MEM_COLOURS.get(k, "#bcbd22"), "rect") for k, v in parts.items()], y=30)
    return ch.svg(f"Memory per GPU by component: {opt['gpus']} x {opt['gpu']}, {_num(total)} of {_num(cap)} GB", out, h)


def _capex_chart(cap: dict) -> str:
    hrs, own, rent = cap.get("hours_per_day") or [], cap.get("own_usd") or [], cap.get("rent_usd") or []
    sx = ch.scale(0, 24, X0, X1)
    ylo, yhi = ch.span(own + rent, zero=True)
    sy = ch.scale(ylo, yhi, Y0, Y1)
    out = ch.axes(sx, sy, ch.ticks(0, 24), ch.ticks(ylo, yhi), "hours of use per day",
                f"cost over {_num(cap.get('horizon_months'))} months (USD)", yfmt=ch.usd_tick)  # fmt: skip
    out.append(ch.path([(sx(h), sy(v)) for h, v in zip(hrs, own, strict=True) if _ok(v)], "#2ca02c", 2.5))
    out.append(ch.path([(sx(h), sy(v)) for h, v in zip(hrs, rent, strict=True) if _ok(v)], "#1f77b4", 2.5))
    be, use = cap.get("break_even_hours_per_day"), cap.get("stated_hours_per_day")
    if _ok(be) and 0 < be <= 24:
        out += [ch.line(sx(be), Y1, sx(be), Y0, "#d62728", 1.5, "5 3"),
                ch.text(sx(be) + 4, Y1 + 14, f"break-even {be:.1f} h/day", "start", fill="#d62728")]
    if _ok(use):
        out += [ch.line(sx(use), Y1, sx(use), Y0, "#555", 1, "2 3"),
                ch.text(sx(use) - 4, Y0 - 8, f"your use: {use:g} h/day", "end", fill="#555")]
    out += ch.legend([("own (TCO)", "#2ca02c", "line"), ("rent", "#1f77b4", "line"),
                    ("break-even", "#d62728", "dash")])  # fmt: skip
    return ch.svg(f"Own vs rent {cap.get('gpus')} x {cap.get('gpu')} against hours of use per day", out)


def _radar_axes(training: bool) -> list[tuple[str, str, bool]]:
    """(label, option key, higher is better) per radar axis."""
    return [("cost", "cost_usd", False), ("speed", "time_h" if training else "tpot_s", False),
            ("energy", "energy_kwh", False),
            ("memory headroom" if training else "memory", "_headroom" if training else "gpu_memory_gb", True)]


def _radar_chart(options: list[dict], styles: dict[str, tuple[str, str]], training: bool) -> str:
    axes = _radar_axes(training)
    rows = [o | {"_headroom": 1 - o["memory_gb_per_gpu"] / o["gpu_memory_gb"]}
            if _ok(o.get("memory_gb_per_gpu")) and _ok(o.get("gpu_memory_gb")) and o["gpu_memory_gb"] > 0 else o
            for o in options]  # fmt: skip
    cx, cy, r = 300, H / 2 + 4, 130
    ang = [-math.pi / 2 + i * 2 * math.pi / len(axes) for i in range(len(axes))]
    pt = lambda a, f: (cx + r * f * math.cos(a), cy + r * f * math.sin(a))  # noqa: E731
    out = [ch.path([pt(a, f) for a in ang], "#dde1e8", 1, fill="#fbfcfe") for f in (1.0, 0.75, 0.5, 0.25)]
    for a, (label, _k, _b) in zip(ang, axes, strict=True):
        out.append(ch.line(cx, cy, *pt(a, 1.0), "#c9ced8"))
        x, y = pt(a, 1.08)
        anchor = "start" if math.cos(a) > 0.3 else "end" if math.cos(a) < -0.3 else "middle"
        out.append(ch.text(x, y + 4 + 8 * math.sin(a), label, anchor, font_weight="600"))
    for f in (0.5, 1.0):
        out.append(ch.text(cx + 5, cy - r * f + 12, f"{f:g}", "start", fill="#777"))
    norm = {}
    for _label, k, up in axes:
        v = [o[k] for o in rows if _ok(o.get(k)) and o[k] > 0]
        best = (max(v) if up else min(v)) if v else None
        norm[k] = lambda x, best=best, up=up: 0.0 if not (_ok(x) and best) else \
            (max(x, 0) / best if up else (best / x if x > 0 else 1.0))  # fmt: skip
    for o in rows:
        col, shape = styles.get(o["gpu"], ("#777", "circle"))
        poly = ch.path([pt(a, norm[k](o.get(k))) for a, (_l, k, _u) in zip(ang, axes, strict=True)], col, 2,
                     "" if shape == "circle" else "6 3", fill=col, opacity=0.12)  # fmt: skip
        out.append(f"{poly[:-2]}><title>{_e(_option_tip(o, training))}</title></path>")
    out += ch.legend([(o["gpu"], styles.get(o["gpu"], ("#777", ""))[0],
                     "line" if styles.get(o["gpu"], ("", "circle"))[1] == "circle" else "dash") for o in rows],
                   x=X1 - 20)  # fmt: skip
    return ch.svg("Radar of cost, speed, energy and memory per GPU type (further out is better)", out)


# ---- sections -----------------------------------------------------------------------------------------------------
def _figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{_e(caption)}</figcaption></figure>"


def _scenario(s: dict) -> str:
    total, active = s.get("model_params_total"), s.get("model_params_active")
    moe = f", {_num(active / 1e9)} B active" if _ok(active) and _ok(total) and active != total else ""
    rows = [("model", f"{s.get('model')} ({_num(total / 1e9 if _ok(total) else None)} B parameters{moe})"),
            ("task", s.get("task"))]  # fmt: skip
    tr, inf, c, p = s.get("training"), s.get("inference"), s.get("constraints") or {}, s.get("pricing") or {}
    if tr:
        tok = s.get("tokens")
        rows += [("tokens", f"{_num(tok / 1e9 if _ok(tok) else None)} B"),
                 ("sequence length × global batch", f"{tr.get('seq_len')} × {tr.get('global_batch')}"),
                 ("precision / optimizer", f"{tr.get('precision')} / {tr.get('optimizer')}"),
                 ("deadline", _opt(c.get("deadline_h"), "h"))]  # fmt: skip
    if inf:
        rows += [("request rate", f"{_num(s.get('requests_per_s'))} req/s"),
                 ("tokens per request", f"{inf.get('input_len')} in, {inf.get('output_len')} out"),
                 ("latency SLOs", f"TTFT {_opt(inf.get('ttft_slo_s'), 's')}, TPOT {_opt(inf.get('tpot_slo_s'), 's')}"),
                 ("precision (weights / KV)", f"{inf.get('precision')} / {inf.get('kv_precision')}")]  # fmt: skip
    budget = format_usd(c["budget_usd"]) if _ok(c.get("budget_usd")) else "none"
    rows += [("budget" + ("" if tr else " per month"), budget),
             ("GPU types", ", ".join(c.get("gpu_types") or []) or "every catalog GPU with a price"),
             ("max GPUs / interconnect", f"{c.get('max_gpus')} / {c.get('interconnect')}"),
             ("pricing", f"{p.get('mode')}, {_num(p.get('hours_per_day'))} h/day, horizon "
                         f"{_num(p.get('horizon_months'))} months")]  # fmt: skip
    du = s.get("defaults_used") or {}
    return (ch.table(None, [list(r) for r in rows]) + "<h3>Defaults used</h3>"
            + (f'<p class="note">Fields the scenario did not set: {_e(", ".join(f"{k}={v}" for k, v in du.items()))}'
               "</p>" if du else '<p class="note">none: every field was set by the scenario.</p>'))  # fmt: skip


def _cards(o: dict, training: bool) -> str:
    items = [(f"{o['gpus']} × {o['gpu']}", _layout(o.get("layout") or {}))]
    if training:
        items += [(f"{_num(o.get('time_h'))} h", "time"), (format_usd(o.get("cost_usd")), "cost per job"),
                  (format_usd(o.get("cost_per_1m_tokens_usd")), "per 1M tokens"), (_pct(o.get("mfu")), "MFU")]
    else:
        items += [(format_usd(o.get("cost_usd")), "per month"), (format_usd(o.get("cost_per_1m_tokens_usd")),
                   "per 1M output tokens"), (f"{_num((o.get('ttft_s') or math.nan) * 1e3)} ms", "TTFT"),
                  (f"{_num((o.get('tpot_s') or math.nan) * 1e3)} ms", "TPOT"),
                  (_pct(o.get("utilisation")), "utilisation")]  # fmt: skip
    per = "" if training else " / month"
    items += [(f"{_num(o.get('energy_kwh'))} kWh", "energy" + per), (f"{_num(o.get('co2e_kg'))} kg", "CO2e" + per),
              (f"${_num(o.get('price_usd_per_gpu_hour'))}", "per GPU-hour")]
    cards = "".join(f"<div class=\"card\"><b>{_e(a)}</b><span>{_e(b)}</span></div>" for a, b in items)
    return f'<div class="cards">{cards}</div><p class="note">price: {_e(o.get("price_source", DASH))}</p>'


def _option_rows(opts: list[dict], training: bool) -> tuple[list[str], list[list]]:
    if training:
        cols = ["GPU", "GPUs", "layout", "time h", "cost", "$/1M tok", "MFU", "mem GB/GPU", "kWh", "kg CO2e",
                "$/GPU-h"]  # fmt: skip
        rows = [[o["gpu"], o["gpus"], _layout(o["layout"]), _num(o.get("time_h")), format_usd(o.get("cost_usd")),
                 format_usd(o.get("cost_per_1m_tokens_usd")), _pct(o.get("mfu")),
                 f"{_num(o.get('memory_gb_per_gpu'))} / {_num(o.get('gpu_memory_gb'))}", _num(o.get("energy_kwh")),
                 _num(o.get("co2e_kg")), format_usd(o.get("price_usd_per_gpu_hour"))] for o in opts]  # fmt: skip
    else:
        cols = ["GPU", "GPUs", "layout", "$/month", "$/1M out tok", "TTFT ms", "TPOT ms", "util", "kWh/month",
                "$/GPU-h"]  # fmt: skip
        rows = [[o["gpu"], o["gpus"], _layout(o["layout"]), format_usd(o.get("cost_usd")),
                 format_usd(o.get("cost_per_1m_tokens_usd")), _num((o.get("ttft_s") or math.nan) * 1e3),
                 _num((o.get("tpot_s") or math.nan) * 1e3), _pct(o.get("utilisation")), _num(o.get("energy_kwh")),
                 format_usd(o.get("price_usd_per_gpu_hour"))] for o in opts]  # fmt: skip
    return cols, rows


def _data_table(data: dict) -> str:
    """A list of row dicts in an explanation's data (families, rows), as a collapsed table."""
    for key in ("families", "rows"):
        rows = data.get(key)
        if isinstance(rows, list) and rows and isinstance(rows[0], dict):
            cols = list(rows[0])
            body = [[_num(r.get(c)) if _ok(r.get(c)) else DASH if r.get(c) is None else r.get(c) for c in cols]
                    for r in rows]  # fmt: skip
            return f"<details><summary>numbers</summary>{ch.table(cols, body)}</details>"
    return ""


def _charts(result: dict, focus: dict | None, styles: dict[str, tuple[str, str]], training: bool) -> list[str]:
    rec, opts = result.get("recommendation"), result.get("options") or []
    exps = {e.get("topic"): e for e in result.get("explanations") or []}
    out = ["<h2>Charts</h2>"]
    curve = [p for p in result.get("curve") or [] if _ok(p.get("speedup")) and p["speedup"] > 0 and _ok(p.get("gpus"))]
    if training and len(curve) == 1:
        out.append(f'<p class="note">Scaling curve: only one GPU count ({_e(curve[0].get("gpus"))}) has an option, so '
                   "there is no speedup to draw.</p>")
    elif training and curve:
        g = (exps.get("utilisation_curve") or {}).get("data", {}).get("gpu", focus["gpu"] if focus else "")
        dl = " (cheapest that meets the deadline); hollow points miss the deadline" \
            if _ok((result["scenario"].get("constraints") or {}).get("deadline_h")) else ""  # fmt: skip
        out.append(_figure(_curve_chart(curve, g), f"Best layout per GPU count on {g}; the dashed line is "
                           f"linear scaling; the ring marks the economically optimal count{dl}."))  # fmt: skip
    elif training:
        out.append('<p class="note">Scaling curve: no curve in the result (nothing fits).</p>')
    if result.get("all_options"):
        out.append(_figure(_pareto_chart(result, styles, training), "Each point is the best layout of one GPU type "
                           "at one count; outlined points form the Pareto front (nothing both faster and cheaper)."))
    if focus and isinstance(focus.get("memory_breakdown_gb"), dict):
        out.append(_figure(_memory_chart(focus), "Memory per GPU of the " + ("recommendation" if rec else
                           "closest option") + " by component, against the GPU's memory (dashed line)."))
    else:
        out.append('<p class="note">Memory breakdown: not available — inference options report KV-cache capacity '
                   "(max batch per replica) rather than a per-component breakdown.</p>" if not training else
                   '<p class="note">Memory breakdown: no option to show.</p>')  # fmt: skip
    cap = (exps.get("capex_opex") or {}).get("data")
    if cap and cap.get("own_usd") and cap.get("rent_usd"):
        out.append(_figure(_capex_chart(cap), f"Total cost over the horizon of owning (purchase "
                           f"{format_usd(cap.get('purchase_usd_per_gpu'))}/GPU, power, resale) vs renting at "
                           f"{format_usd(cap.get('rent_usd_per_gpu_hour'))}/GPU-hour."))  # fmt: skip
    else:
        own = (result["scenario"].get("pricing") or {}).get("mode") == "own"
        out.append(f'<p class="note">Rent vs buy: not computed for {_e(focus["gpu"] if focus else DASH)} — the '
                   f"catalog has no purchase price{' or no on-demand rent price' if own else ''} (or no TDP) "
                   "for it.</p>")  # fmt: skip
    if len(opts) == 1:
        out.append(f'<p class="note">Radar: one GPU type ({_e(opts[0].get("gpu"))}) has an option; a radar compares '
                   "two or more.</p>")
    elif opts:
        out.append(_figure(_radar_chart(opts, styles, training), "Best option per GPU type. Each axis is "
                           "normalised so that further out is better: cost, " + ("time" if training else "TPOT")
                           + " and energy as best/value (1 = best type); memory as value/best of "
                           + ("the free fraction of GPU memory." if training else "GPU memory capacity.")))
    return out


def _serving_section(result: dict, focus: dict | None) -> list[str]:
    """Inference: the serving simulation of the recommended (or closest) fleet — latency CDF, utilisation and queue
    over time (``serve.report``, from the option's ``serving_charts``) and monthly GPU cost against load (its
    ``gpus_against_load`` at its price and service hours)."""
    from scaleright.serve.report import charts_html, cost_load_chart

    out = ["<h2>Serving simulation</h2>"]
    data = (focus or {}).get("serving_charts")
    if not data:
        why = "no option to show" if not focus else "the option was sized by the steady-state model, not simulated " \
            "(a scenario without inference.ttft_slo_s, or one outside the simulated cheapest options)"  # fmt: skip
        return [*out, f'<p class="note">Serving charts: {_e(why)}.</p>']
    assert focus is not None
    what = "recommendation" if result.get("recommendation") else "closest option"
    out.append(f'<p class="note">The {_e(what)} ({_e(focus.get("gpus"))} × {_e(focus.get("gpu"))}) as simulated: '
               f'{_e(data.get("simulated", ""))} at {_num(focus.get("sized_at_requests_per_s"))} requests/s '
               "(the peak rate with headroom).</p>")  # fmt: skip
    out += charts_html(data)
    price, hours = focus.get("price_usd_per_gpu_hour"), focus.get("service_hours_per_month")
    loads = focus.get("gpus_against_load") or []
    if _ok(price) and _ok(hours) and loads:
        pts = [{"requests_per_s": p["requests_per_s"], "usd_per_month": p["gpus"] * price * hours,
                "gpus": p["gpus"]} for p in loads]  # fmt: skip
        mark = {"requests_per_s": result["scenario"].get("requests_per_s"), "label": "simulated fleet",
                "usd_per_month": focus["gpus"] * price * hours} if _ok(focus.get("gpus")) else None  # fmt: skip
        out.append(_figure(cost_load_chart(pts, y_key="usd_per_month", y_label="GPU cost per month (USD)", mark=mark,
                                           tip_keys=(("gpus", "GPUs"),), steps=True),
                           f"GPUs at each load sized as ⌈peak · (1 + headroom) / replica capacity⌉ replicas of "
                           f"{_num(focus.get('replica_capacity'))} requests/s each, at "
                           f"{format_usd(price)} per GPU-hour for {_num(hours)} h a month; the ring is the simulated "
                           "fleet at the scenario's rate, which multiplexes its load and can sit below the "
                           "step."))  # fmt: skip
    else:
        out.append('<p class="note">Cost against load: the option has no price or service hours.</p>')
    return out


def _best_per_gpu(result: dict, training: bool) -> list[str]:
    rec, opts = result.get("recommendation"), result.get("options") or []
    cols, rows = _option_rows(opts, training)
    recrow = {i for i, o in enumerate(opts) if rec and _key(o) == _key(rec)}
    return ["<h2>Best option per GPU type</h2>", ch.table(cols, rows, recrow) if opts else "<p>none</p>"]


def _summary(result: dict, training: bool) -> str:
    """The answer in one paragraph, read from the result: what to rent or buy, how many, time and cost, what chose
    it (the binding constraint), the cheapest and fastest GPU types, and what would change the decision."""
    rec, inf, opts = result.get("recommendation"), result.get("infeasible") or {}, result.get("options") or []
    s = result["scenario"]
    c, mode = s.get("constraints") or {}, (s.get("pricing") or {}).get("mode", "on-demand")
    t = "time_h" if training else "tpot_s"
    per = "per job" if training else "per month"

    def what(o: dict) -> str:
        return f"{o.get('gpus')} × {o.get('gpu')} ({_layout(o.get('layout') or {})})"

    if rec:
        speed = f"{_num(rec.get(t))} h" if training else f"TPOT {fmt.ms(rec.get(t))} ms"
        kind = rec.get("pricing_kind") or mode  # mode cheapest or hybrid: the kind this option pays with
        hybrid = f"Hybrid (own {rec.get('owned_gpus')}, rent the bursts {rec.get('burst_kind')})"
        verb = "Buy" if kind == "own" else hybrid if kind == "hybrid" else f"Rent ({kind})"
        limits = [f"the {_num(c['deadline_h'])} h deadline" if training and _ok(c.get("deadline_h")) else "",
                  f"the {format_usd(c['budget_usd'])} budget" if _ok(c.get("budget_usd")) else ""]
        limits = [x for x in limits if x]
        why = f"the cheapest option that meets {' and '.join(limits)}" if limits else "the cheapest option"
        if not training:
            why += " that meets the latency SLOs at the stated request rate"
        parts = [f"{verb} <b>{_e(what(rec))}</b>: {_e(speed)}, {_e(format_usd(rec.get('cost_usd')))} {per} at "
                 f"{_e(format_usd(rec.get('price_usd_per_gpu_hour')))} per GPU-hour — {_e(why)}."]
    else:
        parts = [f"<b>No option meets the constraints</b>; binding: {_e(inf.get('binding', DASH))}."
                 + (f" Closest: {_e(what(inf['closest']))}." if inf.get("closest") else "")]
    ranked = [o for o in opts if _ok(o.get("cost_usd")) and _ok(o.get(t))]
    if len(ranked) > 1:
        cheap, fast = min(ranked, key=lambda o: o["cost_usd"]), min(ranked, key=lambda o: o[t])
        fast_s = f"{_num(fast[t])} h" if training else f"{fmt.ms(fast[t])} ms TPOT"
        parts.append(f"Comparing the best option of each of the {len(ranked)} GPU types that fit: the cheapest is "
                     f"{_e(cheap['gpu'])} ({_e(format_usd(cheap['cost_usd']))} {per}), the quickest "
                     f"{_e(fast['gpu'])} ({_e(fast_s)}).")
    change = next((e.get("text") for e in result.get("explanations") or [] if e.get("topic") == "what_would_change"),
                  None)  # fmt: skip
    if change:
        parts.append(f"What would change it: {_e(change)}")
    return f'<p class="summary">{" ".join(parts)}</p>'


def _tables(result: dict, training: bool) -> list[str]:
    par = result.get("pareto") or []
    out = ["<h2>Why</h2>"]
    for e in result.get("explanations") or []:
        out.append(f"<h3>{_e(e.get('title'))}</h3><p>{_e(e.get('text'))}</p>{_data_table(e.get('data') or {})}")
    cols, rows = _option_rows(par, training)
    out += ["<h2>Pareto front</h2>", '<p class="note">Sorted by ' + ("time" if training else "TPOT") + "; each is "
            "cheaper than every faster option.</p>", ch.table(cols, rows) if par else "<p>none</p>"]  # fmt: skip
    srch = result.get("search") or {}
    skipped = srch.get("skipped") or []
    out += ["<h2>Skipped GPU types</h2>",
            ch.table(["GPU", "reason"], [[k.get("gpu"), k.get("reason")] for k in skipped]) if skipped
            else "<p>none</p>",
            f'<p class="note">Searched {_num(srch.get("layouts_evaluated"))} layouts over '
            f'{_e(srch.get("gpu_types", DASH))} GPU types in {_num(srch.get("wall_s"))} s.</p>']  # fmt: skip
    srcs = {o["gpu"]: o.get("price_source") for o in result.get("options") or []}
    out += ["<h2>Price sources</h2>", ch.table(["GPU", "source"], [[g, v or DASH] for g, v in srcs.items()])]
    return out


def _decision(result: dict) -> list[str]:
    """The Deployment Decision Tree (``plan.deployment``): the decision, then each of the seed's branches with the
    number that decides it and what would flip it."""
    d = result.get("deployment_decision")
    if not d:
        return []
    out = ["<h2>Deployment Decision Tree</h2>", f"<p><b>Decision</b>: {_e(d.get('text'))}</p>"]
    rows = [[b.get("branch"), b.get("seed_rule"), "yes" if b.get("applies") else "no", b.get("because"),
             b.get("flips_when")] for b in d.get("branches") or []]  # fmt: skip
    if rows:
        out.append(ch.table(["branch", "seed rule", "applies", "because", "flips when"], rows))
        out.append('<p class="note">Seed: <i>Multi-GPU vs Single-GPU Scaling Economics: The 2026 Guide</i>, '
                   '"Operational decision tree"; hours and months are this scenario\'s break-even, not the '
                   "seed's rules of thumb.</p>")  # fmt: skip
    return out


def render_html(result: dict) -> str:
    """The report for ``PlanResult.as_dict()`` as one HTML string."""
    s, rec, inf = result["scenario"], result.get("recommendation"), result.get("infeasible") or {}
    training = s.get("task") != "inference"
    gpus = [o["gpu"] for o in (result.get("options") or []) + (result.get("all_options") or [])]
    styles = ch.styles(gpus)
    focus = rec or inf.get("closest")
    out = [f"<h1>{_e(s.get('name'))}</h1>",
           f'<p class="note">{_e(s.get("model"))}, {_e(s.get("task"))}: scaleright plan report</p>',
           _summary(result, training), "<h2>Recommendation</h2>"]  # fmt: skip
    if rec:
        out.append(f'<div class="rec">{_cards(rec, training)}</div>')
    else:
        out.append(f'<div class="bad"><p><b>No option meets the constraints.</b> Binding constraint: '
                   f'<b>{_e(inf.get("binding", DASH))}</b>. {_e(inf.get("message", ""))}</p>'
                   + (f"<h3>Closest option</h3>{_cards(focus, training)}" if focus else "") + "</div>")  # fmt: skip
    out += [*_best_per_gpu(result, training), *_decision(result), "<h2>Scenario</h2>", _scenario(s)]
    out += _charts(result, focus, styles, training) + ([] if training else _serving_section(result, focus))
    out += _tables(result, training)
    out.append(f"<footer>scaleright {_e(scaleright.__version__)} · every number comes from the model/catalog; "
               "sources: <code>scaleright catalog ... --json</code></footer>")
    return ch.page(f"{s.get('name')}: scaleright plan", out)


def write_html(result: dict, path: Path) -> None:
    """Write ``render_html(result)`` to ``path`` (UTF-8, atomically); ``InputError`` naming the path if it cannot."""
    from scaleright.textfile import write_atomic

    write_atomic("--html", path, render_html(result))
