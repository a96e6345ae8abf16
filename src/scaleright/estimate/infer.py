"""Inference latency and throughput: the steady state of the iteration-level model, KV-cache capacity, and replicas
vs tensor parallelism.

A replica is ``tp · pp`` GPUs serving one copy of the model; ``gpus / (tp · pp)`` replicas share the load.
Every time here is an engine iteration of ``estimate.iteration.IterationModel`` (one physics with
``scaleright serve``): weights read once per iteration, each sequence's KV cache read, bandwidth-bound GEMV at small
batch and compute-bound prefill (Pope et al. 2022, "Efficiently Scaling Transformer Inference", section 2), two
tensor-parallel all-reduces per layer, the engine's per-iteration overhead. The engine is
``engines.calibrated_engine(cal)`` unless one is named: the calibration's fitted decode factors.

Steady state of continuous batching (Yu et al. 2022, Orca; vLLM, TensorRT-LLM in-flight batching) at a closed-loop
concurrency of ``B`` sequences of ``I`` prompt and ``O`` output tokens: a sequence spends one iteration in prefill
(which samples its first token) and ``O − 1`` decoding, so ``n = B/O`` prompts enter per iteration, fused with the
decode steps of the others. With ``k = ⌊n⌋`` and ``f = n − k``, a periodic schedule runs a fraction ``1 − f`` of
iterations with ``k`` prompts and ``f`` with ``k + 1``; an iteration with ``j`` prompts has ``j·I`` prefill rows and
``B − j`` decode rows at the mean context ``I + O/2``. Then
- the mean iteration time is ``T̄ = (1 − f)·t(k) + f·t(k + 1)``, output throughput ``B / T̄`` per replica;
- TTFT is the time of the iteration that runs the prompt (averaged over prompts), ``t_p``, plus the engine's
  frontend latency: a closed-loop client submits when a sequence ends, at an iteration boundary, so there is no
  wait for an iteration in progress and no queue (``scaleright serve simulate`` has both);
- TPOT is the mean inter-token latency, (e2e − TTFT) / (O − 1), as benchmarks and ``serve simulate`` measure it:
  a sequence lives O consecutive iterations, ``O·T̄`` in all, of which its own prompt's iteration is TTFT, so
  TPOT = ``(O·T̄ − t_p) / (O − 1)`` (``T̄`` itself for O = 1). It equals ``T̄`` when every iteration holds the same
  prompts (n = B/O whole) and is below it at small batches, whose own prefill iteration is the long one (batch 1:
  the decode step alone);
- end-to-end latency is TTFT + (O − 1)·TPOT.
The largest batch is the largest B whose weights, KV cache for I + O tokens, activations and overheads fit, and
that the engine's scheduler admits (``scheduler_batch_cap``: its ``max_batch_size`` and its token budget per
iteration, ``max_num_tokens``, where they are given).

Pipeline parallelism: an engine that overlaps its ``pp`` stages (``EngineProfile.overlaps_pipeline_stages``; the
calibrated engine is TensorRT-LLM's) keeps ``k = pp`` micro-batches in flight, each its own continuous batch of
``B / k`` sequences (as vLLM V0's virtual engines are balanced: a new request goes to the scheduler with the fewest;
``min(B, k)`` micro-batches when fewer sequences than stages run). The schedule above is that of one micro-batch,
every iteration ``IterationModel.times_s`` with ``k`` in flight (the serial sum of the stages, or ``k`` times the
slowest stage's GPU time where longer): TPOT and TTFT are one micro-batch's, throughput ``k`` micro-batches'. The
scheduler's caps hold per micro-batch (TensorRT-LLM admits ``pp · max_batch_size`` sequences and spends
``max_num_tokens`` per micro-batch iteration), so ``scheduler_batch_cap`` multiplies them by ``k``. An engine
that runs the stages in turn (llama.cpp) is ``k = 1``: one batch of ``B``, each iteration all stages long.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from scaleright.errors import InputError
from scaleright.estimate.calibration import DEFAULT_CALIBRATION, Calibration
from scaleright.estimate.comm import Cluster, system_of
from scaleright.estimate.engines import EngineProfile, calibrated_engine
from scaleright.estimate.iteration import IterationModel, compute_precision
from scaleright.estimate.layout import Layout
from scaleright.estimate.memory import GB, Overheads, inference_memory_arrays
from scaleright.workload.spec import TransformerSpec

if TYPE_CHECKING:
    from scaleright.catalog.gpus import Accelerator
    from scaleright.catalog.systems import System

__all__ = ["InferEstimate", "infer_arrays", "estimate_infer", "max_batch", "compute_precision", "steady_state",
           "scheduler_batch_cap"]


def steady_state(model: IterationModel, *, batch: ArrayLike, input_len: float,
                 output_len: float) -> dict[str, np.ndarray]:  # fmt: skip
    """The steady state of continuous batching on ``model``'s replica at concurrency ``batch`` (array-friendly):
    the module docstring's schedule, every iteration timed by ``model.times_s``."""
    B_all = np.asarray(batch, dtype=float)
    I, O = float(input_len), float(output_len)  # noqa: E741
    # micro-batches in flight over the pipeline stages (module docstring): balanced, at most one per sequence
    j_fly = np.clip(B_all, 1.0, float(model.micro_batches))
    B = B_all / j_fly  # sequences of one micro-batch
    n = B / O  # prompts entering per iteration
    k = np.floor(n)
    f = n - k
    ctx = I + O / 2  # mean context of a decoding sequence (positions I + 1 .. I + O − 1)

    # four kinds of iteration, timed in one vectorised call: j = k and j = k + 1 prompts fused with the others'
    # decode steps, one prompt alone, the B decode steps alone
    one, none = np.ones_like(B), np.zeros_like(B)
    j = np.stack([k, k + 1, one, none])  # prompts in the iteration
    d = np.stack([np.maximum(B - k, 0.0), np.maximum(B - k - 1, 0.0), none, B])  # decode steps in it
    t = model.times_s(prefill_tokens=j * I, prefill_seqs=j, prefill_pairs=j * I * (I + 1) / 2, prefill_kv_tokens=j * I,
                      decode_batch=d, decode_context_tokens=d * ctx,
                      in_flight=np.stack([j_fly, j_fly, np.ones_like(B), j_fly]))  # fmt: skip
    tk, tk1, t_prompt, t_decode = t
    period = (1 - f) * tk + f * tk1
    # the iteration a prompt runs in, averaged over prompts (k·(1 − f) of them in k-prompt iterations)
    prompt_iter = np.where(k > 0, ((1 - f) * k * tk + f * (k + 1) * tk1) / np.maximum(n, 1e-300), tk1)
    ttft = prompt_iter + model.engine.frontend_latency_s
    # the mean inter-token latency (module docstring): the sequence's O iterations less its own prompt's
    itl = (O * period - prompt_iter) / (O - 1) if O > 1 else period
    out_tps = B_all / period  # every micro-batch in flight samples B tokens per period
    zero = 0 * period
    return {
        "prefill_s": t_prompt + zero,  # one prompt alone
        "decode_step_s": t_decode + zero,  # the B decode steps alone
        "ttft_s": ttft + zero,
        "tpot_s": itl,
        "e2e_latency_s": ttft + (O - 1) * itl,
        "output_tokens_per_s": out_tps,
        "requests_per_s": out_tps / O,
        "total_tokens_per_s": out_tps / O * (I + O),
    }


