"""Model states (Rajbhandari et al. 2020, ZeRO, section 3.1): weights, gradients and optimizer states per GPU.

With mixed-precision Adam each parameter costs 2 B (16-bit weight) + 2 B (16-bit gradient) + K = 12 B (fp32 master
weight, momentum, variance): 16 B per parameter, the seed articles' "16 GB per billion parameters" for a full
fine-tune. ZeRO stage 1/2/3 (and FSDP, the same as stage 3) shard optimizer states / + gradients / + weights over
the data-parallel group. Tensor and pipeline parallelism divide the weights of each GPU's share of layers; expert
parallelism divides the routed experts.

Frameworks do not all keep the paper's 2 + 2 + K (``STATE_FORMATS``, selected with ``states=``):

- ``zero``: the paper's accounting (DeepSpeed ZeRO with 16-bit gradients): 2 + 2 + K.
- ``megatron``: Megatron-LM / Megatron-Core keep an fp32 ``main_grad`` buffer for every local parameter
  (``accumulate_allreduce_grads_in_fp32``, on for bf16) and the distributed optimizer shards the fp32 master
  weights and Adam moments: "bf16 param, fp32 grads: 18 B without, 6 + 12/d with the distributed optimizer"
  (Megatron-LM ``docs/source/api-guide/dist_optimizer.md``, its table of bytes per parameter).
- ``deepspeed-fp16``: DeepSpeed's ZeRO-1/2 optimizer (``stage_1_and_2.py``) with 16-bit weights and gradients also
  gives its fp32 master partition an fp32 gradient partition (``single_partition_of_fp32_groups[i].grad``) for the
  step: 2 + 2 + (K + 4)/d (without ZeRO, DeepSpeed's FP16 optimizer keeps the same fp32 gradients unsharded).
- ``deepspeed-bf16``: DeepSpeed's ``BF16_Optimizer`` (BLOOM's "BF16 optimizer, fp32 grad accumulation") keeps the
  16-bit gradients and a full fp32 gradient accumulation buffer (``fp32_groups_gradients_flat``, sized like the
  unpartitioned 16-bit group) beside the ZeRO-1-partitioned fp32 master and moments: 2 + (2 + 4) + K/d.
- ``fsdp2``: PyTorch FSDP2 with ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)`` (torchtitan) keeps
  the sharded parameters in fp32, which are the optimizer's master weights, and fp32 sharded gradients:
  (4 + 4 + K − 4)/d; the 16-bit copies exist only while gathered (``gathered_buffer_bytes``).

Which gradients are re-allocated every step (``StateFormat.dynamic_grad_b``) matters to the caching allocator
(``overheads``): autograd's ``param.grad`` tensors that the framework frees after the reduction or at
``zero_grad(set_to_none=True)`` come and go like activations, while a contiguous buffer allocated once does not:

- ``zero`` / ``deepspeed-fp16``: DeepSpeed's ZeRO-1/2 optimizer drops each 16-bit ``param.grad`` once it is reduced
  (``stage_1_and_2.py``, ``reduce_ready_partitions_and_remove_grads``): all 16-bit gradients are dynamic;
- ``deepspeed-bf16``: ``BF16_Optimizer`` accumulates the 16-bit ``param.grad`` into its persistent fp32 buffer and
  clears the 16-bit ones every step (``clear_lp_grads``): 2 of its 6 B are dynamic;
- ``megatron``: the fp32 ``main_grad`` lives in one contiguous grad buffer allocated at start (Megatron DDP
  ``use_contiguous_buffers_in_local_ddp``, Megatron-Core ``ParamAndGradBuffer``): none is dynamic;
- ``fsdp2``: the sharded fp32 gradients are created by each step's reduce-scatter and set to None by
  ``zero_grad`` (torchtitan calls ``optimizers.zero_grad()`` every step, ``set_to_none`` by default): all dynamic.

When they exist matters to the peak (``StateFormat.grads_in_forward``). torchtitan's ``train_step`` calls
``self.optimizers.zero_grad()`` first, then runs forward and backward (torchtitan 0.1.0 ``train.py``); PyTorch's
``Optimizer.zero_grad(set_to_none=True)`` drops the tensors; FSDP2's post-backward reduce-scatter then creates each
sharded gradient (``sharded_param.grad = new_sharded_dtensor_grad``, or adds into it when one exists,
``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py``). So at the end of the forward, where the activations
and the loss peak, a step without gradient accumulation holds no sharded gradient; they grow as backward frees the
activations, and the step's peak is the larger of the forward's end (activations, no gradients) and the backward's
end (gradients, no activations). With gradient accumulation (pp = 1, more than one micro-batch) the first
micro-batch's gradients are live through the next forward. Under pipeline parallelism torchtitan's schedule syncs
only the last micro-batch (``gathered_buffer_bytes``), so the sharded gradients appear at the backward's end. The
other formats' gradient buffers persist (``megatron``, BF16_Optimizer's fp32 buffer) or, with DeepSpeed's
pipelined ZeRO-1, accumulate across the micro-batches of a step; they are counted at the peak.

ZeRO-3 / FSDP working buffers are not model states: they are transient copies of whole layers, gathered for
compute and freed after it, and reported apart (``gathered_buffer_bytes``), so that the sharded states read as the
paper's figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.errors import InputError
from scaleright.estimate.layout import stage_layers, stage_slots
from scaleright.workload.params import ParamCounts, count_params
from scaleright.workload.spec import TransformerSpec

__all__ = ["OPTIMIZERS", "STATE_FORMATS", "StateFormat", "optimizer_bytes_per_param", "model_state_bytes",
           "gathered_buffer_bytes"]

# Optimizer state bytes per trainable parameter, beyond the 16-bit weight and gradient.
OPTIMIZERS = {
    # fp32 master + m + v (ZeRO paper's K = 12)
    "adamw": 12.0,
    "adam": 12.0,
    # fp32 master + 8-bit m and v with one fp32 absmax per 2048-element block (Dettmers et al. 2022, 8-bit
    # optimizers via block-wise quantization): 4 + 2 · (1 + 4/2048)
    "adam8bit": 4.0 + 2 * (1 + 4 / 2048),
    # fp32 master + fp32 momentum
    "sgd": 8.0,
}


@dataclass(frozen=True)
class StateFormat:
    """Bytes per parameter of the persistent model states in 16-bit training, by who keeps them (see the module
    docstring). ZeRO stage 3 shards ``weight_b``, stage >= 2 ``grad_b``, stage >= 1 the optimizer's states."""

    weight_b: float  # persistent weights
    grad_b: float  # persistent gradient buffers (16-bit gradients plus any fp32 accumulation buffer)
    fp32_weights: bool  # the persistent weights are the fp32 master copy (the optimizer keeps no other)
    reduce_b: float  # bytes per element of an unsharded gradient on its way to the reduce-scatter (ZeRO-3 / FSDP)
    optimizer_extra_b: float = 0.0  # optimizer-side buffers sharded with its states (DeepSpeed's fp32 gradients)
    dynamic_grad_b: float = 0.0  # of grad_b, the bytes re-allocated every step (module docstring)
    # the gradients exist while a step's forward runs; False: created by backward and dropped by zero_grad before
    # the next forward (module docstring), so only an earlier micro-batch of the same step leaves them live
    grads_in_forward: bool = True

    @property
    def dynamic_grad_share(self) -> float:
        """Share of the persistent gradient bytes that are freed and re-allocated every step."""
        return self.dynamic_grad_b / self.grad_b if self.grad_b else 0.0


