"""Activations (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", section 4).

Per layer and micro-batch ``s·b·h·(34 + 5·a·s/h)`` bytes for a GPT layer with dropout. We derive that figure term by
term (listed in ``activation_bytes_per_layer``) so that it generalises to GQA, gated MLPs, MoE, no dropout and
flash attention (which stores no s² score matrix; Dao et al. 2022), then apply tensor / sequence parallelism,
selective or full recomputation, context parallelism and the micro-batches a pipeline keeps in flight
(1F1B: the first stage holds ``pp`` of them; interleaved: × (1 + (p − 1)/(p·v))).

Recompute policies (``RECOMPUTE``): ``none``; ``selective``, Korthikanti's: the attention core's s² tensors are
recomputed (nothing to drop under flash attention, which never stores them); ``full``: only each layer's input is
kept; ``op-selective``, torchtitan's per-op selective activation checkpointing (``activation_checkpoint.mode =
"selective"``, ``selective_ac_option = "op"``, the llama3_8b.toml default; torchtitan
``torchtitan/models/llama3/infra/parallelize.py``, ``_apply_ac_to_transformer_block``): inside a checkpointed
block it saves the outputs of every other matmul (the 1st, 3rd, ... ``aten.mm`` calls: wq, wv, w1, w2 of a Llama
block) and of the attention kernel (output and fp32 log-sum-exp), and recomputes the rest (norms, rotary, k, o, w3,
SiLU and products); the block's input is kept as by full checkpointing. That is less than Korthikanti's selective
(which under flash attention keeps everything).

Eager and compiled blocks keep different sets under the same policy (``compile_blocks``). Eager SAC caches the output
of every op the policy marks ``MUST_SAVE`` until the block's recomputation consumes it, needed by backward or not
(PyTorch ``torch/utils/checkpoint.py``, ``_CachingTorchDispatchMode``: ``if policy in (MUST_SAVE, PREFER_SAVE) ...:
self.storage[key][idx] = ...``). Under ``torch.compile`` the policy only tags the graph's nodes; AOTAutograd's min-cut
partitioner (``torch/_functorch/partitioners.py``: ``MUST_SAVE`` nodes are banned from recomputation, ``must_recompute``
forces ``PREFER_RECOMPUTE`` ones) saves only what the backward graph needs. A row-parallel matmul's output (w2 of a
Llama block) feeds only the residual add, whose backward needs no input, so a compiled block does not keep it: 2·h B
per token less. Checked on PyTorch 2.13 with a Llama-shaped block, torchtitan's policy and the min-cut partitioner:
the forward graph saves the block input, the wq, wv and w1 outputs and the attention output and log-sum-exp, and not
w2's output. torchtitan's own measurements agree: ``torch.compile`` lowers Llama 3.1 8B's peak from 82.4 to 77.0 GiB
on 8 H100 and from 67.0 to 62.0 GiB on 128 (Dec 2024 benchmarks, op SAC, mb 2, the loss still eager), 5.8 and 5.4 GB
against 4.3 GB of w2 outputs (32 layers × 2 × 4096 B × 16,384 tokens) plus their share of the allocator's reserve.

Quantised training: under Transformer Engine (Megatron-Core) with FP8 / NVFP4 GEMMs the linear layers save a
quantised copy of their input for backward instead of the 16-bit tensor (``GEMM_INPUT_BYTES``,
``activation_bytes_per_layer(gemm_input_bytes=)``).

The loss: the output head's logits feed a cross-entropy whose fp32 transient peaks on the last stage
(``CROSS_ENTROPY``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.errors import InputError
from scaleright.estimate.layout import RECOMPUTE
from scaleright.workload.spec import TransformerSpec

__all__ = ["CROSS_ENTROPY", "GEMM_INPUT_BYTES", "activation_bytes_per_layer", "cross_entropy_bytes",
           "op_selective_recompute_fraction"]

# Bytes per value of the input copy a linear layer saves for its weight gradient under Transformer Engine's quantised
# training (``quantised_gemm_inputs`` frameworks, ``profiles``), by the GEMMs' format. TE 2.x
# ``pytorch/module/linear.py`` (``_Linear.forward``: ``saved_inputmat = inputmat``, the quantised input, after
# "Discard unneeded data in input tensor": ``update_usage(rowwise_usage=False, columnwise_usage=True)``, or rowwise
# only where the sequence-parallel all-gather needs it) and ``layernorm_linear.py`` (``ln_out_to_save = ln_out``, the
# quantised norm output, one usage kept): one quantised copy, not the 16-bit tensor. FP8: 1 B (per-tensor scaling;
# MXFP8 adds one 8-bit scale per 32 values, 3 %, left out); NVFP4: 4-bit values and one E4M3 scale per 16, 0.5625 B
# (``workload.precision``). Megatron-Core's SwiGLU saves its own 16-bit input (fc1's output), unaffected.
GEMM_INPUT_BYTES = {"fp8": 1.0, "fp4": 0.5 + 1.0 / 16}

_RECOMPUTE_CODE = {name: i for i, name in enumerate(RECOMPUTE)}

# Bytes per logit (micro_batch · seq · vocab / tp values) at the loss's peak, by implementation.
CROSS_ENTROPY = {
    # Megatron's vocab-parallel cross entropy (megatron/core/tensor_parallel/cross_entropy.py): 16-bit logits, one
    # fp32 copy whose exp, softmax and gradient are computed in place (Korthikanti et al. 2022 appendix: 4sbv/t).
    "fused": "16-bit logits + one fp32 copy, softmax and gradient in place",
    # PyTorch F.cross_entropy on logits.float() (torchtitan's cross_entropy_loss, HF-style losses): forward 16-bit
    # logits + fp32 copy + fp32 log-softmax (2 + 4 + 4); backward, after the 16-bit logits are freed (torchtitan
    # deletes ``pred`` before ``loss.backward()``), the saved log-softmax, nll_loss's dense fp32 gradient and
    # log_softmax's fp32 input gradient live at once (4 + 4 + 4): 12 B per logit.
    "eager": "fp32 log-softmax, its gradient and the logits' gradient (12 B per logit)",
    # The same loss under torch.compile (torchtitan compiles it with the model since 2025,
    # torchtitan/components/loss.py ``build_cross_entropy_loss``; in 2024 it stayed eager: "TODO: compiling loss
    # function causes CUDA errors, turning off for now" in train.py): Inductor fuses the cast, log-softmax and
    # nll_loss into reductions over each row, so no fp32 [tokens, vocab] tensor is written; the backward saves the
    # 16-bit logits and the per-row log-sum-exp and writes the 16-bit logits' gradient in one kernel: 2 + 2 B.
    "compiled": "16-bit logits and their 16-bit gradient, fp32 only per row (torch.compile, 4 B per logit)",
    # The same F.cross_entropy(pred.float()) on vocab-sharded DTensor logits inside PyTorch's ``loss_parallel()``
    # (torchtitan's default under tensor parallelism: ``training.disable_loss_parallel = False``, the output head
    # ColwiseParallel with ``output_layouts=Shard(-1)``), per local logit: the forward's ``_log_softmax``
    # (torch/distributed/tensor/parallel/loss.py) holds the 16-bit ``pred``, its fp32 copy, ``shifted = x - max``
    # and ``exp(shifted)`` at once (2 + 4 + 4 + 4); the backward, ``_nll_loss_and_log_softmax_backward``, fuses
    # log_softmax's backward into nll_loss's as ``(grad_input + torch.exp(x)) * grad_output`` with ``grad_input =
    # torch.zeros_like(x)``: the saved log-softmax ``x``, ``grad_input``, ``exp(x)`` and their sum live at once
    # (4 + 4 + 4 + 4; torchtitan deletes ``pred`` before ``loss.backward()``): 16 B per logit.
    "loss-parallel": "fp32 log-softmax, a zero gradient, exp and their sum in loss_parallel()'s backward (16 B)",
    # flash-attn's Triton cross entropy (flash_attn/losses/cross_entropy.py ``CrossEntropyLoss``, llm-foundry's
    # ``loss_fn: fused_crossentropy``: ``FusedCrossEntropyLoss(ignore_index=..., reduction='none')``, so
    # ``inplace_backward=False``): the kernel reads the 16-bit logits and computes in fp32 in registers;
    # flash_attn/ops/triton/cross_entropy.py saves ``(logits, lse, labels)``, per-row fp32 losses and lse, and the
    # backward writes ``dlogits = torch.empty_like(logits)``, in the logits' dtype: 2 + 2 B.
    "flash-attn": "flash-attn's Triton cross entropy: 16-bit logits and their 16-bit gradient (4 B per logit)",
}


def cross_entropy_bytes(cross_entropy: str, bytes_per_value: float) -> float:
    """Peak bytes per logit of the loss (``CROSS_ENTROPY``)."""
    if cross_entropy == "fused":
        return bytes_per_value + 4.0
    if cross_entropy == "eager":
        return max(bytes_per_value + 4.0 + 4.0, 12.0)
    if cross_entropy in ("compiled", "flash-attn"):
        return 2.0 * bytes_per_value
    if cross_entropy == "loss-parallel":
        return max(bytes_per_value + 12.0, 16.0)
    raise InputError(f"cross_entropy={cross_entropy!r} not allowed; allowed: {', '.join(CROSS_ENTROPY)}")


def _mm_widths(spec: TransformerSpec) -> list[tuple[float, float, bool]]:
    """One block's matmuls in call order (torchtitan's Llama block: wq, wk, wv, wo, then w1, w3, w2; a plain MLP
    fc1, fc2) as (output width, input width, row-parallel) per token; a row-parallel matmul's output is a
    full-width partial sum on every TP rank. MoE layers count the routed top_k and shared experts' widths."""
    h = spec.hidden
    q = spec.q_dim
    kv_k = (spec.mla.kv_lora_rank + spec.mla.qk_rope_head_dim) if spec.mla else spec.kv_dim
    kv_v = spec.heads * spec.mla.v_head_dim if spec.mla else spec.kv_dim
    o_in = kv_v if spec.mla else q
    if spec.moe:
        m = spec.moe
        moe_frac = spec.moe_layer_count() / spec.layers
        f = (1 - moe_frac) * spec.ffn_hidden + moe_frac * (
            m.top_k * m.expert_ffn_hidden + m.num_shared_experts * m.shared_ffn_hidden)
    else:
        f = spec.ffn_hidden
    mms: list[tuple[float, float, bool]] = [(q, h, False), (kv_k, h, False), (kv_v, h, False), (h, o_in, True)]
    mms += [(f, h, False), (f, h, False), (h, f, True)] if spec.gated_mlp else [(f, h, False), (h, f, True)]
    return mms


