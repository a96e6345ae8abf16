"""Training memory per GPU: model states, activations and overheads assembled for one layout or many."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from scaleright.errors import InputError
from scaleright.estimate.layout import Layout
from scaleright.estimate.memory.activations import (
    _inflight_microbatches,
    _recompute_code,
    activation_bytes_per_layer,
)
from scaleright.estimate.memory.adapters import LoraConfig, lora_param_count
from scaleright.estimate.memory.breakdown import GB, MemoryBreakdown, _breakdown
from scaleright.estimate.memory.overheads import Overheads
from scaleright.estimate.memory.states import (
    _end_params,
    _stage_params,
    gathered_buffer_bytes,
    model_state_bytes,
    optimizer_bytes_per_param,
)
from scaleright.workload.params import count_params
from scaleright.workload.precision import bytes_per_element
from scaleright.workload.spec import TransformerSpec

__all__ = ["TASKS", "training_memory_arrays", "training_memory"]

TASKS = ("pretrain", "full-finetune", "lora", "qlora", "inference")


def training_memory_arrays(
    spec: TransformerSpec,
    *,
    seq_len: ArrayLike,
    tp: ArrayLike = 1,
    pp: ArrayLike = 1,
    dp: ArrayLike = 1,
    cp: ArrayLike = 1,
    ep: ArrayLike = 1,
    zero: ArrayLike = 0,
    micro_batch: ArrayLike = 1,
    n_micro: ArrayLike = 1,
    recompute: str | ArrayLike = "none",
    sequence_parallel: ArrayLike = False,
    virtual_stages: ArrayLike = 1,
    precision: str = "bf16",
    optimizer: str = "adamw",
    task: str = "pretrain",
    lora: LoraConfig | None = None,
    flash_attention: bool = True,
    overheads: Overheads = Overheads(),
    states: str = "zero",
) -> dict[str, np.ndarray]:
    """Per-GPU training memory in bytes by component, broadcast over the layout arrays.

    Keys: the sharded model states ``weights``, ``gradients``, ``optimizer`` (``states``: who keeps them, see
    ``states.STATE_FORMATS``); ``gathered``, ZeRO-3 / FSDP's transient unsharded layers and gradients;
    ``activations``; ``kv_cache`` (0); ``overhead``. Their sum is the memory the GPU needs."""
    if task not in TASKS or task == "inference":
        raise InputError(f"task={task!r} not allowed here; allowed: pretrain, full-finetune, lora, qlora")
    c = count_params(spec)
    bpv = 4.0 if precision == "fp32" else 2.0
    if task in ("lora", "qlora"):
        lora = lora or LoraConfig()
        dense, expert = _stage_params(c, tp, pp, ep, tied=spec.tied_embeddings)
        base = dense + expert
        if task == "qlora":
            # 4-bit NF4 block weights; embeddings and the output head stay 16-bit (bitsandbytes quantises the
            # transformer blocks' Linear layers only).
            emb = (_end_params(c, pp, tied=spec.tied_embeddings) - c.final_norm) / np.asarray(tp, dtype=float)
            weights = (base - emb) * bytes_per_element("nf4") + emb * 2.0
        else:
            weights = base * bpv
        # FSDP (zero=3) shards the frozen base over the data-parallel group too (NeMo Automodel, torchtune)
        shard = np.asarray(dp, dtype=float) * np.asarray(cp, dtype=float)
        weights = weights / np.where(np.asarray(zero) >= 3, shard, 1.0)
        n_adapters = lora_param_count(spec, lora) / (np.asarray(tp, dtype=float) * np.asarray(pp, dtype=float))
        if task == "qlora":
            # bf16 adapters and gradients, 32-bit paged AdamW moments (Dettmers et al. 2023)
            weights = weights + 2.0 * n_adapters
            grads = 2.0 * n_adapters
            opt = 8.0 * n_adapters
        else:
            weights = weights + bpv * n_adapters
            grads = bpv * n_adapters
            opt = optimizer_bytes_per_param(optimizer) * n_adapters
    else:
        weights, grads, opt = model_state_bytes(
            spec, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, zero=zero, precision=precision, optimizer=optimizer, counts=c,
            states=states,
        )
    per_layer = activation_bytes_per_layer(
        spec, seq_len=seq_len, micro_batch=micro_batch, tp=tp, cp=cp, sequence_parallel=sequence_parallel,
        recompute=recompute, flash_attention=flash_attention, bytes_per_value=bpv,
    )  # fmt: skip
    layers_stage = np.ceil(spec.layers / np.asarray(pp, dtype=float))
    first = per_layer * layers_stage * _inflight_microbatches(pp, virtual_stages, n_micro)
    rc = _recompute_code(recompute)
    if np.any(rc > 0):
        # Recomputation rebuilds one layer at a time during backward: full recompute that layer's activations,
        # selective the attention core's score matrices (zero with flash attention, which never stores them).
        kw: dict[str, Any] = dict(
            seq_len=seq_len, micro_batch=micro_batch, tp=tp, cp=cp, sequence_parallel=sequence_parallel,
            flash_attention=flash_attention, bytes_per_value=bpv,
        )  # fmt: skip
        one_layer = activation_bytes_per_layer(spec, recompute="none", **kw)
        one_sel = activation_bytes_per_layer(spec, recompute="selective", **kw)
        first = first + np.where(rc == 2, one_layer, np.where(rc == 1, one_layer - one_sel, 0.0))
    # Output head: bf16 logits and their fp32 copy for the cross-entropy (Korthikanti et al. 2022 appendix: 4sbv/t
    # for the loss), on the last stage.
    s_local = np.asarray(seq_len, dtype=float) / np.asarray(cp, dtype=float)
    logits = s_local * np.asarray(micro_batch, dtype=float) * spec.vocab * (bpv + 4.0) / np.asarray(tp, dtype=float)
    last = per_layer * layers_stage + logits
    acts = np.where(np.asarray(pp) > 1, np.maximum(first, last), first + logits)
    # ZeRO-3 / FSDP working buffers: transient gathered layers and unsharded gradients, apart from the states
    frozen_b = None
    if task == "lora":
        frozen_b = bpv
    elif task == "qlora":
        frozen_b = bytes_per_element("nf4")
    gathered = gathered_buffer_bytes(spec, tp=tp, pp=pp, zero=zero, precision=precision, states=states, counts=c,
                                     frozen_bytes_per_param=frozen_b)  # fmt: skip
    dynamic = acts + gathered
    overhead = overheads.runtime_gb * GB + overheads.fragmentation_fraction * dynamic
    shape = np.broadcast(weights, grads, opt, acts, gathered, overhead).shape
    zeros = np.zeros(shape)
    return {
        "weights": weights + zeros,
        "gradients": grads + zeros,
        "optimizer": opt + zeros,
        "gathered": gathered + zeros,
        "activations": acts + zeros,
        "kv_cache": zeros,
        "overhead": overhead + zeros,
    }



def training_memory(
    spec: TransformerSpec,
    *,
    layout: Layout,
    seq_len: int,
    precision: str = "bf16",
    optimizer: str = "adamw",
    task: str = "pretrain",
    lora: LoraConfig | None = None,
    flash_attention: bool = True,
    overheads: Overheads = Overheads(),
    gpu_memory_gb: float | None = None,
    states: str = "zero",
) -> MemoryBreakdown:
    """Training memory per GPU for one validated ``layout`` (see module docstring)."""
    layout.validate(spec)
    if seq_len < 1:
        raise InputError(f"seq_len={seq_len} must be a positive integer")
    arrs = training_memory_arrays(
        spec, seq_len=seq_len, tp=layout.tp, pp=layout.pp, dp=layout.dp, cp=layout.cp, ep=layout.ep,
        zero=layout.zero, micro_batch=layout.micro_batch, n_micro=layout.grad_accum, recompute=layout.recompute,
        sequence_parallel=layout.sequence_parallel, virtual_stages=layout.virtual_stages, precision=precision,
        optimizer=optimizer, task=task, lora=lora, flash_attention=flash_attention, overheads=overheads,
        states=states,
    )  # fmt: skip
    details: dict[str, float] = {}
    if task in ("lora", "qlora"):
        details["trainable_params"] = float(lora_param_count(spec, lora or LoraConfig()))
    return _breakdown(arrs, gpu_memory_gb, **details)

