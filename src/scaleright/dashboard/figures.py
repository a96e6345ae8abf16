"""Plotly figures (as JSON-ready dicts) of a plan result, for the dashboard's browser-side charts.

Input is ``PlanResult.as_dict()``, the same object ``scaleright plan --json`` prints and the HTML report draws; every
number in a figure is read from it (nothing is recomputed here). Colours and marker shapes per GPU type are
``scaleright.charts.styles``, so a GPU looks the same in the report and the dashboard. Every point carries hover text
with its numbers.
"""

from __future__ import annotations

from typing import Any

from scaleright import charts, fmt
from scaleright.estimate.layout import layout_text

__all__ = ["plan_figures"]

_SYMBOL = {"circle": "circle", "square": "square", "triangle": "triangle-up", "diamond": "diamond"}
_LAYOUT: dict[str, Any] = {"margin": {"l": 70, "r": 20, "t": 40, "b": 60}, "height": 380,
                           "font": {"family": "system-ui, sans-serif", "size": 12}, "hovermode": "closest"}  # fmt: skip
MEMORY_PARTS = ("weights", "gradients", "optimizer", "gathered", "activations", "kv_cache", "overhead")


def _tip(o: dict, training: bool) -> str:
    head = f"{o.get('gpus')} × {o.get('gpu')} ({layout_text(o.get('layout') or {})})"
    if training:
        return (f"{head}<br>{fmt.number(o.get('time_h'))} h, {fmt.usd(o.get('cost_usd'))} per job<br>"
                f"MFU {fmt.percent(o.get('mfu'))}, {fmt.number(o.get('memory_gb_per_gpu'))} GB/GPU")
    return (f"{head}<br>TPOT {fmt.ms(o.get('tpot_s'))} ms, TTFT {fmt.ms(o.get('ttft_s'))} ms<br>"
            f"{fmt.usd(o.get('cost_usd'))} per month, utilisation {fmt.percent(o.get('utilisation'))}")


def _pareto(res: dict, training: bool, styles: dict[str, tuple[str, str]]) -> dict | None:
    xk, mul = ("time_h", 1.0) if training else ("tpot_s", 1e3)
    opts = [o for o in res.get("all_options") or [] if fmt.is_number(o.get(xk)) and fmt.is_number(o.get("cost_usd"))
            and o[xk] > 0 and o["cost_usd"] > 0]  # fmt: skip
    if not opts:
        return None
    traces: list[dict] = []
    for gpu in dict.fromkeys(o["gpu"] for o in opts):
        mine = [o for o in opts if o["gpu"] == gpu]
        col, shape = styles[gpu]
        traces.append({"type": "scatter", "mode": "markers", "name": gpu, "x": [o[xk] * mul for o in mine],
                       "y": [o["cost_usd"] for o in mine], "text": [_tip(o, training) for o in mine],
                       "hovertemplate": "%{text}<extra></extra>",
                       "marker": {"color": col, "symbol": _SYMBOL[shape], "size": 9}})  # fmt: skip
    front = sorted((o[xk] * mul, o["cost_usd"], _tip(o, training)) for o in res.get("pareto") or []
                   if fmt.is_number(o.get(xk)) and fmt.is_number(o.get("cost_usd")))  # fmt: skip
    if front:
        traces.append({"type": "scatter", "mode": "lines", "name": "Pareto front", "x": [p[0] for p in front],
                       "y": [p[1] for p in front], "line": {"color": "#222", "width": 1.5}, "hoverinfo": "skip"})
    rec = res.get("recommendation")
    if rec and fmt.is_number(rec.get(xk)) and fmt.is_number(rec.get("cost_usd")):
        traces.append({"type": "scatter", "mode": "markers", "name": "recommended", "x": [rec[xk] * mul],
                       "y": [rec["cost_usd"]], "text": [_tip(rec, training)], "hovertemplate": "%{text}<extra></extra>",
                       "marker": {"color": "rgba(0,0,0,0)", "size": 20, "line": {"color": "#009E73", "width": 3}}})
    return {"id": "pareto", "title": "Cost against " + ("training time" if training else "time per output token"),
            "data": traces,
            "layout": _LAYOUT | {
                "xaxis": {"type": "log", "title": {"text": "time to train (h)" if training else "TPOT (ms)"}},
                "yaxis": {"type": "log",
                          "title": {"text": "cost per job (USD)" if training else "cost per month (USD)"}},
            }}  # fmt: skip


