"""Close the loop: predict stored benchmark runs with the performance model, and fit its efficiency factors to them.

A stored train run (``RunStore``) carries the benchmark model's dims, the strategy and world size, the device and
the measured median step time. ``run_inputs`` turns it into the model's inputs: a GPT-2-shaped ``TransformerSpec``
(the harness's nanoGPT decoder: tied embeddings, learned positions, biases, 4h GELU MLP, no dropout), a ``Layout``
(single/DDP → ZeRO-0, FSDP shard-grad-op → ZeRO-2, FSDP full shard → ZeRO-3; activation checkpointing → full
recompute) and the catalog accelerator the run used (``--gpu``; a CPU or an unlisted device is described by a user
catalog entry, see README).

``check_hardware`` refuses runs whose hardware is not the accelerator named: a CPU run matches only a catalog entry
with ``form_factor: cpu`` (a user catalog describes the CPU), a GPU run only the entry its GPU names resolve to.

``fit_calibration`` fits the free parameters to the runs' median step times with the one fitter of the project
(``scaleright.estimate.fit``: bounded soft-L1 least squares on log errors), starting from the current calibration.
With runs at one world size only, communication parameters are left as they are (nothing in the data constrains
them). ``cross_validate`` refits with each run left out in turn and predicts that run (leave-one-run-out; 10 folds
of runs beyond 10 runs): the out-of-sample error a saved profile is judged by, against the defaults' error on the
same runs.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from scaleright.errors import InputError, ScalerightError
from scaleright.estimate.calibration import DEFAULT_CALIBRATION, PROVENANCE_SCHEMA, Calibration
from scaleright.estimate.comm import system_of
from scaleright.estimate.fit import FitResult, error_summary, fit, log_errors
from scaleright.estimate.layout import Layout
from scaleright.estimate.memory import Overheads
from scaleright.estimate.train import estimate_train
from scaleright.workload.spec import TransformerSpec, from_hf_config

__all__ = ["RunInputs", "run_inputs", "predict_run", "fit_calibration", "cross_validate", "CalibrationFit",
           "FIT_BOUNDS", "select_runs", "check_hardware", "runs_sha256", "provenance"]

_ZERO = {"single": 0, "ddp": 0, "fsdp-grad-op": 2, "fsdp-full": 3, "fsdp": 3}

# parameter -> (low, high): physical ranges the fit may not leave
FIT_BOUNDS: dict[str, tuple[float, float]] = {
    "gemm_efficiency": (0.01, 0.95),
    "memory_efficiency": (0.05, 0.95),
    "step_overhead_s": (1e-5, 5.0),
    "collective_bandwidth_scale": (0.02, 1.3),  # x the measured fabric bandwidth fraction (which is <= ~0.9)
    "collective_latency_scale": (0.02, 2000.0),  # x the fitted step latency (gloo on CPU: milliseconds)
}


@dataclass(frozen=True)
class RunInputs:
    """What the model needs to predict one stored run, and what was measured."""

    run_id: int
    spec: TransformerSpec
    layout: Layout
    seq_len: int
    precision: str
    world_size: int
    gpus_per_node: int
    measured: dict[str, float]


def select_runs(runs: list[dict], fingerprint: str | None) -> tuple[str, list[dict]]:
    """The ok train runs of one hardware fingerprint (the only one, or the one named)."""
    ok = [r for r in runs if r.get("status") == "ok" and r.get("kind") == "train"]
    fps = sorted({r["fingerprint"] for r in ok})
    if not fps:
        raise InputError("no successful train runs in the database; run `scaleright bench train` first")
    if fingerprint is None:
        if len(fps) > 1:
            raise InputError(f"runs from {len(fps)} machines; choose one with --fingerprint: {', '.join(fps)}")
        fingerprint = fps[0]
    chosen = [r for r in ok if r["fingerprint"] == fingerprint]
    if not chosen:
        raise InputError(f"--fingerprint={fingerprint!r} has no successful train runs; known: {', '.join(fps)}")
    return fingerprint, chosen


def run_inputs(run: dict) -> RunInputs:
    """Map one stored train run onto the performance model's inputs (see module docstring). A run with a missing
    or out-of-range field is an ``InputError`` naming the run and the field."""
    from scaleright.bench.report import run_problem

    why = run_problem(run)
    if why is not None:
        raise InputError(f"run {run.get('id')}: {why}; cannot be predicted or fitted")
    try:
        return _run_inputs(run)
    except KeyError as exc:
        raise InputError(f"run {run.get('id')}: field {exc} is missing; cannot be predicted or fitted") from None
    except (TypeError, ValueError) as exc:
        raise InputError(f"run {run.get('id')}: a field has the wrong type ({exc}); cannot be predicted or "
                         "fitted") from None


def _run_inputs(run: dict) -> RunInputs:
    m, lay, met = run["model"], run["layout"], run["metrics"]
    if m.get("arch") == "llama-decoder":  # a catalog model (bench train --model), as run
        if not isinstance(m["config"], dict):
            raise TypeError("model.config is not a mapping")
        spec = from_hf_config(m["config"], name=str(m.get("name") or "bench-decoder"), source=f"run {run['id']}")
    else:  # a nanoGPT preset: GPT-2 shape
        cfg = {"model_type": "gpt2", "n_layer": m["layers"], "n_embd": m["hidden"], "n_head": m["heads"],
               "vocab_size": m["vocab"], "n_positions": m["seq_len"], "resid_pdrop": 0.0, "attn_pdrop": 0.0,
               "embd_pdrop": 0.0}  # fmt: skip
        spec = from_hf_config(cfg, name=f"bench-{m.get('preset') or 'custom'}", source=f"run {run['id']}")
    strategy = lay["strategy"]
    if strategy not in _ZERO:
        raise InputError(f"run {run['id']}: strategy {strategy!r} not known; allowed: {', '.join(_ZERO)}")
    ws = int(lay["world_size"])
    layout = Layout(dp=ws, zero=_ZERO[strategy] if ws > 1 else 0, micro_batch=int(lay["micro_batch"]),
                    global_batch=int(lay.get("global_batch") or lay["micro_batch"] * ws),
                    recompute="full" if lay.get("activation_checkpointing") else "none")  # fmt: skip
    return RunInputs(
        run_id=int(run["id"]), spec=spec, layout=layout, seq_len=int(m["seq_len"]),
        precision=str(lay.get("precision", "fp32")), world_size=ws, gpus_per_node=int(lay.get("nproc_per_node") or ws),
        measured={"step_time_s": float(met["step_time_s_median"]), "tokens_per_s": float(met["tokens_per_s"]),
                  "peak_memory_gb": float(met.get("peak_memory_gb") or float("nan"))},
    )  # fmt: skip


def predict_run(ri: RunInputs, *, gpu, cal: Calibration = DEFAULT_CALIBRATION) -> dict[str, float]:
    """The model's step time, tokens/s and memory per rank for one run."""
    system = system_of(gpu, gpus_per_node=ri.gpus_per_node)
    # The harness measures allocated tensors (CUDA max_memory_allocated, or RSS growth on CPU), without the CUDA
    # context or the allocator's cache: compare like with like.
    est = estimate_train(ri.spec, gpu=gpu, layout=ri.layout, seq_len=ri.seq_len, system=system,
                         precision=ri.precision, cal=cal,
                         overheads=Overheads(runtime_gb=0.0, fragmentation_fraction=0.0,
                                             nccl_gb_per_group=0.0))  # fmt: skip
    return {"step_time_s": est.step_time_s, "tokens_per_s": est.tokens_per_s, "peak_memory_gb": est.memory_gb_per_gpu}


