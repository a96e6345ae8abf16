"""Scaling report from stored train runs: speedup, efficiency and cost per job against world size.

Runs are grouped by everything but the world size: hardware fingerprint, model (name, parameter count, whether it
was truncated, dims), strategy, precision, activation checkpointing, micro batch and device type. Within a group,
repeated runs at one world size are combined by their median tokens/s. Formulas in ``bench/scaling.py`` (seed guide:
efficiency = speedup / N; cost = N x price x time). Output as rows (``--json``), a rich table, or a self-contained
HTML page with inline SVG charts of speedup, scaling efficiency and (with a price) cost per job against world size,
with axis ticks, a legend and hover values (drawn by ``scaleright.charts``; no scripts, no external resources).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from typing import Any

import numpy as np

from scaleright import charts as ch
from scaleright import fmt
from scaleright.bench.scaling import job_cost_usd, job_time_h, scaling_curve
from scaleright.charts import X0, X1, Y0, Y1
from scaleright.errors import InputError

__all__ = ["scaling_report", "render_table", "render_html", "group_label", "model_key", "model_label", "run_problem"]

_GROUP_LAYOUT = ("strategy", "precision", "activation_checkpointing", "micro_batch", "device_type")
_GROUP_MODEL = ("layers", "hidden", "heads", "vocab", "seq_len")


def model_key(model: dict) -> dict[str, Any]:
    """The model fields a group shares: ``name`` (preset or catalog model), ``params``, ``truncated`` and the dims
    (a catalog decoder's from its stored config, ``bench/spec.DecoderSpec.as_dict``)."""
    if model.get("arch") == "llama-decoder":
        cfg: dict[str, Any] = model["config"] if isinstance(model.get("config"), dict) else {}
        dims = {"layers": cfg.get("num_hidden_layers"), "hidden": cfg.get("hidden_size"),
                "heads": cfg.get("num_attention_heads"), "vocab": cfg.get("vocab_size"),
                "seq_len": model.get("seq_len")}
        return {"name": model.get("name"), "params": model.get("params"), "truncated": model.get("truncated"),
                **{f"catalog_{k}": _full(model, k) for k in ("layers", "vocab")}, **dims}
    return {"name": model.get("preset"), "params": model.get("params"), "truncated": False,
            **{k: model.get(k) for k in _GROUP_MODEL}}


def _full(model: dict, what: str) -> Any:
    """The catalog model's ``what`` (layers, vocab) from a stored decoder's ``truncation`` ([as run, catalog])."""
    cut: dict[str, Any] = model["truncation"] if isinstance(model.get("truncation"), dict) else {}
    pair = cut.get(what)
    return pair[1] if isinstance(pair, list) and len(pair) == 2 else None


def _group_key(run: dict) -> str:
    key = {"fingerprint": run["fingerprint"], **model_key(run["model"]),
           **{k: run["layout"].get(k) for k in _GROUP_LAYOUT}}
    return json.dumps(key, sort_keys=True)


def model_label(k: dict) -> str:
    """``llama-3.2-1b 61.3M params (truncated: 1 of 16 layers) L1 h2048 nh32 V128256 T32`` from a ``model_key``."""
    params = f" {fmt.number(k['params'] / 1e6)}M params" if _number(k.get("params")) else ""
    cut = ", ".join(f"{k.get(d)} of {k.get('catalog_' + d)} {what}" for d, what in (("layers", "layers"),
                    ("vocab", "tokens")) if k.get("truncated") and k.get(d) != k.get("catalog_" + d))  # fmt: skip
    cut = f" (truncated: {cut})" if cut else ""
    name = f"{k['name']}{params}{cut} " if k.get("name") else ""
    return f"{name}L{k['layers']} h{k['hidden']} nh{k['heads']} V{k['vocab']} T{k['seq_len']}"


def group_label(group: dict) -> str:
    """Short human label of a group."""
    k = group["key"]
    ac = " +AC" if k["activation_checkpointing"] else ""
    return (f"{model_label(k)} | {k['strategy']} {k['precision']}{ac} mb{k['micro_batch']} | {k['device_type']} "
            f"{k['fingerprint']}")


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
                         **curve[n], "job_time_h": hours, "job_cost_usd": cost,
                         "shared_hardware": next((r["metrics"]["shared_hardware"] for r in by_n[n]
                                                  if r["metrics"].get("shared_hardware")), None)})  # fmt: skip
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
        one = len(g["rows"]) < 2  # one world size: no scaling to report
        shared = [r for r in g["rows"] if r.get("shared_hardware")]
        notes = (["one world size: speedup and efficiency need two or more (bench train --nproc 1,2)"] if one else [])
        notes += [f"* N={r['world_size']}: {r['shared_hardware']}; its ranks time-shared the hardware, so its "
                  "scaling figures are not meaningful" for r in shared]  # fmt: skip
        t = Table(title=title, title_justify="left", caption="\n".join(notes) or None, caption_justify="left")
        for col in ("N ranks", "runs", "tokens/s", "step s", "speedup", "eff.", "job h", "job USD"):
            t.add_column(col, justify="right")
        for r in g["rows"]:
            cost = "-" if r["job_cost_usd"] is None else f"{r['job_cost_usd']:,.2f}"
            mark = " *" if r.get("shared_hardware") else ""
            t.add_row(f"{r['world_size']}{mark}", str(r["runs"]), f"{r['tokens_per_s']:,.0f}",
                      f"{r['step_time_s_median']:.4g}", "—" if one else f"{r['speedup']:.2f}x",
                      "—" if one else f"{r['scaling_efficiency']:.0%}", f"{r['job_time_h']:,.2f}", cost)
        tables.append(t)
    return Group(*tables)


