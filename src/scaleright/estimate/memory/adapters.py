"""Low-rank adapters (LoRA, Hu et al. 2021; QLoRA, Dettmers et al. 2023): their configuration and parameter count."""

from __future__ import annotations

from dataclasses import dataclass

from scaleright.errors import InputError
from scaleright.workload.spec import TransformerSpec

__all__ = ["LORA_TARGETS", "LoraConfig", "lora_param_count"]

LORA_TARGETS = ("q", "k", "v", "o", "gate", "up", "down")


@dataclass(frozen=True)
class LoraConfig:
    """Low-rank adapters (Hu et al. 2021) on the named projections of every layer."""

    rank: int = 16  # adapter rank r: each target W (d_out x d_in) gets A (r x d_in) and B (d_out x r)
    targets: tuple[str, ...] = LORA_TARGETS  # projections carrying adapters (default: all linear layers)

    def __post_init__(self) -> None:
        if self.rank < 1:
            raise InputError(f"lora_rank={self.rank} must be a positive integer")
        bad = [t for t in self.targets if t not in LORA_TARGETS]
        if bad:
            raise InputError(f"lora targets {bad} not allowed; allowed: {', '.join(LORA_TARGETS)}")



def lora_param_count(spec: TransformerSpec, lora: LoraConfig) -> int:
    """Trainable adapter parameters: r · (d_in + d_out) for each target matrix in each layer (MoE: per expert)."""
    h, r = spec.hidden, lora.rank
    q_out = spec.q_dim
    kv_out = spec.kv_dim
    v_in = spec.heads * (spec.mla.v_head_dim if spec.mla else spec.head_dim)
    shapes = {"q": (h, q_out), "k": (h, kv_out), "v": (h, kv_out), "o": (v_in, h)}
    per_layer = sum(r * (a + b) for t, (a, b) in shapes.items() if t in lora.targets)
    ffn_targets = [t for t in ("gate", "up", "down") if t in lora.targets and (spec.gated_mlp or t != "gate")]
    dense_ffn = len(ffn_targets) * r * (h + spec.ffn_hidden)
    total = spec.layers * per_layer
    moe_layers = spec.moe_layer_count()
    total += (spec.layers - moe_layers) * dense_ffn
    if spec.moe:
        m = spec.moe
        total += moe_layers * m.num_experts * len(ffn_targets) * r * (h + m.expert_ffn_hidden)
        total += moe_layers * m.num_shared_experts * len(ffn_targets) * r * (h + m.shared_ffn_hidden)
    return int(total)