def _step_errors(inputs: list[RunInputs], gpu: Any, cal: Calibration) -> np.ndarray:
    """log(predicted / measured) of each run's median step time."""
    pred = [predict_run(ri, gpu=gpu, cal=cal)["step_time_s"] for ri in inputs]
    return log_errors(pred, [ri.measured["step_time_s"] for ri in inputs])


def default_params(inputs: list[RunInputs]) -> tuple[str, ...]:
    """Compute, memory and overhead; plus the link's bandwidth and latency scales when the runs span several world
    sizes (one of them above 1): only then do the data constrain them."""
    params: tuple[str, ...] = ("gemm_efficiency", "memory_efficiency", "step_overhead_s")
    if len({ri.world_size for ri in inputs}) > 1 and any(ri.world_size > 1 for ri in inputs):
        params += ("collective_bandwidth_scale", "collective_latency_scale")
    return params


def _fit(inputs: list[RunInputs], gpu: Any, start: Calibration, params: tuple[str, ...]) -> FitResult:
    measured = np.array([ri.measured["step_time_s"] for ri in inputs])

    def predict(cal: Calibration) -> np.ndarray:
        return np.array([predict_run(ri, gpu=gpu, cal=cal)["step_time_s"] for ri in inputs])

    return fit(predict, measured, start, {p: FIT_BOUNDS[p] for p in params})


