"""Training memory per GPU: model states, activations and overheads assembled for one layout or many."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from scaleright.errors import InputError
from scaleright.estimate.framework import Framework
from scaleright.estimate.layout import ZERO_STAGES, Layout, stage_layers, stage_slots
from scaleright.estimate.memory.activations import (
    GEMM_INPUT_BYTES,
    _inflight_first_chunk,
    _inflight_microbatches,
    _recompute_code,
    activation_bytes_per_layer,
    cross_entropy_bytes,
)
from scaleright.estimate.memory.adapters import LoraConfig, lora_param_count
from scaleright.estimate.memory.breakdown import GB, MemoryBreakdown, _breakdown, fold_overheads, overhead_details
from scaleright.estimate.memory.offload import resident_activations, resident_states
from scaleright.estimate.memory.overheads import Overheads, allocator_reserve_bytes, nccl_buffer_bytes
from scaleright.estimate.memory.profiles import MemoryProfile, resolve_profile
from scaleright.estimate.memory.states import (
    _end_params,
    _stage_params,
    gathered_buffer_bytes,
    model_state_bytes,
    optimizer_bytes_per_param,
    state_format,
)
from scaleright.workload.params import count_params
from scaleright.workload.precision import bytes_per_element
from scaleright.workload.spec import TransformerSpec

__all__ = ["TASKS", "training_memory_arrays", "training_memory"]

TASKS = ("pretrain", "full-finetune", "lora", "qlora", "inference")


def _training_parts(
    spec: TransformerSpec,
    *,
    seq_len: ArrayLike,
    tp: ArrayLike,
    pp: ArrayLike,
    dp: ArrayLike,
    cp: ArrayLike,
    ep: ArrayLike,
    zero: ArrayLike,
    micro_batch: ArrayLike,
    n_micro: ArrayLike,
    recompute: str | ArrayLike,
    sequence_parallel: ArrayLike,
    virtual_stages: ArrayLike,
    precision: str,
    optimizer: str,
    task: str,
    lora: LoraConfig | None,
    flash_attention: bool,
    overheads: Overheads,
    states: str,
    cross_entropy: str,
    etp: ArrayLike | None = None,
    dp_shard: ArrayLike | None = None,
    pipeline_outputs: bool = False,
    offload_optimizer: ArrayLike = False,
    offload_activations: ArrayLike = False,
    compile_blocks: bool = False,
    cross_entropy_tp: str | None = None,
    dtensor_tp: bool = False,
    gemm_input_bytes: float | None = None,
    pipeline_split_embedding_loss: ArrayLike = False,
) -> dict[str, np.ndarray]:
    """``training_memory_arrays`` with the overhead split into its three terms (one code for both APIs)."""
    if task not in TASKS or task == "inference":
        raise InputError(f"task={task!r} not allowed here; allowed: pretrain, full-finetune, lora, qlora")
    c = count_params(spec)
    bpv = 4.0 if precision == "fp32" else 2.0
    if task in ("lora", "qlora"):
        lora = lora or LoraConfig()
        dense, expert = _stage_params(c, tp, pp, ep, tied=spec.tied_embeddings, etp=etp)
        base = dense + expert
        if task == "qlora":
            # 4-bit NF4 block weights; embeddings and the output head stay 16-bit (bitsandbytes quantises the
            # transformer blocks' Linear layers only).
            emb = (_end_params(c, pp, tied=spec.tied_embeddings) - c.final_norm) / np.asarray(tp, dtype=float)
            weights = (base - emb) * bytes_per_element("nf4") + emb * 2.0
        else:
            weights = base * bpv
        # FSDP (zero=3) shards the frozen base over the data-parallel group too (NeMo Automodel, torchtune)
        shard = np.asarray(dp, dtype=float) * np.asarray(cp, dtype=float) if dp_shard is None \
            else np.asarray(dp_shard, dtype=float)  # fmt: skip
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
            states=states, etp=etp, dp_shard=dp_shard, embedding_loss=pipeline_split_embedding_loss,
        )
    if np.any(offload_optimizer):  # ZeRO-Offload (``offload``): optimizer states and gradients in host memory
        weights, grads, opt = resident_states(weights, grads, opt, offload_optimizer, fp32_master_weights=(
            precision != "fp32" and state_format(states).fp32_weights))  # fmt: skip
    per_layer = activation_bytes_per_layer(
        spec, seq_len=seq_len, micro_batch=micro_batch, tp=tp, cp=cp, sequence_parallel=sequence_parallel,
        recompute=recompute, flash_attention=flash_attention, bytes_per_value=bpv, compile_blocks=compile_blocks,
        gemm_input_bytes=gemm_input_bytes,
    )  # fmt: skip
    layers_stage = stage_slots(spec.layers, pp)
    inflight = _inflight_microbatches(pp, virtual_stages, n_micro)
    first = per_layer * layers_stage * inflight
    stage_acts = per_layer * layers_stage
    split_on = np.asarray(pipeline_split_embedding_loss, dtype=bool) & (np.asarray(pp) > 1)
    if np.any(split_on):
        # the embedding and loss as pipeline slots (``Layout.pipeline_split_embedding_loss``): ceil((L + 2) / pp)
        # slots a stage; stage 0's first chunk and the last stage's last chunk hold one transformer layer fewer, so
        # of stage 0's in-flight chunk forwards those of its first chunk save one layer fewer
        # (``_inflight_first_chunk``), and the last stage holds slots - 1 layers
        slots = stage_slots(spec.layers, pp, split_on)
        held = inflight * slots - _inflight_first_chunk(pp, virtual_stages, n_micro)
        first = np.where(split_on, per_layer * held, first)
        stage_acts = np.where(split_on, per_layer * stage_layers(spec.layers, pp, split_on)[1], stage_acts)
    if np.any(offload_activations):  # saved activations in host memory but a double buffer (``offload``)
        first = resident_activations(first, per_layer, offload_activations)
        stage_acts = resident_activations(stage_acts, per_layer, offload_activations)
    if pipeline_outputs:
        # DeepSpeed's PipelineEngine and torch.distributed.pipelining keep each in-flight micro-batch's stage output
        # until its backward, plus one received-gradient buffer (profiles.MemoryProfile.pipeline_outputs): s·b·h
        # 16-bit values each (over tp under sequence parallelism)
        out_b = (np.asarray(seq_len, dtype=float) / np.asarray(cp, dtype=float) * np.asarray(micro_batch, dtype=float)
                 * spec.hidden * bpv / np.where(np.asarray(sequence_parallel, dtype=bool), np.asarray(tp, dtype=float),
                                                1.0))  # fmt: skip
        # (interleaved: each of the v chunks of a rank sends its own output, so v times the in-flight count)
        chunks = inflight * np.asarray(virtual_stages, dtype=float)
        first = first + np.where(np.asarray(pp) > 1, (chunks + 1) * out_b, 0.0)
    rc = _recompute_code(recompute)
    if np.any(rc > 0):
        # Recomputation rebuilds one layer at a time during backward: full recompute that layer's activations,
        # selective the attention core's score matrices (zero with flash attention, which never stores them),
        # op-selective what its policy did not save (eager or compiled, the same tensors are rebuilt: a compiled
        # block neither saves nor rebuilds the row-parallel outputs backward never reads).
        kw: dict[str, Any] = dict(
            seq_len=seq_len, micro_batch=micro_batch, tp=tp, cp=cp, sequence_parallel=sequence_parallel,
            flash_attention=flash_attention, bytes_per_value=bpv, gemm_input_bytes=gemm_input_bytes,
        )  # fmt: skip
        one_layer = activation_bytes_per_layer(spec, recompute="none", **kw)
        # (selective drops only the s x s scores, which flash attention never stores: there it saves what no
        # recompute saves, and rebuilds nothing)
        one_sel = one_layer if flash_attention else activation_bytes_per_layer(spec, recompute="selective", **kw)
        working = np.where(rc == 2, one_layer, np.where(rc == 1, one_layer - one_sel, 0.0))
        if np.any(rc == 3):
            one_op = activation_bytes_per_layer(spec, recompute="op-selective", **kw)
            working = np.where(rc == 3, one_layer - one_op, working)
        first = first + working
    # The loss on the last stage: logits and the cross-entropy's fp32 transient (CROSS_ENTROPY), split over tp
    # (vocab-parallel), at its peak while every activation of the stage is still held. It is over before any
    # block's backward starts (the loss's saved tensors and the logits' gradient are freed once the output head's
    # backward has run), so it never meets the recompute working set of a block: with or without a pipeline the
    # peak is the larger of the two moments.
    s_local = np.asarray(seq_len, dtype=float) / np.asarray(cp, dtype=float)
    t_arr = np.asarray(tp, dtype=float)
    per_logit: ArrayLike = cross_entropy_bytes(cross_entropy, bpv)
    if cross_entropy_tp is not None and cross_entropy_tp != cross_entropy:  # (profiles.MemoryProfile.cross_entropy_tp)
        per_logit = np.where(t_arr > 1, cross_entropy_bytes(cross_entropy_tp, bpv), per_logit)
    logits = s_local * np.asarray(micro_batch, dtype=float) * spec.vocab * per_logit / t_arr
    # Beside the blocks' tensors the loss moment holds the final norm's input and the output head's input, which
    # the head's matmul saves for its weight gradient: s·b·h 16-bit values each, the norm's over tp under sequence
    # parallelism. The head's is over tp only where the framework saves the sequence-parallel shard and gathers it
    # again in backward (Megatron's ColumnParallelLinear); DTensor's ColwiseParallel(input_layouts=Shard(1))
    # (torchtitan's output head, ``dtensor_tp``) all-gathers it first and its matmul saves the whole tensor.
    sp_div = np.where(np.asarray(sequence_parallel, dtype=bool), t_arr, 1.0)
    sbh = s_local * np.asarray(micro_batch, dtype=float) * spec.hidden * bpv
    head_in = sbh / sp_div + sbh / (1.0 if dtensor_tp else sp_div)
    last = stage_acts + logits + head_in
    acts = np.maximum(first, last)
    # ZeRO-3 / FSDP working buffers: transient gathered layers and unsharded gradients, apart from the states
    frozen_b = None
    if task == "lora":
        frozen_b = bpv
    elif task == "qlora":
        frozen_b = bytes_per_element("nf4")
    gathered = gathered_buffer_bytes(spec, tp=tp, pp=pp, ep=ep, etp=etp, zero=zero, n_micro=n_micro,
                                     precision=precision, states=states, counts=c,
                                     frozen_bytes_per_param=frozen_b)  # fmt: skip
    fmt = state_format(states)
    if not fmt.grads_in_forward:
        # FSDP2's sharded gradients are created by backward and dropped by zero_grad before the next forward
        # (states module docstring): live at the activation peak only after an earlier micro-batch of the step
        # (gradient accumulation, pp = 1); else the peak is the forward's end or, when the gradients outweigh the
        # activations, the backward's end, where the activations are gone.
        accumulated = (np.asarray(pp) == 1) & (np.asarray(n_micro) > 1)
        at_end = ~accumulated & (grads > acts)
        grads = np.where(accumulated | at_end, grads, 0.0)
        acts = np.where(at_end, 0.0, acts)
    # gradients the framework frees and re-allocates every step fragment like activations (states.StateFormat)
    dyn_grads = grads if task in ("lora", "qlora") else grads * fmt.dynamic_grad_share
    reserve = allocator_reserve_bytes(acts + gathered + dyn_grads, overheads)
    nccl = nccl_buffer_bytes(overheads, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep)
    shape = np.broadcast(weights, grads, opt, acts, gathered, reserve, nccl).shape
    zeros = np.zeros(shape)
    return {
        "weights": weights + zeros,
        "gradients": grads + zeros,
        "optimizer": opt + zeros,
        "gathered": gathered + zeros,
        "activations": acts + zeros,
        "kv_cache": zeros,
        "overhead_allocator": reserve + zeros,
        "overhead_cuda_context": overheads.runtime_gb * GB + zeros,
        "overhead_nccl": nccl + zeros,
    }


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
    flash_attention: bool | None = None,
    overheads: Overheads | None = None,
    states: str | None = None,
    cross_entropy: str | None = None,
    etp: ArrayLike | None = None,
    dp_shard: ArrayLike | None = None,
    framework: Framework | str | None = None,
    offload_optimizer: ArrayLike = False,
    offload_activations: ArrayLike = False,
    compile_blocks: bool = False,
    pipeline_split_embedding_loss: ArrayLike = False,
) -> dict[str, np.ndarray]:
    """Per-GPU training memory in bytes by component, broadcast over the layout arrays (``etp``: expert tensor
    parallel, None: tp; ``dp_shard``: the ZeRO shard group, None: dp·cp; ``offload_optimizer`` /
    ``offload_activations``: what lives in host memory instead, ``memory.offload``, off by default;
    ``compile_blocks``: the transformer blocks run under ``torch.compile``, which changes what ``op-selective``
    saves, ``activations``; ``pipeline_split_embedding_loss``: Megatron-Core counts the embedding and the loss as
    pipeline layer slots, ``Layout``).

    Keys, as live at the step's peak: the sharded model states ``weights``, ``gradients``, ``optimizer``
    (``states``: who keeps them, see ``states.STATE_FORMATS``; FSDP2's sharded gradients do not exist yet at the
    forward's end and read 0 when that is the peak, and the activations 0 when the backward's end is,
    ``states.StateFormat.grads_in_forward``); ``gathered``, ZeRO-3 / FSDP's transient unsharded layers and
    gradients; ``activations`` (with the loss transient, ``cross_entropy``: ``activations.CROSS_ENTROPY``, under
    tp > 1 the profile's ``cross_entropy_tp``, and the final norm's and output head's inputs); ``kv_cache``
    (0); ``overhead``: allocator reserve, CUDA context and NCCL buffers (``overheads``). Their sum is what
    nvidia-smi would show, the memory the GPU must have.

    ``framework`` (a ``estimate.framework`` preset or ``Framework``) supplies ``states``, ``cross_entropy``,
    ``flash_attention`` and the CUDA context of ``overheads`` where they are None (``profiles.memory_profile``,
    per ZeRO stage); without one they are the ZeRO paper's accounting: ``zero`` states, ``fused`` loss, flash
    attention, ``Overheads()``."""
    return fold_overheads(_parts_for(
        spec, framework, states=states, cross_entropy=cross_entropy, flash_attention=flash_attention,
        overheads=overheads, zero=zero, precision=precision, seq_len=seq_len, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep,
        micro_batch=micro_batch, n_micro=n_micro, recompute=recompute, sequence_parallel=sequence_parallel,
        virtual_stages=virtual_stages, optimizer=optimizer, task=task, lora=lora, etp=etp, dp_shard=dp_shard,
        offload_optimizer=offload_optimizer, offload_activations=offload_activations, compile_blocks=compile_blocks,
        pipeline_split_embedding_loss=pipeline_split_embedding_loss,
    ))  # fmt: skip


def _parts_for(
    spec: TransformerSpec,
    framework: Framework | str | None,
    *,
    states: str | None,
    cross_entropy: str | None,
    flash_attention: bool | None,
    overheads: Overheads | None,
    zero: ArrayLike,
    precision: str,
    **kw: Any,
) -> dict[str, np.ndarray]:
    """``_training_parts`` with the framework's memory inputs filled in where not given, one profile per ZeRO stage
    present in ``zero`` (the state format of ``megatron-2021`` and ``deepspeed`` depends on it). Stages that share a
    profile are evaluated together: one ``_training_parts`` call when all do (every preset but those two), else one
    per distinct profile on its own rows only, so the cost stays that of one evaluation of every layout."""
    z = np.asarray(zero)
    by_prof: dict[MemoryProfile, list[int]] = {}
    # resolving a profile is cheap, scanning an array of stages is not: an array resolves every stage
    for stage in ((0,) if framework is None else (int(z),) if z.ndim == 0 else ZERO_STAGES):
        prof = resolve_profile(framework, zero=stage, precision=precision, states=states,
                               cross_entropy=cross_entropy, flash_attention=flash_attention)  # fmt: skip
        by_prof.setdefault(prof, []).append(stage)

    def parts(prof: MemoryProfile, zero_: ArrayLike, **kw_: Any) -> dict[str, np.ndarray]:
        return _training_parts(
            spec, zero=zero_, precision=precision, states=prof.states, cross_entropy=prof.cross_entropy,
            flash_attention=prof.flash_attention, overheads=overheads or prof.overheads,
            pipeline_outputs=prof.pipeline_outputs, cross_entropy_tp=prof.cross_entropy_tp,
            dtensor_tp=prof.dtensor_tp, **kw_,
            gemm_input_bytes=GEMM_INPUT_BYTES.get(precision) if prof.quantised_gemm_inputs else None,
        )  # fmt: skip

    if len(by_prof) == 1 or z.size == 0:
        return parts(next(iter(by_prof)), zero, **kw)
    # the layout axes given as arrays, flattened to the common shape; each profile gets the rows of its stages
    axes = {k: v for k, v in kw.items() if k in _LAYOUT_AXES and v is not None and not isinstance(v, str)}
    shape = np.broadcast(z, *(np.asarray(v) for v in axes.values())).shape
    flat_z = np.broadcast_to(z, shape).ravel()
    out: dict[str, np.ndarray] = {}
    if not np.isin(flat_z, ZERO_STAGES).all():
        raise InputError(f"zero={sorted(set(np.unique(flat_z).tolist()) - set(ZERO_STAGES))} not allowed; "
                         f"allowed: {', '.join(map(str, ZERO_STAGES))}")
    for prof, stages in by_prof.items():
        rows = np.flatnonzero(np.isin(flat_z, stages))
        if rows.size == 0:
            continue
        sub = {k: np.broadcast_to(np.asarray(v), shape).ravel()[rows] for k, v in axes.items()}
        got = parts(prof, flat_z[rows], **(kw | sub))
        for k, v in got.items():
            out.setdefault(k, np.zeros(int(np.prod(shape))))[rows] = v
    return {k: v.reshape(shape) for k, v in out.items()}


# ``_training_parts`` arguments that are layout axes (arrays over layouts), as opposed to model-wide settings
_LAYOUT_AXES = frozenset({"seq_len", "tp", "pp", "dp", "cp", "ep", "micro_batch", "n_micro", "recompute",
                          "sequence_parallel", "virtual_stages", "etp", "dp_shard", "offload_optimizer",
                          "offload_activations", "pipeline_split_embedding_loss"})  # fmt: skip


def training_memory(
    spec: TransformerSpec,
    *,
    layout: Layout,
    seq_len: int,
    precision: str = "bf16",
    optimizer: str = "adamw",
    task: str = "pretrain",
    lora: LoraConfig | None = None,
    flash_attention: bool | None = None,
    overheads: Overheads | None = None,
    gpu_memory_gb: float | None = None,
    states: str | None = None,
    cross_entropy: str | None = None,
    framework: Framework | str | None = None,
    compile_blocks: bool = False,
) -> MemoryBreakdown:
    """Training memory per GPU for one validated ``layout``: the arrays of ``training_memory_arrays`` read as
    floats, with the overhead's terms in ``details`` (``allocator_reserve_gb``, ``cuda_context_gb``,
    ``nccl_buffers_gb``); ``framework`` and ``compile_blocks`` as in ``training_memory_arrays``."""
    layout.validate(spec)
    if seq_len < 1:
        raise InputError(f"seq_len={seq_len} must be a positive integer")
    parts = _parts_for(
        spec, framework, seq_len=seq_len, tp=layout.tp, pp=layout.pp, dp=layout.dp, cp=layout.cp, ep=layout.ep,
        zero=layout.zero, micro_batch=layout.micro_batch, n_micro=layout.grad_accum, recompute=layout.recompute,
        sequence_parallel=layout.sequence_parallel, virtual_stages=layout.virtual_stages, precision=precision,
        optimizer=optimizer, task=task, lora=lora, flash_attention=flash_attention, overheads=overheads,
        states=states, cross_entropy=cross_entropy, etp=layout.expert_tp, dp_shard=layout.zero_shard,
        offload_optimizer=layout.offload_optimizer, offload_activations=layout.offload_activations,
        pipeline_split_embedding_loss=layout.pipeline_split_embedding_loss,
        compile_blocks=compile_blocks,
    )  # fmt: skip
    details = overhead_details(parts)
    if task in ("lora", "qlora"):
        details["trainable_params"] = float(lora_param_count(spec, lora or LoraConfig()))
    return _breakdown(fold_overheads(parts), gpu_memory_gb, **details)
