"""What a KV cache holds per layer: tokens (by attention kind) and elements per token (by attention type).

A full-attention layer keeps every token of the context; a sliding-window layer (Gemma 2, gpt-oss) only the last
``window``; a chunked layer (Llama 4) only the current chunk, at most ``chunk`` tokens (the peak a request reaches,
which is what memory must hold). DeepSeek-V3.2's sparse attention still keeps every token: its indexer scores all of
them before the main attention reads ``index_topk``. Elements per token and layer: K and V of every KV head (GQA,
2·kv_heads·head_dim); MLA's compressed latent plus the decoupled RoPE key (kv_lora_rank + qk_rope_head_dim,
arXiv:2405.04434 section 2.1); plus the DSA indexer's key (index_head_dim). Bytes are the caller's: multiply by the
KV format's bytes per element (``workload.precision``).

The memory estimators (``estimate/memory``) can take ``kv_cache_elements(spec, context_len)`` as the per-sequence
element count: it equals ``Σ_layers tokens_per_layer × elements_per_token`` for every family.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.workload.spec import TransformerSpec

__all__ = ["kv_cache_elements", "kv_cache_elements_per_token", "kv_cache_tokens_per_layer"]


def kv_cache_tokens_per_layer(spec: TransformerSpec, context_len: ArrayLike) -> NDArray[np.float64]:
    """Tokens each layer's KV cache holds for a sequence of ``context_len`` tokens, shape
    ``(*context_len.shape, layers)``: context (full and sparse attention), min(context, window) (sliding),
    min(context, chunk) (chunked; the most the current chunk reaches)."""
    ctx = np.asarray(context_len, dtype=float)[..., None]
    span = {"full": np.inf, "sliding": spec.sliding_window or np.inf, "chunked": spec.sliding_window or np.inf}
    out: NDArray[np.float64] = np.minimum(ctx, np.array([span[k] for k in spec.layer_kinds()], dtype=float))
    return out


def kv_cache_elements_per_token(spec: TransformerSpec) -> int:
    """Elements one layer caches per token: 2·kv_heads·head_dim (K and V), or MLA's kv_lora_rank + qk_rope_head_dim;
    plus index_head_dim for DeepSeek-V3.2's indexer keys."""
    per = spec.mla.kv_lora_rank + spec.mla.qk_rope_head_dim if spec.mla else 2 * spec.kv_dim
    return per + (spec.sparse.indexer_head_dim if spec.sparse else 0)


def kv_cache_elements(spec: TransformerSpec, context_len: ArrayLike) -> float | NDArray[np.float64]:
    """Elements the KV cache of one sequence of ``context_len`` tokens holds, all layers (array-friendly)."""
    total = kv_cache_tokens_per_layer(spec, context_len).sum(axis=-1) * kv_cache_elements_per_token(spec)
    return total if total.ndim else float(total)
