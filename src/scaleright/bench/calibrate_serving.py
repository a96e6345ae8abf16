"""Close the serving loop: simulate a stored ``bench serve`` run, compare it with what was measured, and fit an engine
profile's factors (``estimate.engines``) to such runs.

A serve run stores its workload (the seed, arrival process, lengths, rate or concurrency and request count) and the
server as the user described it (``--sim-model``, ``--gpu``, ``--gpus``, ``--tp``, ``--pp``, ``--precision``,
``--max-num-seqs``, ``--max-num-batched-tokens``); ``serving_inputs`` turns it into ``serve.simulate`` arguments,
which redraw the identical requests (``bench.serve.draw_workload``). A run stopped early (Ctrl-C, wall time) is
simulated in full and compared with the requests that finished: it says so (``stopped``).

``fit_engine`` fits ``iteration_overhead_s``, ``hbm_fraction`` and ``frontend_latency_s`` of a base profile, and
``sequence_overhead_s`` (host time per sampled sequence per iteration, ``estimate.engines``) where every run was
served by vLLM's V0 engine loop (``default_fit_params``), to the measured mean TTFT, mean TPOT and mean ITL of the
runs with the project's one fitter (``scaleright.estimate.fit``:
bounded soft-L1 least squares on log errors, within ``ENGINE_FIT_BOUNDS``; a trust-region step follows the valley
along which the first two trade off: decode time ≈ bytes / (fraction · bandwidth) + overhead). The frontend latency
is added to every request's TTFT and end-to-end latency and to nothing else (``serve.simulate``), so a profile
differing only in it is the cached simulation with every TTFT and end-to-end statistic shifted by the difference:
only the other factors re-run the simulator. A factor that
ends on its bound is named in the report (``on_bound``): the profile is then missing a physical term, and widening
the bound would hide it. The fit is in-sample: its ``error_after`` is on the runs it was fitted to.

Which engine loop served a run is read from what ``bench serve`` stored of the server (``hardware.engine``, the
``owned_by`` of ``GET /v1/models``, and ``hardware.engine_version``, ``GET /version``): vLLM before ``VLLM_V1_FROM``
(0.8, when V1 became the default) ran V0's loop, which does each sequence's output processing and detokenisation in
Python between GPU steps; V1, TensorRT-LLM's C++ batch manager, SGLang and llama.cpp do not (0 in their shipped
profiles). A vLLM run without a release version (none reported, or a development tag) is not assumed to be either,
so the term is not fitted by default; nor is it when the runs mix loops (one profile describes one engine). A
server from 0.8 to 0.10 started with ``VLLM_USE_V1=0`` runs V0 under a V1 version number: ``params`` then names
``sequence_overhead_s`` explicitly.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from scaleright.errors import InputError
from scaleright.estimate.calibration import DEFAULT_CALIBRATION, Calibration
from scaleright.estimate.engines import SEQUENCE_OVERHEAD_BOUNDS_S, EngineProfile, get_engine

__all__ = ["ENGINE_FIT_BOUNDS", "ALWAYS_FITTED", "FIT_METRICS", "COMPARED", "VLLM_V1_FROM", "ServingInputs",
           "serving_inputs", "load_serving_runs", "simulate_run", "compare_run", "fit_engine", "default_fit_params",
           "serial_host_loop", "engine_provenance"]

# factor -> (low, high): the physical range the fit may not leave
ENGINE_FIT_BOUNDS: dict[str, tuple[float, float]] = {
    "iteration_overhead_s": (1e-5, 0.1),  # 10 µs (a CUDA-graph replay) to 100 ms per iteration
    "hbm_fraction": (0.05, 1.0),  # of the datasheet HBM bandwidth; more than all of it is not physical
    "frontend_latency_s": (1e-5, 1.0),  # HTTP + tokenisation per request
    "sequence_overhead_s": SEQUENCE_OVERHEAD_BOUNDS_S,  # host time per sampled sequence per iteration (engines)
}
# fitted unless the caller names others: every factor but the per-sequence host time (see default_fit_params)
ALWAYS_FITTED = ("iteration_overhead_s", "hbm_fraction", "frontend_latency_s")
VLLM_V1_FROM = (0, 8)  # vLLM's V1 engine loop is the default from 0.8.0 (its release notes); before, V0's
# a release version as vLLM numbers them (PEP 440: 0.6.3, 0.6.3.post1, 0.7.0rc1, 0.6.4.dev26+g1a2b3c); the
# major and minor release are groups 1 and 2
_RELEASE = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\.post\d+)?(?:\.dev\d+)?(?:\+[A-Za-z0-9.]+)?$")
SIM_DIFF_STEP = 0.02  # finite-difference step (share of a factor's range): the simulator's output moves in jumps
FRONTEND_START_S = 1e-3  # where the fit starts a frontend latency the base profile leaves at 0
FIT_METRICS = (("ttft_ms", "mean"), ("tpot_ms", "mean"), ("itl_ms", "mean"))
COMPARED = (("ttft_ms", "mean"), ("ttft_ms", "p50"), ("ttft_ms", "p99"), ("tpot_ms", "mean"), ("tpot_ms", "p99"),
            ("itl_ms", "mean"), ("itl_ms", "p99"), ("e2e_ms", "mean"), ("e2e_ms", "p99"),
            ("output_tokens_per_s", None), ("requests_per_s", None))  # fmt: skip
_SHIFTED = ("ttft_ms", "e2e_ms")  # the statistics the frontend latency moves


@dataclass(frozen=True)
class ServingInputs:
    """What the simulator needs for one stored serve run, and what was measured."""

    run_id: int
    spec: Any  # TransformerSpec
    gpu: Any  # Accelerator
    engine: str
    sim: dict[str, Any]  # keyword arguments of serve.simulate (without spec, model, engine, cal)
    measured: dict[str, Any]  # the run's metrics
    stopped: str | None
    server: str | None = None  # the engine and version the server reported (``GET /v1/models``), e.g. "vllm 0.6.3"
    serial_host: bool | None = None  # served by a V0-style loop (``serial_host_loop``); None: not known


def serving_inputs(run: dict, *, catalog: Any = None, sim_model: str | None = None, gpu: str | None = None,
                   engine: str | None = None) -> ServingInputs:  # fmt: skip
    """Map a stored serve run onto ``serve.simulate`` arguments. ``sim_model``, ``gpu`` and ``engine`` replace what
    the run stored; a run without one of them is an ``InputError`` naming the flag to give."""
    from scaleright.workload import load_model

    rid = run.get("id")
    if run.get("kind") != "serve":
        raise InputError(f"run {rid} is a {run.get('kind')} run, not a serve run")
    if run.get("status") != "ok":
        raise InputError(f"run {rid} failed ({run.get('error')}); nothing was measured to compare")
    lay, met = run["layout"], run["metrics"]
    model_name = sim_model or run["model"].get("sim_model")
    gpu_name = gpu or lay.get("gpu")
    engine_name = engine or lay.get("engine_profile")
    for flag, v in (("--sim-model", model_name), ("--gpu", gpu_name), ("--engine", engine_name)):
        if not v:
            raise InputError(f"run {rid}: the run does not say which {flag[2:].replace('-', ' ')} the server ran; "
                             f"give {flag}")  # fmt: skip
    get_engine(str(engine_name))
    if catalog is None:
        from scaleright.catalog import Catalog

        catalog = Catalog.load()
    try:
        sim = {"gpus": int(lay["gpus"]), "tp": int(lay["tp"]), "pp": int(lay["pp"]),
               "input_len": int(lay["input_len"]), "output_len": int(lay["output_len"]),
               "requests": int(lay["requests"]), "input_dist": str(lay["length_dist"]),
               "output_dist": str(lay["length_dist"]), "length_cv": float(lay["length_cv"]), "seed": int(lay["seed"]),
               "precision": str(lay["precision"]), "max_num_seqs": int(lay["max_num_seqs"]),
               "max_num_batched_tokens": int(lay["max_num_batched_tokens"])}  # fmt: skip
        if lay.get("rate") is not None:
            sim.update(rate=float(lay["rate"]), arrival=str(lay["arrival"]), burstiness=float(lay["burstiness"]),
                       diurnal_period_s=float(lay["diurnal_period_s"]),
                       diurnal_amplitude=float(lay["diurnal_amplitude"]))  # fmt: skip
        else:
            sim["concurrency"] = int(lay["concurrency"])
        for key, stat in FIT_METRICS:
            float(met[key][stat])
    except KeyError as exc:
        raise InputError(f"run {rid}: field {exc} is missing; cannot be simulated") from None
    except (TypeError, ValueError) as exc:
        raise InputError(f"run {rid}: a field has the wrong type ({exc}); cannot be simulated") from None
    g = catalog.gpu(str(gpu_name))
    sim["gpu"] = g
    hw = run.get("hardware") or {}
    server = " ".join(str(hw[k]) for k in ("engine", "engine_version") if hw.get(k)) or None
    return ServingInputs(run_id=int(run["id"]), spec=load_model(str(model_name), catalog=catalog), gpu=g,
                         engine=str(engine_name), sim=sim, measured=met, stopped=met.get("stopped"),
                         server=server, serial_host=serial_host_loop(hw.get("engine"), hw.get("engine_version")))


def serial_host_loop(engine: object, version: object) -> bool | None:
    """Whether the server ``bench serve`` identified (``engine``: ``GET /v1/models``' ``owned_by``, ``version``:
    ``GET /version``) runs its per-sequence host work between GPU steps: True for vLLM before ``VLLM_V1_FROM`` (V0),
    False for vLLM from it and for every other engine ``ENGINE_OF_OWNER`` knows, None for vLLM without a release
    version and for a server not identified (not known)."""
    from scaleright.bench.serve_client import ENGINE_OF_OWNER

    if not isinstance(engine, str) or ENGINE_OF_OWNER.get(engine.lower()) is None:
        return None  # an engine the run does not name: nothing is known of its loop
    if ENGINE_OF_OWNER[engine.lower()] != "vllm":
        return False
    m = _RELEASE.match(version.strip()) if isinstance(version, str) else None
    if m is None:
        return None
    return (int(m.group(1)), int(m.group(2))) < VLLM_V1_FROM


def default_fit_params(runs: list[ServingInputs]) -> tuple[tuple[str, ...], str]:
    """The factors ``fit_engine`` fits when the caller names none, and why: ``ALWAYS_FITTED``, and
    ``sequence_overhead_s`` when every run was served by a V0-style loop (``serial_host_loop``; module docstring)."""
    if runs and all(si.serial_host for si in runs):
        return (*ALWAYS_FITTED, "sequence_overhead_s"), (
            "sequence_overhead_s fitted: every run was served by vLLM before "
            f"{'.'.join(map(str, VLLM_V1_FROM))} (V0's host loop between GPU steps)")
    other = [si for si in runs if not si.serial_host]
    why = ", ".join(f"run {si.run_id} ({si.server or 'server not identified'}: "
                    f"{'no serial host loop' if si.serial_host is False else 'engine loop not known'})"
                    for si in other)  # fmt: skip
    return ALWAYS_FITTED, f"sequence_overhead_s not fitted (kept as in the base profile): {why}"


def load_serving_runs(store: Any, run_ids: list[int] | tuple[int, ...] | None = None, *, catalog: Any = None,
                      sim_model: str | None = None, gpu: str | None = None, engine: str | None = None,
                      damaged: list[str] | None = None) -> list[ServingInputs]:  # fmt: skip
    """The serve runs ``run_ids`` of ``store`` (default: every ok serve run) as simulator inputs, read without
    changing the database; ``damaged`` (a list) collects rows that could not be read, which are then skipped."""
    if run_ids is not None:
        from scaleright.bench.db import check_run_id

        runs = [store.get(check_run_id(i, flag="--run-ids")) for i in run_ids]
    else:
        runs = store.list("serve", status="ok", damaged=damaged)
        if not runs:
            raise InputError(f"no successful serve runs in {store.path}; run `scaleright bench serve` first")
    return [serving_inputs(r, catalog=catalog, sim_model=sim_model, gpu=gpu, engine=engine) for r in runs]


def _simulated(si: ServingInputs, profile: EngineProfile, cal: Calibration) -> dict[str, Any]:
    """``serve.simulate`` of the run with ``profile``'s iteration factors (its frontend latency: see ``_shift``)."""
    from scaleright.estimate.iteration import IterationModel
    from scaleright.serve.simulate import simulate

    s = si.sim
    model = IterationModel(si.spec, gpu=si.gpu, tp=s["tp"], pp=s["pp"], precision=s["precision"], engine=profile,
                           cal=cal, max_rows=s["max_num_batched_tokens"])  # fmt: skip
    return simulate(si.spec, engine=si.engine, cal=cal, model=model, **s).as_dict()