def _curve(res: dict) -> dict | None:
    pts = [p for p in res.get("curve") or [] if fmt.is_number(p.get("gpus")) and fmt.is_number(p.get("speedup"))]
    if len(pts) < 2:  # one point is no curve
        return None
    n0 = pts[0]["gpus"]
    eff = [p for p in pts if fmt.is_number(p.get("scaling_efficiency"))]
    tips = [f"{p['gpus']} GPUs: speedup {fmt.number(p['speedup'])}×, efficiency "
            f"{fmt.percent(p.get('scaling_efficiency'))}, {fmt.usd(p.get('cost_usd'))} per job" for p in pts]
    return {"id": "curve", "title": "Utilisation Efficiency Curve", "data": [
        {"type": "scatter", "mode": "lines+markers", "name": "speedup", "x": [p["gpus"] for p in pts],
         "y": [p["speedup"] for p in pts], "text": tips, "hovertemplate": "%{text}<extra></extra>",
         "marker": {"color": charts.PALETTE[0]}},
        {"type": "scatter", "mode": "lines", "name": "ideal (linear)", "x": [p["gpus"] for p in pts],
         "y": [p["gpus"] / n0 for p in pts], "line": {"dash": "dash", "color": "#888"}, "hoverinfo": "skip"},
        {"type": "scatter", "mode": "lines+markers", "name": "scaling efficiency", "yaxis": "y2",
         "x": [p["gpus"] for p in eff], "y": [p["scaling_efficiency"] for p in eff],
         "line": {"dash": "dot", "color": charts.PALETTE[1]}, "hovertemplate": "%{y:.0%}<extra>efficiency</extra>"},
    ], "layout": _LAYOUT | {
        "xaxis": {"type": "log", "title": {"text": "GPUs"}}, "yaxis": {"type": "log", "title": {"text": "speedup (×)"}},
        "yaxis2": {"overlaying": "y", "side": "right", "title": {"text": "efficiency"}, "tickformat": ".0%",
                   "rangemode": "tozero"},
    }}  # fmt: skip


def _memory(opt: dict | None) -> dict | None:
    parts = (opt or {}).get("memory_breakdown_gb")
    if not isinstance(parts, dict):
        return None
    keys = [k for k in (*MEMORY_PARTS, *parts) if fmt.is_number(parts.get(k)) and parts[k] > 0]
    keys = list(dict.fromkeys(keys))
    cap = (opt or {}).get("gpu_memory_gb")
    traces = [{"type": "bar", "orientation": "h", "name": k, "y": ["per GPU"], "x": [parts[k]],
               "marker": {"color": charts.PALETTE[i % len(charts.PALETTE)]},
               "hovertemplate": f"{k}: %{{x:.3g}} GB<extra></extra>"} for i, k in enumerate(keys)]  # fmt: skip
    dashed = {"color": "#D55E00", "dash": "dash"}
    shapes = [{"type": "line", "x0": cap, "x1": cap, "y0": -0.5, "y1": 0.5, "line": dashed}] if fmt.is_number(
        cap) else []
    return {"id": "memory", "title": f"Memory per GPU: {opt.get('gpus')} × {opt.get('gpu')}"  # type: ignore[union-attr]
            + (f" (GPU has {fmt.number(cap)} GB, dashed)" if fmt.is_number(cap) else ""),
            "data": traces, "layout": _LAYOUT | {"barmode": "stack", "height": 220, "shapes": shapes,
                                                 "xaxis": {"title": {"text": "GB per GPU"}}}}  # fmt: skip


def _capex(res: dict) -> dict | None:
    cap = next((e.get("data") for e in res.get("explanations") or [] if e.get("topic") == "capex_opex"), None)
    if not cap or not cap.get("own_usd") or not cap.get("rent_usd"):
        return None
    hrs = cap.get("hours_per_day") or []
    traces = [{"type": "scatter", "mode": "lines", "name": name, "x": hrs, "y": cap[key],
               "line": {"color": col}, "hovertemplate": "%{x:g} h/day: $%{y:,.0f}<extra>" + name + "</extra>"}
              for name, key, col in (("own (TCO)", "own_usd", "#009E73"), ("rent", "rent_usd", "#0072B2"))]
    be = cap.get("break_even_hours_per_day")
    shapes = ([{"type": "line", "x0": be, "x1": be, "yref": "paper", "y0": 0, "y1": 1,
                "line": {"color": "#D55E00", "dash": "dash"}}] if fmt.is_number(be) and 0 < be <= 24 else [])
    return {"id": "capex", "title": f"Own vs rent {cap.get('gpus')} × {cap.get('gpu')}"
            + (f" (break-even {be:.1f} h/day, dashed)" if shapes else ""),
            "data": traces, "layout": _LAYOUT | {
                "shapes": shapes, "xaxis": {"title": {"text": "hours of use per day"}},
                "yaxis": {"title": {"text": f"cost over {cap.get('horizon_months')} months (USD)"}}}}


def plan_figures(res: dict) -> list[dict]:
    """The dashboard's charts for one plan result (Pareto front, Utilisation Efficiency Curve, memory bars, rent vs
    buy), each ``{"id", "title", "data", "layout"}``; a chart the result has no data for is left out."""
    training = (res.get("scenario") or {}).get("task") != "inference"
    gpus = [o["gpu"] for o in (res.get("options") or []) + (res.get("all_options") or [])]
    styles = charts.styles(gpus)
    focus = res.get("recommendation") or (res.get("infeasible") or {}).get("closest")
    figs = [_pareto(res, training, styles), _curve(res) if training else None, _memory(focus), _capex(res)]
    return [f for f in figs if f is not None]
