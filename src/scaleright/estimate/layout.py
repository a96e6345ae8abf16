"""A parallel layout: how one training or inference job is split over GPUs. Knows nothing of prices.

Dimensions follow Megatron-LM / torchtitan naming (torchtitan ``distributed/parallel_dims.py``):
``gpus = tp · pp · dp · cp``; expert parallelism ``ep`` splits the experts of MoE layers inside the
data-parallel × context-parallel group, so it must divide ``dp · cp``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from scaleright.errors import LayoutError
from scaleright.workload.spec import TransformerSpec

__all__ = ["Layout", "RECOMPUTE", "divisors"]

# "op-selective": torchtitan's per-op selective activation checkpointing (estimate.memory.activations)
RECOMPUTE = ("none", "selective", "full", "op-selective")


def divisors(n: int) -> list[int]:
    """All positive divisors of ``n`` in ascending order."""
    return [d for d in range(1, n + 1) if n % d == 0]


@dataclass(frozen=True)
class Layout:
    """One parallel layout. Every field is per job; defaults mean "not used"."""

    tp: int = 1  # tensor-parallel size (splits heads and FFN columns; Shoeybi et al. 2019)
    pp: int = 1  # pipeline stages (Narayanan et al. 2021)
    dp: int = 1  # data-parallel replicas
    cp: int = 1  # context parallel: the sequence split over GPUs (ring attention)
    ep: int = 1  # expert parallel: routed experts split over this many GPUs of the dp·cp group
    zero: int = 0  # ZeRO stage over the dp·cp group: 0 none, 1 optimizer, 2 +gradients, 3 +weights (= FSDP)
    micro_batch: int = 1  # sequences per micro-batch per data-parallel replica
    global_batch: int | None = None  # sequences per optimizer step (None: micro_batch · dp, no accumulation)
    recompute: str = "none"  # none, selective (attention core), full (each layer), op-selective (torchtitan per-op)
    sequence_parallel: bool = False  # Megatron sequence parallelism: norms/dropout split over tp
    virtual_stages: int = 1  # interleaved pipeline: model chunks per pipeline stage

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def grad_accum(self) -> int:
        """Micro-batches per replica per optimizer step."""
        gb = self.global_batch or self.micro_batch * self.dp
        return max(gb // (self.micro_batch * self.dp), 1)

    def replace(self, **changes: Any) -> Layout:
        return dataclasses.replace(self, **changes)

    def validate(self, spec: TransformerSpec | None = None, *, gpus: int | None = None) -> Layout:
        """Raise ``LayoutError`` naming the operands when this layout cannot exist; return self otherwise."""
        for name in ("tp", "pp", "dp", "cp", "ep", "micro_batch", "virtual_stages"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise LayoutError(f"{name}={v!r} must be a positive integer")
        if self.zero not in (0, 1, 2, 3):
            raise LayoutError(f"zero={self.zero!r} must be one of 0, 1, 2, 3")
        if self.recompute not in RECOMPUTE:
            raise LayoutError(f"recompute={self.recompute!r} must be one of {', '.join(RECOMPUTE)}")
        if gpus is not None and self.gpus != gpus:
            raise LayoutError(
                f"tp({self.tp}) * pp({self.pp}) * dp({self.dp}) * cp({self.cp}) = {self.gpus} != gpus({gpus})"
            )
        if (self.dp * self.cp) % self.ep:
            raise LayoutError(f"ep({self.ep}) does not divide dp({self.dp}) * cp({self.cp}) = {self.dp * self.cp}")
        if self.global_batch is not None:  # noqa: SIM102 (the None check reads apart from the arithmetic)
            if self.global_batch < 1 or self.global_batch % (self.micro_batch * self.dp):
                raise LayoutError(
                    f"global_batch({self.global_batch}) is not a positive multiple of "
                    f"micro_batch({self.micro_batch}) * dp({self.dp}) = {self.micro_batch * self.dp}"
                )
        if self.virtual_stages > 1 and self.pp == 1:
            raise LayoutError(f"virtual_stages({self.virtual_stages}) > 1 needs pp > 1, got pp(1)")
        if spec is not None:
            if spec.heads % self.tp:
                raise LayoutError(f"tp({self.tp}) does not divide num_attention_heads({spec.heads})")
            if not spec.mla and spec.kv_heads % self.tp and self.tp % spec.kv_heads:
                raise LayoutError(
                    f"tp({self.tp}) does not divide num_key_value_heads({spec.kv_heads}) "
                    f"(nor is it a multiple of it, which would replicate KV heads)"
                )
            if self.pp * self.virtual_stages > spec.layers:
                raise LayoutError(
                    f"pp({self.pp}) * virtual_stages({self.virtual_stages}) > num_hidden_layers({spec.layers})"
                )
            if self.ep > 1:
                if not spec.moe:
                    raise LayoutError(f"ep({self.ep}) > 1 but the model has no experts")
                if spec.moe.num_experts % self.ep:
                    raise LayoutError(f"ep({self.ep}) does not divide num_experts({spec.moe.num_experts})")
        return self