@dataclass(frozen=True)
class CalibrationFit:
    """A fit to stored runs: the result, and the step-time errors of the defaults and of the fitted values."""

    result: FitResult
    params: tuple[str, ...]
    start: Calibration
    defaults_error: dict[str, Any]  # error_summary of ``start`` on the runs (not fitted to them: out of sample)
    in_sample_error: dict[str, Any]  # error_summary of the fitted values on the runs they were fitted to

    @property
    def calibration(self) -> Calibration:
        return self.result.calibration

    def parameters(self) -> dict[str, dict[str, Any]]:
        """Per fitted parameter: value, default, low, high, on_bound (None, "low" or "high")."""
        r = self.result
        return {p: {"value": r.values[p], "default": getattr(self.start, p), "low": r.bounds[p][0],
                    "high": r.bounds[p][1], "on_bound": r.on_bound.get(p)} for p in self.params}  # fmt: skip


def fit_calibration(inputs: list[RunInputs], *, gpu: Any, start: Calibration = DEFAULT_CALIBRATION,
                    params: tuple[str, ...] | None = None) -> CalibrationFit:  # fmt: skip
    """Fit ``params`` (default: ``default_params``) to the runs' median step times."""
    if not inputs:
        raise InputError("no runs to fit")
    params = params or default_params(inputs)
    res = _fit(inputs, gpu, start, params)
    return CalibrationFit(result=res, params=params, start=start,
                          defaults_error=error_summary(_step_errors(inputs, gpu, start)),
                          in_sample_error=error_summary(_step_errors(inputs, gpu, res.calibration)))  # fmt: skip


CV_FOLDS_MAX = 10  # up to this many runs: leave-one-run-out; more: this many folds of runs (every k-th run)


def cross_validate(inputs: list[RunInputs], *, gpu: Any, start: Calibration = DEFAULT_CALIBRATION,
                   params: tuple[str, ...]) -> dict[str, Any]:  # fmt: skip
    """Fit ``params`` on every run but a held-out fold, predict the fold, for each fold in turn: leave-one-run-out
    up to ``CV_FOLDS_MAX`` runs, else that many folds (run i in fold i mod k). The ``error_summary`` of the held-out
    predictions, with ``method`` and ``folds``; fewer than 2 runs: no folds (every error None)."""
    n = len(inputs)
    k = min(n, CV_FOLDS_MAX) if n >= 2 else 0
    held = np.full(n, np.nan)
    for f in range(k):
        test = [i for i in range(n) if i % k == f]
        cal = _fit([ri for i, ri in enumerate(inputs) if i % k != f], gpu, start, params).calibration
        held[test] = _step_errors([inputs[i] for i in test], gpu, cal)
    method = "leave-one-run-out" if k == n else f"{k}-fold by run"
    return {**error_summary(held), "method": method, "folds": k}


