"""``scaleright plan SCENARIO.yaml``: one GPU or many, which GPU, which layout, rent or buy — with reasons."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from scaleright.cli.common import (
    CatalogOpt,
    JsonOpt,
    catalog_files,
    catalog_from,
    check_output_path,
    console,
    emit_json,
    esc,
    profile_from,
    startup_imports,
    table,
)
from scaleright.errors import InputError
from scaleright.fmt import ms, number, percent, usd

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID


def register(app: typer.Typer) -> None:
    app.command("plan")(plan_cmd)


class _DelayedProgress:
    """A progress bar on stderr that appears only once the search has run for over a second, and only on a terminal
    (rich draws no live bar into a pipe or file; there it would cost the import of rich and nothing else)."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.bar: Progress | None = None
        self.task: TaskID | None = None
        self.terminal = sys.stderr.isatty()

    def __call__(self, i: int, n: int, label: str) -> None:
        if self.bar is None and self.terminal and time.perf_counter() - self.t0 > 1.0 and i < n:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

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
    export: Path | None = typer.Option(None, "--export", help="Also write the recommendation as launch configs "
                                       "into this directory, one per format that applies (see scaleright export)."),
    as_json: bool = JsonOpt,
) -> None:
    """Search every allowed GPU type, count and parallel layout; recommend one option and say why."""
    with startup_imports():
        from scaleright.plan.planner import plan
        from scaleright.plan.scenario import load_scenario
        from scaleright.results.plan import PlanResult
        from scaleright.textfile import is_regular_file, refuse_input_as_output

    if html is not None:
        check_output_path("--html", html)
    if export is not None:
        from scaleright.textfile import path_problem

        why = path_problem(export, want="dir")
        if why is not None and not (why == "directory not found" and path_problem(export.parent, want="dir") is None):
            raise InputError(f"--export={export}: {why}; give a directory (created if its parent exists)")
    scn = load_scenario(scenario)
    cat = catalog_from(catalog)
    prof = profile_from("--calibration", calibration)
    cal = prof.calibration
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
    # validated (scaleright schema plan); the calibration record says which profile produced every number
    d = PlanResult.of(res, calibration=prof.record()).to_dict()
    if html is not None:
        from scaleright.plan.report import write_html

        write_html(d, html)  # atomic; an OS error is one line naming --html and the path
    if export is not None:
        _export(d, export, inputs=[scenario, *catalog_files(catalog)], quiet=as_json)
    if as_json:
        emit_json(d)
        return
    _print(d)
    console.print(esc(prof.line()), style="dim")
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
            console.print(f"[green]Recommendation:[/green] {rec['gpus']} x {gpu} ({lay}): {number(rec['time_h'])} h, "
                          f"{usd(rec['cost_usd'])} ({usd(rec['cost_per_1m_tokens_usd'])} per 1M tokens), "
                          f"{number(rec['energy_kwh'])} kWh, {number(rec['co2e_kg'])} kg CO2e")  # fmt: skip
            acc = rec.get("memory_accounting")
            if acc:  # the framework the step time and the memory assumed
                from scaleright.estimate.memory.profiles import MemoryProfile

                prof = MemoryProfile(framework=acc["framework"], states=acc["states"],
                                     cross_entropy=acc["cross_entropy"], flash_attention=acc["attention"] == "flash",
                                     runtime_gb=acc["cuda_context_gb"])  # fmt: skip
                console.print(f"framework {esc(rec['framework'])}; memory accounting {esc(prof.summary())}",
                              style="dim")  # fmt: skip
        else:
            console.print(f"[green]Recommendation:[/green] {rec['gpus']} x {gpu} ({lay}): "
                          f"{usd(rec['cost_usd'])}/month, {usd(rec['cost_per_1m_tokens_usd'])} per 1M output tokens, "
                          f"TTFT {ms(rec['ttft_s'])} ms, TPOT {ms(rec['tpot_s'])} ms")  # fmt: skip
    for note in d["search"].get("precision_notes", []):  # a part without the requested tensor rate ran a fallback
        console.print(f"[yellow]precision:[/yellow] {esc(note)}")
    if training:
        cols = ["gpu", "gpus", "layout", "time h", "cost", "$/1M tok", "MFU", "mem GB/GPU", "kWh", "$/GPU-h"]
        rows = [[o["gpu"], o["gpus"], _short(o["layout"]), number(o["time_h"]), usd(o["cost_usd"]),
                 usd(o["cost_per_1m_tokens_usd"]), percent(o["mfu"]), number(o["memory_gb_per_gpu"]),
                 number(o["energy_kwh"]), usd(o["price_usd_per_gpu_hour"])] for o in d["options"]]  # fmt: skip
    else:
        cols = ["gpu", "gpus", "layout", "$/month", "$/1M out tok", "TTFT ms", "TPOT ms", "util", "$/GPU-h"]
        rows = [[o["gpu"], o["gpus"], _short(o["layout"]), usd(o["cost_usd"]), usd(o["cost_per_1m_tokens_usd"]),
                 ms(o["ttft_s"]), ms(o["tpot_s"]), percent(o["utilisation"]), usd(o["price_usd_per_gpu_hour"])]
                for o in d["options"]]  # fmt: skip
    table("Best option per GPU type", cols, rows[:20])
    if d["pareto"] and training:
        console.print("Pareto front (time vs cost): " + esc("; ".join(
            f"{o['gpus']}x{o['gpu']} {number(o['time_h'])} h {usd(o['cost_usd'])}" for o in d["pareto"][:8])))
    elif d["pareto"]:
        console.print("Pareto front (TPOT vs monthly cost): " + esc("; ".join(
            f"{o['gpus']}x{o['gpu']} {ms(o['tpot_s'])} ms {usd(o['cost_usd'])}" for o in d["pareto"][:8])))
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


def _export(d: dict, out: Path, *, inputs: list, quiet: bool) -> None:
    """Every launch config that applies to the plan (``scaleright.export``) into ``out``; a format that cannot
    express the layout is named with its reason (on stderr with --json, so stdout stays one JSON object)."""
    from scaleright.cli.export_cmd import write_files
    from scaleright.export import export_plan, formats_for

    if d.get("recommendation") is None:
        raise InputError("--export: the plan has no recommendation (no option met the constraints); nothing to export")
    files: dict[str, str] = {}
    skipped = []
    for fmt in formats_for(d):
        try:
            files |= export_plan(d, fmt)
        except InputError as exc:
            skipped.append(f"{fmt}: {exc}")
    written = write_files(out, files, inputs=inputs)
    from rich.console import Console

    out_console = Console(stderr=True) if quiet else console
    for p in written:
        out_console.print(f"wrote {esc(p)}")
    for line in skipped:
        out_console.print(f"not exported: {esc(line)}")


def _short(layout: dict) -> str:
    from scaleright.estimate.layout import layout_text

    return layout_text(layout)