STATE_FORMATS = {
    "zero": StateFormat(weight_b=2.0, grad_b=2.0, fp32_weights=False, reduce_b=2.0, dynamic_grad_b=2.0),
    "megatron": StateFormat(weight_b=2.0, grad_b=4.0, fp32_weights=False, reduce_b=4.0),
    "deepspeed-fp16": StateFormat(weight_b=2.0, grad_b=2.0, fp32_weights=False, reduce_b=2.0, optimizer_extra_b=4.0,
                                  dynamic_grad_b=2.0),
    "deepspeed-bf16": StateFormat(weight_b=2.0, grad_b=6.0, fp32_weights=False, reduce_b=2.0, dynamic_grad_b=2.0),
    # the bf16 gradient of a layer, then its fp32 copy for the reduce-scatter (reduce_dtype=fp32)
    "fsdp2": StateFormat(weight_b=4.0, grad_b=4.0, fp32_weights=True, reduce_b=2.0 + 4.0, dynamic_grad_b=4.0,
                         grads_in_forward=False),
}


def state_format(states: str) -> StateFormat:
    try:
        return STATE_FORMATS[states]
    except KeyError:
        raise InputError(f"states={states!r} not allowed; allowed: {', '.join(STATE_FORMATS)}") from None


def optimizer_bytes_per_param(optimizer: str) -> float:
    try:
        return OPTIMIZERS[optimizer.lower()]
    except KeyError:
        raise InputError(f"optimizer={optimizer!r} not allowed; allowed: {', '.join(OPTIMIZERS)}") from None



