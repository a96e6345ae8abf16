"""Inference memory: weights at their storage precision, the KV cache and one forward step's workspace."""

from __future__ import annotations

from typing import cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.errors import InputError
from scaleright.estimate.layout import Layout, stage_slots
from scaleright.estimate.memory.breakdown import GB, MemoryBreakdown, _breakdown, fold_overheads, overhead_details
from scaleright.estimate.memory.overheads import Overheads, allocator_reserve_bytes, nccl_buffer_bytes
from scaleright.estimate.memory.states import _end_params, _ends, _stage_params
from scaleright.workload.kv import kv_cache_tokens_per_layer
from scaleright.workload.params import ParamCounts, count_params, gguf_weight_bytes
from scaleright.workload.precision import bytes_per_element, is_gguf
from scaleright.workload.spec import TransformerSpec

__all__ = ["kv_cache_bytes", "inference_memory_arrays", "inference_memory"]


def kv_cache_bytes(
    spec: TransformerSpec, *, batch: ArrayLike, context: ArrayLike, tp: ArrayLike = 1, pp: ArrayLike = 1,
    kv_precision: str = "bf16",
) -> float | NDArray[np.float64]:
    """KV-cache bytes per GPU for ``batch`` sequences of ``context`` tokens.

    Per token and layer: 2 · kv_heads · head_dim values (K and V; GQA/MQA shrink kv_heads). Tensor parallelism
    splits KV heads; when tp exceeds kv_heads each GPU keeps one head (replication, as vLLM and TensorRT-LLM do).
    MLA (DeepSeek-V2/V3) caches the compressed latent plus the RoPE key, kv_lora_rank + qk_rope_head_dim values
    per token and layer, replicated on every tp rank; DeepSeek-V3.2 adds its indexer's keys. Sliding-window and
    chunked-attention layers keep at most their window or chunk (``workload.kv_cache_tokens_per_layer``).
    """
    bpe = bytes_per_element(kv_precision, field="kv_precision")
    ctx = np.asarray(context, dtype=float)
    tp = np.asarray(tp, dtype=float)
    eff_tokens = kv_cache_tokens_per_layer(spec, ctx).sum(axis=-1)  # sliding / chunked layers hold their span
    if spec.mla:
        per_token_layer = spec.mla.kv_lora_rank + spec.mla.qk_rope_head_dim + 0 * tp
    else:
        per_token_layer = 2 * np.maximum(spec.kv_heads / tp, 1.0) * spec.head_dim
    if spec.sparse:  # DeepSeek-V3.2's DSA indexer caches its own keys per token and layer, on every tp rank
        per_token_layer = per_token_layer + spec.sparse.indexer_head_dim
    stage_share = stage_slots(spec.layers, pp) / spec.layers  # the fullest stage's layers
    out = np.asarray(batch, dtype=float) * eff_tokens * per_token_layer * bpe * stage_share
    return cast("float | NDArray[np.float64]", out)


def _inference_weight_bytes(
    spec: TransformerSpec, c: ParamCounts, *, tp: ArrayLike, pp: ArrayLike, ep: ArrayLike, precision: str
) -> float | NDArray[np.float64]:
    """Weights per GPU: block matmuls at ``precision``; embeddings, head and norms stay 16-bit when quantised. A GGUF
    file type: its tensors' own bytes (``workload.params.gguf_weight_bytes``), split as ``_stage_params`` splits
    the elements (the blocks' mix of ggml types taken as even over the stages)."""
    if is_gguf(precision):
        w = gguf_weight_bytes(spec, precision)
        t, p, e = (np.asarray(x, dtype=float) for x in (tp, pp, ep))
        stage = stage_slots(c.layers, p) / c.layers
        ends = _ends(w.embedding, w.positions, w.lm_head, w.final_norm, p, tied=spec.tied_embeddings)
        blocks = w.attention + w.ffn - w.routed_experts + w.vectors
        return cast("float | NDArray[np.float64]", (stage * blocks + ends) / t + stage * w.routed_experts / (t * e))
    bpe = bytes_per_element(precision)
    dense, expert = _stage_params(c, tp, pp, ep, tied=spec.tied_embeddings)
    hi = 4.0 if precision == "fp32" else 2.0
    emb = (_end_params(c, pp, tied=spec.tied_embeddings) - c.final_norm) / np.asarray(tp, dtype=float)
    return cast("float | NDArray[np.float64]", (dense - emb + expert) * bpe + emb * hi)


