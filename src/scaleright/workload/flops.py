"""Floating-point operations per token of a ``TransformerSpec``.

Bottom-up: every matmul costs 2 FLOPs per weight per token (multiply + add); attention adds, per layer and token,
2·(heads·qk_dim)·ctx for the scores Q·Kᵀ and 2·(heads·v_dim)·ctx for the weighted sum with V, where ctx is the
number of keys the token attends to. Causal attention averages ctx over positions (≈ s/2); the non-causal
convention (used by Megatron's and llm-foundry's MFU) counts the full sequence. The backward pass costs twice the
forward (Kaplan et al. 2020, section 2.1), so model FLOPs per trained token are 3× forward; recomputation adds
the recomputed forward work to the hardware FLOPs (Korthikanti et al. 2022).

Closed form for cross-checking (Chowdhery et al. 2022, PaLM, appendix B): training FLOPs per token
6·N + 12·L·H·Q·T with N the non-embedding parameters, T the sequence length (non-causal).

Norms, activations, softmax and biases are not counted as FLOPs here: they are memory-bound and the
performance model times them by bytes moved instead.
"""

from __future__ import annotations

from typing import cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.workload.params import ParamCounts, count_params
from scaleright.workload.spec import TransformerSpec

__all__ = [
    "matmul_params_per_token",
    "mean_context",
    "attention_flops_per_token",
    "forward_flops_per_token",
    "train_flops_per_token",
    "decode_flops_per_token",
]


def matmul_params_per_token(spec: TransformerSpec, counts: ParamCounts | None = None) -> int:
    """Weights that multiply each token's activations: active block matmuls, router and the output head."""
    c = counts or count_params(spec)
    norms = c.layers * c.norms_per_layer + c.final_norm
    # The output head runs even when tied; the embedding lookup and the position table are gathers, not matmuls.
    head = c.embedding if spec.tied_embeddings else c.lm_head
    return c.active - c.embedding - c.positions - c.lm_head - norms + head


def mean_context(seq_len: ArrayLike, *, window: int = 0, causal: bool = True) -> float | NDArray[np.float64]:
    """Mean number of keys a query attends to over a sequence of ``seq_len`` tokens (array-friendly)."""
    s = np.asarray(seq_len, dtype=float)
    if not causal:
        return np.minimum(s, window) if window else s
    if not window:
        return (s + 1) / 2
    w = float(window)
    # positions 1..w see i keys, the rest see w keys
    full = np.minimum(s, w)
    return cast("float | NDArray[np.float64]", (full * (full + 1) / 2 + np.maximum(s - w, 0) * w) / s)


def attention_flops_per_token(
    spec: TransformerSpec, seq_len: ArrayLike, *, causal: bool = True
) -> float | NDArray[np.float64]:
    """Forward FLOPs per token of the attention scores and weighted sum, all layers (array-friendly in seq_len)."""
    if spec.mla:
        qk = spec.heads * (spec.mla.qk_nope_head_dim + spec.mla.qk_rope_head_dim)
        v = spec.heads * spec.mla.v_head_dim
    else:
        qk = v = spec.heads * spec.head_dim
    per_ctx = 2 * qk + 2 * v
    local = spec.local_layer_count()
    glob = spec.layers - local
    ctx_global = mean_context(seq_len, causal=causal)
    total = glob * per_ctx * ctx_global
    if local:
        total = total + local * per_ctx * mean_context(seq_len, window=spec.sliding_window, causal=causal)
    return total


def forward_flops_per_token(
    spec: TransformerSpec, seq_len: ArrayLike, *, causal: bool = True
) -> float | NDArray[np.float64]:
    """Forward FLOPs per token: 2 × matmul weights + attention."""
    return 2.0 * matmul_params_per_token(spec) + attention_flops_per_token(spec, seq_len, causal=causal)


def train_flops_per_token(
    spec: TransformerSpec, seq_len: ArrayLike, *, recompute: str = "none", causal: bool = True
) -> tuple[float | NDArray[np.float64], float | NDArray[np.float64]]:
    """FLOPs per trained token: (model, hardware). Model = 3 × forward; hardware adds the recompute pass.

    ``recompute``: ``none``; ``selective`` recomputes the attention core (scores and weighted sum,
    Korthikanti et al. 2022 section 4.2); ``full`` recomputes the whole forward pass.
    """
    fwd = forward_flops_per_token(spec, seq_len, causal=causal)
    model = 3.0 * fwd
    if recompute == "full":
        hw = model + fwd
    elif recompute == "selective":
        hw = model + attention_flops_per_token(spec, seq_len, causal=causal)
    elif recompute == "none":
        hw = model
    else:
        raise ValueError(f"recompute={recompute!r}")
    return model, hw


def decode_flops_per_token(spec: TransformerSpec, context_len: ArrayLike) -> float | NDArray[np.float64]:
    """FLOPs to generate one token with ``context_len`` tokens already in the KV cache."""
    ctx = np.asarray(context_len, dtype=float)
    if spec.mla:
        per_ctx = 2 * spec.heads * (spec.mla.qk_nope_head_dim + spec.mla.qk_rope_head_dim + spec.mla.v_head_dim)
    else:
        per_ctx = 4 * spec.heads * spec.head_dim
    local = spec.local_layer_count()
    eff = (spec.layers - local) * ctx
    if local:
        eff = eff + local * np.minimum(ctx, spec.sliding_window)
    return 2.0 * matmul_params_per_token(spec) + per_ctx * eff
