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
"""

from __future__ import annotations

from dataclasses import dataclass

from scaleright.workload.spec import TransformerSpec

__all__ = ["ParamCounts", "count_params"]


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