def inference_memory_arrays(
    spec: TransformerSpec,
    *,
    batch: ArrayLike,
    context: ArrayLike,
    tp: ArrayLike = 1,
    pp: ArrayLike = 1,
    ep: ArrayLike = 1,
    precision: str = "bf16",
    kv_precision: str = "bf16",
    prefill_chunk: int = 8192,
    overheads: Overheads = Overheads(),
    _split_overhead: bool = False,
) -> dict[str, np.ndarray]:
    """Per-GPU inference memory in bytes by component, broadcast over batch / context / tp / pp arrays.

    Activation workspace: the largest intermediate tensors of one forward step over the tokens processed at once
    (a prefill chunk of at most ``prefill_chunk`` tokens): the residual stream and norm output (2 · h), the
    q/k/v projections ((q + 2kv)/tp) and the FFN intermediate (2 · f/tp for gated MLPs) at 16 bits, plus fp32 logits
    of the last position of each sequence. ``prefill_chunk`` defaults to 8192 tokens per step, TensorRT-LLM's default
    ``max_num_tokens`` (and vLLM's chunked-prefill token budget of that order).
    """
    c = count_params(spec)
    weights = _inference_weight_bytes(spec, c, tp=tp, pp=pp, ep=ep, precision=precision)
    kv = kv_cache_bytes(spec, batch=batch, context=context, tp=tp, pp=pp, kv_precision=kv_precision)
    tokens = np.minimum(np.asarray(batch, dtype=float) * np.asarray(context, dtype=float), prefill_chunk)
    t = np.asarray(tp, dtype=float)
    ffn = spec.moe.expert_ffn_hidden * spec.moe.top_k if spec.moe else spec.ffn_hidden
    width = 2 * spec.hidden + (spec.q_dim + 2 * spec.kv_dim) / t + (2 if spec.gated_mlp else 1) * ffn / t
    acts = tokens * width * 2.0 + np.asarray(batch, dtype=float) * spec.vocab * 4.0 / t
    # the CUDA context, NCCL buffers of the tp / pp groups and the allocator's reserve over the step's workspace
    # (the KV cache is one preallocated pool in vLLM / TensorRT-LLM, not churned)
    reserve = allocator_reserve_bytes(acts, overheads)
    nccl = nccl_buffer_bytes(overheads, tp=tp, pp=pp)
    shape = np.broadcast(weights, kv, acts, reserve, nccl).shape
    zeros = np.zeros(shape)
    parts = {
        "weights": weights + zeros,
        "gradients": zeros,
        "optimizer": zeros,
        "activations": acts + zeros,
        "kv_cache": kv + zeros,
        "overhead_allocator": reserve + zeros,
        "overhead_cuda_context": overheads.runtime_gb * GB + zeros,
        "overhead_nccl": nccl + zeros,
    }
    return parts if _split_overhead else fold_overheads(parts)


def inference_memory(
    spec: TransformerSpec,
    *,
    batch: int,
    context: int,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    precision: str = "bf16",
    kv_precision: str = "bf16",
    overheads: Overheads = Overheads(),
    gpu_memory_gb: float | None = None,
) -> MemoryBreakdown:
    """Inference memory per GPU for ``batch`` sequences of ``context`` tokens (prompt + generated)."""
    Layout(tp=tp, pp=pp, dp=ep if ep > 1 else 1, ep=ep).validate(spec)
    if batch < 1 or context < 1:
        raise InputError(f"batch={batch} and context={context} must be positive integers")
    parts = inference_memory_arrays(
        spec, batch=batch, context=context, tp=tp, pp=pp, ep=ep, precision=precision, kv_precision=kv_precision,
        overheads=overheads, _split_overhead=True,
    )  # fmt: skip
    return _breakdown(fold_overheads(parts), gpu_memory_gb, **overhead_details(parts))
