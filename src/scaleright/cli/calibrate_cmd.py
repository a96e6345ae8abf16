"""``scaleright calibrate`` and ``scaleright compare``: fit the model to measured runs, and show predicted vs
measured."""

from __future__ import annotations

from pathlib import Path

import typer

from scaleright.cli.common import CatalogOpt, JsonOpt, catalog_from, console, emit_json, table

DbOpt = typer.Option(None, "--db", help="Run database (default: the user data directory's runs.sqlite).")
GpuOpt = typer.Option(..., "--gpu", help="Catalog accelerator the runs used (a user catalog entry for a CPU or an "
                      "unlisted device: --catalog DIR).")  # fmt: skip
FpOpt = typer.Option(None, "--fingerprint", help="Hardware fingerprint of the runs (needed if the database holds "
                     "runs of several machines).")  # fmt: skip


def register(app: typer.Typer) -> None:
    app.command("calibrate")(calibrate_cmd)
    app.command("compare")(compare_cmd)


def _inputs(db: Path | None, fingerprint: str | None):
    from scaleright.bench.calibrate import run_inputs, select_runs
    from scaleright.bench.db import RunStore

    store = RunStore(db)
    fp, runs = select_runs(store.list(kind="train", status="ok"), fingerprint)
    return fp, [run_inputs(r) for r in runs]


def calibrate_cmd(
    name: str = typer.Option(..., "--name", help="Name of the calibration profile to save."),
    gpu: str = GpuOpt,
    db: Path | None = DbOpt,
    fingerprint: str | None = FpOpt,
    catalog: Path | None = CatalogOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Fit the performance model's efficiency parameters to the stored train runs of one machine and save them
    as a profile that `estimate` and `plan` use with --calibration NAME."""
    from scaleright.bench.calibrate import fit_calibration
    from scaleright.estimate.calibration import DEFAULT_CALIBRATION, save_calibration

    g = catalog_from(catalog).gpu(gpu)
    fp, inputs = _inputs(db, fingerprint)
    cal, report = fit_calibration(inputs, gpu=g)
    meta = {"fingerprint": fp, "gpu": g.id, **report}
    path = save_calibration(name, cal, meta=meta)
    changed = {k: (getattr(DEFAULT_CALIBRATION, k), getattr(cal, k)) for k in report["fitted"]}
    if as_json:
        emit_json({"name": name, "path": str(path), "parameters": cal.as_dict(), **meta})
        return
    table(f"Calibration '{name}' from {report['runs']} runs on {fp} ({g.id})", ["parameter", "default", "fitted"],
          [[k, a, b] for k, (a, b) in changed.items()])  # fmt: skip
    console.print(f"median |error| of step time: {report['median_abs_pct_error_before']:.1f} % → "
                  f"{report['median_abs_pct_error_after']:.1f} %; saved to {path}")  # fmt: skip


def compare_cmd(
    gpu: str = GpuOpt,
    calibration: str | None = typer.Option(None, "--calibration", help="Calibration profile name or JSON path."),
    db: Path | None = DbOpt,
    fingerprint: str | None = FpOpt,
    catalog: Path | None = CatalogOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Predicted vs measured step time, tokens/s and peak memory for every stored train run, with % error."""
    from scaleright.bench.calibrate import predict_run
    from scaleright.estimate.calibration import load_calibration

    g = catalog_from(catalog).gpu(gpu)
    cal = load_calibration(calibration)
    fp, inputs = _inputs(db, fingerprint)
    rows = []
    for ri in inputs:
        pred = predict_run(ri, gpu=g, cal=cal)
        for metric, measured in ri.measured.items():
            p = pred[metric]
            err = (p / measured - 1) * 100 if measured and measured == measured else None
            rows.append({"run_id": ri.run_id, "world_size": ri.world_size, "metric": metric, "predicted": p,
                         "measured": measured, "error_pct": err})  # fmt: skip
    if as_json:
        emit_json({"fingerprint": fp, "gpu": g.id, "calibration": calibration or "default", "rows": rows})
        return
    table(f"Predicted vs measured ({fp}, {g.id}, calibration {calibration or 'default'})",
          ["run", "world size", "metric", "predicted", "measured", "error %"],
          [[r["run_id"], r["world_size"], r["metric"], r["predicted"], r["measured"], r["error_pct"]] for r in rows])
    console.print("peak_memory_gb on CPU is the process RSS growth, not comparable to the model's per-GPU memory",
                  style="dim")