def _tip(g: dict, i: int, r: dict) -> str:
    cost = f", job {fmt.usd(r['job_cost_usd'])}" if r.get("job_cost_usd") is not None else ""
    return (f"group {i + 1}, N={r['world_size']}: {fmt.number(r['tokens_per_s'])} tokens/s, speedup "
            f"{fmt.number(r['speedup'])}×, efficiency {fmt.percent(r['scaling_efficiency'])}{cost}")


def _chart(groups: list[dict], key: str, title: str, ylabel: str, *, log: bool, yfmt=fmt.number) -> str:
    """``key`` of every row against world size (log2 x), one coloured line and marker shape per group; for speedup,
    each group's ideal line N / N_base dashed."""
    sty = ch.styles([str(i) for i in range(len(groups))])
    n_all = [r["world_size"] for g in groups for r in g["rows"]]
    ideal = {(g["rows"][0]["world_size"], g["rows"][-1]["world_size"]) for g in groups} if key == "speedup" else set()
    ys = [r[key] for g in groups for r in g["rows"] if fmt.is_number(r.get(key))]
    ys += [hi / lo for lo, hi in ideal] + [1.0] * bool(ideal)
    xlo, xhi = ch.span(n_all, 2)
    ylo, yhi = ch.span(ys, 2) if log else ch.span(ys + ([1.05] if key == "scaling_efficiency" else []), zero=True)
    sx, sy = ch.scale(xlo, xhi, X0, X1, 2), ch.scale(ylo, yhi, Y0, Y1, 2 if log else 0)
    out = ch.axes(sx, sy, ch.ticks(xlo, xhi, 2), ch.ticks(ylo, yhi, 2 if log else 0), "world size (GPUs / ranks, log2)",
                  ylabel, xfmt=lambda v: f"{v:g}", yfmt=yfmt)  # fmt: skip
    for lo, hi in sorted(ideal):
        out.append(ch.path([(sx(lo), sy(1.0)), (sx(hi), sy(hi / lo))], "#888", 1.5, "6 4"))
    if key == "scaling_efficiency" and ylo < 1 < yhi:
        out.append(ch.line(X0, sy(1.0), X1, sy(1.0), "#888", 1.5, "6 4"))
    items = []
    for i, g in enumerate(groups):
        col, shape = sty[str(i)]
        rows = [r for r in g["rows"] if fmt.is_number(r.get(key))]
        if len(rows) > 1:
            out.append(ch.path([(sx(r["world_size"]), sy(r[key])) for r in rows], col, 2))
        out += [ch.dot(sx(r["world_size"]), sy(r[key]), col, 4.5, shape=shape, tip=_tip(g, i, r)) for r in rows]
        items.append((f"group {i + 1}", col, "dot" if shape == "circle" else shape))
    if ideal or key == "scaling_efficiency":
        items.append(("ideal (linear)", "#888", "dash"))
    out += ch.legend(items)
    return ch.svg(title, out)


