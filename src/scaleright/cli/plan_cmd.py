"""``scaleright plan SCENARIO.yaml``: one GPU or many, which GPU, which layout, rent or buy — with reasons."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from scaleright.cli.common import (
    CatalogOpt,
    JsonOpt,
    calibration_from,
    catalog_files,
    catalog_from,
    check_output_path,
    console,
    emit_json,
    esc,
    fmt,
    table,
)


def register(app: typer.Typer) -> None:
    app.command("plan")(plan_cmd)


class _DelayedProgress:
    """A progress bar on stderr that appears only once the search has run for over a second."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.bar: Progress | None = None
        self.task: TaskID | None = None

    def __call__(self, i: int, n: int, label: str) -> None:
        if self.bar is None and time.perf_counter() - self.t0 > 1.0 and i < n:
            self.bar = Progress(TextColumn("searching {task.description}"), BarColumn(),
                                TextColumn("{task.completed}/{task.total} GPU types"), TimeElapsedColumn(),
                                console=Console(stderr=True, emoji=False), transient=True)  # fmt: skip
            self.bar.start()
            self.task = self.bar.add_task(esc(label), total=n)
        if self.bar is not None and self.task is not None:
            self.bar.update(self.task, completed=i, description=esc(label))
            if i >= n:
                self.bar.stop()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def plan_cmd(
    scenario: Path = typer.Argument(..., help="Scenario YAML (see examples/)."),
    html: Path | None = typer.Option(None, "--html", help="Also write a self-contained HTML report here."),
    calibration: str | None = typer.Option(None, "--calibration", help="Calibration profile name or JSON path."),
    catalog: Path | None = CatalogOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Search every allowed GPU type, count and parallel layout; recommend one option and say why."""
    from scaleright.plan.planner import plan
    from scaleright.plan.scenario import load_scenario
    from scaleright.textfile import is_regular_file, refuse_input_as_output

    if html is not None:
        check_output_path("--html", html)
    scn = load_scenario(scenario)
    cat = catalog_from(catalog)
    cal = calibration_from("--calibration", calibration)
    if html is not None:  # the report must not overwrite the scenario, its model config or a catalog file
        model_file = scn.model if is_regular_file(scn.model) else None
        cal_file = None
        if calibration not in (None, "", "default"):  # a JSON path, or a profile name's file
            from scaleright.estimate.calibration import calibration_dir

            cal_file = calibration if Path(calibration).suffix else calibration_dir() / f"{calibration}.json"
        refuse_input_as_output("--html", html, [scenario, model_file, cal_file, *catalog_files(catalog)])
    prog = _DelayedProgress()
    try:
        res = plan(scn, catalog=cat, cal=cal, progress=prog)
    finally:
        prog.close()
    d = res.as_dict()
    if html is not None:
        from scaleright.plan.report import write_html

        write_html(d, html)  # atomic; an OS error is one line naming --html and the path
    if as_json:
        emit_json(d)
        return
    _print(d)
    if html is not None:
        console.print(f"report written to {esc(html)}")


def _print(d: dict) -> None:
    s = d["scenario"]
    training = s["task"] != "inference"
    console.print(f"[bold]{esc(s['name'])}[/bold]: {esc(s['model'])} ({s['model_params_total'] / 1e9:.1f} B params), "
                  f"{s['task']}, pricing {s['pricing']['mode']}")  # fmt: skip
    rec = d["recommendation"]
    if rec is None:
        inf = d["infeasible"] or {}
        console.print(f"[red]No option meets the constraints[/red] ({esc(inf.get('binding'))}): "
                      f"{esc(inf.get('message'))}")  # fmt: skip
    else:
        lay = esc(_short(rec["layout"]))
        gpu = esc(rec["gpu"])
        if training:
            console.print(f"[green]Recommendation:[/green] {rec['gpus']} x {gpu} ({lay}): {rec['time_h']:.3g} h, "
                          f"${rec['cost_usd']:,.0f} (${rec['cost_per_1m_tokens_usd']:.3g} per 1M tokens), "
                          f"{rec['energy_kwh']:,.0f} kWh, {rec['co2e_kg']:,.0f} kg CO2e")  # fmt: skip
        else:
            console.print(f"[green]Recommendation:[/green] {rec['gpus']} x {gpu} ({lay}): "
                          f"${rec['cost_usd']:,.0f}/month, ${rec['cost_per_1m_tokens_usd']:.3g} per 1M output tokens, "
                          f"TTFT {rec['ttft_s'] * 1e3:.0f} ms, TPOT {rec['tpot_s'] * 1e3:.1f} ms")  # fmt: skip
    if training:
        cols = ["gpu", "gpus", "layout", "time h", "cost $", "$/1M tok", "MFU", "mem GB/GPU", "kWh", "price $/GPU-h"]
        rows = [[o["gpu"], o["gpus"], _short(o["layout"]), o["time_h"], o["cost_usd"], o["cost_per_1m_tokens_usd"],
                 o["mfu"], o["memory_gb_per_gpu"], o["energy_kwh"], o["price_usd_per_gpu_hour"]] for o in d["options"]]
    else:
        cols = ["gpu", "gpus", "layout", "$/month", "$/1M out tok", "TTFT s", "TPOT s", "util", "price $/GPU-h"]
        rows = [[o["gpu"], o["gpus"], _short(o["layout"]), o["cost_usd"], o["cost_per_1m_tokens_usd"], o["ttft_s"],
                 o["tpot_s"], o["utilisation"], o["price_usd_per_gpu_hour"]] for o in d["options"]]
    table("Best option per GPU type", cols, rows[:20])
    if d["pareto"] and training:
        console.print("Pareto front (time vs cost): " + esc("; ".join(
            f"{o['gpus']}x{o['gpu']} {fmt(o['time_h'])} h ${fmt(o['cost_usd'])}" for o in d["pareto"][:8])))
    elif d["pareto"]:
        console.print("Pareto front (TPOT vs monthly cost): " + esc("; ".join(
            f"{o['gpus']}x{o['gpu']} {o['tpot_s'] * 1e3:.1f} ms ${fmt(o['cost_usd'])}" for o in d["pareto"][:8])))
    for e in d["explanations"]:
        console.print(f"[bold]{esc(e['title'])}[/bold]: {esc(e['text'])}")
    srch = d["search"]
    console.print(f"searched {srch.get('layouts_evaluated', 0):,} layouts over {srch.get('gpu_types')} GPU types in "
                  f"{srch.get('wall_s', 0):.2f} s; skipped: {len(srch.get('skipped', []))} GPU types "
                  f"(see --json)", style="dim")  # fmt: skip
    lim = srch.get("limits", {})
    if lim:
        console.print("search limits: " + esc("; ".join(f"{k}: {v}" for k, v in lim.items())), style="dim")
    du = s.get("defaults_used", {})
    if du:
        console.print("defaults used: " + esc(", ".join(f"{k}={v}" for k, v in du.items())), style="dim")


def _short(layout: dict) -> str:
    from scaleright.estimate.layout import layout_text

    return layout_text(layout)

