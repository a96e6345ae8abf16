"""Charts of a serving simulation, and ``serve simulate --report``'s self-contained HTML page.

The charts are drawn from plain lists (``chart_data``: the JSON form, so the plan report draws the same charts from a
``PlanResult`` dict): the latency CDF of TTFT, TPOT and end-to-end latency; GPU busy share and KV-cache use over
time (with the replica count when it changes); requests waiting and in the system over time; cost against load.
Every number shown comes from the simulation; only scales are computed here. A chart with fewer than two points is
replaced by a sentence saying so. SVG primitives, palette and number formats: ``scaleright.charts`` and
``scaleright.fmt``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

import scaleright
from scaleright import charts as ch
from scaleright import fmt
from scaleright.charts import X0, X1, Y0, Y1

__all__ = ["MAX_CHART_POINTS", "chart_data", "cost_load_chart", "latency_cdf_chart", "queue_chart", "render_html",
           "render_fleet_html", "replicas_chart", "timeline_chart", "write_report"]

MAX_CHART_POINTS = 120  # intervals per time-series chart (neighbours merged, weighted by duration)
_LAT = (("TTFT", "ttft_ms"), ("TPOT", "tpot_ms"), ("end-to-end", "e2e_ms"))


def _merge(series: dict[str, np.ndarray], most: int) -> dict[str, np.ndarray]:
    """Time-weighted means over runs of neighbouring intervals, at most ``most`` intervals."""
    n = len(series["start_s"])
    if n <= most:
        return series
    k = math.ceil(n / most)
    w = series["end_s"] - series["start_s"]
    idx = np.arange(0, n, k)
    ws = np.add.reduceat(w, idx)
    out = {"start_s": series["start_s"][idx], "end_s": series["end_s"][np.minimum(idx + k, n) - 1]}
    for key, v in series.items():
        if key not in out:
            out[key] = np.add.reduceat(np.nan_to_num(v) * w, idx) / np.where(ws > 0, ws, np.nan)
    return out


def chart_data(res, *, most: int = MAX_CHART_POINTS) -> dict[str, Any]:
    """The JSON form of a ``SimulationResult``'s charts: its timeline (at most ``most`` intervals) and its latency
    quantiles at ``metrics.CDF_PROBABILITIES``."""
    from scaleright.serve.metrics import CDF_PROBABILITIES, quantile_curve

    tl = _merge({k: np.asarray(v, dtype=float) for k, v in res.timeline.items()}, most) if res.timeline else {}
    rec = res.records
    return {
        "timeline": {k: [float(x) for x in v] for k, v in tl.items()},
        "latency_cdf": {"p": list(CDF_PROBABILITIES),
                        **{key: quantile_curve(rec.get(key[:-3] + "_s", [])) for _, key in _LAT}},
    }  # fmt: skip


def _ms(v: float) -> str:
    return f"{fmt.number(v)} ms"


def _note(text: str) -> str:
    return f'<p class="note">{ch.esc(text)}</p>'


def latency_cdf_chart(cdf: dict[str, list[float]]) -> str:
    """Cumulative share of requests against latency (log scale), one line per latency."""
    p = cdf.get("p") or []
    series = [(name, [(x, q) for x, q in zip(cdf.get(key) or [], p, strict=False) if fmt.is_number(x) and x > 0])
              for name, key in _LAT]  # fmt: skip
    series = [(n, pts) for n, pts in series if len({x for x, _ in pts}) >= 2]
    if not series:
        return _note("Latency CDF: fewer than two distinct latencies in the run; nothing to draw.")
    xs = [x for _, pts in series for x, _ in pts]
    xlo, xhi = ch.span(xs, 10)
    sx, sy = ch.scale(xlo, xhi, X0, X1, 10), ch.scale(0, 1, Y0, Y1)
    out = ch.axes(sx, sy, ch.ticks(xlo, xhi, 10), [0, 0.25, 0.5, 0.75, 1.0], "latency (ms, log)",
                  "share of requests at or below", yfmt=fmt.percent)  # fmt: skip
    sty = ch.styles([n for n, _ in series])
    for name, pts in series:
        col, shape = sty[name]
        out.append(ch.path([(sx(x), sy(q)) for x, q in pts], col, 2))
        for x, q in pts:
            if round(q * 1000) in (500, 900, 990):  # markers at p50, p90, p99 carry their numbers
                out.append(ch.dot(sx(x), sy(q), col, 4, shape=shape, tip=f"{name} p{q * 100:g}: {_ms(x)}"))
    out += ch.legend([(n, sty[n][0], "line") for n, _ in series])
    return ch.svg("Latency CDF: TTFT, TPOT and end-to-end latency of every request", out)


def _time_axis(tl: dict[str, list[float]]):
    t0, t1 = tl["start_s"][0], tl["end_s"][-1]
    mids = [(a + b) / 2 for a, b in zip(tl["start_s"], tl["end_s"], strict=True)]
    return ch.scale(t0, t1, X0, X1), ch.ticks(t0, t1), mids


def timeline_chart(tl: dict[str, list[float]]) -> str:
    """GPU busy share and KV-cache use over time; the replica count on a right axis when it changes."""
    if len(tl.get("start_s") or []) < 2:
        return _note("Utilisation over time: the run is shorter than two sampling intervals; nothing to draw.")
    sx, xt, mids = _time_axis(tl)
    sy = ch.scale(0, 1.05, Y0, Y1)
    out = ch.axes(sx, sy, xt, [0, 0.25, 0.5, 0.75, 1.0], "simulated time (s)", "share", yfmt=fmt.percent)
    sty = ch.styles(["GPU busy", "KV cache used", "replicas"])
    for name, key in (("GPU busy", "gpu_busy"), ("KV cache used", "kv_used")):
        col, shape = sty[name]
        pts = [(m, v) for m, v in zip(mids, tl[key], strict=True) if fmt.is_number(v)]
        out.append(ch.path([(sx(m), sy(min(v, 1.05))) for m, v in pts], col, 2))
        out += [ch.dot(sx(m), sy(min(v, 1.05)), col, 2.5, shape=shape, tip=f"{name} at {fmt.number(m)} s: "
                       f"{fmt.percent(v)}") for m, v in pts]  # fmt: skip
    items = [("GPU busy", sty["GPU busy"][0], "line"), ("KV cache used", sty["KV cache used"][0], "line")]
    reps = tl.get("replicas") or []
    if len(set(reps)) > 1:
        col = sty["replicas"][0]
        sr = ch.scale(0, max(reps) * 1.05, Y0, Y1)
        for v in ch.ticks(0, max(reps)):
            out += [ch.line(X1, sr(v), X1 + 4, sr(v)), ch.text(X1 + 7, sr(v) + 4, fmt.number(v), "start", fill=col)]
        out.append(ch.path([(sx(m), sr(r)) for m, r in zip(mids, reps, strict=True)], col, 2, "5 3"))
        out += [ch.dot(sx(m), sr(r), col, 2.5, shape=sty["replicas"][1], tip=f"{fmt.number(r)} replicas at "
                       f"{fmt.number(m)} s") for m, r in zip(mids, reps, strict=True)]  # fmt: skip
        items.append(("replicas (right)", col, "dash"))
    out += ch.legend(items, x=X1 + 40 if len(items) > 2 else X1 + 14)
    return ch.svg("GPU busy share and KV-cache use over time" + (", with the replica count" if len(items) > 2
                                                                    else ""), out)  # fmt: skip


def queue_chart(tl: dict[str, list[float]]) -> str:
    """Requests waiting for a batch slot, and in the system (waiting or running), over time."""
    if len(tl.get("start_s") or []) < 2:
        return _note("Queue length over time: the run is shorter than two sampling intervals; nothing to draw.")
    sx, xt, mids = _time_axis(tl)
    _, yhi = ch.span(list(tl["queue"]) + list(tl["in_system"]), zero=True)
    sy = ch.scale(0, yhi, Y0, Y1)
    out = ch.axes(sx, sy, xt, ch.ticks(0, yhi), "simulated time (s)", "requests (time average per interval)")
    sty = ch.styles(["waiting", "in system"])
    for name, key in (("waiting", "queue"), ("in system", "in_system")):
        col, shape = sty[name]
        pts = [(m, v) for m, v in zip(mids, tl[key], strict=True) if fmt.is_number(v)]
        out.append(ch.path([(sx(m), sy(v)) for m, v in pts], col, 2))
        out += [ch.dot(sx(m), sy(v), col, 2.5, shape=shape, tip=f"{name} at {fmt.number(m)} s: {fmt.number(v)}")
                for m, v in pts]  # fmt: skip
    out += ch.legend([(n, sty[n][0], "line") for n in ("waiting", "in system")])
    return ch.svg("Requests waiting and in the system over time (all replicas)", out)


def cost_load_chart(points: list[dict], *, y_key: str, y_label: str, mark: dict | None = None,
                    tip_keys: tuple[tuple[str, str], ...] = (), steps: bool = False) -> str:  # fmt: skip
    """Cost (``y_key`` of each point, USD) against offered load (``requests_per_s``); ``mark`` rings one point
    (e.g. the simulated run or the recommended fleet). ``tip_keys``: (key, label) shown in each point's hover.
    ``steps``: each point's cost holds from the previous point's load (0 for the first) up to its own — a whole
    number of replicas carries every load up to its capacity — drawn as a staircase."""
    pts = [p for p in points if fmt.is_number(p.get("requests_per_s")) and fmt.is_number(p.get(y_key))]
    if len(pts) < 2:
        return _note("Cost against load: fewer than two loads were simulated; nothing to draw.")
    pts.sort(key=lambda p: p["requests_per_s"])
    xs, ys = [p["requests_per_s"] for p in pts], [p[y_key] for p in pts]
    xhi, yhi = ch.span(xs, zero=True)[1], ch.span(ys, zero=True)[1]
    sx, sy = ch.scale(0, xhi, X0, X1), ch.scale(0, yhi, Y0, Y1)
    out = ch.axes(sx, sy, ch.ticks(0, xhi), ch.ticks(0, yhi), "offered load (requests/s)", y_label,
                  yfmt=ch.usd_tick)  # fmt: skip
    col, shape = ch.PALETTE[0], "circle"
    line = [pt for i, (x, y) in enumerate(zip(xs, ys, strict=True))
            for pt in ([(xs[i - 1] if i else 0.0, y), (x, y)] if steps else [(x, y)])]  # fmt: skip
    out.append(ch.path([(sx(x), sy(y)) for x, y in line], col, 2))
    for p in pts:
        extra = "".join(f", {label} {fmt.number(p[k])}" for k, label in tip_keys if fmt.is_number(p.get(k)))
        out.append(ch.dot(sx(p["requests_per_s"]), sy(p[y_key]), col, 4, shape=shape,
                          tip=f"{fmt.number(p['requests_per_s'])} req/s: {fmt.usd(p[y_key])}{extra}"))  # fmt: skip
    items = [("cost", col, "line")]
    if mark and fmt.is_number(mark.get("requests_per_s")) and fmt.is_number(mark.get(y_key)):
        out.append(ch.dot(sx(mark["requests_per_s"]), sy(mark[y_key]), "none", 9, ch.PALETTE[2],
                          tip=f"{mark.get('label', 'this run')}: {fmt.usd(mark[y_key])}"))  # fmt: skip
        items.append((mark.get("label", "this run"), ch.PALETTE[2], "ring"))
    out += ch.legend(items)
    return ch.svg(f"{y_label} against offered load", out)


def _figure(svg: str, caption: str) -> str:
    return svg if svg.startswith("<p") else f"<figure>{svg}<figcaption>{ch.esc(caption)}</figcaption></figure>"


def charts_html(data: dict[str, Any], *, sweep: list[dict] | None = None, sweep_note: str = "") -> list[str]:
    """The charts of one simulation (``chart_data``) as HTML figures; ``sweep``: cost-against-load points."""
    tl, cdf = data.get("timeline") or {}, data.get("latency_cdf") or {}
    reps = tl.get("replicas") or []
    fixed = f" {fmt.number(reps[0])} replica(s) throughout." if reps and len(set(reps)) == 1 else ""
    out = [_figure(latency_cdf_chart(cdf), "Share of requests whose latency is at or below x; markers at p50, p90 "
                   "and p99 (hover for the value). TTFT includes the engine profile's frontend latency."),
           _figure(timeline_chart(tl), "Per sampling interval: share of the time an iteration ran (mean over the "
                   "replicas) and share of the KV-cache blocks in use." + fixed),
           _figure(queue_chart(tl), "Per sampling interval: requests queued for a batch slot, and all requests in "
                   "the system (queued or running), summed over the replicas.")]  # fmt: skip
    if sweep is not None:
        out.append(_figure(cost_load_chart(sweep, y_key="usd_per_1m_output_tokens",
                                           y_label="USD per 1M output tokens",
                                           mark=next((p | {"label": "--rate"} for p in sweep if p.get("this_run")),
                                                     None),
                                           tip_keys=(("ttft_p99_ms", "p99 TTFT ms"),
                                                     ("gpu_utilisation", "GPU busy share"))),
                           "The same fleet simulated at other loads (same seed and lengths): cost per 1M output "
                           "tokens falls with load until throughput saturates; the ring is the run's --rate "
                           "(each point a run of at most 1,000 requests)."))  # fmt: skip
    elif sweep_note:
        out.append(_note(sweep_note))
    return out


def render_html(res, *, title: str, sweep: list[dict] | None = None, sweep_note: str = "") -> str:
    """``serve simulate --report``: the run's numbers and its charts as one self-contained HTML page."""
    rows = [[name, *(fmt.number(d[k]) for k in ("mean", "p50", "p90", "p99"))]
            for name, d in (("TTFT (ms)", res.ttft_ms), ("TPOT (ms)", res.tpot_ms), ("ITL (ms)", res.itl_ms),
                            ("end-to-end (ms)", res.e2e_ms))]  # fmt: skip
    cards = [(fmt.number(res.requests_per_s), "requests/s"), (fmt.number(res.output_tokens_per_s), "output tokens/s"),
             (fmt.percent(res.gpu_utilisation), "GPU busy"), (fmt.percent(res.kv_utilisation), "KV cache used"),
             (fmt.number(res.mean_queue_length), "mean queue"), (fmt.number(res.preemptions), "preemptions"),
             (fmt.usd(res.usd_per_1m_output_tokens), "per 1M output tokens")]  # fmt: skip
    card_html = "".join(f'<div class="card"><b>{ch.esc(a)}</b><span>{ch.esc(b)}</span></div>' for a, b in cards)
    body = [f"<h1>{ch.esc(title)}</h1>",
            f'<p class="note">scaleright serve simulate: {fmt.number(res.requests)} requests on '
            f"{fmt.number(res.replicas)} replica(s), {ch.esc(res.engine)} profile, over "
            f"{fmt.number(res.duration_s)} s simulated</p>",
            f'<div class="cards">{card_html}</div>', "<h2>Latency</h2>",
            ch.table(["latency", "mean", "p50", "p90", "p99"], rows), "<h2>Charts</h2>",
            *charts_html(chart_data(res), sweep=sweep, sweep_note=sweep_note),
            f"<footer>scaleright {ch.esc(scaleright.__version__)} · every number comes from the simulation "
            "(<code>serve simulate --json</code> prints them)</footer>"]  # fmt: skip
    return ch.page(f"{title}: scaleright serve", body)


