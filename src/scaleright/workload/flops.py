"""Floating-point operations per token of a ``TransformerSpec``.

Bottom-up: every matmul costs 2 FLOPs per weight per token (multiply + add); attention adds, per layer and token,
2·(heads·qk_dim)·ctx for the scores Q·Kᵀ and 2·(heads·v_dim)·ctx for the weighted sum with V, where ctx is the
number of keys the token attends to. Causal attention averages ctx over positions (≈ s/2); the non-causal
convention (used by Megatron's and llm-foundry's MFU) counts the full sequence. The backward pass costs twice the
forward (Kaplan et al. 2020, section 2.1), so model FLOPs per trained token are 3× forward; recomputation adds
the recomputed forward work to the hardware FLOPs (Korthikanti et al. 2022).

Closed form for cross-checking (Chowdhery et al. 2022, PaLM, appendix B): training FLOPs per token
6·N + 12·L·H·Q·T with N the non-embedding parameters, T the sequence length (non-causal).

Bounded attention: a sliding-window layer (Gemma 2, gpt-oss) attends min(position, window) keys; a chunked layer
(Llama 4) attends the keys of its own chunk so far, (position - 1) mod chunk + 1; DeepSeek-V3.2's sparse attention
attends min(position, index_topk) keys and adds its lightning indexer, 2·index_heads·index_head_dim FLOPs per
earlier key (every key is scored, DeepSeek-V3.2-Exp report section 2.1).

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
    "attended_keys_per_layer",
    "layer_kind_counts",
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


def mean_context(seq_len: ArrayLike, *, window: int = 0, chunk: int = 0,
                 causal: bool = True) -> float | NDArray[np.float64]:  # fmt: skip
    """Mean number of keys a query attends to over a sequence of ``seq_len`` tokens (array-friendly): all earlier
    keys, the last ``window`` of them, or those of its own ``chunk`` (give at most one of the two)."""
    s = np.asarray(seq_len, dtype=float)
    if window and chunk:
        raise ValueError("mean_context: give window or chunk, not both")
    if chunk:
        c = float(chunk)
        if not causal:  # every query sees its whole chunk (the last, partial one: its length)
            full, rest = np.floor(s / c), np.mod(s, c)
            return cast("float | NDArray[np.float64]", (full * c * c + rest * rest) / s)
        full, rest = np.floor(s / c), np.mod(s, c)  # positions 1..c in each full chunk, 1..rest in the last
        return cast("float | NDArray[np.float64]", (full * c * (c + 1) / 2 + rest * (rest + 1) / 2) / s)
    if not causal:
        return np.minimum(s, window) if window else s
    if not window:
        return (s + 1) / 2
    w = float(window)
    # positions 1..w see i keys, the rest see w keys
    full = np.minimum(s, w)
    return cast("float | NDArray[np.float64]", (full * (full + 1) / 2 + np.maximum(s - w, 0) * w) / s)


def _per_key_flops(spec: TransformerSpec) -> tuple[int, int]:
    """(main attention, indexer) forward FLOPs per (query, key) pair in one layer: 2·(heads·qk_dim) for Q·Kᵀ plus
    2·(heads·v_dim) for the weighted sum; the DSA indexer's 2·index_heads·index_head_dim (0 without one)."""
    if spec.mla:
        qk = spec.heads * (spec.mla.qk_nope_head_dim + spec.mla.qk_rope_head_dim)
        v = spec.heads * spec.mla.v_head_dim
    else:
        qk = v = spec.heads * spec.head_dim
    idx = 2 * spec.sparse.indexer_heads * spec.sparse.indexer_head_dim if spec.sparse else 0
    return 2 * qk + 2 * v, idx


def layer_kind_counts(spec: TransformerSpec) -> dict[str, int]:
    """How many layers have each attention kind (full, sliding, chunked), zeros left out."""
    kinds = spec.layer_kinds()
    return {k: kinds.count(k) for k in ("full", "sliding", "chunked") if kinds.count(k)}


def attention_flops_per_token(
    spec: TransformerSpec, seq_len: ArrayLike, *, causal: bool = True
) -> float | NDArray[np.float64]:
    """Forward FLOPs per token of the attention scores and weighted sum, all layers (array-friendly in seq_len):
    each layer kind at its own mean attended context; sparse attention at min(position, top_k) plus its indexer."""
    per_ctx, idx = _per_key_flops(spec)
    span = {"full": {}, "sliding": {"window": spec.sliding_window}, "chunked": {"chunk": spec.sliding_window}}
    if spec.sparse:  # the main attention reads the top_k keys the indexer picks: a window's count, any keys
        span["full"] = {"window": spec.sparse.top_k}
    total: float | NDArray[np.float64] = 0.0
    for kind, n in layer_kind_counts(spec).items():
        total = total + n * per_ctx * mean_context(seq_len, causal=causal, **span[kind])
    if idx:
        total = total + spec.layers * idx * mean_context(seq_len, causal=causal)
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
    """FLOPs to generate one token with ``context_len`` tokens already in the KV cache: the matmuls plus, per layer,
    the keys it attends (``attended_keys_per_layer``; a chunked layer at its most, a full chunk) and, with sparse
    attention, the indexer scoring every cached key."""
    ctx = np.asarray(context_len, dtype=float)
    per_ctx, idx = _per_key_flops(spec)
    keys = attended_keys_per_layer(spec, ctx).sum(axis=-1)
    out = 2.0 * matmul_params_per_token(spec) + per_ctx * keys
    if idx:
        out = out + spec.layers * idx * ctx
    return cast("float | NDArray[np.float64]", out if out.ndim else float(out))


def attended_keys_per_layer(spec: TransformerSpec, context_len: ArrayLike) -> NDArray[np.float64]:
    """Keys each layer's attention reads for a query with ``context_len`` earlier tokens, shape
    ``(*context_len.shape, layers)``: all of them (full), min(context, window) (sliding), at most a whole chunk,
    min(context, chunk) (chunked; the exact count cycles 1..chunk), min(context, top_k) (sparse attention)."""
    ctx = np.asarray(context_len, dtype=float)[..., None]
    cap = {"full": spec.sparse.top_k if spec.sparse else 0, "sliding": spec.sliding_window,
           "chunked": spec.sliding_window}  # fmt: skip
    spans = np.array([cap[k] or np.inf for k in spec.layer_kinds()], dtype=float)
    out: NDArray[np.float64] = np.minimum(ctx, spans)
    return out
