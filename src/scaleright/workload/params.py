"""Exact parameter counts of a ``TransformerSpec``, bottom-up by component.

Counts follow the ``transformers`` modelling code of each family: q/k/v/o projections (with biases where the
family has them), FFN matrices (three for gated MLPs, two otherwise), norms (RMSNorm: weight; LayerNorm: weight and
bias), embeddings, learned positions, and an output head unless tied. MoE layers count every routed expert in the
total and ``top_k`` of them in the active count (Mixtral, arXiv:2401.04088: 46.7 B total, 12.9 B active).
Family details: gpt-oss adds one attention-sink logit per head and biases on every expert matrix and the router;
Qwen3 adds q/k RMSNorms of ``head_dim``; DeepSeek-V3.2's DSA indexer adds per layer a query projection from the
query latent (q_lora_rank x heads·dim), a key projection (hidden x dim) with a LayerNorm, and a head-weight
projection (hidden x heads) (DeepSeek-V3.2-Exp ``inference/model.py``, class ``Indexer``). ``active`` counts every
parameter a token touches, the input embedding included; OpenAI's gpt-oss card and Qwen count without it.

``gguf_weight_bytes`` is the stored size of the same tensors in a GGUF file type (``workload.precision``), tensor by
tensor as llama.cpp's ``llama_tensor_get_type`` (``src/llama-quant.cpp``) picks each one's ggml type.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from scaleright.errors import InputError
from scaleright.workload.precision import GGML_BLOCKS, GGUF_BASE_TYPE, is_gguf
from scaleright.workload.spec import TransformerSpec

__all__ = ["GGUFBytes", "ParamCounts", "count_params", "gguf_weight_bytes"]


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts (elements) by component. ``*_per_layer`` figures are for one layer of that kind."""

    embedding: int  # token embedding table (vocab x hidden)
    positions: int  # learned position table (GPT-2), else 0
    lm_head: int  # output projection, 0 if tied to the embedding
    final_norm: int
    attn_per_layer: int  # projections + biases (+ MLA norms, + q/k norms)
    norms_per_layer: int  # block norms
    dense_ffn_per_layer: int  # FFN of a dense layer
    expert_ffn: int  # one routed expert
    shared_ffn_per_layer: int  # shared experts of a MoE layer together (+ their gate)
    router_per_layer: int  # router of a MoE layer
    layers: int
    moe_layers: int
    top_k: int
    num_experts: int

    @property
    def dense_layers(self) -> int:
        return self.layers - self.moe_layers

    @property
    def moe_ffn_per_layer(self) -> int:
        """All parameters of one MoE FFN block (every routed expert, shared experts, router)."""
        return self.num_experts * self.expert_ffn + self.shared_ffn_per_layer + self.router_per_layer

    @property
    def routed_experts_total(self) -> int:
        """Parameters of all routed experts in the model (the part expert parallelism shards)."""
        return self.moe_layers * self.num_experts * self.expert_ffn

    @property
    def blocks(self) -> int:
        """All transformer-block parameters (attention, norms, FFNs)."""
        return (
            self.layers * (self.attn_per_layer + self.norms_per_layer)
            + self.dense_layers * self.dense_ffn_per_layer
            + self.moe_layers * self.moe_ffn_per_layer
        )

    @property
    def total(self) -> int:
        return self.embedding + self.positions + self.lm_head + self.final_norm + self.blocks

    @property
    def active(self) -> int:
        """Parameters a single token touches (MoE: top_k routed experts plus shared ones)."""
        inactive = self.moe_layers * (self.num_experts - self.top_k) * self.expert_ffn
        return self.total - inactive

    @property
    def non_embedding(self) -> int:
        """Total without the embedding and position tables (Kaplan et al. 2020's N); the head counts if untied."""
        return self.total - self.embedding - self.positions


def _ffn(hidden: int, inner: int, gated: bool, bias: bool) -> int:
    mats = 3 if gated else 2
    biases = ((2 if gated else 1) * inner + hidden) if bias else 0
    return mats * hidden * inner + biases