def scheduler_batch_cap(*, input_len: float, output_len: float, max_batch_size: int | None = None,
                        max_num_tokens: int | None = None, micro_batches: int = 1) -> int | None:
    """The largest steady-state concurrency an engine's scheduler admits (None: no cap given), over
    ``micro_batches`` micro-batches in flight (pipeline parallelism: each admits the caps, module docstring).

    ``max_batch_size`` caps the sequences in flight; ``max_num_tokens`` the tokens of one iteration (TensorRT-LLM,
    vLLM ``max_num_batched_tokens``: prefill and decode tokens together). In the steady state of the module
    docstring an iteration runs ``B / O`` prompts of ``I`` tokens and ``B − B / O`` decode steps, i.e.
    ``B · (I + O − 1) / O`` tokens, so the budget admits ``B ≤ max_num_tokens · O / (I + O − 1)``; the sequences
    beyond it wait in the queue, and throughput is that of the capped batch."""
    caps = []
    for name, v in (("max_batch_size", max_batch_size), ("max_num_tokens", max_num_tokens)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise InputError(f"{name}={v!r} must be a positive integer")
    if max_batch_size is not None:
        caps.append(max_batch_size)
    if max_num_tokens is not None:
        caps.append(max(1, int(max_num_tokens * output_len // (input_len + output_len - 1))))
    if isinstance(micro_batches, bool) or not isinstance(micro_batches, int) or micro_batches < 1:
        raise InputError(f"micro_batches={micro_batches!r} must be a positive integer")
    return min(caps) * micro_batches if caps else None


def max_batch(spec: TransformerSpec, *, gpu: Accelerator, context: int, tp: int = 1, pp: int = 1,
              precision: str = "bf16", kv_precision: str = "bf16", overheads: Overheads = Overheads(),
              limit: int = 1 << 16) -> int:  # fmt: skip
    """Largest batch whose memory per GPU fits ``gpu`` (0 if not even one sequence fits)."""

    def fits(b: int) -> bool:
        arrs = inference_memory_arrays(spec, batch=b, context=context, tp=tp, pp=pp, precision=precision,
                                       kv_precision=kv_precision, overheads=overheads)  # fmt: skip
        return float(sum(np.asarray(v) for v in arrs.values())) <= gpu.memory_gb * GB

    if not fits(1):
        return 0
    lo, hi = 1, 2
    while hi <= limit and fits(hi):
        lo, hi = hi, hi * 2
    hi = min(hi, limit + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def infer_arrays(spec: TransformerSpec, *, gpu: Accelerator, tp: int, pp: int,
                 batch: ArrayLike, input_len: float, output_len: float, precision: str = "bf16",
                 kv_precision: str = "bf16", cal: Calibration = DEFAULT_CALIBRATION, system: System | None = None,
                 cluster: Cluster | None = None,
                 engine: str | EngineProfile | None = None) -> dict[str, np.ndarray]:  # fmt: skip
    """Latency and throughput of ONE replica of ``tp · pp`` GPUs at concurrency ``batch`` (array-friendly in
    batch): ``steady_state`` of its ``IterationModel``. ``system`` is the network (default:
    ``system_of(gpu, cluster=cluster)``); ``engine`` None: the calibration's decode factors."""
    if np.ndim(tp) or np.ndim(pp):
        raise InputError(f"tp={tp!r} and pp={pp!r} must be single integers (one replica layout per call)")
    model = IterationModel(spec, gpu=gpu, system=system, cluster=cluster, tp=int(tp), pp=int(pp),
                           precision=precision, kv_precision=kv_precision, engine=engine, cal=cal,
                           max_rows=0)  # fmt: skip
    return steady_state(model, batch=batch, input_len=input_len, output_len=output_len)


@dataclass(frozen=True)
class InferEstimate:
    """Inference prediction for all ``gpus`` together. ``as_dict`` keys are a stable contract."""

    fits: bool
    reason: str | None
    layout: dict[str, int]
    memory_gb_per_gpu: float
    memory_breakdown_gb: dict[str, float]
    max_batch: int
    batch: int
    ttft_s: float
    tpot_s: float
    e2e_latency_s: float
    output_tokens_per_s: float
    total_tokens_per_s: float
    requests_per_s: float
    alternatives: tuple[dict[str, Any], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "alternatives"} | {
            "alternatives": list(self.alternatives)
        }


def _one_layout(spec: TransformerSpec, *, gpu: Accelerator, system: System, gpus: int, tp: int, pp: int,
                batch: int | str, input_len: int, output_len: int, precision: str, kv_precision: str,
                cal: Calibration, overheads: Overheads, batch_cap: int | None) -> InferEstimate:  # fmt: skip
    context = input_len + output_len
    mb = max_batch(spec, gpu=gpu, context=context, tp=tp, pp=pp, precision=precision, kv_precision=kv_precision,
                   overheads=overheads)  # fmt: skip
    replicas = gpus // (tp * pp)
    layout = {"tp": tp, "pp": pp, "replicas": replicas, "idle_gpus": gpus - replicas * tp * pp}
    # Concurrency spread over replicas: ``rem`` replicas carry q + 1 sequences, the others q (max: all at capacity).
    if batch == "max":  # each replica at its KV-cache capacity or the scheduler's cap, whichever is smaller
        q, rem = (mb if batch_cap is None else min(mb, batch_cap)), 0
    else:
        q, rem = divmod(int(batch), replicas)
    busiest = q + 1 if rem else q
    b_eval = max(busiest, 1)
    arrs = inference_memory_arrays(spec, batch=b_eval, context=context, tp=tp, pp=pp, precision=precision,
                                   kv_precision=kv_precision, overheads=overheads)  # fmt: skip
    mem = {k: float(v) / GB for k, v in arrs.items()}
    total = sum(mem.values())
    fits = mb >= 1 and busiest <= mb
    reason = None
    if mb < 1:
        reason = (f"weights and one sequence of {context} tokens need {total:.1f} GB per GPU; "
                  f"{gpu.id} has {gpu.memory_gb:.1f} GB")
    elif not fits:
        reason = f"batch {busiest} per replica exceeds the KV-cache capacity of {mb} sequences"
    kw: dict[str, Any] = dict(gpu=gpu, system=system, tp=tp, pp=pp, input_len=input_len, output_len=output_len,
                              precision=precision, kv_precision=kv_precision, cal=cal)  # fmt: skip
    hi = {k: float(v) for k, v in infer_arrays(spec, batch=b_eval, **kw).items()}
    totals: dict[str, Any] = {k: hi[k] * (rem if rem else replicas)
                              for k in ("output_tokens_per_s", "total_tokens_per_s", "requests_per_s")}  # fmt: skip
    if rem and q > 0:  # the other replicas run one sequence fewer
        lo = {k: float(v) for k, v in infer_arrays(spec, batch=q, **kw).items()}
        totals = {k: v + lo[k] * (replicas - rem) for k, v in totals.items()}
    return InferEstimate(
        fits=fits, reason=reason, layout=layout, memory_gb_per_gpu=total, memory_breakdown_gb=mem, max_batch=mb,
        batch=q * replicas + rem, ttft_s=hi["ttft_s"], tpot_s=hi["tpot_s"], e2e_latency_s=hi["e2e_latency_s"],
        **totals,
    )  # fmt: skip


def estimate_infer(
    spec: TransformerSpec,
    *,
    gpu: Accelerator,
    gpus: int = 1,
    input_len: int,
    output_len: int,
    batch: int | str = 1,
    tp: int | None = None,
    pp: int = 1,
    system: System | str | None = None,
    cluster: Cluster | None = None,
    precision: str = "bf16",
    kv_precision: str | None = None,
    cal: Calibration = DEFAULT_CALIBRATION,
    overheads: Overheads = Overheads(),
    max_batch_size: int | None = None,
    max_num_tokens: int | None = None,
) -> InferEstimate:
    """Predict serving ``spec`` on ``gpus`` GPUs at concurrency ``batch`` (total over replicas) or ``"max"``
    (each replica at its KV-cache capacity, or at the engine scheduler's cap when ``max_batch_size`` /
    ``max_num_tokens`` are given: ``scheduler_batch_cap``). With ``tp`` None, every valid TP size (replicas =
    gpus / (tp·pp)) is evaluated and the one with the highest output throughput that fits is returned; the others
    are listed in ``alternatives`` (the seeds' replicas-vs-tensor-parallel question). A TP size need not divide
    ``gpus``: the GPUs left over idle (``layout["idle_gpus"]``), so adding a GPU never lowers the best throughput
    (the previous count's layout is still a candidate)."""
    if input_len < 1 or output_len < 1:
        raise InputError(f"input_len={input_len} and output_len={output_len} must be positive integers")
    if gpus < 1:
        raise InputError(f"gpus={gpus} must be a positive integer")
    if batch != "max" and (not isinstance(batch, int) or batch < 1):
        raise InputError(f"batch={batch!r} must be a positive integer or 'max'")
    kv_precision = kv_precision or ("fp32" if precision == "fp32" else "bf16")
    kw: dict[str, Any] = dict(
        gpu=gpu, system=system_of(gpu, system=system, cluster=cluster), gpus=gpus, pp=pp, batch=batch,
        input_len=input_len, output_len=output_len,
        precision=precision, kv_precision=kv_precision, cal=cal, overheads=overheads,
        batch_cap=scheduler_batch_cap(input_len=input_len, output_len=output_len, max_batch_size=max_batch_size,
                                      max_num_tokens=max_num_tokens,
                                      micro_batches=calibrated_engine(cal).micro_batches_in_flight(pp)),
    )  # fmt: skip
    if tp is not None:
        Layout(tp=tp, pp=pp, dp=gpus // (tp * pp) or 1).validate(spec)
        if gpus % (tp * pp):
            raise InputError(f"tp({tp}) * pp({pp}) = {tp * pp} does not divide gpus({gpus})")
        return _one_layout(spec, tp=tp, **kw)
    cands: list[InferEstimate] = []
    for t in range(1, gpus // pp + 1):  # every TP size that fits the GPUs; the rest of them idle
        try:
            Layout(tp=t, pp=pp).validate(spec)
        except InputError:
            continue
        cands.append(_one_layout(spec, tp=t, **kw))
    if not cands:
        raise InputError(f"no tensor-parallel size up to gpus({gpus}) / pp({pp}) divides the model's heads"
                         f"({spec.heads})")  # fmt: skip
    fitting = [e for e in cands if e.fits]
    pool = fitting or cands
    best = max(pool, key=lambda e: e.output_tokens_per_s)
    alts = tuple(
        {"layout": e.layout, "fits": e.fits, "output_tokens_per_s": e.output_tokens_per_s, "tpot_s": e.tpot_s,
         "ttft_s": e.ttft_s, "max_batch": e.max_batch}
        for e in cands
    )  # fmt: skip
    return InferEstimate(**{**best.__dict__, "alternatives": alts})
