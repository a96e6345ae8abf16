"""Scaling report from stored train runs: speedup, efficiency and cost per job against world size.

Runs are grouped by everything but the world size: hardware fingerprint, model dims, strategy, precision,
activation checkpointing, micro batch and device type. Within a group, repeated runs at one world size are combined
by their median tokens/s. Formulas in ``bench/scaling.py`` (seed guide: efficiency = speedup / N; cost = N x price x
time). Output as rows (``--json``), a rich table, or a self-contained HTML page with an inline SVG chart of speedup
against world size next to the ideal line (no scripts, no external resources).
"""

from __future__ import annotations

import html
import json
import math
from collections import defaultdict
from typing import Any

import numpy as np

from scaleright.bench.scaling import job_cost_usd, job_time_h, scaling_curve
from scaleright.errors import InputError

__all__ = ["scaling_report", "render_table", "render_html", "group_label", "run_problem"]

_GROUP_LAYOUT = ("strategy", "precision", "activation_checkpointing", "micro_batch", "device_type")
_GROUP_MODEL = ("layers", "hidden", "heads", "vocab", "seq_len")


def _group_key(run: dict) -> str:
    key = {"fingerprint": run["fingerprint"], **{k: run["model"].get(k) for k in _GROUP_MODEL},
           **{k: run["layout"].get(k) for k in _GROUP_LAYOUT}}
    return json.dumps(key, sort_keys=True)


def group_label(group: dict) -> str:
    """Short human label of a group."""
    k = group["key"]
    ac = " +AC" if k["activation_checkpointing"] else ""
    return (f"L{k['layers']} h{k['hidden']} nh{k['heads']} V{k['vocab']} T{k['seq_len']} | {k['strategy']} "
            f"{k['precision']}{ac} mb{k['micro_batch']} | {k['device_type']} {k['fingerprint']}")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _peak(runs: list[dict]) -> float | None:
    """Largest peak memory of repeated runs (None when no run recorded a number)."""
    values = [v for r in runs if _number(v := r["metrics"].get("peak_memory_gb"))]
    return max(values) if values else None


def run_problem(run: dict) -> str | None:
    """Why a stored ok train run cannot enter the report (a field missing or out of range); None when it can."""
    if not all(isinstance(run.get(k), dict) for k in ("model", "layout", "metrics")):
        return "has no model, layout or metrics object"
    lay, met = run["layout"], run["metrics"]
    ws = lay.get("world_size")
    if isinstance(ws, bool) or not isinstance(ws, int) or ws < 1:
        return f"layout.world_size={ws!r} is not a positive integer"
    for key in ("tokens_per_s", "step_time_s_median"):
        v = met.get(key)
        if not (_number(v) and math.isfinite(v) and v > 0):
            return f"metrics.{key}={v!r} is not a finite positive number"
    return None


