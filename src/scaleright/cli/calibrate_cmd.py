"""``scaleright calibrate`` and ``scaleright compare``: fit the model to measured runs; show predicted vs measured."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import typer

from scaleright.cli.common import CatalogOpt, JsonOpt, catalog_from, console, emit_json, esc, table

DbOpt = typer.Option(None, "--db", help="Run database (default: the user data directory's runs.sqlite).")
GpuOpt = typer.Option(None, "--gpu", help="Catalog accelerator the runs used (a user catalog entry for a CPU or an "
                      "unlisted device: --catalog DIR); required for train runs, with --serving the server's GPU "
                      "(default: the run's).")  # fmt: skip
ServingOpt = typer.Option(False, "--serving", help="Use the stored serve runs (bench serve) instead of the train runs: "
                          "fit / compare the serving engine profile.")  # fmt: skip
RunIdsOpt = typer.Option(None, "--run-ids", help="With --serving: serve run ids, e.g. 3,4 (default: every ok serve "
                         "run).")  # fmt: skip
SimModelOpt = typer.Option(None, "--sim-model", help="With --serving: catalog model the server ran (default: the "
                           "run's --sim-model).")  # fmt: skip
EngineOpt = typer.Option(None, "--engine", help="With --serving: engine profile (default: the run's).")
FpOpt = typer.Option(None, "--fingerprint", help="Hardware fingerprint of the runs (needed if the database holds "
                     "runs of several machines).")  # fmt: skip


calibrate_app = typer.Typer(short_help="Fit a calibration profile to the stored runs of one machine; list, show or "
                            "delete saved profiles.")  # its full help: calibrate_cmd's docstring


def register(app: typer.Typer) -> None:
    app.add_typer(calibrate_app, name="calibrate")
    app.command("compare")(compare_cmd)


def _refuse(serving: bool, given: dict[str, bool]) -> None:
    """One line for the first flag given that does not apply to the chosen mode (train runs or --serving)."""
    from scaleright.errors import InputError

    for flag, present in given.items():
        if present:
            mode = "train runs; not with --serving" if serving else "--serving"
            raise InputError(f"{flag} applies only to {mode}")


def _need_gpu(gpu: str | None) -> str:
    from scaleright.errors import InputError

    if gpu is None:
        raise InputError("--gpu is required for train runs (the catalog accelerator they used); "
                         "or pass --serving for serve runs")
    return gpu


def _inputs(db: Path | None, fingerprint: str | None):
    """The usable ok train runs of one machine (fingerprint, run records, model inputs), read without changing the
    database; a damaged or incomplete run is skipped with a warning on stderr."""
    from scaleright.bench.calibrate import run_inputs, select_runs
    from scaleright.bench.db import RunStore
    from scaleright.errors import InputError

    damaged: list[str] = []
    fp, runs = select_runs(RunStore(db).list(kind="train", status="ok", damaged=damaged), fingerprint)
    used, inputs = [], []
    for r in runs:
        try:
            inputs.append(run_inputs(r))
            used.append(r)
        except InputError as exc:
            damaged.append(str(exc))
    if not inputs:  # one line, no warnings before it: the first reason stands for the rest
        why = f" ({damaged[0]}{f'; and {len(damaged) - 1} more' if len(damaged) > 1 else ''})" if damaged else ""
        raise InputError(f"none of the {len(runs)} successful train runs of {fp} can be used{why}")
    for message in damaged:
        typer.echo(f"warning: {message}; skipped", err=True)
    return fp, used, inputs


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f} %"


@calibrate_app.callback(invoke_without_command=True)
def calibrate_cmd(
    ctx: typer.Context,
    name: str | None = typer.Option(None, "--name", help="Name of the profile to save: 1 to 100 letters, digits, "
                                    "'-' or '_'. Train runs: the calibration profile (required). With --serving: "
                                    "store the fitted engine profile under NAME for --engine NAME (optional)."),
    gpu: str | None = GpuOpt,
    db: Path | None = DbOpt,
    fingerprint: str | None = FpOpt,
    catalog: Path | None = CatalogOpt,
    as_json: bool = JsonOpt,
    force: bool = typer.Option(False, "--force", help="Replace an existing profile of the same name, and save a "
                               "profile whose cross-validated error is not better than the defaults' (or that "
                               "cannot be cross-validated: one run); with --serving --name, replace a stored engine "
                               "profile."),
    serving: bool = ServingOpt,
    run_ids: str | None = RunIdsOpt,
    sim_model: str | None = SimModelOpt,
    engine: str | None = EngineOpt,
    calibration: str | None = typer.Option(None, "--calibration", help="With --serving: calibration profile name "
                                           "or JSON path the simulation uses."),
    out: Path | None = typer.Option(None, "--out", help="With --serving: also write the fitted engine profile and "
                                    "report as JSON (atomically)."),
) -> None:
    """Fit the performance model's efficiency parameters to the stored train runs of one machine and save them
    as a profile that `estimate` and `plan` use with --calibration NAME. Runs whose hardware is not --gpu are
    refused; so is a profile whose leave-one-run-out error is worse than the defaults' on the same runs.

    With --serving: fit the engine profile's iteration overhead, HBM fraction and frontend latency (and the
    per-sequence host time when every run's server is vLLM before 0.8) to the stored serve runs (in-sample), as
    `bench calibrate-serving` does; --name NAME stores it (with its provenance) for `serve simulate --engine NAME`,
    `serve capacity --engine NAME` and fleet files; --fingerprint does not apply.

    Saved profiles: `calibrate list`, `calibrate show NAME`, `calibrate delete NAME` (engine profiles: with
    --serving)."""
    if ctx.invoked_subcommand is not None:
        # the first fit option given on the command line (click records where each value came from)
        given = next((p for p in ctx.command.params if p.name is not None and getattr(
            ctx.get_parameter_source(p.name), "name", None) == "COMMANDLINE"), None)  # fmt: skip
        if given is not None:
            from scaleright.errors import InputError

            raise InputError(f"{given.opts[0]}: a fit option; not with 'calibrate {ctx.invoked_subcommand}' (which "
                             "takes its own options after it)")
        return
    if serving:
        from scaleright.cli.bench_cmd import serving_calibrate

        _refuse(True, {"--fingerprint": fingerprint is not None})
        if force and name is None:
            from scaleright.errors import InputError

            raise InputError("--force with --serving replaces a stored engine profile; give --name NAME")
        serving_calibrate(run_ids, sim_model, gpu, engine, calibration, catalog, db, out, as_json, name=name,
                          force=force)  # fmt: skip
        return
    _refuse(False, {"--run-ids": run_ids is not None, "--sim-model": sim_model is not None,
                    "--engine": engine is not None, "--calibration": calibration is not None,
                    "--out": out is not None})  # fmt: skip
    if name is None:
        from scaleright.errors import InputError

        raise InputError("--name is required for train runs (the calibration profile to save); "
                         "or pass --serving to fit the engine profile to serve runs")
    gpu = _need_gpu(gpu)
    from scaleright.bench.calibrate import check_hardware, cross_validate, fit_calibration, provenance
    from scaleright.errors import InputError
    from scaleright.estimate.calibration import profile_path, save_calibration

    # everything that can be refused without the fit is checked before it (which can take a while)
    target = profile_path(name, flag="--name")
    if target.exists() and not force:
        raise InputError(f"--name={name}: a calibration profile already exists at {target}; pass --force to "
                         "replace it")
    cat = catalog_from(catalog)
    g = cat.gpu(gpu)
    fp, runs, inputs = _inputs(db, fingerprint)
    check_hardware(runs, g, cat)
    result = fit_calibration(inputs, gpu=g)
    cv = cross_validate(inputs, gpu=g, params=result.params)
    default_err, cv_err = result.defaults_error["median_abs_pct"], cv["median_abs_pct"]
    worse = cv_err is None or (default_err is not None and cv_err > default_err)
    if worse and not force:
        if cv_err is None:
            raise InputError(f"--name={name}: one run cannot be cross-validated (that needs 2 or more runs), "
                             "so the profile could not be shown to beat the defaults; not saved; measure more runs "
                             "(e.g. bench train --nproc 1,2) or pass --force")  # fmt: skip
        raise InputError(f"--name={name}: the fitted profile is worse than the defaults on these {len(inputs)} runs "
                         f"(cross-validated median |error| of step time {_pct(cv_err)}, defaults {_pct(default_err)}); "
                         "not saved; pass --force to save it anyway")  # fmt: skip
    prov = provenance(result, cv, runs=runs, gpu_id=g.id, fingerprint=fp, forced=worse)
    path = save_calibration(name, result.calibration, provenance=prov, overwrite=force)
    if as_json:
        emit_json({"name": name, "path": str(path), "parameters": result.calibration.as_dict(),
                   "fitted": prov["parameters"], **{k: prov[k] for k in ("gpu", "fingerprint", "runs", "runs_sha256",
                                                                       "error", "forced")}})  # fmt: skip
        return
    table(f"Calibration '{name}' from {len(inputs)} runs on {fp} ({g.id})",
          ["parameter", "default", "fitted", "low", "high", "on bound"],
          [[k, p["default"], p["value"], p["low"], p["high"], p["on_bound"] or ""]
           for k, p in prov["parameters"].items()])  # fmt: skip
    console.print(f"median |error| of step time: defaults {_pct(default_err)}, fitted {_pct(cv_err)} "
                  f"cross-validated ({cv['method']}, {cv['folds']} folds), "
                  f"{_pct(result.in_sample_error['median_abs_pct'])} in-sample")  # fmt: skip
    for k, p in prov["parameters"].items():
        if p["on_bound"]:
            console.print(f"[yellow]{k} sits on its {p['on_bound']} bound ({p[p['on_bound']]:g})[/yellow]: the "
                          "model lacks a physical term these runs need; the value is not a measurement of it")
    if worse:
        console.print("[yellow]saved with --force[/yellow] although it was not shown to beat the defaults")
    console.print(f"saved to {esc(path)}")


def compare_cmd(
    gpu: str | None = GpuOpt,
    calibration: str | None = typer.Option(None, "--calibration", help="Calibration profile name or JSON path."),
    db: Path | None = DbOpt,
    fingerprint: str | None = FpOpt,
    catalog: Path | None = CatalogOpt,
    as_json: bool = JsonOpt,
    serving: bool = ServingOpt,
    run_ids: str | None = RunIdsOpt,
    sim_model: str | None = SimModelOpt,
    engine: str | None = EngineOpt,
) -> None:
    """Predicted vs measured step time, tokens/s and peak memory for every stored train run, with % error.

    With --serving: simulated (serve simulate, the run's workload redrawn from its seed) vs measured TTFT, TPOT,
    ITL and end-to-end latency for the stored serve runs, as `bench compare-serving` does."""
    if serving:
        from scaleright.cli.bench_cmd import serving_compare

        _refuse(True, {"--fingerprint": fingerprint is not None})
        serving_compare(run_ids, sim_model, gpu, engine, calibration, catalog, db, as_json)
        return
    _refuse(False, {"--run-ids": run_ids is not None, "--sim-model": sim_model is not None,
                    "--engine": engine is not None})  # fmt: skip
    gpu = _need_gpu(gpu)
    from scaleright.bench.calibrate import predict_run
    from scaleright.cli.common import profile_from

    g = catalog_from(catalog).gpu(gpu)
    prof = profile_from("--calibration", calibration)
    cal = prof.calibration
    fp, _, inputs = _inputs(db, fingerprint)
    rows = []
    for ri in inputs:
        pred = predict_run(ri, gpu=g, cal=cal)
        for metric, measured in ri.measured.items():
            p = pred[metric]
            err = (p / measured - 1) * 100 if measured and measured == measured else None
            rows.append({"run_id": ri.run_id, "world_size": ri.world_size, "metric": metric, "predicted": p,
                         "measured": measured, "error_pct": err})  # fmt: skip
    if as_json:
        emit_json({"fingerprint": fp, "gpu": g.id, "calibration": prof.record(), "rows": rows})
        return
    table(f"Predicted vs measured ({fp}, {g.id}, calibration {prof.name})",
          ["run", "world size", "metric", "predicted", "measured", "error %"],
          [[r["run_id"], r["world_size"], r["metric"], r["predicted"], r["measured"], r["error_pct"]] for r in rows])
    console.print("peak_memory_gb on CPU is the process RSS growth, not comparable to the model's per-GPU memory",
                  style="dim")
    console.print(esc(prof.line()), style="dim")


# ---- saved profiles: list, show, delete -------------------------------------------------------------------------


def _saved(path: Path) -> dict:
    """What ``calibrate list`` shows of one profile file: its record, or why it does not load."""
    from scaleright.errors import ScalerightError
    from scaleright.estimate.calibration import load_profile

    try:
        prof = load_profile(str(path))
    except ScalerightError as exc:
        return {"name": path.stem, "path": str(path), "ok": False, "error": str(exc)}
    rec = prof.record()
    return {"name": path.stem, "path": str(path), "ok": True, "sha256": rec["sha256"], "provenance": rec["provenance"]}


def _engines_saved() -> tuple[Path, list[dict]]:
    """The stored engine profiles (``calibrate --serving --name``): their directory and records."""
    from scaleright.estimate.engine_store import engine_dir, read_stored

    d = engine_dir()
    files = sorted(p for p in d.glob("*.json") if p.is_file() and not p.is_symlink()) if d.is_dir() else []
    return d, [read_stored(p) for p in files]


def _list_engines(d: Path, engines: list[dict]) -> None:
    if not engines:
        console.print(f"no engine profiles in {esc(d)} (scaleright calibrate --serving --name NAME stores one)")
        return
    rows = []
    for f in engines:
        prov = f.get("provenance") or {}
        runs = prov.get("runs")
        rows.append([f["name"], prov.get("base"), ", ".join(map(str, runs)) if isinstance(runs, list) else None,
                     ", ".join(prov.get("engines") or []) or None,
                     _pct(prov.get("median_abs_pct_error_after")) + " in-sample" if f["ok"] and prov else None,
                     str(prov.get("created_utc") or "")[:10] or None,
                     "" if f["ok"] else f"does not load: {f['error']}"])  # fmt: skip
    table(f"Engine profiles in {d}", ["name", "base", "serve runs", "served by", "median |error|", "fitted", "note"],
          rows)  # fmt: skip


@calibrate_app.command("list")
def list_cmd(as_json: bool = JsonOpt) -> None:
    """The saved calibration profiles (name, GPU, runs, cross-validated error, date, file) and the stored engine
    profiles (calibrate --serving --name: base engine, serve runs, server, in-sample error, date)."""
    from scaleright.estimate.calibration import calibration_dir

    d = calibration_dir()
    files = sorted(p for p in d.glob("*.json") if p.is_file()) if d.is_dir() else []
    found = [_saved(p) for p in files]
    ed, engines = _engines_saved()
    if as_json:
        emit_json({"directory": str(d), "profiles": found, "engine_directory": str(ed), "engine_profiles": engines})
        return
    if not found:
        console.print(f"no calibration profiles in {esc(d)} (scaleright calibrate --name NAME --gpu GPU saves one)")
        _list_engines(ed, engines)
        return
    rows = []
    for f in found:
        prov = f.get("provenance") or {}
        cv = prov.get("cross_validated_median_abs_pct")
        rows.append([f["name"], prov.get("gpu"), prov.get("runs"), _pct(cv) if f["ok"] and prov else None,
                     str(prov.get("created_utc") or "")[:10] or None,
                     "" if f["ok"] else f"does not load: {f['error']}"])  # fmt: skip
    table(f"Calibration profiles in {d}", ["name", "gpu", "runs", "cv median |error|", "fitted", "note"], rows)
    _list_engines(ed, engines)


_SERVING_NAME = typer.Option(False, "--serving", help="NAME is a stored engine profile (calibrate --serving "
                             "--name), not a calibration profile.")  # fmt: skip


def _stored_engine(name: str) -> tuple[Path, dict]:
    """The stored engine profile ``name``: its file and record; an unknown name lists the stored ones."""
    from scaleright.errors import InputError
    from scaleright.estimate.engine_store import engine_profile_path, read_stored, stored_engine_names

    target = engine_profile_path(name, flag="NAME")
    if not target.is_symlink() and not target.exists():
        raise InputError(f"NAME={name}: no engine profile of that name in {target.parent}; "
                         f"stored: {', '.join(stored_engine_names()) or 'none'}")  # fmt: skip
    if target.is_symlink() or not target.is_file():
        raise InputError(f"NAME={name}: {target} is not a regular file; left alone")
    return target, read_stored(target)


def _show_engine(name: str, as_json: bool) -> None:
    from scaleright.errors import InputError
    from scaleright.estimate.engines import ENGINES

    _, found = _stored_engine(name)
    if not found["ok"]:
        raise InputError(found["error"])
    prof, prov = found["profile"], found.get("provenance") or {}
    base = ENGINES.get(str(prov.get("base")))
    from_base = list(found.get("from_base") or [])
    if as_json:
        emit_json({"name": name, "path": found["path"], "profile": prof, "provenance": prov, "from_base": from_base})
        return
    # the factors the fit moved (its provenance), then the four every fit reports; fields the file predates last
    fitted = [k for k in (prov.get("fitted") or []) if k in prof]
    shown = [*fitted, *(k for k in ("iteration_overhead_s", "hbm_fraction", "frontend_latency_s",
                                    "gemm_efficiency_factor") if k not in fitted)]  # fmt: skip
    rows = [[k, prof[k], getattr(base, k, None), "yes" if k in (prov.get("on_bound") or []) else ""] for k in shown]
    rows += [[k, prof[k], getattr(base, k, None), "from base, not fitted"] for k in from_base if k not in shown]
    table(f"Engine profile '{name}' (fitted from {prov.get('base')!s}, serve runs "
          f"{', '.join(map(str, prov.get('runs') or []))})", ["factor", "value", "base", "on bound"], rows)
    console.print(f"median |error| of mean TTFT, TPOT and ITL {_pct(prov.get('median_abs_pct_error_before'))} -> "
                  f"{_pct(prov.get('median_abs_pct_error_after'))} (in-sample); served by "
                  f"{esc(', '.join(prov.get('engines') or []))}; fitted {esc(prov.get('created_utc'))}")


@calibrate_app.command("show")
def show_cmd(
    name: str = typer.Argument(..., help="Profile name (calibrate list) or a profile JSON path."),
    serving: bool = _SERVING_NAME,
    as_json: bool = JsonOpt,
) -> None:
    """One profile: its parameters against the defaults, and what it was fitted to (--serving: a stored engine
    profile against its base engine)."""
    from scaleright.cli.common import profile_from
    from scaleright.estimate.calibration import DEFAULT_CALIBRATION

    if serving:
        _show_engine(name, as_json)
        return

    prof = profile_from("NAME", name)
    params, defaults = prof.calibration.as_dict(), DEFAULT_CALIBRATION.as_dict()
    if as_json:
        emit_json({"name": prof.name, "source": prof.source, "sha256": prof.sha256, "parameters": params,
                   "defaults": defaults, "provenance": prof.provenance})  # fmt: skip
        return
    # (a validated provenance: {"parameters": {name: {"on_bound": ...}, ...}, ...})
    fitted = cast("dict[str, dict[str, Any]]", (prof.provenance or {}).get("parameters") or {})
    table(f"Calibration '{prof.name}'", ["parameter", "value", "default", "on bound"],
          [[k, v, defaults.get(k), (fitted.get(k) or {}).get("on_bound") or ""] for k, v in params.items()])
    console.print(esc(prof.line()))


@calibrate_app.command("delete")
def delete_cmd(name: str = typer.Argument(..., help="Profile name (calibrate list)."),
               serving: bool = _SERVING_NAME) -> None:  # fmt: skip
    """Delete a saved profile: only a file `scaleright calibrate` wrote.

    NAME is a profile name, not a path; the file must be a regular file (not a link) in the calibration directory
    (with --serving: its engines/ directory) that loads as a profile with the provenance calibrate writes. Anything
    else is refused and left alone."""
    from scaleright.errors import InputError
    from scaleright.estimate.calibration import calibration_dir, profile_path

    if serving:
        target, found = _stored_engine(name)
        _delete_written(name, target, found, "engine profile", "an engine profile calibrate wrote",
                        ok=isinstance(found.get("provenance"), dict))  # fmt: skip
        return

    target = profile_path(name, flag="NAME")  # refuses a path, '..', 'default' and any character outside [A-Za-z0-9_-]
    d = calibration_dir()
    if not target.is_symlink() and not target.exists():
        known = sorted(p.stem for p in d.glob("*.json") if p.is_file()) if d.is_dir() else []
        raise InputError(f"NAME={name}: no calibration profile of that name in {d}; "
                         f"known: {', '.join(known) or 'none'}")
    if target.is_symlink() or not target.is_file():
        raise InputError(f"NAME={name}: {target} is not a regular file; not deleted (remove it yourself)")
    found = _saved(target)
    _delete_written(name, target, found, "calibration profile", "a profile scaleright calibrate wrote",
                    ok=found.get("provenance") is not None)  # fmt: skip


def _delete_written(name: str, target: Path, found: dict, kind: str, what: str, *, ok: bool) -> None:
    """Delete ``target`` only when it loaded (``found["ok"]``) with the provenance ``calibrate`` writes (``ok``)."""
    from scaleright.errors import InputError

    if not found["ok"] or not ok:
        why = found.get("error") or "it has no provenance, so scaleright calibrate did not write it"
        raise InputError(f"NAME={name}: {target} is not {what} ({why}); not deleted")
    try:
        target.unlink()
    except OSError as exc:
        raise InputError(f"NAME={name}: cannot delete {target} ({exc.strerror or exc})") from None
    console.print(f"deleted {kind} '{esc(name)}': {esc(target)}")