def op_selective_recompute_fraction(spec: TransformerSpec) -> float:
    """Fraction of a block's forward matmul FLOPs that ``op-selective`` recomputes: the even-numbered matmuls
    (wk, wo, w3 of a Llama block), whose outputs torchtitan's policy does not save."""
    mms = _mm_widths(spec)
    total = sum(w * d for w, d, _ in mms)
    return float(sum(w * d for i, (w, d, _) in enumerate(mms) if i % 2 == 1) / total)


def activation_bytes_per_layer(
    spec: TransformerSpec,
    *,
    seq_len: ArrayLike,
    micro_batch: ArrayLike = 1,
    tp: ArrayLike = 1,
    cp: ArrayLike = 1,
    sequence_parallel: ArrayLike = False,
    recompute: str | ArrayLike = "none",
    flash_attention: bool = True,
    bytes_per_value: float = 2.0,
    compile_blocks: ArrayLike = False,
    gemm_input_bytes: float | None = None,
) -> NDArray[np.float64]:
    """Activation bytes one transformer layer keeps for the backward pass, per micro-batch, on one GPU.

    Terms (Korthikanti et al. 2022, section 4.1; 16-bit values cost 2 B, dropout masks 1 B):
    attention — QKV input 2sbh, Q and K 2sb(q+kv), V 2sb·kv, output-projection input 2sb·q, softmax output
    2as²b, and with dropout its mask as²b, dropout output 2as²b and the output dropout mask sbh;
    MLP — input 2sbh, then 2sbf at the activation input and 2sbf at the second matmul input (gated MLP: gate,
    up and their product, 6sbf with a fused SwiGLU); output dropout mask sbh; MoE multiplies the MLP terms by
    top_k and adds shared experts; norms — 2sbh per norm. For GPT (q = kv = h, f = 4h, 2 norms, dropout) this is
    34sbh + 5as²b. Flash attention replaces the s² terms by the fp32 log-sum-exp (4asb).
    Without sequence parallelism, norm inputs, the QKV and MLP inputs and dropout masks are replicated over tp
    (the "10" of 10 + 24/t); with it everything is divided by t. Selective recomputation drops the s² terms;
    full recomputation keeps only the layer input 2sbh (divided by t under sequence parallelism).
    ``op-selective`` keeps what torchtitan's per-op policy saves (module docstring); with ``compile_blocks``
    (the blocks run under ``torch.compile``) without the row-parallel matmul outputs that backward never reads.
    ``recompute`` may be a string or an integer code array (0 none, 1 selective, 2 full, 3 op-selective).

    ``gemm_input_bytes``: the linear layers save a quantised copy of their input for the weight gradient, at this
    many bytes per value, instead of the 16-bit input (``GEMM_INPUT_BYTES``: Transformer Engine under FP8 / NVFP4);
    None: the 16-bit inputs. It applies to the QKV, output-projection, MLP-input and second-MLP-matmul inputs; the
    output projection's copy is extra under flash attention, whose kernel saves its own 16-bit output (the same
    tensor the 16-bit accounting counts once), and an MoE layer's MLP input stays 16-bit (the router saves it).
    """
    bpv = bytes_per_value
    unit = bpv / 2.0  # the paper's byte counts are for 2-byte values
    s = np.asarray(seq_len, dtype=float) / np.asarray(cp, dtype=float)
    b = np.asarray(micro_batch, dtype=float)
    t = np.asarray(tp, dtype=float)
    sp = np.asarray(sequence_parallel, dtype=bool)
    rc = _recompute_code(recompute)
    h = spec.hidden
    q = spec.q_dim
    kv_k = (spec.mla.kv_lora_rank + spec.mla.qk_rope_head_dim) if spec.mla else spec.kv_dim
    kv_v = spec.heads * spec.mla.v_head_dim if spec.mla else spec.kv_dim
    o_in = kv_v if spec.mla else q
    a = spec.heads
    drop = 1.0 if spec.dropout else 0.0
    sb = s * b
    # a saved GEMM input in the paper's 2-byte units: 2 for a 16-bit input, else its quantised copy
    g2 = 2.0 if gemm_input_bytes is None else gemm_input_bytes / unit
    mlp_in = 2.0 if spec.moe else g2  # (an MoE router saves the 16-bit MLP input)
    # replicated over tp unless sequence parallel: norm inputs, QKV input, MLP input, dropout masks
    repl = sb * (spec.norms_per_layer * 2 * h + g2 * h + mlp_in * h + drop * 2 * h) * unit
    # ... for parallel-attention models both branches read one norm output
    if spec.parallel_attn:
        repl = repl - sb * mlp_in * h * unit
    # split over tp; the output projection's input is the attention's output (saved by flash attention itself)
    o_term = 2 * o_in if gemm_input_bytes is None else ((2 + g2) if flash_attention else g2) * o_in
    attn = sb * (2 * (q + kv_k) + 2 * kv_v + o_term) * unit
    # MLP: the activation's input (2f, gated: gate and up 4f) and the second matmul's input (2f, or its copy)
    ffn_w: Callable[[int], float] = lambda f: ((4 if spec.gated_mlp else 2) + g2) * f  # noqa: E731
    if spec.moe:
        m = spec.moe
        moe_frac = spec.moe_layer_count() / spec.layers
        per_tok_ffn = (1 - moe_frac) * ffn_w(spec.ffn_hidden) + moe_frac * (
            m.top_k * ffn_w(m.expert_ffn_hidden) + m.num_shared_experts * ffn_w(m.shared_ffn_hidden)
            + g2 * h * m.top_k  # tokens permuted to their experts (the experts' first-matmul input)
        )  # fmt: skip
    else:
        per_tok_ffn = ffn_w(spec.ffn_hidden)
    mlp = sb * per_tok_ffn * unit
    # Under context parallelism a query still sees every key of the sequence; local layers see a window.
    s_full = np.asarray(seq_len, dtype=float)
    local = spec.local_layer_count() / spec.layers if spec.layers else 0.0
    keys = (1 - local) * s_full + local * np.minimum(s_full, spec.sliding_window or 1) if local else s_full
    if flash_attention:  # noqa: SIM108 (the branches carry their own comments)
        scores = 4.0 * a * sb  # fp32 log-sum-exp per head and query
    else:
        scores = a * sb * keys * (2 + drop * 3) * unit
    split = attn + mlp + scores
    no_rc = np.where(sp, (repl + split) / t, repl + split / t)
    sel = no_rc if flash_attention else no_rc - scores / t  # flash attention keeps no s² terms to drop
    full = np.where(sp, 2 * sb * h * unit / t, 2 * sb * h * unit)
    # op-selective: the block input (as full), the odd-numbered matmul outputs (column-parallel ones split over tp,
    # row-parallel ones a full partial sum), the attention kernel's output and log-sum-exp (flash only)
    out = np.where(rc == 2, full, np.where(rc == 1, sel, no_rc))
    if np.any(rc == 3):
        mms = _mm_widths(spec)
        saved_split = sum(w for i, (w, _, row) in enumerate(mms) if i % 2 == 0 and not row)
        saved_full = sum(w for i, (w, _, row) in enumerate(mms) if i % 2 == 0 and row)
        kernel = (2 * q + 4.0 * a / unit) if flash_attention else 0.0
        # (a row-parallel output feeds only the residual add: cached by eager SAC, not saved by a compiled block)
        eager_only = np.where(np.asarray(compile_blocks, dtype=bool), 0.0, 2.0 * saved_full)
        op_sel = full + sb * (eager_only + (2 * saved_split + kernel) / t) * unit
        out = np.where(rc == 3, op_sel, out)
    return cast("NDArray[np.float64]", out)