def render_html(groups: list[dict]) -> str:
    """A self-contained HTML page: speedup, scaling efficiency and (with a price) cost per job against world size,
    one series per group (hover a marker for its numbers), then one table per group."""
    body = ["<h1>scaleright scaling report</h1>"]
    if not groups:
        body.append("<p>No ok train runs.</p>")
    else:
        price, job = groups[0]["price_usd_per_gpu_hour"], groups[0]["job_tokens"]
        body.append('<p class="summary">' + (f"Price {ch.esc(fmt.usd(price))} per GPU-hour (given with "
                    "<code>--price-usd-per-gpu-hour</code>)" if price is not None else "No price given "
                    "(<code>--price-usd-per-gpu-hour</code>): cost per job is not computed")
                    + f"; one job = {ch.esc(fmt.number(job))} tokens.</p>")  # fmt: skip
        if all(len(g["rows"]) < 2 for g in groups):
            body.append('<p class="note">Each group has runs at one world size only: a scaling curve needs two.</p>')
        else:
            body.append(_chart(groups, "speedup", "Speedup against world size", "speedup (×, log2)", log=True,
                               yfmt=lambda v: f"{v:g}×"))  # fmt: skip
            body.append(_chart(groups, "scaling_efficiency", "Scaling efficiency = speedup / (N / N_base)",
                               "scaling efficiency", log=False, yfmt=fmt.percent))  # fmt: skip
            if price is not None:
                body.append(_chart(groups, "job_cost_usd", "Cost per job against world size", "cost per job (USD)",
                                   log=False, yfmt=ch.usd_tick))  # fmt: skip
    cols = ["N ranks", "runs", "tokens/s", "step s", "speedup", "efficiency", "job h", "job cost", "peak GB", "run ids"]
    for i, g in enumerate(groups):
        rows = [[r["world_size"], r["runs"], fmt.number(r["tokens_per_s"]), fmt.number(r["step_time_s_median"]),
                 f"{fmt.number(r['speedup'])}×", fmt.percent(r["scaling_efficiency"]), fmt.number(r["job_time_h"]),
                 fmt.usd(r["job_cost_usd"]), fmt.number(r.get("peak_memory_gb")),
                 ", ".join(str(x) for x in r["run_ids"])] for r in g["rows"]]  # fmt: skip
        body.append(f"<h2>group {i + 1}: {ch.esc(group_label(g))}</h2>{ch.table(cols, rows)}")
        body += [f'<p class="note">N={r["world_size"]}: {ch.esc(r["shared_hardware"])}; its ranks time-shared the '
                 "hardware, so its scaling figures are not meaningful.</p>" for r in g["rows"]
                 if r.get("shared_hardware")]  # fmt: skip
    note = ('<p class="note">efficiency = speedup / (N / N<sub>base</sub>); job cost = N × price per GPU-hour '
            '× job hours (seed guide "Single GPU vs Multi-GPU Server").</p>')
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"/><title>scaleright scaling report</title>'
            f"<style>{ch.CSS}</style></head><body>{''.join(body)}{note}</body></html>\n")
