"""Apply recompute, precision and the parallel strategy to a model from outside (imports torch).

As in torchtitan ``parallelize.py``: model code stays free of parallelism.
- ``ddp``: ``torch.nn.parallel.DistributedDataParallel`` (gradients all-reduced in buckets during backward).
- ``fsdp-full`` / ``fsdp-grad-op``: FSDP2 ``torch.distributed.fsdp.fully_shard`` on every block and on the root,
  ``reshard_after_forward=True`` (= FSDP1 ``ShardingStrategy.FULL_SHARD``, ZeRO-3) or ``False``
  (= ``SHARD_GRAD_OP``, ZeRO-2); see the PyTorch FSDP2 docs, "reshard_after_forward".
- bf16: FSDP uses ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)`` (torchtitan's default); single and
  DDP run the forward under ``torch.autocast(dtype=bfloat16)``. Master weights and optimizer state stay fp32.
- activation checkpointing: each block wrapped in ``torch.utils.checkpoint.checkpoint(use_reentrant=False)``.

``build_model`` builds the benchmark's model on this rank by the path ``bench/fit.py`` chose: a catalog decoder
under FSDP is constructed on the ``meta`` device, wrapped with ``fully_shard`` (which shards the meta parameters),
then ``to_empty(device)`` allocates only this rank's shards and ``init_weights`` fills them (torchtitan's and the
FSDP2 docs' meta-device recipe). On CUDA DTensor's random ops draw each shard from one global stream (its
``OffsetBasedRNGTracker``); on CPU DTensor has no such tracker, so each shard comes from the rank's generator, which
``torch.manual_seed(seed)`` seeds alike on every rank (random weights either way).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from scaleright.bench.config import Strategy, TrainBenchConfig
from scaleright.bench.fit import uses_meta_init
from scaleright.bench.spec import DecoderSpec

if TYPE_CHECKING:
    from torch.distributed.fsdp import FSDPModule
    from torch.nn.parallel import DistributedDataParallel

__all__ = ["parallelize", "build_model", "autocast_context", "gradient_sync", "local_param_bytes"]


class Checkpointed(nn.Module):
    """Run ``block`` without storing its activations; recompute them in backward."""

    def __init__(self, block: nn.Module):
        super().__init__()
        self.block = block

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return checkpoint(self.block, x, use_reentrant=False)


def parallelize(
    model: nn.Module, *, strategy: Strategy, precision: str, activation_checkpointing: bool, device: torch.device
) -> nn.Module:
    """Wrap ``model`` (on ``device``, or on ``meta`` for FSDP) for ``strategy``; its ``blocks`` are wrapped one by
    one. The process group must be initialised."""
    blocks = cast("nn.ModuleList", model.blocks)
    if activation_checkpointing:
        for i, block in enumerate(blocks):
            blocks[i] = Checkpointed(block)
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
    for block in blocks:
        fully_shard(block, **kwargs)
    fully_shard(model, **kwargs)
    return model


def build_model(cfg: TrainBenchConfig, device: torch.device) -> nn.Module:
    """The wrapped model of ``cfg`` on this rank (module docstring: the meta-device path or the whole model)."""
    def wrap(model: nn.Module) -> nn.Module:
        return parallelize(model, strategy=cfg.strategy, precision=cfg.precision,
                           activation_checkpointing=cfg.activation_checkpointing, device=device)  # fmt: skip

    if not isinstance(cfg.model, DecoderSpec):
        from scaleright.bench.model import GPT

        return wrap(GPT(cfg.model).to(device))
    from scaleright.bench.decoder import Decoder

    if uses_meta_init(cfg):
        with torch.device("meta"):
            meta = Decoder(cfg.model)
        model = wrap(meta)
        model.to_empty(device=device)
        cast("Decoder", model).init_weights()
        return model
    with torch.device(device):
        whole = Decoder(cfg.model)
    whole.init_weights()
    return wrap(whole)


def local_param_bytes(model: nn.Module) -> int:
    """Bytes of the parameters this rank holds: its shards under FSDP (``DTensor.to_local``), else all of them."""
    total = 0
    for p in model.parameters():
        local = p.to_local() if hasattr(p, "to_local") else p
        total += local.numel() * local.element_size()
    return total


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
