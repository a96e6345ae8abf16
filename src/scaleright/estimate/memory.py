"""Memory per GPU, broken down by component, for training, fine-tuning (LoRA / QLoRA) and inference.

Model states (Rajbhandari et al. 2020, ZeRO, section 3.1): with mixed-precision Adam each parameter costs
2 B (16-bit weight) + 2 B (16-bit gradient) + K = 12 B (fp32 master weight, momentum, variance): 16 B per
parameter, the seed articles' "16 GB per billion parameters" for a full fine-tune. ZeRO stage 1/2/3 (and FSDP, the
same as stage 3) shard optimizer states / + gradients / + weights over the data-parallel group. Tensor and pipeline
parallelism divide the weights of each GPU's share of layers; expert parallelism divides the routed experts.

Activations (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", section 4):
per layer and micro-batch ``s·b·h·(34 + 5·a·s/h)`` bytes for a GPT layer with dropout. We derive that figure term by
term (listed in ``_layer_activation_bytes``) so that it generalises to GQA, gated MLPs, MoE, no dropout and
flash attention (which stores no s² score matrix; Dao et al. 2022), then apply tensor / sequence parallelism,
selective or full recomputation, context parallelism and the micro-batches a pipeline keeps in flight
(1F1B: the first stage holds ``pp`` of them; interleaved: × (1 + (p − 1)/(p·v))).

Overheads are explicit parameters (``Overheads``): the CUDA context and library workspaces, and allocator
fragmentation as a fraction of dynamically allocated memory. Their defaults are assumptions stated with their basis
and are checked against measured peaks by ``benchmarks/memory_accuracy.py``.

Every function here accepts numpy arrays for the layout axes and broadcasts, so the planner can evaluate many
layouts in one call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.errors import InputError
from scaleright.estimate.layout import RECOMPUTE, Layout
from scaleright.workload.params import ParamCounts, count_params
from scaleright.workload.precision import bytes_per_element
from scaleright.workload.spec import TransformerSpec

__all__ = [
    "TASKS",
    "OPTIMIZERS",
    "LORA_TARGETS",
    "LoraConfig",
    "Overheads",
    "MemoryBreakdown",
    "optimizer_bytes_per_param",
    "model_state_bytes",
    "activation_bytes_per_layer",
    "training_memory_arrays",
    "training_memory",
    "kv_cache_bytes",
    "inference_memory_arrays",
    "inference_memory",
    "lora_param_count",
]

GB = 1e9
TASKS = ("pretrain", "full-finetune", "lora", "qlora", "inference")
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
LORA_TARGETS = ("q", "k", "v", "o", "gate", "up", "down")
_RECOMPUTE_CODE = {name: i for i, name in enumerate(RECOMPUTE)}


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


@dataclass(frozen=True)
class Overheads:
    """Memory that is not weights, gradients, optimizer states, activations or KV cache."""

    # CUDA context with lazy module loading (CUDA >= 11.7) is roughly 0.3-0.6 GB; cuBLAS/cuDNN workspaces and NCCL
    # communicator buffers add a few hundred MB. We take 1.0 GB as the central figure (assumption, checked by
    # benchmarks/memory_accuracy.py).
    runtime_gb: float = 1.0
    # The PyTorch caching allocator reserves more than is allocated (block rounding, segments that cannot be
    # split); a fraction of the dynamically allocated memory (activations, KV cache, buffers). Assumption: 5 %.
    fragmentation_fraction: float = 0.05


@dataclass(frozen=True)
class MemoryBreakdown:
    """Memory per GPU in GB (1e9 bytes), by component. Keys of ``as_dict`` are a stable contract."""

    weights: float
    gradients: float
    optimizer: float
    activations: float
    kv_cache: float
    overhead: float
    gpu_memory_gb: float | None = None
    details: dict[str, float] = field(default_factory=dict)

    @property
    def total_gb(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations + self.kv_cache + self.overhead

    @property
    def fits(self) -> bool | None:
        return None if self.gpu_memory_gb is None else self.total_gb <= self.gpu_memory_gb

    @property
    def headroom_gb(self) -> float | None:
        return None if self.gpu_memory_gb is None else self.gpu_memory_gb - self.total_gb

    def as_dict(self) -> dict[str, float]:
        return {
            "weights": self.weights,
            "gradients": self.gradients,
            "optimizer": self.optimizer,
            "activations": self.activations,
            "kv_cache": self.kv_cache,
            "overhead": self.overhead,
        }


def optimizer_bytes_per_param(optimizer: str) -> float:
    try:
        return OPTIMIZERS[optimizer.lower()]
    except KeyError:
        raise InputError(f"optimizer={optimizer!r} not allowed; allowed: {', '.join(OPTIMIZERS)}") from None


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


# --------------------------------------------------------------------------------------------------------------
# Model states
# --------------------------------------------------------------------------------------------------------------


def _end_params(c: ParamCounts, pp: ArrayLike, *, tied: bool) -> NDArray[np.float64]:
    """Embedding / position / head / final-norm parameters on the fullest pipeline stage, before tp.

    pp = 1: all of them (a tied head shares the embedding). pp > 1: the larger of the first stage's (embedding,
    positions) and the last stage's (head, or a copy of the tied embedding, and the final norm).
    """
    head = c.embedding if tied else c.lm_head
    first = c.embedding + c.positions
    last = head + c.final_norm
    single = first + (0 if tied else c.lm_head) + c.final_norm
    return np.where(np.asarray(pp) > 1, np.maximum(first, last), single)


def _stage_params(
    c: ParamCounts, tp: ArrayLike, pp: ArrayLike, ep: ArrayLike, *, tied: bool, etp: ArrayLike | None = None
) -> tuple[float | NDArray[np.float64], float | NDArray[np.float64]]:
    """(dense, expert) parameters held by the fullest pipeline stage of one GPU, before ZeRO sharding.

    Layers are split as evenly as possible (ceil(L / pp) on the fullest stage). The first stage also holds the
    embedding (and learned positions), the last the output head and final norm (a tied head keeps a copy of the
    embedding there, as Megatron does). Matmul weights and the vocabulary are split over tp (vocab-parallel
    embedding); the few norm weights are counted as split too (a < 0.01 % error). Routed experts are split over
    ``ep · etp`` (MoE parallel folding; ``etp`` None: tp).
    """
    tp, pp, ep = (np.asarray(x, dtype=float) for x in (tp, pp, ep))
    etp = tp if etp is None else np.asarray(etp, dtype=float)
    layers_stage = np.ceil(c.layers / pp)
    moe_frac = c.moe_layers / c.layers if c.layers else 0.0
    dense_per_layer = c.attn_per_layer + c.norms_per_layer
    dense_layers_stage = layers_stage  # every layer has attention; FFN split by kind below
    dense_ffn = (1 - moe_frac) * c.dense_ffn_per_layer + moe_frac * (c.shared_ffn_per_layer + c.router_per_layer)
    blocks_dense = dense_layers_stage * (dense_per_layer + dense_ffn)
    blocks_expert = layers_stage * moe_frac * c.num_experts * c.expert_ffn
    ends = _end_params(c, pp, tied=tied)
    dense = (blocks_dense + ends) / tp
    expert = blocks_expert / (etp * ep)
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
    etp: ArrayLike | None = None,
    dp_shard: ArrayLike | None = None,
) -> tuple[float | NDArray[np.float64], float | NDArray[np.float64], float | NDArray[np.float64]]:
    """(weights, gradients, optimizer) bytes per GPU for full training with ZeRO sharding over dp · cp.

    16-bit training keeps 16-bit weights and gradients plus ``optimizer`` state with fp32 master weights; fp32
    training keeps fp32 weights and gradients and the optimizer's moments only (no master copy).
    """
    c = counts or count_params(spec)
    dense, expert = _stage_params(c, tp, pp, ep, tied=spec.tied_embeddings, etp=etp)
    zero = np.asarray(zero)
    shard_dense = np.asarray(dp, dtype=float) * np.asarray(cp, dtype=float)
    if dp_shard is not None:  # HSDP: shard over dp_shard ranks, replicated across the rest (dense models)
        shard_dense = np.asarray(dp_shard, dtype=float)
    # experts shard over the expert-data-parallel group, tp·cp·dp / (ep·etp) (MoE parallel folding)
    etp_ = np.asarray(tp if etp is None else etp, dtype=float)
    shard_expert = shard_dense * np.asarray(tp, dtype=float) / (np.asarray(ep, dtype=float) * etp_)
    w_b = 4.0 if precision == "fp32" else 2.0
    opt_b = optimizer_bytes_per_param(optimizer) - (4.0 if precision == "fp32" else 0.0)

    def sharded(per_param: float, stage: int) -> float | NDArray[np.float64]:
        return (
            dense * per_param / np.where(zero >= stage, shard_dense, 1.0)
            + expert * per_param / np.where(zero >= stage, shard_expert, 1.0)
        )

    return sharded(w_b, 3), sharded(w_b, 2), sharded(opt_b, 1)


# --------------------------------------------------------------------------------------------------------------
# Activations
# --------------------------------------------------------------------------------------------------------------


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
    etp: ArrayLike | None = None,
    dp_shard: ArrayLike | None = None,
) -> dict[str, np.ndarray]:
    """Per-GPU training memory in bytes by component, broadcast over the layout arrays (``etp``: expert tensor
    parallel, None: tp; ``dp_shard``: the ZeRO shard group, None: dp·cp)."""
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
            etp=etp, dp_shard=dp_shard,
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
    # ZeRO-3 / FSDP working buffers: two layers' gathered 16-bit weights (current + prefetched) and one layer's
    # unsharded gradients before reduce-scatter.
    layer_params = (c.blocks / max(c.layers, 1)) / np.asarray(tp, dtype=float)
    z3 = np.asarray(zero) >= 3
    weights = weights + np.where(z3, 2 * layer_params * bpv, 0.0)
    grads = grads + np.where(z3, layer_params * bpv, 0.0)
    dynamic = acts + np.where(z3, 3 * layer_params * bpv, 0.0)
    overhead = overheads.runtime_gb * GB + overheads.fragmentation_fraction * dynamic
    shape = np.broadcast(weights, grads, opt, acts, overhead).shape
    zeros = np.zeros(shape)
    return {
        "weights": weights + zeros,
        "gradients": grads + zeros,
        "optimizer": opt + zeros,
        "activations": acts + zeros,
        "kv_cache": zeros,
        "overhead": overhead + zeros,
    }


def _breakdown(arrs: dict[str, np.ndarray], gpu_memory_gb: float | None, **details: float) -> MemoryBreakdown:
    vals = {k: float(np.asarray(v)) / GB for k, v in arrs.items()}
    return MemoryBreakdown(**vals, gpu_memory_gb=gpu_memory_gb, details=details)


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
        etp=layout.expert_tp, dp_shard=layout.zero_shard,
    )  # fmt: skip
    details: dict[str, float] = {}
    if task in ("lora", "qlora"):
        details["trainable_params"] = float(lora_param_count(spec, lora or LoraConfig()))
    return _breakdown(arrs, gpu_memory_gb, **details)


# --------------------------------------------------------------------------------------------------------------
# Inference
# --------------------------------------------------------------------------------------------------------------


def kv_cache_bytes(
    spec: TransformerSpec, *, batch: ArrayLike, context: ArrayLike, tp: ArrayLike = 1, pp: ArrayLike = 1,
    kv_precision: str = "bf16",
) -> float | NDArray[np.float64]:
    """KV-cache bytes per GPU for ``batch`` sequences of ``context`` tokens.

    Per token and layer: 2 · kv_heads · head_dim values (K and V; GQA/MQA shrink kv_heads). Tensor parallelism
    splits KV heads; when tp exceeds kv_heads each GPU keeps one head (replication, as vLLM and TensorRT-LLM do).
    MLA (DeepSeek-V2/V3) caches the compressed latent plus the RoPE key, kv_lora_rank + qk_rope_head_dim values
    per token and layer, replicated on every tp rank. Sliding-window layers keep at most ``window`` tokens.
    """
    bpe = bytes_per_element(kv_precision, field="kv_precision")
    ctx = np.asarray(context, dtype=float)
    tp = np.asarray(tp, dtype=float)
    local = spec.local_layer_count()
    eff_tokens = (spec.layers - local) * ctx + local * np.minimum(ctx, spec.sliding_window or 0)
    if spec.mla:
        per_token_layer = spec.mla.kv_lora_rank + spec.mla.qk_rope_head_dim + 0 * tp
    else:
        per_token_layer = 2 * np.maximum(spec.kv_heads / tp, 1.0) * spec.head_dim
    stage_share = np.ceil(spec.layers / np.asarray(pp, dtype=float)) / spec.layers  # the fullest stage's layers
    out = np.asarray(batch, dtype=float) * eff_tokens * per_token_layer * bpe * stage_share
    return cast("float | NDArray[np.float64]", out)


def _inference_weight_bytes(
    spec: TransformerSpec, c: ParamCounts, *, tp: ArrayLike, pp: ArrayLike, ep: ArrayLike, precision: str
) -> float | NDArray[np.float64]:
    """Weights per GPU: block matmuls at ``precision``; embeddings, head and norms stay 16-bit when quantised."""
    bpe = bytes_per_element(precision)
    dense, expert = _stage_params(c, tp, pp, ep, tied=spec.tied_embeddings)
    hi = 4.0 if precision == "fp32" else 2.0
    emb = (_end_params(c, pp, tied=spec.tied_embeddings) - c.final_norm) / np.asarray(tp, dtype=float)
    return cast("float | NDArray[np.float64]", (dense - emb + expert) * bpe + emb * hi)


def inference_memory_arrays(
    spec: TransformerSpec,
    *,
    batch: ArrayLike,
    context: ArrayLike,
    tp: ArrayLike = 1,
    pp: ArrayLike = 1,
    ep: ArrayLike = 1,
    precision: str = "bf16",
    kv_precision: str = "bf16",
    prefill_chunk: int = 8192,
    overheads: Overheads = Overheads(),
) -> dict[str, np.ndarray]:
    """Per-GPU inference memory in bytes by component, broadcast over batch / context / tp / pp arrays.

    Activation workspace: the largest intermediate tensors of one forward step over the tokens processed at once
    (a prefill chunk of at most ``prefill_chunk`` tokens): the residual stream and norm output (2 · h), the
    q/k/v projections ((q + 2kv)/tp) and the FFN intermediate (2 · f/tp for gated MLPs) at 16 bits, plus fp32 logits
    of the last position of each sequence. ``prefill_chunk`` defaults to 8192 tokens per step, TensorRT-LLM's default
    ``max_num_tokens`` (and vLLM's chunked-prefill token budget of that order).
    """
    c = count_params(spec)
    weights = _inference_weight_bytes(spec, c, tp=tp, pp=pp, ep=ep, precision=precision)
    kv = kv_cache_bytes(spec, batch=batch, context=context, tp=tp, pp=pp, kv_precision=kv_precision)
    tokens = np.minimum(np.asarray(batch, dtype=float) * np.asarray(context, dtype=float), prefill_chunk)
    t = np.asarray(tp, dtype=float)
    ffn = spec.moe.expert_ffn_hidden * spec.moe.top_k if spec.moe else spec.ffn_hidden
    width = 2 * spec.hidden + (spec.q_dim + 2 * spec.kv_dim) / t + (2 if spec.gated_mlp else 1) * ffn / t
    acts = tokens * width * 2.0 + np.asarray(batch, dtype=float) * spec.vocab * 4.0 / t
    overhead = overheads.runtime_gb * GB + overheads.fragmentation_fraction * acts
    shape = np.broadcast(weights, kv, acts, overhead).shape
    zeros = np.zeros(shape)
    return {
        "weights": weights + zeros,
        "gradients": zeros,
        "optimizer": zeros,
        "activations": acts + zeros,
        "kv_cache": kv + zeros,
        "overhead": overhead + zeros,
    }


def inference_memory(
    spec: TransformerSpec,
    *,
    batch: int,
    context: int,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    precision: str = "bf16",
    kv_precision: str = "bf16",
    overheads: Overheads = Overheads(),
    gpu_memory_gb: float | None = None,
) -> MemoryBreakdown:
    """Inference memory per GPU for ``batch`` sequences of ``context`` tokens (prompt + generated)."""
    Layout(tp=tp, pp=pp, dp=ep if ep > 1 else 1, ep=ep).validate(spec)
    if batch < 1 or context < 1:
        raise InputError(f"batch={batch} and context={context} must be positive integers")
    arrs = inference_memory_arrays(
        spec, batch=batch, context=context, tp=tp, pp=pp, ep=ep, precision=precision, kv_precision=kv_precision,
        overheads=overheads,
    )  # fmt: skip
    return _breakdown(arrs, gpu_memory_gb)
