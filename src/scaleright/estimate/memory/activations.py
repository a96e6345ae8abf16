"""Activations (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", section 4).

Per layer and micro-batch ``s·b·h·(34 + 5·a·s/h)`` bytes for a GPT layer with dropout. We derive that figure term by
term (listed in ``activation_bytes_per_layer``) so that it generalises to GQA, gated MLPs, MoE, no dropout and
flash attention (which stores no s² score matrix; Dao et al. 2022), then apply tensor / sequence parallelism,
selective or full recomputation, context parallelism and the micro-batches a pipeline keeps in flight
(1F1B: the first stage holds ``pp`` of them; interleaved: × (1 + (p − 1)/(p·v))).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.errors import InputError
from scaleright.estimate.layout import RECOMPUTE
from scaleright.workload.spec import TransformerSpec

__all__ = ["activation_bytes_per_layer"]

_RECOMPUTE_CODE = {name: i for i, name in enumerate(RECOMPUTE)}


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
    ``recompute`` may be a string or an integer code array (0 none, 1 selective, 2 full).
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
    # replicated over tp unless sequence parallel
    repl = sb * (spec.norms_per_layer * 2 * h + 2 * h + 2 * h + drop * 2 * h) * unit
    # ... note the MLP input is the second 2h; for parallel-attention models both branches read one norm output
    if spec.parallel_attn:
        repl = repl - sb * 2 * h * unit
    # split over tp
    attn = sb * (2 * (q + kv_k) + 2 * kv_v + 2 * o_in) * unit
    if spec.moe:
        m = spec.moe
        moe_frac = spec.moe_layer_count() / spec.layers
        ffn_w: Callable[[int], int] = lambda f: (6 if spec.gated_mlp else 4) * f  # noqa: E731
        per_tok_ffn = (1 - moe_frac) * ffn_w(spec.ffn_hidden) + moe_frac * (
            m.top_k * ffn_w(m.expert_ffn_hidden) + m.num_shared_experts * ffn_w(m.shared_ffn_hidden)
            + 2 * h * m.top_k  # tokens permuted to their experts
        )  # fmt: skip
    else:
        per_tok_ffn = (6 if spec.gated_mlp else 4) * spec.ffn_hidden
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
    return cast("NDArray[np.float64]", np.where(rc == 2, full, np.where(rc == 1, sel, no_rc)))


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