def _shift(sim: dict[str, Any], delta_ms: float) -> dict[str, Any]:
    """``sim`` with every TTFT and end-to-end statistic moved by ``delta_ms`` (a frontend latency change)."""
    out = dict(sim)
    for key in _SHIFTED:
        out[key] = {k: v + delta_ms for k, v in sim[key].items()}
    return out


def simulate_run(si: ServingInputs, profile: EngineProfile | None = None,
                 cal: Calibration = DEFAULT_CALIBRATION) -> dict[str, Any]:  # fmt: skip
    """The simulator's metrics (``serve simulate --json`` names) for the run, under ``profile`` (default: the run's
    engine profile as shipped)."""
    base = get_engine(si.engine)
    profile = profile or base
    sim = _simulated(si, dataclasses.replace(profile, frontend_latency_s=base.frontend_latency_s), cal)
    return _shift(sim, (profile.frontend_latency_s - base.frontend_latency_s) * 1e3)


def _value(d: dict[str, Any], key: str, stat: str | None) -> float:
    v = d.get(key)
    v = v.get(stat) if stat is not None and isinstance(v, dict) else v
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else float("nan")


def compare_run(si: ServingInputs, sim: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows of simulated vs measured, one per ``COMPARED`` statistic, with the error in % of the measurement."""
    rows = []
    for key, stat in COMPARED:
        s, m = _value(sim, key, stat), _value(si.measured, key, stat)
        err = (s / m - 1) * 100 if math.isfinite(s) and math.isfinite(m) and m > 0 else None
        rows.append({"run_id": si.run_id, "metric": f"{key}.{stat}" if stat else key, "simulated": s,
                     "measured": m, "error_pct": err})  # fmt: skip
    return rows


def _errors(runs: list[ServingInputs], sims: list[dict[str, Any]]) -> list[float]:
    """log(simulated / measured) of every fitted statistic of every run."""
    out = []
    for si, sim in zip(runs, sims, strict=True):
        for key, stat in FIT_METRICS:
            s, m = _value(sim, key, stat), _value(si.measured, key, stat)
            if m > 0 and math.isfinite(m):
                out.append(math.log(s / m) if s > 0 and math.isfinite(s) else 10.0)
    return out


def fit_engine(runs: list[ServingInputs], *, base: str | EngineProfile | None = None,
               cal: Calibration = DEFAULT_CALIBRATION, params: tuple[str, ...] | None = None,
               evals: int = 120) -> tuple[EngineProfile, dict[str, Any]]:  # fmt: skip
    """Fit ``params`` (default: ``default_fit_params``) of the ``base`` profile (default: the runs' engine) to
    ``runs`` (see the module docstring). Returns the fitted profile and a report: factors before and after, which
    ended on a bound, why the per-sequence host time was or was not fitted (``fit_choice``), and the median absolute
    % error of the fitted statistics before and after (in-sample)."""
    from scaleright.estimate.fit import fit

    if not runs:
        raise InputError("no serve runs to fit")
    if params is None:
        params, choice = default_fit_params(runs)
    else:
        choice = f"as asked: {', '.join(params)}"
    unknown = [p for p in params if p not in ENGINE_FIT_BOUNDS]
    if unknown:
        raise InputError(f"cannot fit {', '.join(unknown)}; fittable: {', '.join(ENGINE_FIT_BOUNDS)}")
    engines = sorted({si.engine for si in runs})
    if base is None:
        if len(engines) > 1:
            raise InputError(f"the runs are of {len(engines)} engines ({', '.join(engines)}); fit one at a time")
        base = engines[0]
    start = get_engine(base) if isinstance(base, str) else base
    if start.hbm_fraction is None:
        start = dataclasses.replace(start, hbm_fraction=cal.decode_memory_efficiency)
    fronts = [get_engine(si.engine).frontend_latency_s for si in runs]
    cache: dict[tuple[float, float, float], list[dict[str, Any]]] = {}

    def sims(p: EngineProfile) -> list[dict[str, Any]]:
        key = (p.iteration_overhead_s, float(p.hbm_fraction or 0.0), p.sequence_overhead_s)
        if key not in cache:
            cache[key] = [simulate_run(si, dataclasses.replace(p, frontend_latency_s=fr), cal)
                          for si, fr in zip(runs, fronts, strict=True)]  # fmt: skip
        return [_shift(s, (p.frontend_latency_s - fr) * 1e3) for s, fr in zip(cache[key], fronts, strict=True)]

    rows = [(i, key, stat) for i, si in enumerate(runs) for key, stat in FIT_METRICS
            if _value(si.measured, key, stat) > 0 and math.isfinite(_value(si.measured, key, stat))]  # fmt: skip
    measured = np.array([_value(runs[i].measured, key, stat) for i, key, stat in rows])

    def predict(p: EngineProfile) -> np.ndarray:
        simulated = sims(p)
        return np.array([_value(simulated[i], key, stat) for i, key, stat in rows], dtype=float)

    def loss(p: EngineProfile) -> float:
        return float(np.mean(np.square(_errors(runs, sims(p)))))

    before = loss(start)
    # The one fitter (scaleright.estimate.fit): bounded soft-L1 least squares on log errors. A step in the frontend
    # latency alone re-uses the cached simulations (it shifts TTFT and end-to-end only).
    # A factor at the bottom of a log-scaled range (a profile without a frontend latency: 0, clipped to 10 µs) has
    # no gradient there (a step is a fraction of a microsecond); the search starts it at 1 ms instead.
    x0 = dataclasses.replace(start, frontend_latency_s=max(start.frontend_latency_s, FRONTEND_START_S))
    result = fit(predict, measured, x0, {n: ENGINE_FIT_BOUNDS[n] for n in params}, f_scale=1.0,
                 max_nfev=max(evals // 4, 4), step=SIM_DIFF_STEP)  # fmt: skip
    prof = result.calibration
    if loss(prof) > before:  # never worse than where it started
        prof = start
    after = loss(prof)
    on_bound = [n for n in params if _near_bound(float(getattr(prof, n)), *ENGINE_FIT_BOUNDS[n])]
    ids = ", ".join(str(si.run_id) for si in runs)

    def pct(p: EngineProfile) -> float:
        return float(np.median([abs(math.exp(e) - 1) * 100 for e in _errors(runs, sims(p))]))

    fitted = dataclasses.replace(
        prof, status="fitted",
        grounded_in=(f"bench serve runs {ids}: mean TTFT, TPOT and ITL",),
        note=f"Fitted by calibrate_serving.fit_engine from {start.name!r} on {len(runs)} run(s) (in-sample)"
             + (f"; on its bound: {', '.join(on_bound)}" if on_bound else "") + ".")  # fmt: skip
    report = {
        "base": start.name, "runs": [si.run_id for si in runs], "fitted": list(params),
        "before": {n: getattr(start, n) for n in params}, "after": {n: getattr(fitted, n) for n in params},
        "bounds": {n: ENGINE_FIT_BOUNDS[n] for n in params}, "on_bound": on_bound, "fit_choice": choice,
        "rms_log_error_before": math.sqrt(before), "rms_log_error_after": math.sqrt(after),
        "median_abs_pct_error_before": pct(start), "median_abs_pct_error_after": pct(fitted),
        "in_sample": True, "stopped_runs": [si.run_id for si in runs if si.stopped],
        "simulations": len(cache) * len(runs),
    }  # fmt: skip
    return fitted, report


def _near_bound(v: float, lo: float, hi: float, rel: float = 0.02) -> bool:
    """Within ``rel`` of a bound: as a ratio (log) for a range above 0, as a share of the range for one from 0."""
    if lo <= 0:
        return v - lo <= rel * (hi - lo) or hi - v <= rel * (hi - lo)
    return abs(math.log(v / lo)) < rel or abs(math.log(hi / v)) < rel


def engine_provenance(runs: list[ServingInputs], report: dict[str, Any]) -> dict[str, Any]:
    """What a stored engine profile records of its fit (``estimate.engine_store.PROVENANCE_KEYS``): when, from
    which base profile and runs (with a SHA-256 of their measured metrics, so a changed run shows), the engines and
    versions and GPUs that served them, the factors before and after, those on a bound and the in-sample error."""
    import datetime
    import hashlib
    import json

    measured = [{"run_id": si.run_id, "metrics": si.measured} for si in sorted(runs, key=lambda x: x.run_id)]
    digest = hashlib.sha256(json.dumps(measured, sort_keys=True, default=str).encode()).hexdigest()
    return {
        "created_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "base": report["base"], "runs": list(report["runs"]), "runs_sha256": digest,
        "engines": sorted({si.server or f"{si.engine} (version not reported)" for si in runs}),
        "gpus": sorted({si.gpu.id for si in runs}), "fitted": list(report["fitted"]),
        "before": dict(report["before"]), "after": dict(report["after"]), "on_bound": list(report["on_bound"]),
        "median_abs_pct_error_before": report["median_abs_pct_error_before"],
        "median_abs_pct_error_after": report["median_abs_pct_error_after"], "in_sample": True,
    }  # fmt: skip