def replicas_chart(pools: dict[str, list[list[float]]], end_s: float) -> str:
    """Replicas serving (solid) and billed (dashed: serving plus cold-starting) per pool over time, as steps from
    each pool's change points ``[time, serving, billed]`` to ``end_s``."""
    pools = {k: v for k, v in pools.items() if v}
    if not pools or not end_s > 0:
        return _note("Replicas over time: the run has no span; nothing to draw.")
    top = max(max(b for _, _, b in v) for v in pools.values()) or 1
    sx, sy = ch.scale(0, end_s, X0, X1), ch.scale(0, top * 1.1, Y0, Y1)
    out = ch.axes(sx, sy, ch.ticks(0, end_s), [t for t in ch.ticks(0, top * 1.1) if t == int(t)],
                  "simulated time (s)", "replicas")  # fmt: skip
    sty = ch.styles(list(pools))
    items = []
    for name, pts in pools.items():
        col, shape = sty[name]
        for j, dash in ((1, ""), (2, "5 3")):
            line = [(sx(t), sy(p[j])) for i, p in enumerate(pts) for t in ((p[0], pts[i + 1][0]) if i + 1 < len(pts)
                    else (p[0], end_s))]  # fmt: skip
            out.append(ch.path(line, col, 2 if not dash else 1.5, dash))
        out += [ch.dot(sx(t), sy(n), col, 3, shape=shape, tip=f"{name} at {fmt.number(t)} s: {fmt.number(n)} "
                       f"serving, {fmt.number(b)} billed") for t, n, b in pts[1:]]  # fmt: skip
        items += [(f"{name} serving", col, "line"), (f"{name} billed", col, "dash")]
    out += ch.legend(items)
    return ch.svg("Replicas serving and billed per pool over time", out)