def count_params(spec: TransformerSpec) -> ParamCounts:
    """Count ``spec``'s parameters by component (see module docstring for the conventions)."""
    h = spec.hidden
    norm_w = 2 * h if spec.norm == "layernorm" else h
    if spec.mla:
        m = spec.mla
        q = (h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * spec.q_dim) if m.q_lora_rank else h * spec.q_dim
        kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank
        kv += m.kv_lora_rank * spec.heads * (m.qk_nope_head_dim + m.v_head_dim)
        attn = q + kv + spec.heads * m.v_head_dim * h
        if spec.sparse:  # DSA lightning indexer: wq_b, wk, k_norm (LayerNorm), weights_proj
            s = spec.sparse
            attn += m.q_lora_rank * s.indexer_heads * s.indexer_head_dim + h * s.indexer_head_dim
            attn += 2 * s.indexer_head_dim + h * s.indexer_heads
    else:
        attn = h * spec.q_dim + 2 * h * spec.kv_dim + spec.q_dim * h
        if spec.qkv_bias:
            attn += spec.q_dim + 2 * spec.kv_dim
        if spec.out_bias:
            attn += h
        if spec.qk_norm:
            attn += 2 * spec.head_dim
        if spec.attention_sinks:
            attn += spec.heads
    moe = spec.moe
    expert = shared = router = 0
    if moe:
        expert = _ffn(h, moe.expert_ffn_hidden, spec.gated_mlp, moe.expert_bias)
        shared = moe.num_shared_experts * _ffn(h, moe.shared_ffn_hidden, spec.gated_mlp, False)
        shared += h if moe.shared_expert_gate else 0
        router = h * moe.num_experts + (moe.num_experts if moe.router_bias else 0)
    return ParamCounts(
        embedding=spec.vocab * h,
        positions=spec.learned_positions * h,
        lm_head=0 if spec.tied_embeddings else spec.vocab * h,
        final_norm=norm_w,
        attn_per_layer=attn,
        norms_per_layer=spec.norms_per_layer * norm_w,
        dense_ffn_per_layer=_ffn(h, spec.ffn_hidden, spec.gated_mlp, spec.mlp_bias),
        expert_ffn=expert,
        shared_ffn_per_layer=shared,
        router_per_layer=router,
        layers=spec.layers,
        moe_layers=spec.moe_layer_count(),
        top_k=moe.top_k if moe else 0,
        num_experts=moe.num_experts if moe else 0,
    )


@dataclass(frozen=True)
class GGUFBytes:
    """Stored bytes of a model's tensors in one GGUF file type, by the parts inference reads differently; each
    ``*_params`` the elements of that part (so ``bytes / params`` is its bytes per weight)."""

    attention: float  # every layer's attention matrices
    attention_params: int
    ffn: float  # every layer's FFN matrices: dense FFNs, shared and routed experts, routers
    ffn_params: int
    routed_experts: float  # the routed experts' part of ``ffn``
    routed_expert_params: int
    vectors: float  # the blocks' norms, biases and sinks (f32)
    embedding: float  # token embedding (a tied model's one table, at the output tensor's type)
    positions: float  # learned position table (GPT-2), else 0
    lm_head: float  # output.weight, 0 when tied
    lm_head_params: int  # elements of the tensor the head multiplies (the embedding when tied)
    head_bytes_per_weight: float  # of that tensor
    final_norm: float

    @property
    def total(self) -> float:
        return (self.attention + self.ffn + self.vectors + self.embedding + self.positions + self.lm_head
                + self.final_norm)  # fmt: skip


_FUSED_QKV = ("gpt2", "gpt_neox", "falcon", "phi3")  # families llama.cpp stores with one attn_qkv tensor
# a K-quant or Q6_K tensor whose rows are not a whole number of 256-weight blocks falls back (llama-quant.cpp)
_FALLBACK = {"q4_k": "q5_0", "q5_k": "q5_1", "q6_k": "q8_0"}


