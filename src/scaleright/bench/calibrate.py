"""Close the loop: predict stored benchmark runs with the performance model, and fit its efficiency factors to them.

A stored train run (``RunStore``) carries the benchmark model's dims, the strategy and world size, the device and
the measured median step time. ``run_inputs`` turns it into the model's inputs: a GPT-2-shaped ``TransformerSpec``
(the harness's nanoGPT decoder: tied embeddings, learned positions, biases, 4h GELU MLP, no dropout), a ``Layout``
(single/DDP → ZeRO-0, FSDP shard-grad-op → ZeRO-2, FSDP full shard → ZeRO-3; activation checkpointing → full
recompute) and the catalog accelerator the run used (``--gpu``; a CPU or an unlisted device is described by a user
catalog entry, see README).

``fit_calibration`` minimises the squared log error of the predicted step times over the free parameters
(coordinate descent with golden-section line searches, in log space, within physical bounds), starting from the
current calibration. It needs no scipy. With runs at one world size only, communication parameters are left as
they are (nothing in the data constrains them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scaleright.errors import InputError
from scaleright.estimate.calibration import DEFAULT_CALIBRATION, Calibration
from scaleright.estimate.comm import system_of
from scaleright.estimate.layout import Layout
from scaleright.estimate.memory import Overheads
from scaleright.estimate.train import estimate_train
from scaleright.workload.spec import TransformerSpec, from_hf_config

__all__ = ["RunInputs", "run_inputs", "predict_run", "fit_calibration", "FIT_BOUNDS", "select_runs"]

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


def _loss(inputs: list[RunInputs], gpu, cal: Calibration) -> float:
    errs = [math.log(predict_run(ri, gpu=gpu, cal=cal)["step_time_s"] / ri.measured["step_time_s"]) for ri in inputs]
    return float(np.mean(np.square(errs)))


def _golden(f, lo: float, hi: float, iters: int = 30) -> float:
    """Minimise ``f`` over [lo, hi] (log space) by golden-section search."""
    a, b = math.log(lo), math.log(hi)
    g = (math.sqrt(5) - 1) / 2
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(math.exp(c)), f(math.exp(d))
    for _ in range(iters):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(math.exp(c))
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(math.exp(d))
    return math.exp((a + b) / 2)


def fit_calibration(inputs: list[RunInputs], *, gpu, start: Calibration = DEFAULT_CALIBRATION,
                    params: tuple[str, ...] | None = None, sweeps: int = 25) -> tuple[Calibration, dict]:  # fmt: skip
    """Fit ``params`` (default: compute, memory and overhead; plus link parameters when several world sizes are
    present) to the runs' median step times. Returns the calibration and a report with the errors before/after."""
    if not inputs:
        raise InputError("no runs to fit")
    multi = len({ri.world_size for ri in inputs}) > 1 and any(ri.world_size > 1 for ri in inputs)
    if params is None:
        params = ("gemm_efficiency", "memory_efficiency", "step_overhead_s")
        if multi:
            params += ("collective_bandwidth_scale", "collective_latency_scale")
    cal = start
    before = _loss(inputs, gpu, cal)
    cur = before
    for _ in range(sweeps):  # coordinate descent until a sweep gains less than 1e-10 in loss
        start_sweep = cur
        for p in params:
            lo, hi = FIT_BOUNDS[p]
            best = _golden(lambda v, p=p, c=cal: _loss(inputs, gpu, c.replace(**{p: v})), lo, hi)
            trial = _loss(inputs, gpu, cal.replace(**{p: best}))
            if trial < cur:
                cal, cur = cal.replace(**{p: best}), trial
        if start_sweep - cur < 1e-10:
            break
    after = _loss(inputs, gpu, cal)

    def pct(c: Calibration) -> list[float]:
        return [abs(predict_run(ri, gpu=gpu, cal=c)["step_time_s"] / ri.measured["step_time_s"] - 1) * 100
                for ri in inputs]  # fmt: skip

    report = {
        "runs": len(inputs), "fitted": list(params), "rms_log_error_before": math.sqrt(before),
        "rms_log_error_after": math.sqrt(after), "median_abs_pct_error_before": float(np.median(pct(start))),
        "median_abs_pct_error_after": float(np.median(pct(cal))),
    }  # fmt: skip
    return cal, report
