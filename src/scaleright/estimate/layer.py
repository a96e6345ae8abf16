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
  shared experts and the router.
A GEMM (m x k)·(k x n) takes ``max(2mkn / (peak · eff), bytes / HBM)`` with
``eff = eff_max · d / (d + half_dim)``, d its smallest dimension (tile and wave quantisation).

Elementwise traffic per token and layer, forward, in values read plus written by unfused kernels:
two norms (read h, write h: 4h) and two residual adds (read 2h, write h: 6h) — 10h, replicated over tp unless
sequence parallel; rotary on q and k (2(q + kv)) and the K/V copy into the attention kernel's layout (2kv); the
gated activation (read gate and up, write their product: 3f); the attention output re-layout (2·o). The
calibration's ``elementwise_factor`` scales this count (fusion lowers it).
"""

from __future__ import annotations

from typing import cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.workload.params import ParamCounts
from scaleright.workload.spec import TransformerSpec

__all__ = ["gemm_time", "layer_gemm_times", "elementwise_values", "ffn_width", "attn_out_width"]


def gemm_time(
    m: ArrayLike, k: ArrayLike, n: ArrayLike, *, peak: float, eff_max: float, half_dim: float, hbm: float,
    bytes_per_el: float, count: float | NDArray[np.float64] = 1.0,
) -> float | NDArray[np.float64]:
    """Roofline time of ``count`` GEMMs (m x k)·(k x n) (array-friendly)."""
    m, k, n = (np.asarray(x, dtype=float) for x in (m, k, n))
    dmin = np.minimum(np.minimum(m, k), n)
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
    ep: float | NDArray[np.float64] = 1.0, gemm: dict[str, float], etp: float | NDArray[np.float64] | None = None,
) -> tuple[float | NDArray[np.float64], float | NDArray[np.float64]]:
    """(attention projections, FFN) forward GEMM time of one average layer for ``tokens`` tokens on one GPU
    (``etp``: expert tensor parallel, None: tp)."""
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
            split: float | NDArray[np.float64] = tp) -> float | NDArray[np.float64]:  # fmt: skip
        return gemm_time(rows, h, n_up * f / split, count=count, **gemm) + gemm_time(rows, f / split, h, count=count,
                                                                                    **gemm)  # fmt: skip

    dense = ffn(t, spec.ffn_hidden)
    if not spec.moe:
        return attn, dense
    m = spec.moe
    frac = c.moe_layers / c.layers
    e_tp = tp if etp is None else etp
    moe = ffn(t * m.top_k * ep * e_tp / (tp * m.num_experts), m.expert_ffn_hidden, count=m.num_experts / ep,
              split=e_tp)  # fmt: skip
    if m.num_shared_experts:
        moe = moe + ffn(t, m.shared_ffn_hidden * m.num_shared_experts)
    moe = moe + gemm_time(t, h, m.num_experts, **gemm)  # router
    return attn, (1 - frac) * dense + frac * moe


def elementwise_values(spec: TransformerSpec, c: ParamCounts) -> tuple[float, float]:
    """(replicated, tp-split) elementwise values per token and layer, forward (module docstring)."""
    replicated = 10.0 * spec.hidden
    split = 2 * (spec.q_dim + spec.kv_dim) + 2 * spec.kv_dim + 3 * ffn_width(spec, c) + 2 * attn_out_width(spec)
    return replicated, split