def _end_params(c: ParamCounts, pp: ArrayLike, *, tied: bool) -> NDArray[np.float64]:
    """Embedding / position / head / final-norm parameters on the fullest pipeline stage, before tp (``_ends``)."""
    return _ends(c.embedding, c.positions, c.lm_head, c.final_norm, pp, tied=tied)


def _ends(embedding: float, positions: float, lm_head: float, final_norm: float, pp: ArrayLike, *,
          tied: bool) -> NDArray[np.float64]:  # fmt: skip
    """Of the embedding, position table, head and final norm (elements or bytes), what the fullest pipeline stage
    holds. pp = 1: all of them (a tied head shares the embedding). pp > 1: the larger of the first stage's
    (embedding, positions) and the last stage's (head, or a copy of the tied embedding, and the final norm)."""
    head = embedding if tied else lm_head
    first = embedding + positions
    last = head + final_norm
    single = first + (0 if tied else lm_head) + final_norm
    return np.where(np.asarray(pp) > 1, np.maximum(first, last), single)


def _stage_params(
    c: ParamCounts, tp: ArrayLike, pp: ArrayLike, ep: ArrayLike, *, tied: bool, etp: ArrayLike | None = None,
    embedding_loss: ArrayLike = False,
) -> tuple[float | NDArray[np.float64], float | NDArray[np.float64]]:
    """(dense, expert) parameters held by the fullest pipeline stage of one GPU, before ZeRO sharding.

    Layers are split as evenly as possible (ceil(L / pp) on the fullest stage). The first stage also holds the
    embedding (and learned positions), the last the output head and final norm (a tied head keeps a copy of the
    embedding there, as Megatron does). Matmul weights and the vocabulary are split over tp (vocab-parallel
    embedding); the few norm weights are counted as split too (a < 0.01 % error). Routed experts are split over
    ``ep · etp`` (MoE parallel folding; ``etp`` None: tp).

    ``embedding_loss`` (``Layout.pipeline_split_embedding_loss``, pp > 1): ``n = ceil((L + 2) / pp)`` slots a
    stage; the end stages hold ``n - 1`` layers and their embedding / head, a middle stage (pp > 2) ``n`` layers
    and no ends; the fullest of the two.
    """
    tp, pp, ep = (np.asarray(x, dtype=float) for x in (tp, pp, ep))
    etp = tp if etp is None else np.asarray(etp, dtype=float)
    moe_frac = c.moe_layers / c.layers if c.layers else 0.0
    dense_ffn = (1 - moe_frac) * c.dense_ffn_per_layer + moe_frac * (c.shared_ffn_per_layer + c.router_per_layer)
    layer_dense = (c.attn_per_layer + c.norms_per_layer + dense_ffn) / tp  # every layer has attention
    layer_expert = moe_frac * c.num_experts * c.expert_ffn / (etp * ep)
    ends = _end_params(c, pp, tied=tied) / tp
    layers_stage = stage_slots(c.layers, pp)
    dense, expert = layers_stage * layer_dense + ends, layers_stage * layer_expert
    on = np.asarray(embedding_loss, dtype=bool) & (pp > 1)
    if np.any(on):
        busiest, last = stage_layers(c.layers, pp, on)  # a middle stage's layers (pp > 2), an end stage's
        end_d, end_e = last * layer_dense + ends, last * layer_expert
        mid_d, mid_e = busiest * layer_dense, busiest * layer_expert
        mid = (pp > 2) & (mid_d + mid_e > end_d + end_e)
        dense = np.where(on, np.where(mid, mid_d, end_d), dense)
        expert = np.where(on, np.where(mid, mid_e, end_e), expert)
    return dense, expert