def _recompute_code(recompute: str | ArrayLike) -> NDArray[np.int_]:
    if isinstance(recompute, str):
        if recompute not in _RECOMPUTE_CODE:
            raise InputError(f"recompute={recompute!r} not allowed; allowed: {', '.join(RECOMPUTE)}")
        return np.asarray(_RECOMPUTE_CODE[recompute])
    return np.asarray(recompute)


def _inflight_microbatches(pp: ArrayLike, virtual_stages: ArrayLike, n_micro: ArrayLike) -> NDArray[np.float64]:
    """Micro-batches whose activations the first pipeline stage holds at peak (Korthikanti et al. 2022, 4.2.3)."""
    pp = np.asarray(pp, dtype=float)
    v = np.asarray(virtual_stages, dtype=float)
    m = np.asarray(n_micro, dtype=float)
    interleave = np.where(v > 1, 1 + (pp - 1) / (pp * v), 1.0)
    return np.where(pp > 1, np.minimum(pp, m) * interleave, 1.0)


def _inflight_first_chunk(pp: ArrayLike, virtual_stages: ArrayLike, n_micro: ArrayLike) -> NDArray[np.float64]:
    """Of the first stage's in-flight chunk forwards at peak (``_inflight_microbatches`` · v), those of its first
    model chunk. 1F1B (v = 1): all of them. Interleaved 1F1B (Megatron-Core's schedule runs pp micro-batches on
    a chunk before the next chunk): rank 0's ``2(pp-1) + (v-1)pp + 1`` warm-up forwards are pp of every chunk and
    then ``pp - 1`` more of the first, so ``pp + min(pp - 1, m - pp)`` (m ≥ pp micro-batches)."""
    pp = np.asarray(pp, dtype=float)
    v = np.asarray(virtual_stages, dtype=float)
    m = np.asarray(n_micro, dtype=float)
    first = np.minimum(pp, m) + np.clip(m - pp, 0.0, pp - 1)
    return np.where(pp > 1, np.where(v > 1, first, np.minimum(pp, m)), 1.0)
