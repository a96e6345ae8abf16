"""The work of one transformer layer on one GPU: its GEMMs (roofline-timed) and its elementwise traffic.

Shared by the training model (``train.py``) and the inference model (``infer.py``), so both time the same layer.

GEMMs of a layer on a tensor-parallel shard of size ``tp``, for ``t`` tokens (forward):
- attention projections: q/k/v (``h x (q + 2kv)/tp``; KV heads are replicated when tp exceeds them) and the
  output projection (``q/tp x h``); MLA (DeepSeek-V2/V3, arXiv:2405.04434) instead runs the q down/up
  projections, the joint KV down-projection (with the RoPE key, not split over tp), the KV up-projection and the
  output projection;
- FFN: ``h x n·f/tp`` and ``f/tp x h`` (n = 2 for gated MLPs); MoE layers run each of their ``E/ep`` local
  experts split over ``etp`` GPUs (``h x n·f/etp``) on its share of tokens: a GPU dispatches its sequence-parallel
  ``t/tp`` tokens k times over the EP group and the ETP group gathers them, ``t·k·ep·etp/(tp·E)`` rows per expert
  (Megatron-Core's all-to-all dispatcher; ``etp = tp``: ``t·k·ep/E``; thin GEMMs for fine-grained experts), plus
  shared experts and the router. The expert GEMMs are timed on the busiest expert-parallel rank (its expected
  routed rows and experts reached under uniform routing; the mean for ep = 1), and the MoE FFN time includes the
  dispatch / combine copies that group rows by expert and restore token order, over the streaming bandwidth, for
  ``t_src`` tokens routed and ``R`` routed rows run: the bytes the engine's kernels move (``estimate.moe.
  dispatch_bytes``; training and by default Megatron-Core's permute / unpermute, ``2·h·(t_src + R)`` values at
  the activation bytes). The efficiency below is that of each expert's GEMM (its own rows, width and hidden size).
A GEMM (m x k)·(k x n) takes ``max(2mkn / (peak · eff), bytes / HBM)`` with
``eff = eff_max · d / (d + half_dim)``, d its smallest dimension (tile and wave quantisation). Serving passes
``rows_floor``: the rows count in ``d`` as at least that many, because a GEMM of few rows (decode) runs as a
bandwidth-bound GEMV / split-K kernel, not as a tensor-core tile mostly empty (Pope et al. 2022, section 2).
A batch of ``T`` tokens routed over the expert-parallel group reaches ``E·(1 − (1 − k/E)^T)`` of the ``E``
experts, and only those are run and read (serving: ``layer_gemm_times(expert_tokens=...)``; training batches are
large enough to reach every expert).

Elementwise traffic per token and layer, forward, in values read plus written by unfused kernels:
two norms (read h, write h: 4h) and two residual adds (read 2h, write h: 6h) — 10h, replicated over tp unless
sequence parallel; rotary on q and k (2(q + kv)) and the K/V copy into the attention kernel's layout (2kv); the
gated activation (read gate and up, write their product: 3f); the attention output re-layout (2·o). The
calibration's ``elementwise_factor`` scales this count (fusion lowers it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.errors import InputError
from scaleright.estimate.calibration import ArchFactors, Calibration, arch_factors
from scaleright.workload.params import ParamCounts
from scaleright.workload.spec import TransformerSpec

if TYPE_CHECKING:
    from scaleright.catalog.gpus import Accelerator

__all__ = ["gemm_time", "layer_gemm_times", "elementwise_values", "ffn_width", "attn_out_width", "peak_flops",
           "Roofline", "roofline"]


def peak_flops(gpu: Accelerator, precision: str) -> float:
    """Dense peak FLOP/s of ``gpu`` at ``precision``; fp32 training uses the TF32 tensor-core rate where it exists."""
    key = "tf32" if precision == "fp32" and gpu.dense_tflops.get("tf32") else precision
    v = gpu.dense_tflops.get(key)
    if not v:
        have = [k for k, x in gpu.dense_tflops.items() if x]
        raise InputError(f"precision={precision!r} has no dense TFLOP/s figure for gpu {gpu.id}; available: {have}")
    return float(v) * 1e12


@dataclass(frozen=True)
class Roofline:
    """Every peak and efficiency of one GPU at one compute precision, set up once (training, prefill, decode).

    ``peak`` is the datasheet dense FLOP/s at the precision (what MFU divides by); ``tensor`` the FLOP/s large GEMMs
    reach (peak × the architecture's measured GEMM ceiling × the calibration's share, fp8/fp4 shares for those
    formats); ``attention`` / ``attention_bwd`` the 16-bit FLOP/s of the attention core forward / backward;
    ``hbm`` the bytes/s streaming kernels reach (datasheet × measured STREAM ceiling × ``memory_efficiency``),
    ``decode_hbm`` the bytes/s decode reads weights and KV at (× ``decode_memory_efficiency``)."""

    peak: float
    peak16: float
    tensor: float
    attention: float
    attention_bwd: float
    hbm: float
    decode_hbm: float
    half_dim: float
    arch: ArchFactors

    def gemm(self, bytes_per_el: float) -> dict[str, Any]:
        """Keyword arguments of ``gemm_time`` for GEMMs with ``bytes_per_el`` operands."""
        return dict(peak=self.tensor, eff_max=1.0, half_dim=self.half_dim, hbm=self.hbm, bytes_per_el=bytes_per_el)


def roofline(gpu: Accelerator, precision: str, cal: Calibration) -> Roofline:
    """The ``Roofline`` of ``gpu`` computing in ``precision`` under ``cal`` (the attention core runs 16-bit even in
    fp8/fp4; fp32 uses TF32 where the GPU has it)."""
    arch = arch_factors(gpu)
    peak = peak_flops(gpu, precision)
    peak16 = peak if precision not in ("fp8", "fp4", "int8") else peak_flops(
        gpu, "bf16" if gpu.dense_tflops.get("bf16") else "fp16")  # fmt: skip
    share = {"fp8": cal.fp8_gemm_efficiency, "fp4": cal.fp4_gemm_efficiency}.get(precision, cal.gemm_efficiency)
    hbm_peak = gpu.hbm_bandwidth_tb_per_s * 1e12 * arch.memory_efficiency
    return Roofline(
        peak=peak, peak16=peak16, tensor=peak * arch.gemm_efficiency * share,
        attention=peak16 * arch.gemm_efficiency * cal.attention_efficiency,
        attention_bwd=peak16 * arch.gemm_efficiency * cal.attention_efficiency * cal.attention_bwd_efficiency,
        hbm=hbm_peak * cal.memory_efficiency, decode_hbm=hbm_peak * cal.decode_memory_efficiency,
        half_dim=cal.gemm_half_dim, arch=arch,
    )  # fmt: skip


def gemm_time(
    m: ArrayLike, k: ArrayLike, n: ArrayLike, *, peak: float, eff_max: float, half_dim: float, hbm: float,
    bytes_per_el: float, count: float | NDArray[np.float64] = 1.0, rows_floor: float = 0.0,
) -> float | NDArray[np.float64]:
    """Roofline time of ``count`` GEMMs (m x k)·(k x n) (array-friendly); ``rows_floor``: see the module doc."""
    m, k, n = (np.asarray(x, dtype=float) for x in (m, k, n))
    dmin = np.minimum(np.minimum(np.maximum(m, rows_floor) if rows_floor else m, k), n)
    eff = eff_max * dmin / (dmin + half_dim)
    flops = 2.0 * m * k * n
    byt = bytes_per_el * (m * k + k * n + m * n)
    return cast("float | NDArray[np.float64]", count * np.maximum(flops / (peak * eff), byt / hbm))


def attn_out_width(spec: TransformerSpec) -> int:
    """Width of the attention output entering the output projection (all heads)."""
    return spec.heads * spec.mla.v_head_dim if spec.mla else spec.q_dim


def ffn_width(spec: TransformerSpec, c: ParamCounts) -> float:
    """FFN intermediate width a token passes through, averaged over dense and MoE layers (MoE: k routed experts
    plus the shared ones)."""
    if not spec.moe:
        return float(spec.ffn_hidden)
    m = spec.moe
    frac = c.moe_layers / c.layers
    moe = m.top_k * m.expert_ffn_hidden + m.num_shared_experts * m.shared_ffn_hidden
    return (1 - frac) * spec.ffn_hidden + frac * moe


def layer_gemm_times(
    spec: TransformerSpec, c: ParamCounts, *, tokens: float | NDArray[np.float64], tp: float | NDArray[np.float64],
    ep: float | NDArray[np.float64] = 1.0, gemm: dict[str, float],
    expert_tokens: float | NDArray[np.float64] | None = None, expert_tp: float | None = None,
    etp: float | NDArray[np.float64] | None = None, act_bytes: float | None = None, stream_hbm: float | None = None,
    moe_dispatch: str = "permute", gemm_in_bytes: float | None = None,
) -> tuple[float | NDArray[np.float64], float | NDArray[np.float64]]:
    """(attention projections, FFN) forward GEMM time of one average layer for ``tokens`` tokens on one GPU.

    MoE: by default (training) each of the ``ep`` ranks routes its sequence-parallel ``tokens / tp`` and runs the
    tokens of ``ep · etp / tp`` attention ranks (``etp``: expert tensor parallel, MoE parallel folding; None: tp),
    each expert's width sliced ``etp`` ways. ``expert_tokens`` (serving): the tokens the expert-parallel group
    routes in all, every one of them held (and dispatched) by each rank of the tensor-parallel group; only the
    experts they reach are run and read. ``expert_tp``: the slicing of each expert's width when serving (default
    ``tp``; serving splits the experts over the ``ep`` ranks of the tensor-parallel group, so each is sliced
    ``tp / ep`` ways). The FFN time includes the MoE dispatch / combine copies (module docstring): the bytes the
    kernels ``moe_dispatch`` move (``estimate.moe.MOE_DISPATCH``; default Megatron-Core's ``permute``) for
    activations of ``act_bytes`` (default: 16-bit, or the GEMM operands' bytes if wider) and GEMM inputs of
    ``gemm_in_bytes`` (default ``act_bytes``), over ``stream_hbm`` bytes/s (default: the GEMMs' ``hbm``)."""
    t = tokens
    h = spec.hidden
    if spec.mla:
        m_ = spec.mla
        attn = gemm_time(t, h, m_.kv_lora_rank + m_.qk_rope_head_dim, **gemm)
        if m_.q_lora_rank:
            attn = attn + gemm_time(t, h, m_.q_lora_rank, **gemm)
            attn = attn + gemm_time(t, m_.q_lora_rank, spec.q_dim / tp, **gemm)
        else:
            attn = attn + gemm_time(t, h, spec.q_dim / tp, **gemm)
        attn = attn + gemm_time(t, m_.kv_lora_rank, spec.heads * (m_.qk_nope_head_dim + m_.v_head_dim) / tp, **gemm)
        attn = attn + gemm_time(t, spec.heads * m_.v_head_dim / tp, h, **gemm)
    else:
        kv_tp = np.maximum(spec.kv_dim / tp, spec.head_dim)
        attn = gemm_time(t, h, spec.q_dim / tp + 2 * kv_tp, **gemm) + gemm_time(t, spec.q_dim / tp, h, **gemm)
    n_up = 2 if spec.gated_mlp else 1

    def ffn(rows: ArrayLike, f: float, count: float | NDArray[np.float64] = 1.0,
            split: float | NDArray[np.float64] = tp) -> float | NDArray[np.float64]:
        return (gemm_time(rows, h, n_up * f / split, count=count, **gemm)
                + gemm_time(rows, f / split, h, count=count, **gemm))  # fmt: skip

    dense = ffn(t, spec.ffn_hidden)
    if not spec.moe:
        return attn, dense
    from scaleright.estimate.moe import busiest_rank_experts, busiest_rank_rows, dispatch_bytes  # MoE models only

    m = spec.moe
    frac = c.moe_layers / c.layers
    e_tp = etp if etp is not None else (tp if expert_tp is None else expert_tp)
    if expert_tokens is None:  # training: the EP group routes t·ep·(etp/tp) tokens, each rank its t/tp of them
        fold = 1.0 if etp is None else np.asarray(etp, dtype=float) / tp
        group_tokens, source = t * ep * fold, t / np.asarray(tp, dtype=float)
    else:  # serving: every rank of the tensor-parallel group holds (and dispatches) all the tokens
        group_tokens, source = np.asarray(expert_tokens, dtype=float), t
    # the busiest expert-parallel rank sets the layer's time: its routed rows and the experts it reaches
    rows = busiest_rank_rows(group_tokens, num_experts=m.num_experts, top_k=m.top_k, ep=ep)
    reached = busiest_rank_experts(group_tokens, num_experts=m.num_experts, top_k=m.top_k, ep=ep)
    moe = ffn(rows / np.maximum(reached, 1e-300), m.expert_ffn_hidden, count=reached, split=e_tp)
    # the dispatch / combine copies around the grouped GEMMs, at the streaming bandwidth (``estimate.moe``)
    a_bytes = act_bytes if act_bytes is not None else max(2.0, float(gemm["bytes_per_el"]))
    copies = dispatch_bytes(h, source_tokens=source, routed_rows=rows, kernels=moe_dispatch, act_bytes=a_bytes,
                            gemm_in_bytes=gemm_in_bytes)  # fmt: skip
    moe = moe + copies / (stream_hbm if stream_hbm is not None else gemm["hbm"])
    if m.num_shared_experts:
        moe = moe + ffn(t, m.shared_ffn_hidden * m.num_shared_experts)
    moe = moe + gemm_time(t, h, m.num_experts, **gemm)  # router
    return attn, (1 - frac) * dense + frac * moe


def elementwise_values(spec: TransformerSpec, c: ParamCounts) -> tuple[float, float]:
    """(replicated, tp-split) elementwise values per token and layer, forward (module docstring)."""
    replicated = 10.0 * spec.hidden
    split = 2 * (spec.q_dim + spec.kv_dim) + 2 * spec.kv_dim + 3 * ffn_width(spec, c) + 2 * attn_out_width(spec)
    return replicated, split