def scaling_report(runs: list[dict], *, price_usd_per_gpu_hour: float | None = None,
                   job_tokens: float = 1e9, skipped: list[str] | None = None) -> list[dict[str, Any]]:
    """Groups of ``{"key", "rows": [{world_size, runs, run_ids, tokens_per_s, step_time_s_median, speedup,
    scaling_efficiency, job_time_h, job_cost_usd}]}`` from ok train runs.

    An ok train run with a missing or out-of-range field raises ``InputError`` naming the run and the field, unless
    ``skipped`` is a list: then the run is left out and that message appended to it."""
    groups: dict[str, dict[int, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        if run["kind"] == "train" and run["status"] == "ok":
            why = run_problem(run)
            if why is not None:
                message = f"run {run.get('id')}: {why}; not in the report"
                if skipped is None:
                    raise InputError(message)
                skipped.append(message)
                continue
            groups[_group_key(run)][run["layout"]["world_size"]].append(run)
    out = []
    for key, by_n in sorted(groups.items()):
        tps = {n: float(np.median([r["metrics"]["tokens_per_s"] for r in rs])) for n, rs in by_n.items()}
        curve = scaling_curve(tps)
        rows = []
        for n in sorted(by_n):
            hours = job_time_h(job_tokens=job_tokens, tokens_per_s=tps[n])
            cost = None if price_usd_per_gpu_hour is None else job_cost_usd(
                world_size=n, price_usd_per_gpu_hour=price_usd_per_gpu_hour, job_time_h=hours)
            rows.append({"world_size": n, "runs": len(by_n[n]), "run_ids": [r["id"] for r in by_n[n]],
                         "tokens_per_s": tps[n],
                         "step_time_s_median": float(np.median([r["metrics"]["step_time_s_median"] for r in by_n[n]])),
                         "peak_memory_gb": _peak(by_n[n]),
                         **curve[n], "job_time_h": hours, "job_cost_usd": cost})
        out.append({"key": json.loads(key), "job_tokens": job_tokens,
                    "price_usd_per_gpu_hour": price_usd_per_gpu_hour, "rows": rows})
    return out


def render_table(groups: list[dict]):
    """A ``rich`` renderable: one table per group."""
    from rich.console import Group
    from rich.table import Table

    tables = []
    for g in groups:
        price = g["price_usd_per_gpu_hour"]
        title = f"{group_label(g)}\njob = {g['job_tokens']:.3g} tokens" + (f", ${price}/GPU-h" if price else "")
        t = Table(title=title, title_justify="left")
        for col in ("N ranks", "runs", "tokens/s", "step s", "speedup", "eff.", "job h", "job USD"):
            t.add_column(col, justify="right")
        for r in g["rows"]:
            cost = "-" if r["job_cost_usd"] is None else f"{r['job_cost_usd']:,.2f}"
            t.add_row(str(r["world_size"]), str(r["runs"]), f"{r['tokens_per_s']:,.0f}",
                      f"{r['step_time_s_median']:.4g}", f"{r['speedup']:.2f}x", f"{r['scaling_efficiency']:.0%}",
                      f"{r['job_time_h']:,.2f}", cost)
        tables.append(t)
    return Group(*tables)


_W, _H, _PAD = 560, 340, 50
_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


def _svg(groups: list[dict]) -> str:
    """Speedup vs world size per group, plus the ideal line speedup = N / N_base."""
    pts = [(r["world_size"], r["speedup"]) for g in groups for r in g["rows"]]
    xmax = max([p[0] for p in pts] + [2])
    ymax = max([p[1] for p in pts] + [xmax])

    def x(v: float) -> float:
        return _PAD + (v - 1) / (xmax - 1) * (_W - 2 * _PAD)

    def y(v: float) -> float:
        return _H - _PAD - v / ymax * (_H - 2 * _PAD)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" role="img" '
             f'aria-label="speedup against world size">',
             f'<line x1="{_PAD}" y1="{y(0)}" x2="{_W - _PAD}" y2="{y(0)}" stroke="#444"/>',
             f'<line x1="{_PAD}" y1="{y(0)}" x2="{_PAD}" y2="{_PAD}" stroke="#444"/>',
             f'<text x="{_W / 2}" y="{_H - 10}" text-anchor="middle">world size (GPUs / ranks)</text>',
             f'<text x="14" y="{_H / 2}" transform="rotate(-90 14 {_H / 2})" text-anchor="middle">speedup</text>',
             f'<polyline points="{x(1)},{y(1)} {x(xmax)},{y(xmax)}" fill="none" stroke="#999" '
             f'stroke-dasharray="5,4"/><text x="{x(xmax) - 4}" y="{y(xmax) - 6}" text-anchor="end" '
             f'fill="#777">ideal</text>']
    for n in sorted({p[0] for p in pts} | {1, xmax}):
        parts.append(f'<text x="{x(n)}" y="{y(0) + 18}" text-anchor="middle">{n}</text>')
    for i, g in enumerate(groups):
        c = _COLORS[i % len(_COLORS)]
        line = " ".join(f"{x(r['world_size']):.1f},{y(r['speedup']):.1f}" for r in g["rows"])
        parts.append(f'<polyline points="{line}" fill="none" stroke="{c}" stroke-width="2"/>')
        for r in g["rows"]:
            parts.append(f'<circle cx="{x(r["world_size"]):.1f}" cy="{y(r["speedup"]):.1f}" r="4" fill="{c}">'
                         f'<title>{html.escape(group_label(g))}: N={r["world_size"]}, speedup '
                         f'{r["speedup"]:.2f}</title></circle>')
    parts.append("</svg>")
    return "".join(parts)


def render_html(groups: list[dict]) -> str:
    """A self-contained HTML page: the chart and one table per group."""
    body = [f"<h1>scaleright scaling report</h1>{_svg(groups) if groups else '<p>No ok train runs.</p>'}"]
    for i, g in enumerate(groups):
        c = _COLORS[i % len(_COLORS)]
        head = "".join(f"<th>{h}</th>" for h in ("N ranks", "runs", "tokens/s", "step s", "speedup", "efficiency",
                                                   "job h", "job cost USD"))
        rows = "".join(
            f"<tr><td>{r['world_size']}</td><td>{r['runs']}</td><td>{r['tokens_per_s']:,.0f}</td>"
            f"<td>{r['step_time_s_median']:.4g}</td><td>{r['speedup']:.2f}x</td>"
            f"<td>{r['scaling_efficiency']:.0%}</td><td>{r['job_time_h']:,.2f}</td>"
            f"<td>{'-' if r['job_cost_usd'] is None else format(r['job_cost_usd'], ',.2f')}</td></tr>"
            for r in g["rows"])
        body.append(f'<h2 style="color:{c}">{html.escape(group_label(g))}</h2><table>'
                    f"<tr>{head}</tr>{rows}</table>")
    note = ("<p>efficiency = speedup / (N / N<sub>base</sub>); job cost = N &times; price per GPU-hour &times; job "
            "hours (seed guide \"Single GPU vs Multi-GPU Server\").</p>")
    style = ("body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}")
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>scaleright scaling report</title>'
            f"<style>{style}</style></head><body>{''.join(body)}{note}</body></html>\n")