def _more_bits(i: int, n: int) -> bool:
    """llama.cpp's ``use_more_bits(i_layer, n_layers)`` (integer arithmetic as in C)."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def _ggml_type(spec: TransformerSpec, ftype: str, role: str, i: int) -> str:
    """The ggml type ``llama_tensor_get_type`` gives a matrix of ``role`` in layer ``i`` of a ``ftype`` file
    (without an importance matrix): the base type, except
    - output.weight (and a tied model's token_embd.weight): Q6_K, Q8_0 in a Q8_0 file (Falcon: Q8_0);
    - attn_v.weight: Q6_K in Q4_K_M / Q5_K_M files in the layers where ``use_more_bits``; Q4_K → Q5_K in 80-layer
      GQA models (llama.cpp's LLM_TYPE_70B); Q8_0 with 8 experts (Mixtral), as attn_k.weight;
    - attn_output.weight of an 8-expert model: Q5_K in Q4_K_M files; fused attn_qkv: Q5_K (Q4_K_M), Q6_K (Q5_K_M);
    - ffn_down (dense, shared, experts): Q6_K where ``use_more_bits`` in Q4_K_M (Falcon: Q6_K in the first n/16
      layers, Q5_K where use_more_bits) and Q5_K_M files."""
    base = GGUF_BASE_TYPE[ftype]
    n = spec.layers
    experts8 = spec.moe is not None and spec.moe.num_experts == 8
    if role == "output":
        if spec.family == "falcon" or base == "q8_0":
            return "q8_0"
        return "q6_k"
    if role == "attn_v":
        t = "q6_k" if ftype in ("q4_k_m", "q5_k_m") and _more_bits(i, n) else base
        if n == 80 and spec.kv_heads < spec.heads and t == "q4_k":
            t = "q5_k"
        return "q8_0" if experts8 else t
    if role == "attn_k":
        return "q8_0" if experts8 else base
    if role == "attn_output":
        return "q5_k" if experts8 and ftype == "q4_k_m" and spec.family != "falcon" else base
    if role == "attn_qkv":
        return {"q4_k_m": "q5_k", "q5_k_m": "q6_k"}.get(ftype, base)
    if role == "ffn_down":
        if ftype == "q4_k_m" and spec.family == "falcon":
            return "q6_k" if i < n // 16 else "q5_k" if _more_bits(i, n) else "q4_k"
        if ftype in ("q4_k_m", "q5_k_m") and _more_bits(i, n):
            return "q6_k"
    return base


def _bytes(spec: TransformerSpec, ftype: str, role: str, i: int, row: int, params: float) -> float:
    """Bytes of a matrix of ``params`` elements in rows of ``row`` weights (ggml's ne[0], the input width)."""
    t = _ggml_type(spec, ftype, role, i)
    if row % GGML_BLOCKS[t][1]:
        t = _FALLBACK.get(t, t)
    nbytes, per = GGML_BLOCKS[t]
    if row % per:
        raise InputError(f"precision={ftype!r}: {spec.name}'s {role} rows of {row} weights are not a whole number of "
                         f"{per}-weight {t} blocks; llama.cpp cannot quantise that tensor")  # fmt: skip
    return params / per * nbytes


@functools.lru_cache(maxsize=256)  # a per-tensor loop, asked again for every batch size memory tries
def gguf_weight_bytes(spec: TransformerSpec, precision: str) -> GGUFBytes:
    """Bytes of ``spec``'s weights in the GGUF file type ``precision``, tensor by tensor (``_ggml_type``).

    Tensors as llama.cpp's converter names them for a llama-style model: token_embd, output, and per layer attn_q,
    attn_k, attn_v, attn_output (one attn_qkv in ``_FUSED_QKV`` families; MLA's low-rank matrices and the DSA
    indexer's at the base type), ffn_gate / ffn_up / ffn_down (per expert: *_exps, *_shexp), the router
    (ffn_gate_inp) f32 and every vector (norms, biases, sinks) f32. A row length (the input width) not a whole
    number of the type's blocks takes llama.cpp's fallback (Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0). Not modelled:
    an importance matrix (it changes Q4_0's first ffn_down layers) and per-architecture exceptions beyond Falcon
    and the fused-QKV families."""
    if not is_gguf(precision):
        raise InputError(f"precision={precision!r} is not a GGUF file type; allowed: {', '.join(GGUF_BASE_TYPE)}")
    c = count_params(spec)
    h, f = spec.hidden, precision
    att = ffn = exp = 0.0
    att_p = ffn_p = exp_p = 0
    n_up = 2 if spec.gated_mlp else 1
    for i in range(spec.layers):
        mats: list[tuple[str, int, int]] = []  # attention matrices: (role, row length, elements)
        if spec.mla:
            m = spec.mla
            if m.q_lora_rank:
                mats += [("attn", h, h * m.q_lora_rank), ("attn", m.q_lora_rank, m.q_lora_rank * spec.q_dim)]
            else:
                mats.append(("attn", h, h * spec.q_dim))
            mats += [("attn", h, h * (m.kv_lora_rank + m.qk_rope_head_dim)),
                     ("attn", m.kv_lora_rank, m.kv_lora_rank * spec.heads * (m.qk_nope_head_dim + m.v_head_dim)),
                     ("attn_output", spec.heads * m.v_head_dim, spec.heads * m.v_head_dim * h)]  # fmt: skip
            if spec.sparse:
                s = spec.sparse
                mats += [("attn", m.q_lora_rank, m.q_lora_rank * s.indexer_heads * s.indexer_head_dim),
                         ("attn", h, h * s.indexer_head_dim), ("attn", h, h * s.indexer_heads)]  # fmt: skip
        elif spec.family in _FUSED_QKV:
            mats += [("attn_qkv", h, h * (spec.q_dim + 2 * spec.kv_dim)), ("attn_output", spec.q_dim, spec.q_dim * h)]
        else:
            mats += [("attn", h, h * spec.q_dim), ("attn_k", h, h * spec.kv_dim), ("attn_v", h, h * spec.kv_dim),
                     ("attn_output", spec.q_dim, spec.q_dim * h)]  # fmt: skip
        for role, row, p in mats:
            att += _bytes(spec, f, role, i, row, p)
            att_p += p
        moe = spec.moe
        is_moe = moe is not None and i >= moe.num_dense_layers and (i + 1) % moe.moe_every == 0
        if moe is not None and is_moe:
            for width, count, routed in ((moe.expert_ffn_hidden, moe.num_experts, True),
                                         (moe.shared_ffn_hidden * moe.num_shared_experts, 1, False)):  # fmt: skip
                if not width:
                    continue
                b = count * (_bytes(spec, f, "ffn", i, h, n_up * h * width)
                             + _bytes(spec, f, "ffn_down", i, width, width * h))  # fmt: skip
                ffn += b
                ffn_p += count * (n_up + 1) * h * width
                if routed:
                    exp += b
                    exp_p += count * (n_up + 1) * h * width
            ffn += 4.0 * h * moe.num_experts  # router (ffn_gate_inp) f32
            ffn_p += h * moe.num_experts
        else:
            w = spec.ffn_hidden
            ffn += _bytes(spec, f, "ffn", i, h, n_up * h * w) + _bytes(spec, f, "ffn_down", i, w, w * h)
            ffn_p += (n_up + 1) * h * w
    matrices = att_p + ffn_p
    vectors = 4.0 * (c.blocks - matrices)  # norms, biases, sinks, expert biases: f32 (the router is in ``ffn``)
    head_bpw = _bytes(spec, f, "output", 0, h, 1.0)
    emb_bpw = head_bpw if spec.tied_embeddings else _bytes(spec, f, "token_embd", 0, h, 1.0)
    return GGUFBytes(
        attention=att, attention_params=att_p, ffn=ffn, ffn_params=ffn_p, routed_experts=exp,
        routed_expert_params=exp_p, vectors=vectors, embedding=c.embedding * emb_bpw,
        positions=4.0 * c.positions, lm_head=c.lm_head * head_bpw,
        lm_head_params=c.embedding if spec.tied_embeddings else c.lm_head, head_bytes_per_weight=head_bpw,
        final_norm=4.0 * c.final_norm,
    )  # fmt: skip