def model_state_bytes(
    spec: TransformerSpec,
    *,
    tp: ArrayLike = 1,
    pp: ArrayLike = 1,
    dp: ArrayLike = 1,
    cp: ArrayLike = 1,
    ep: ArrayLike = 1,
    zero: ArrayLike = 0,
    precision: str = "bf16",
    optimizer: str = "adamw",
    counts: ParamCounts | None = None,
    states: str = "zero",
    etp: ArrayLike | None = None,
    dp_shard: ArrayLike | None = None,
    embedding_loss: ArrayLike = False,
) -> tuple[float | NDArray[np.float64], float | NDArray[np.float64], float | NDArray[np.float64]]:
    """(weights, gradients, optimizer) bytes per GPU for full training with ZeRO sharding over dp · cp
    (``embedding_loss``: the pipeline split counts the embedding and loss as slots, ``_stage_params``).

    16-bit training keeps the ``states`` format's weights and gradients (``STATE_FORMATS``; default the ZeRO
    paper's 16-bit weights and gradients) plus ``optimizer`` state with fp32 master weights, unless the weights
    are the fp32 master themselves (FSDP2); fp32 training keeps fp32 weights and gradients and the optimizer's
    moments only (no master copy). Transient gathered copies are not included (``gathered_buffer_bytes``).
    """
    fmt = state_format(states)
    c = counts or count_params(spec)
    dense, expert = _stage_params(c, tp, pp, ep, tied=spec.tied_embeddings, etp=etp, embedding_loss=embedding_loss)
    zero = np.asarray(zero)
    shard_dense = np.asarray(dp, dtype=float) * np.asarray(cp, dtype=float)
    if dp_shard is not None:  # HSDP: shard over dp_shard ranks, replicated across the rest (dense models)
        shard_dense = np.asarray(dp_shard, dtype=float)
    # experts shard over the expert-data-parallel group, tp·cp·dp / (ep·etp) (MoE parallel folding)
    etp_ = np.asarray(tp if etp is None else etp, dtype=float)
    shard_expert = shard_dense * np.asarray(tp, dtype=float) / (np.asarray(ep, dtype=float) * etp_)
    fp32 = precision == "fp32"
    w_b = 4.0 if fp32 else fmt.weight_b
    g_b = 4.0 if fp32 else fmt.grad_b
    opt_b = optimizer_bytes_per_param(optimizer) - (4.0 if fp32 or fmt.fp32_weights else 0.0)
    opt_b += 0.0 if fp32 else fmt.optimizer_extra_b

    def sharded(per_param: float, stage: int) -> float | NDArray[np.float64]:
        return (
            dense * per_param / np.where(zero >= stage, shard_dense, 1.0)
            + expert * per_param / np.where(zero >= stage, shard_expert, 1.0)
        )

    return sharded(w_b, 3), sharded(g_b, 2), sharded(opt_b, 1)


