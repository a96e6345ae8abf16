"""``scaleright calibrate`` and ``scaleright compare``: fit the model to measured runs; show predicted vs measured."""

from __future__ import annotations

from pathlib import Path

import typer

from scaleright.cli.common import CatalogOpt, JsonOpt, catalog_from, console, emit_json, esc, table

DbOpt = typer.Option(None, "--db", help="Run database (default: the user data directory's runs.sqlite).")
GpuOpt = typer.Option(..., "--gpu", help="Catalog accelerator the runs used (a user catalog entry for a CPU or an "
                      "unlisted device: --catalog DIR).")  # fmt: skip
FpOpt = typer.Option(None, "--fingerprint", help="Hardware fingerprint of the runs (needed if the database holds "
                     "runs of several machines).")  # fmt: skip


def register(app: typer.Typer) -> None:
    app.command("calibrate")(calibrate_cmd)
    app.command("compare")(compare_cmd)


def _inputs(db: Path | None, fingerprint: str | None):
    """The usable ok train runs of one machine, read without changing the database; a damaged or incomplete run is
    skipped with a warning on stderr."""
    from scaleright.bench.calibrate import run_inputs, select_runs
    from scaleright.bench.db import RunStore
    from scaleright.errors import InputError

    damaged: list[str] = []
    fp, runs = select_runs(RunStore(db).list(kind="train", status="ok", damaged=damaged), fingerprint)
    inputs = []
    for r in runs:
        try:
            inputs.append(run_inputs(r))
        except InputError as exc:
            damaged.append(str(exc))
    if not inputs:  # one line, no warnings before it: the first reason stands for the rest
        why = f" ({damaged[0]}{f'; and {len(damaged) - 1} more' if len(damaged) > 1 else ''})" if damaged else ""
        raise InputError(f"none of the {len(runs)} successful train runs of {fp} can be used{why}")
    for message in damaged:
        typer.echo(f"warning: {message}; skipped", err=True)
    return fp, inputs


def calibrate_cmd(
    name: str = typer.Option(..., "--name", help="Name of the calibration profile to save: 1 to 100 letters, "
                             "digits, '-' or '_'."),
    gpu: str = GpuOpt,
    db: Path | None = DbOpt,
    fingerprint: str | None = FpOpt,
    catalog: Path | None = CatalogOpt,
    as_json: bool = JsonOpt,
    force: bool = typer.Option(False, "--force", help="Replace an existing profile of the same name."),
) -> None:
    """Fit the performance model's efficiency parameters to the stored train runs of one machine and save them
    as a profile that `estimate` and `plan` use with --calibration NAME."""
    from scaleright.bench.calibrate import fit_calibration
    from scaleright.errors import InputError
    from scaleright.estimate.calibration import DEFAULT_CALIBRATION, profile_path, save_calibration

    # everything that can be refused is checked before the fit (which can take a while)
    target = profile_path(name, flag="--name")
    if target.exists() and not force:
        raise InputError(f"--name={name}: a calibration profile already exists at {target}; pass --force to "
                         "replace it")
    g = catalog_from(catalog).gpu(gpu)
    fp, inputs = _inputs(db, fingerprint)
    cal, report = fit_calibration(inputs, gpu=g)
    meta = {"fingerprint": fp, "gpu": g.id, **report}
    path = save_calibration(name, cal, meta=meta, overwrite=force)
    changed = {k: (getattr(DEFAULT_CALIBRATION, k), getattr(cal, k)) for k in report["fitted"]}
    if as_json:
        emit_json({"name": name, "path": str(path), "parameters": cal.as_dict(), **meta})
        return
    table(f"Calibration '{name}' from {report['runs']} runs on {fp} ({g.id})", ["parameter", "default", "fitted"],
          [[k, a, b] for k, (a, b) in changed.items()])  # fmt: skip
    console.print(f"median |error| of step time: {report['median_abs_pct_error_before']:.1f} % → "
                  f"{report['median_abs_pct_error_after']:.1f} %; saved to {esc(path)}")  # fmt: skip


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
    from scaleright.cli.common import calibration_from

    g = catalog_from(catalog).gpu(gpu)
    cal = calibration_from("--calibration", calibration)
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