def render_fleet_html(res, *, title: str) -> str:
    """``serve simulate --fleet FILE --report``: per service its latency CDF, per pool its replicas over time and
    its cost, as one self-contained HTML page."""
    from scaleright.serve.metrics import CDF_PROBABILITIES, quantile_curve

    rec = res.records
    names = rec.get("service_names") or list(res.services)
    body = [f"<h1>{ch.esc(title)}</h1>",
            f'<p class="note">scaleright serve simulate --fleet: {len(res.services)} service(s) on '
            f"{len(res.pools)} pool(s) over {fmt.number(res.duration_s)} s simulated</p>", "<h2>Services</h2>",
            ch.table(["service", "requests", "TTFT p50 ms", "TTFT p99 ms", "TPOT p99 ms", "e2e p99 ms",
                      "goodput req/s"],
                     [[n, s["requests"], fmt.number(s["ttft_ms"]["p50"]), fmt.number(s["ttft_ms"]["p99"]),
                       fmt.number(s["tpot_ms"]["p99"]), fmt.number(s["e2e_ms"]["p99"]),
                       fmt.number(s["goodput_requests_per_s"])] for n, s in res.services.items()]),
            "<h2>Pools</h2>",
            ch.table(["pool", "GPUs/replica", "peak replicas", "mean replicas", "GPU busy share",
                      "USD per-second billing", "USD always-on", "USD idle"],
                     [[n, p["gpus_per_replica"], p["peak_replicas"], fmt.number(p["mean_replicas"]),
                       fmt.percent(p["gpu_utilisation"]), fmt.usd(p.get("usd_per_second_billing")),
                       fmt.usd(p.get("usd_always_on")), fmt.usd(p.get("idle_usd"))] for n, p in res.pools.items()]),
            "<h2>Charts</h2>",
            _figure(replicas_chart({n: p["replicas_over_time"] for n, p in res.pools.items()},
                                   float(np.nanmax(rec["finish_s"])) if np.isfinite(rec["finish_s"]).any()
                                   else 0.0),
                    "Each pool's replicas over time: serving (solid) and billed (dashed, cold starts included); "
                    "hover a change for its counts.")]  # fmt: skip
    arr, first, fin, out = rec["arrival_s"], rec["first_token_s"], rec["finish_s"], rec["output_tokens"]
    for k, name in enumerate(names):
        sel = (rec["service"] == k) & np.isfinite(fin)
        multi = sel & (out > 1)
        cdf = {"p": list(CDF_PROBABILITIES), "ttft_ms": quantile_curve((first - arr)[sel]),
               "tpot_ms": quantile_curve(((fin - first) / np.maximum(out - 1, 1))[multi]),
               "e2e_ms": quantile_curve((fin - arr)[sel])}  # fmt: skip
        body.append(f"<h3>{ch.esc(name)}</h3>")
        body.append(_figure(latency_cdf_chart(cdf), f"Latency CDF of service {name}: TTFT and end-to-end from each "
                            "request's first arrival (an escalated request pays every tier it passes)."))
    body.append(f"<footer>scaleright {ch.esc(scaleright.__version__)} · every number comes from the simulation "
                "(<code>serve simulate --fleet FILE --json</code> prints them)</footer>")
    return ch.page(f"{title}: scaleright serve", body)


def write_report(path: Path, html: str) -> None:
    """Write the page atomically; ``InputError`` naming ``--report`` if it cannot."""
    from scaleright.textfile import write_atomic

    write_atomic("--report", path, html)