# DeepSpeed ZeRO stage 1/2 communication buckets: reduce_bucket_size and allgather_bucket_size, "number of
# elements reduced / allgathered at a time", 5e8 each by default (DeepSpeed configuration docs, zero_optimization)
DEEPSPEED_BUCKET_ELEMENTS = 5e8


def gathered_buffer_bytes(
    spec: TransformerSpec,
    *,
    tp: ArrayLike = 1,
    pp: ArrayLike = 1,
    ep: ArrayLike = 1,
    zero: ArrayLike = 0,
    n_micro: ArrayLike = 1,
    precision: str = "bf16",
    states: str = "zero",
    counts: ParamCounts | None = None,
    frozen_bytes_per_param: float | None = None,
    etp: ArrayLike | None = None,
) -> NDArray[np.float64]:
    """Transient unsharded copies and communication buffers at the peak, bytes per GPU (not model states).

    ZeRO-3 / FSDP (``zero >= 3``): gathered 16-bit weights of two transformer layers (the one computing and the one
    prefetched: FSDP's forward / backward prefetch, DeepSpeed's prefetch bucket) and of the embedding and output
    head (FSDP2's root unit, gathered for the whole forward and at the start of backward, where the loss peak is),
    plus one layer's unsharded gradient on its way to the reduce-scatter in the format's reduce dtype. A frozen base
    (LoRA / QLoRA: its blocks at ``frozen_bytes_per_param``, NF4 for QLoRA) is gathered without gradients.

    FSDP2 under pipeline parallelism (``states="fsdp2"``, ``pp > 1``), as torchtitan runs it: the blocks are not
    resharded after forward (torchtitan ``apply_fsdp``: "For PP, do not reshard after forward to avoid
    per-microbatch all-gathers"), so the whole
    stage stays gathered in 16-bit, and the pipeline schedule turns gradient sync off for all micro-batches but the
    last (``torch.distributed.pipelining`` stage, ``backward_maybe_with_nosync``), so FSDP2 accumulates the
    stage's unsharded gradients in the fp32 reduce dtype (``unsharded_accumulated_grad``): 2 + 4 B per stage
    parameter when there is more than one micro-batch.

    DeepSpeed ZeRO-1/2 (``states`` ``zero``, ``deepspeed-fp16`` or ``deepspeed-bf16``, ``zero`` 1 or 2): the
    reduce and all-gather buckets, ``DEEPSPEED_BUCKET_ELEMENTS`` 16-bit elements each.
    """
    fmt = state_format(states)
    c = counts or count_params(spec)
    t = np.asarray(tp, dtype=float)
    zero = np.asarray(zero)
    w16 = 4.0 if precision == "fp32" else 2.0
    layer = (c.blocks / max(c.layers, 1)) / t
    ends = _end_params(c, pp, tied=spec.tied_embeddings) / t
    if frozen_bytes_per_param is not None:  # the embedding and head stay 16-bit under QLoRA
        z3 = 2 * layer * frozen_bytes_per_param + ends * w16
    else:
        reduce_b = 4.0 if precision == "fp32" else fmt.reduce_b
        z3 = (2 * layer + ends) * w16 + layer * reduce_b
        if states == "fsdp2":
            dense, expert = _stage_params(c, tp, pp, ep, tied=spec.tied_embeddings, etp=etp)
            acc = np.where(np.asarray(n_micro) > 1, 4.0, 0.0)
            z3 = np.where(np.asarray(pp) > 1, (dense + expert) * (w16 + acc), z3)
    out = np.where(zero >= 3, z3, 0.0)
    if states in ("zero", "deepspeed-fp16", "deepspeed-bf16"):
        out = out + np.where((zero == 1) | (zero == 2), 2 * DEEPSPEED_BUCKET_ELEMENTS * w16, 0.0)
    return cast("NDArray[np.float64]", out)