# ---- which hardware the runs measured --------------------------------------------------------------------------

_USER_CATALOG = ("a user catalog: a gpus.yaml entry of the same schema as the built-ins in a directory given with "
                 "--catalog DIR (see README, 'Measure, then calibrate')")  # fmt: skip


def check_hardware(runs: list[dict], gpu: Any, catalog: Any) -> None:
    """Refuse (``InputError``, one line) the first run whose hardware is not ``gpu``: a CPU run (``device_type``
    cpu, or no GPU recorded) needs a catalog entry with ``form_factor: cpu``; a GPU run needs every GPU it
    recorded (nvidia-smi's names) to resolve, by id or alias, to ``gpu``."""
    is_cpu_entry = str(getattr(gpu, "form_factor", "")).strip().lower() == "cpu"
    for run in runs:
        hw: dict = run["hardware"] if isinstance(run.get("hardware"), dict) else {}
        layout: dict = run["layout"] if isinstance(run.get("layout"), dict) else {}
        names = [str(n) for n in (hw.get("gpus") or []) if isinstance(n, str) and n.strip()]
        device = str(layout.get("device_type") or ("cuda" if names else "cpu"))
        rid = run.get("id")
        if device == "cpu":
            if is_cpu_entry:
                continue
            cpu = f" ({hw['cpu_model']})" if isinstance(hw.get("cpu_model"), str) and hw["cpu_model"] else ""
            raise InputError(f"--gpu={gpu.id}: run {rid} ran on a CPU{cpu}, and a CPU run is not an {gpu.id}; "
                             f"describe the CPU in {_USER_CATALOG}, with form_factor: cpu and its measured FLOP/s "
                             "and memory bandwidth, and name it with --gpu")  # fmt: skip
        if not names:
            raise InputError(f"--gpu={gpu.id}: run {rid} ran on {device} but recorded no GPU names, so its hardware "
                             "cannot be matched to a catalog entry; measure again with `scaleright bench train`")
        for n in dict.fromkeys(names):
            try:
                found = catalog.gpu(n)
            except ScalerightError:
                raise InputError(f"--gpu={gpu.id}: run {rid} ran on {n!r}, which the catalog does not list; "
                                 f"describe that card in {_USER_CATALOG} (or add {n!r} to the aliases of its "
                                 "entry), and name it with --gpu") from None  # fmt: skip
            if found.id != gpu.id:
                raise InputError(f"--gpu={gpu.id}: run {rid} ran on {n} ({found.id}), not on {gpu.id}; name "
                                 f"--gpu {found.id}, or choose another machine's runs with --fingerprint")


# ---- provenance ------------------------------------------------------------------------------------------------


def runs_sha256(runs: list[dict]) -> str:
    """SHA-256 of the stored run records (canonical JSON, ordered by id): which measurements a profile came from."""
    ordered = sorted(runs, key=lambda r: int(r["id"]))
    text = json.dumps(ordered, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def provenance(result: CalibrationFit, cv: dict[str, Any], *, runs: list[dict], gpu_id: str, fingerprint: str,
               forced: bool) -> dict[str, Any]:  # fmt: skip
    """The provenance a saved profile carries (schema in ``scaleright.estimate.calibration``)."""
    from scaleright import __version__

    r = result.result
    return {
        "schema": PROVENANCE_SCHEMA, "created_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "scaleright_version": __version__, "gpu": gpu_id, "fingerprint": fingerprint,
        "runs": sorted(int(x["id"]) for x in runs), "runs_sha256": runs_sha256(runs),
        "parameters": result.parameters(),
        "error": {"defaults": result.defaults_error, "in_sample": result.in_sample_error, "cross_validated": cv},
        "forced": forced, "solver": {"cost": r.cost, "nfev": r.nfev, "status": r.status},
    }  # fmt: skip
