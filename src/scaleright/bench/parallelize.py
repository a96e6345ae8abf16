"""Apply recompute, precision and the parallel strategy to a model from outside (imports torch).

As in torchtitan ``parallelize.py``: model code stays free of parallelism.
- ``ddp``: ``torch.nn.parallel.DistributedDataParallel`` (gradients all-reduced in buckets during backward).
- ``fsdp-full`` / ``fsdp-grad-op``: FSDP2 ``torch.distributed.fsdp.fully_shard`` on every block and on the root,
  ``reshard_after_forward=True`` (= FSDP1 ``ShardingStrategy.FULL_SHARD``, ZeRO-3) or ``False``
  (= ``SHARD_GRAD_OP``, ZeRO-2); see the PyTorch FSDP2 docs, "reshard_after_forward".
- bf16: FSDP uses ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)`` (torchtitan's default); single and
  DDP run the forward under ``torch.autocast(dtype=bfloat16)``. Master weights and optimizer state stay fp32.
- activation checkpointing: each block wrapped in ``torch.utils.checkpoint.checkpoint(use_reentrant=False)``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from scaleright.bench.config import Strategy

if TYPE_CHECKING:
    from torch.distributed.fsdp import FSDPModule
    from torch.nn.parallel import DistributedDataParallel

    from scaleright.bench.model import GPT

__all__ = ["parallelize", "autocast_context", "gradient_sync"]


class Checkpointed(nn.Module):
    """Run ``block`` without storing its activations; recompute them in backward."""

    def __init__(self, block: nn.Module):
        super().__init__()
        self.block = block

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return checkpoint(self.block, x, use_reentrant=False)


def parallelize(
    model: GPT, *, strategy: Strategy, precision: str, activation_checkpointing: bool, device: torch.device
) -> nn.Module:
    """Wrap ``model`` (already on ``device``) for ``strategy``; the process group must be initialised."""
    if activation_checkpointing:
        for i, block in enumerate(model.blocks):
            model.blocks[i] = Checkpointed(block)
    if strategy is Strategy.SINGLE:
        return model
    if strategy is Strategy.DDP:
        from torch.nn.parallel import DistributedDataParallel

        ids = [device.index] if device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids)
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    reshard = strategy is Strategy.FSDP_FULL
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if precision == "bf16" else None
    kwargs: dict[str, Any] = {"reshard_after_forward": reshard, **({"mp_policy": mp} if mp else {})}
    for block in model.blocks:
        fully_shard(block, **kwargs)
    fully_shard(model, **kwargs)
    return model


def autocast_context(*, strategy: Strategy, precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """Autocast for bf16 under single/DDP; FSDP casts through its policy, fp32 needs nothing."""
    if precision == "bf16" and strategy in (Strategy.SINGLE, Strategy.DDP):
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def gradient_sync(model: nn.Module, strategy: Strategy) -> Callable[[bool], contextlib.AbstractContextManager]:
    """``ctx(enabled)``: a context where backward does (True) or skips (False) gradient reduction."""

    @contextlib.contextmanager
    def ctx(enabled: bool):
        if strategy is Strategy.DDP and not enabled:
            with cast("DistributedDataParallel", model).no_sync():
                yield
        elif strategy in (Strategy.FSDP_FULL, Strategy.FSDP_GRAD_OP) and not enabled:
            cast("FSDPModule", model).set_requires_gradient_sync(False)
            try:
                yield
            finally:
                cast("FSDPModule", model).set_requires_gradient_sync(True)
        else:
            yield

    return ctx
