"""Inference latency and throughput: prefill, decode, KV-cache capacity, and replicas vs tensor parallelism.

A replica is ``tp · pp`` GPUs serving one copy of the model; ``gpus / (tp · pp)`` replicas share the load.
- Prefill of ``n`` prompt tokens is compute-bound: the layer GEMMs with m = n rows (roofline, as in training),
  the causal attention core, elementwise traffic, and two tensor-parallel all-reduces per layer.
- A decode iteration for a batch of ``B`` sequences reads every local weight once and each sequence's KV cache
  from HBM, and does 2·N_active·B FLOPs: its time is the larger of the memory and the compute time
  (Pope et al. 2022, "Efficiently Scaling Transformer Inference", section 2), plus two small all-reduces per
  layer (latency-bound) and a fixed per-iteration overhead. MoE layers read only the experts the batch touches:
  E·(1 − (1 − k/E)^B) of E.
- Continuous batching (Yu et al. 2022, Orca; vLLM) at concurrency ``B``: each iteration decodes B tokens and, in
  steady state, prefills B/O new prompts in one batched prefill (or one prompt every O/B iterations when B < O),
  so the period per output token is ``t_decode(B) + min(B/O, 1)·t_prefill(max(B/O, 1)·I)``. TPOT is that period, output
  throughput B / period per replica, TTFT a prompt's prefill plus one iteration, end-to-end latency TTFT + (O − 1)·TPOT.
- The largest batch is the largest B whose weights, KV cache for I + O tokens, activations and overheads fit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.errors import InputError
from scaleright.estimate.calibration import DEFAULT_CALIBRATION, Calibration
from scaleright.estimate.collectives import collective_time_s
from scaleright.estimate.comm import Cluster, scaled_fits, system_of
from scaleright.estimate.layer import elementwise_values, gemm_time, layer_gemm_times, roofline
from scaleright.estimate.layout import Layout
from scaleright.estimate.memory import GB, Overheads, inference_memory_arrays, kv_cache_bytes
from scaleright.workload.flops import attention_flops_per_token, decode_flops_per_token
from scaleright.workload.params import ParamCounts, count_params
from scaleright.workload.precision import bytes_per_element
from scaleright.workload.spec import TransformerSpec

if TYPE_CHECKING:
    from scaleright.catalog.gpus import Accelerator
    from scaleright.catalog.systems import System

__all__ = ["InferEstimate", "infer_arrays", "estimate_infer", "max_batch", "compute_precision"]


def compute_precision(gpu: Accelerator, precision: str) -> str:
    """The tensor-core format the GEMMs run in: weight-only int4 runs in 16-bit; fp8/fp4/int8 natively if the
    GPU has a rate for it, else in 16-bit after dequantisation."""
    if precision in ("fp32",):
        return "fp32"
    if precision in ("fp8", "fp4", "int8") and gpu.dense_tflops.get(precision):
        return precision
    return "fp16" if not gpu.dense_tflops.get("bf16") else "bf16"


def _prefill_time(
    spec: TransformerSpec, c: ParamCounts, *, gpu: Accelerator, system: System, tokens: ArrayLike, context: float,
    tp: ArrayLike, precision: str, cal: Calibration,
) -> float | NDArray[np.float64]:
    """Time to run ``tokens`` prompt tokens (each attending to ``context`` on average... causal) on one replica."""
    rl = roofline(gpu, compute_precision(gpu, precision), cal)  # peaks and efficiencies, one home
    hbm = rl.hbm
    gemm = rl.gemm(bytes_per_element(precision))
    t = np.asarray(tokens, dtype=float)
    tp = np.asarray(tp, dtype=float)
    h = spec.hidden
    attn, ffn = layer_gemm_times(spec, c, tokens=t, tp=tp, gemm=gemm)
    core = t * attention_flops_per_token(spec, context, causal=True) / spec.layers / tp / rl.attention
    repl, split = elementwise_values(spec, c)
    elem = cal.elementwise_factor * t * (repl + split / tp) * 2 / hbm
    comm = 2 * collective_time_s("all_reduce", t * h * 2.0, system=system, fits=scaled_fits(cal), size=tp, stride=1)
    head = gemm_time(np.maximum(t / np.maximum(context, 1), 1), h, spec.vocab / tp, **gemm)
    return cast("float | NDArray[np.float64]", spec.layers * (attn + ffn + core + elem + comm) + head)


def _decode_time(
    spec: TransformerSpec, c: ParamCounts, *, gpu: Accelerator, system: System, batch: ArrayLike, context: float,
    tp: ArrayLike, pp: ArrayLike, precision: str, kv_precision: str, cal: Calibration,
) -> float | NDArray[np.float64]:
    """One decode iteration for ``batch`` sequences at ``context`` tokens on one replica."""
    rl = roofline(gpu, compute_precision(gpu, precision), cal)  # peaks and efficiencies, one home
    hbm = rl.decode_hbm
    B = np.asarray(batch, dtype=float)
    tp = np.asarray(tp, dtype=float)
    pp = np.asarray(pp, dtype=float)
    bpe = bytes_per_element(precision)
    # Every local weight is read once per step: block weights at ``precision``; the output head stays 16-bit in
    # quantised checkpoints (as in the memory model); the embedding is a gather of B rows (negligible).
    head = c.embedding if spec.tied_embeddings else c.lm_head
    blocks = c.total - c.routed_experts_total - c.embedding - c.positions - c.lm_head
    w_bytes: float | NDArray[np.float64] = blocks * bpe + head * max(bpe, 4.0 if precision == "fp32" else 2.0)
    if spec.moe:
        m = spec.moe
        touched = m.num_experts * (1 - (1 - m.top_k / m.num_experts) ** B)
        w_bytes = w_bytes + c.moe_layers * touched * c.expert_ffn * bpe
    w_bytes = w_bytes / (tp * pp)
    kv = kv_cache_bytes(spec, batch=B, context=context, tp=tp, pp=pp, kv_precision=kv_precision)
    flops = B * decode_flops_per_token(spec, context) / (tp * pp)
    # GEMMs of one decode step have B rows (dense layers) or B·k/E rows per expert (MoE): thin GEMMs run below
    # the large-GEMM efficiency (the same shape law as prefill and training).
    rows: Callable[[NDArray[np.float64]], NDArray[np.float64]] = lambda m: m / (m + cal.gemm_half_dim)  # noqa: E731
    peak_eff = rl.tensor
    if spec.moe:
        m = spec.moe
        expert_flops = B * 2.0 * c.moe_layers * m.top_k * c.expert_ffn / (tp * pp)
        compute = (flops - expert_flops) / (peak_eff * rows(B)) + expert_flops / (
            peak_eff * rows(B * m.top_k / m.num_experts)
        )
    else:
        compute = flops / (peak_eff * rows(B))
    mem = (w_bytes + kv) / hbm
    fits = scaled_fits(cal)
    comm = spec.layers / pp * 2 * collective_time_s("all_reduce", B * spec.hidden * 2.0, system=system, fits=fits,
                                                    size=tp, stride=1)  # fmt: skip
    # pp - 1 stage-to-stage sends per token, each on the slowest tier the pipeline group spans
    p2p = (pp - 1) * collective_time_s("p2p", B * spec.hidden * 2.0, system=system, fits=fits, size=pp, stride=tp)
    # stages run one after another for a token: pp stage times add up
    return cast("float | NDArray[np.float64]", pp * (np.maximum(compute, mem) + comm) + p2p + cal.decode_overhead_s)


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


def infer_arrays(spec: TransformerSpec, *, gpu: Accelerator, tp: ArrayLike, pp: ArrayLike,
                 batch: ArrayLike, input_len: float, output_len: float, precision: str = "bf16",
                 kv_precision: str = "bf16", cal: Calibration = DEFAULT_CALIBRATION, system: System | None = None,
                 cluster: Cluster | None = None) -> dict[str, np.ndarray]:  # fmt: skip
    """Latency and throughput of ONE replica at concurrency ``batch`` (array-friendly in batch and tp); ``system``
    is the network (default: ``system_of(gpu, cluster=cluster)``)."""
    system = system_of(gpu, system=system, cluster=cluster)
    c = count_params(spec)
    I = float(input_len)  # noqa: E741
    O = float(output_len)  # noqa: E741
    prefill_one = _prefill_time(spec, c, gpu=gpu, system=system, tokens=I, context=I, tp=tp, precision=precision,
                                cal=cal)  # fmt: skip
    t_dec = _decode_time(spec, c, gpu=gpu, system=system, batch=batch, context=I + O / 2, tp=tp, pp=pp,
                         precision=precision, kv_precision=kv_precision, cal=cal)  # fmt: skip
    prefill_one = np.asarray(prefill_one) * np.asarray(pp, dtype=float)
    B = np.asarray(batch, dtype=float)
    # B/O prompts arrive per iteration in steady state; at least one of them is prefilled together (one batched
    # prefill reads the weights once), fewer than one means one prefill every O/B iterations.
    n_new = B / O
    prefill_batch = _prefill_time(spec, c, gpu=gpu, system=system, tokens=np.maximum(n_new, 1.0) * I, context=I,
                                  tp=tp, precision=precision, cal=cal) * np.asarray(pp, dtype=float)  # fmt: skip
    period = t_dec + np.minimum(n_new, 1.0) * prefill_batch
    ttft = prefill_one + t_dec
    out_tps = B / period
    return {
        "prefill_s": prefill_one + 0 * period,
        "decode_step_s": t_dec + 0 * period,
        "ttft_s": ttft + 0 * period,
        "tpot_s": period,
        "e2e_latency_s": ttft + (O - 1) * period,
        "output_tokens_per_s": out_tps,
        "requests_per_s": out_tps / O,
        "total_tokens_per_s": out_tps / O * (I + O),
    }


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
                cal: Calibration, overheads: Overheads) -> InferEstimate:  # fmt: skip
    context = input_len + output_len
    mb = max_batch(spec, gpu=gpu, context=context, tp=tp, pp=pp, precision=precision, kv_precision=kv_precision,
                   overheads=overheads)  # fmt: skip
    replicas = gpus // (tp * pp)
    layout = {"tp": tp, "pp": pp, "replicas": replicas, "idle_gpus": gpus - replicas * tp * pp}
    # Concurrency spread over replicas: ``rem`` replicas carry q + 1 sequences, the others q (max: all at capacity).
    if batch == "max":
        q, rem = mb, 0
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
) -> InferEstimate:
    """Predict serving ``spec`` on ``gpus`` GPUs at concurrency ``batch`` (total over replicas) or ``"max"``
    (each replica at its KV-cache capacity). With ``tp`` None, every valid TP size (replicas = gpus / (tp·pp)) is
    evaluated and the one with the highest output throughput that fits is returned; the others are listed in
    ``alternatives`` (the seeds' replicas-vs-tensor-parallel question). A TP size need not divide ``gpus``: the
    GPUs left over idle (``layout["idle_gpus"]``), so adding a GPU never lowers the best throughput (the previous
    count's layout is still a candidate)."""
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
