"""The layout search: every allowed GPU type × count × parallel layout, evaluated as numpy arrays.

For training, the axes are GPU count (node-aware: 1, 2, 4, ... up to a host of the system, then whole hosts), tensor
parallel (powers of two inside the system's scale-up domain that divide the heads), pipeline stages, context
parallel (long sequences), expert parallel (MoE), ZeRO stage, micro-batch, recomputation and sequence
parallelism. They are combined into one flat grid per GPU type (``numpy.meshgrid``), invalid combinations are
masked arithmetically (STYLE habit 7), memory is evaluated for all valid layouts at once, and the performance model
for those that fit. No Python loop runs over layouts.

For inference, each GPU type × tensor-parallel size is evaluated over a grid of batch sizes up to the KV-cache
capacity; the largest batch meeting the latency SLOs sets a replica's capacity, and enough replicas are added to
carry the request rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from scaleright.catalog.systems import System
from scaleright.errors import InputError
from scaleright.estimate.calibration import DEFAULT_CALIBRATION, Calibration
from scaleright.estimate.comm import Cluster, system_of
from scaleright.estimate.framework import Framework
from scaleright.estimate.infer import infer_arrays, max_batch
from scaleright.estimate.layout import RECOMPUTE
from scaleright.estimate.memory import GB, LoraConfig, inference_memory_arrays, training_memory_arrays
from scaleright.estimate.train import TIME_KEYS, train_step_arrays
from scaleright.workload.spec import TransformerSpec

__all__ = ["TrainCandidates", "InferCandidate", "SEARCH_LIMITS", "gpu_counts", "train_layout_grid",
           "evaluate_training", "evaluate_inference", "tp_domain"]  # fmt: skip

RECOMPUTE_NAMES = RECOMPUTE  # index = the grid's recompute code

# The grid's bounds (printed with every plan): what the search does and does not try.
SEARCH_LIMITS = {
    "tp": "powers of two dividing the heads, inside the scale-up domain (8 on HGX, 72 on NVL72)",
    "pp": "1, 2, 4, 8, 16, 32 (at most the layers); no interleaved virtual stages",
    "cp": "1, 2, 4, 8 from 32k-token sequences, else 1",
    "ep": "powers of two dividing the experts, up to 64 (MoE only)",
    "zero": "0-3 (LoRA/QLoRA: 0 or 3)",
    "micro_batch": "1, 2, 4, 8 (dividing the global batch with dp)",
    "recompute": "none, selective (with sequence parallelism when tp > 1), full",
    "inference": "tp in 1, 2, 4, 8, 16 inside the scale-up domain, pp = 1, batch up to 4096 sequences per replica",
}
INFER_BATCH_LIMIT = 4096


def gpu_counts(gpus_per_node: int, max_gpus: int) -> list[int]:
    """1, 2, 4, ... up to one node, then 2, 4, 8, ... whole nodes, up to ``max_gpus``."""
    out = []
    n = 1
    while n < gpus_per_node and n <= max_gpus:
        out.append(n)
        n *= 2
    n = gpus_per_node
    while n <= max_gpus:
        out.append(n)
        n *= 2
    return out


def _pow2_upto(n: int) -> list[int]:
    out, x = [], 1
    while x <= n:
        out.append(x)
        x *= 2
    return out


def train_layout_grid(spec: TransformerSpec, *, counts: list[int], gpus_per_node: int, seq_len: int,
                      global_batch: int, task: str) -> dict[str, np.ndarray]:  # fmt: skip
    """All valid training layouts as flat integer arrays (keys: gpus, tp, pp, dp, cp, ep, zero, mb, rc, sp)."""
    frozen = task in ("lora", "qlora")
    tps = [t for t in _pow2_upto(min(gpus_per_node, spec.heads)) if spec.heads % t == 0]
    pps = [p for p in (1, 2, 4, 8, 16, 32) if p <= spec.layers]
    cps = [1, 2, 4, 8] if seq_len >= 32768 else [1]
    eps = [e for e in _pow2_upto(min(spec.moe.num_experts, 64)) if spec.moe.num_experts % e == 0] if spec.moe else [1]
    zeros = [0, 3] if frozen else [0, 1, 2, 3]  # LoRA: the frozen base is either replicated or FSDP-sharded
    mbs = [m for m in (1, 2, 4, 8) if m <= global_batch]
    axes = dict(gpus=counts, tp=tps, pp=pps, cp=cps, ep=eps, zero=zeros, mb=mbs, rc=[0, 1, 2], sp=[0, 1])
    grids = np.meshgrid(*[np.asarray(v, dtype=np.int64) for v in axes.values()], indexing="ij")
    g = {k: a.ravel() for k, a in zip(axes, grids, strict=True)}
    mp = g["tp"] * g["pp"] * g["cp"]
    ok = g["gpus"] % mp == 0
    dp = np.where(ok, g["gpus"] // np.maximum(mp, 1), 0)
    ok &= dp >= 1
    ok &= (dp * g["cp"]) % g["ep"] == 0
    ok &= global_batch % np.maximum(dp * g["mb"], 1) == 0
    if not spec.mla:
        ok &= (spec.kv_heads % g["tp"] == 0) | (g["tp"] % spec.kv_heads == 0)
    ok &= (g["sp"] == 0) | (g["tp"] > 1)  # sequence parallelism needs tensor parallelism
    ok &= (g["zero"] == 0) | (dp * g["cp"] > 1)  # ZeRO over one rank is stage 0
    ok &= (g["rc"] != 1) | (g["sp"] == 1) | (g["tp"] == 1)  # selective without SP is dominated; keep the grid lean
    out = {k: v[ok] for k, v in g.items()}
    out["dp"] = dp[ok]
    return out


@dataclass
class TrainCandidates:
    """Evaluated training layouts of one GPU type (flat arrays, one entry per layout that fits)."""

    gpu: str
    precision: str
    n_evaluated: int  # valid layouts whose memory was evaluated
    n_fit: int
    arrays: dict[str, np.ndarray]  # layout axes + step_time_s, tokens_per_s, mfu, memory_gb, t_* ...
    note: str | None = None


def tp_domain(system: System) -> int:
    """GPUs a tensor-parallel group may span: the innermost (scale-up) domain, at most the whole host when that
    domain is unbounded or larger than it (an NVL72 rack: 72)."""
    d = system.tiers[0].domain_gpus
    return d if d is not None else system.gpus_per_node


def evaluate_training(spec: TransformerSpec, *, gpu, counts: list[int], seq_len: int, global_batch: int,
                      precision: str, task: str, optimizer: str, lora_rank: int,
                      cal: Calibration = DEFAULT_CALIBRATION, system: System | None = None,
                      cluster: Cluster | None = None, tp_comm_overlap: bool | None = None,
                      framework: Framework | str | None = None) -> TrainCandidates:  # fmt: skip
    """Evaluate every valid layout of ``spec`` on ``gpu`` in ``system`` (default: ``system_of(gpu, cluster=...)``;
    see module docstring)."""
    system = system_of(gpu, system=system, cluster=cluster)
    fallback, note = gpu.tensor_precision(precision)  # a part without the requested rate runs its fallback
    if fallback is None:
        return TrainCandidates(gpu.id, precision, 0, 0, {}, note=note)
    prec = fallback
    g = train_layout_grid(spec, counts=counts, gpus_per_node=tp_domain(system), seq_len=seq_len,
                          global_batch=global_batch, task=task)  # fmt: skip
    n_eval = int(g["tp"].size)
    if n_eval == 0:
        return TrainCandidates(gpu.id, prec, 0, 0, {}, note="no valid layout for these GPU counts")
    lora = LoraConfig(rank=lora_rank) if task in ("lora", "qlora") else None
    n_micro = global_batch // (g["dp"] * g["mb"])
    mem = training_memory_arrays(
        spec, seq_len=seq_len, tp=g["tp"], pp=g["pp"], dp=g["dp"], cp=g["cp"], ep=g["ep"], zero=g["zero"],
        micro_batch=g["mb"], n_micro=n_micro, recompute=g["rc"], sequence_parallel=g["sp"].astype(bool),
        precision=prec, optimizer=optimizer, task=task, lora=lora,
    )  # fmt: skip
    total = cast(np.ndarray, sum(mem.values()) / GB)
    fit = total <= gpu.memory_gb
    if not fit.any():
        a = {k: v for k, v in g.items()}
        a["memory_gb"] = total
        return TrainCandidates(gpu.id, prec, n_eval, 0, a, note=note)
    sub = {k: v[fit] for k, v in g.items()}
    perf = train_step_arrays(
        spec, gpu=gpu, system=system, seq_len=seq_len, global_batch=global_batch, tp=sub["tp"], pp=sub["pp"],
        dp=sub["dp"], cp=sub["cp"], ep=sub["ep"], zero=sub["zero"], micro_batch=sub["mb"], recompute=sub["rc"],
        sequence_parallel=sub["sp"].astype(bool), precision=prec, task=task, lora=lora, cal=cal,
        tp_comm_overlap=tp_comm_overlap, framework=framework,
    )  # fmt: skip
    arrays = dict(sub)
    arrays["memory_gb"] = total[fit]
    for k in ("weights", "gradients", "optimizer", "gathered", "activations", "overhead"):
        arrays[f"mem_{k}"] = mem[k][fit] / GB
    arrays.update({k: np.asarray(v) for k, v in perf.items()})
    return TrainCandidates(gpu.id, prec, n_eval, int(fit.sum()), arrays, note=note)


def layout_dict(arrays: dict[str, np.ndarray], i: int) -> dict:
    """The layout of entry ``i`` as plain values."""
    return {
        "tp": int(arrays["tp"][i]), "pp": int(arrays["pp"][i]), "dp": int(arrays["dp"][i]),
        "cp": int(arrays["cp"][i]), "ep": int(arrays["ep"][i]), "zero": int(arrays["zero"][i]),
        "micro_batch": int(arrays["mb"][i]), "recompute": RECOMPUTE_NAMES[int(arrays["rc"][i])],
        "sequence_parallel": bool(arrays["sp"][i]),
    }  # fmt: skip


def time_breakdown(arrays: dict[str, np.ndarray], i: int) -> dict[str, float]:
    return {k: float(arrays[f"t_{k}"][i]) for k in TIME_KEYS}


# ----------------------------------------------------------------------------------------------------------------
# Inference
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class InferCandidate:
    """The cheapest way to carry the load with one GPU type and TP size."""

    gpu: str
    tp: int
    fits: bool
    reason: str | None
    batch_per_replica: int = 0
    max_batch: int = 0
    replicas: int = 0
    gpus: int = 0
    capacity_requests_per_s: float = 0.0  # all replicas
    ttft_s: float = math.inf
    tpot_s: float = math.inf
    e2e_latency_s: float = math.inf
    utilisation: float = 0.0
    curve: dict[str, list] = field(default_factory=dict)  # batch -> throughput/latency of one replica
    memory_breakdown_gb: dict[str, float] = field(default_factory=dict)  # per GPU at batch_per_replica


def evaluate_inference(spec: TransformerSpec, *, gpu, tp: int, rate_rps: float, input_len: int,
                       output_len: int, precision: str, kv_precision: str, ttft_slo_s: float | None,
                       tpot_slo_s: float | None, max_gpus: int, cal: Calibration = DEFAULT_CALIBRATION,
                       batch_limit: int | None = None, system: System | None = None,
                       cluster: Cluster | None = None) -> InferCandidate:  # fmt: skip
    """Largest SLO-meeting batch per replica (at most ``batch_limit``), then replicas = ceil(rate / capacity);
    ``system`` is the network (default: ``system_of(gpu, cluster=...)``)."""
    system = system_of(gpu, system=system, cluster=cluster)
    try:
        mb = max_batch(spec, gpu=gpu, context=input_len + output_len, tp=tp, precision=precision,
                       kv_precision=kv_precision, limit=INFER_BATCH_LIMIT)  # fmt: skip
    except InputError as exc:
        return InferCandidate(gpu.id, tp, False, str(exc))
    if mb < 1:
        return InferCandidate(gpu.id, tp, False, f"model and one {input_len + output_len}-token sequence do not fit")
    if batch_limit is not None:
        mb = min(mb, batch_limit)
    batches = np.unique(np.concatenate([np.asarray(_pow2_upto(mb)), [mb]]))
    try:
        arr = _infer(spec, gpu, system, tp, batches, input_len, output_len, precision, kv_precision, cal)
    except InputError as exc:
        return InferCandidate(gpu.id, tp, False, str(exc), max_batch=mb)
    ok = np.ones(batches.shape, dtype=bool)
    if ttft_slo_s is not None:
        ok &= arr["ttft_s"] <= ttft_slo_s
    if tpot_slo_s is not None:
        ok &= arr["tpot_s"] <= tpot_slo_s
    curve = {k: np.asarray(v).tolist() for k, v in arr.items()} | {"batch": batches.tolist()}
    if not ok.any():
        which = []
        if ttft_slo_s is not None and arr["ttft_s"][0] > ttft_slo_s:
            which.append(f"TTFT {arr['ttft_s'][0]:.3g} s > SLO {ttft_slo_s:g} s")
        if tpot_slo_s is not None and arr["tpot_s"][0] > tpot_slo_s:
            which.append(f"TPOT {arr['tpot_s'][0]:.3g} s > SLO {tpot_slo_s:g} s")
        return InferCandidate(gpu.id, tp, False, "even batch 1 misses the SLO: " + "; ".join(which), max_batch=mb,
                              curve=curve)  # fmt: skip
    i = int(np.flatnonzero(ok)[-1])
    cap = float(arr["requests_per_s"][i])
    need = rate_rps / cap
    if not math.isfinite(need):  # a rate no finite number of replicas carries (never an int of infinity)
        return InferCandidate(gpu.id, tp, False, f"{rate_rps:g} requests/s needs more replicas than max_gpus "
                              f"{max_gpus} allows", max_batch=mb, curve=curve)  # fmt: skip
    replicas = max(math.ceil(need - 1e-12), 1)
    gpus = replicas * tp
    fits = gpus <= max_gpus
    mem = inference_memory_arrays(spec, batch=int(batches[i]), context=input_len + output_len, tp=tp,
                                  precision=precision, kv_precision=kv_precision)  # fmt: skip
    return InferCandidate(
        gpu.id, tp, fits, None if fits else f"needs {gpus} GPUs > max_gpus {max_gpus}",
        batch_per_replica=int(batches[i]), max_batch=mb, replicas=replicas, gpus=gpus,
        capacity_requests_per_s=cap * replicas, ttft_s=float(arr["ttft_s"][i]), tpot_s=float(arr["tpot_s"][i]),
        e2e_latency_s=float(arr["e2e_latency_s"][i]), utilisation=rate_rps / (cap * replicas), curve=curve,
        memory_breakdown_gb={k: float(v) / GB for k, v in mem.items()},
    )  # fmt: skip


def _infer(spec, gpu, system, tp, batches, input_len, output_len, precision, kv_precision, cal):
    return infer_arrays(spec, gpu=gpu, system=system, tp=tp, pp=1, batch=batches, input_len=input_len,
                        output_len=output_len, precision=precision, kv_precision=kv_precision, cal=cal)
