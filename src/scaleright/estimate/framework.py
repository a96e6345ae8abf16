"""Training frameworks as the performance model sees them: which communication they overlap, how they run
attention, context parallelism and the pipeline.

A step time is only meaningful with the framework behaviour it assumes, so every training estimate names one
(``Framework.name`` and its fields are printed with it). The presets describe what each framework does by default;
every field can be overridden (``Framework.with_overrides``, ``--tp-comm-overlap``, ``--attention``,
``--cp-variant``, ``--pipeline-schedule`` on ``estimate train``, a mapping under ``framework:`` in a scenario).

Fields:
- ``tp_comm_overlap``: tensor-parallel all-gathers / reduce-scatters run concurrently with the GEMMs that consume or
  produce them (then ``Calibration.tp_overlap`` of that time is hidden; never over PCIe without P2P).
- ``tp_bwd_overlap``: in backward, the all-reduce (or reduce-scatter) of a column-parallel linear's input gradient
  runs asynchronously behind that linear's weight-gradient GEMM (Megatron-LM since 2021:
  ``--async-tensor-model-parallel-allreduce``, ``LinearWithGradAccumulationAndAsyncCommunication``; Korthikanti
  et al. 2022, 4.2.2). Each of the layer's two backward TP collectives exposes only what exceeds its GEMM.
- ``attention``: ``flash`` (the s×s scores never leave on-chip memory; Dao et al. 2022) or ``materialized`` (the
  scores, softmax, dropout mask and dropout output are written to and read from HBM; the two batched GEMMs run at
  GEMM efficiency over the full s×s, masked or not; Korthikanti et al. 2022, section 4.1).
- ``flash_version``: the flash-attention kernel generation: 2 (FlashAttention-2, Dao 2023: Ampere-style mma, the
  kernel of PyTorch SDPA's flash backend and of flash-attn 2) or 3 (Hopper-native: FlashAttention-3, Shah et al.
  2024, and Transformer Engine / cuDNN fused attention). On Hopper FlashAttention-2 reaches 35 % of peak forward
  where FlashAttention-3 reaches 75 %, and its backward is 1.5-1.75x slower (Shah et al. 2024, abstract and
  section 4.1): ``FA2_ON_HOPPER``. Elsewhere the two are timed alike (no measurement says otherwise).
- ``cp_variant``: context parallelism as a K/V ``ring`` overlapped with attention (Liu et al. 2023, Megatron-Core),
  an exposed ``allgather`` of K/V before attention (Llama 3, Dubey et al. 2024, section 3.3.2) or ``ulysses``
  all-to-alls of q/k/v and the output (Jacobs et al. 2023, DeepSpeed-Ulysses).
- ``pipeline_schedule``: ``1f1b`` (PipeDream-Flush, one stage per rank: a layout's ``virtual_stages`` must be 1),
  ``interleaved`` (Narayanan et al. 2021,
  ``virtual_stages`` chunks per rank: bubble (p − 1)/v slots) or ``zero-bubble`` (Qi et al. 2023 ZB-H1: weight
  gradients fill the bubble, which shrinks to (p − 1)·(T_F + T_B − T_W), a third of 1F1B's when the three are equal).
- ``fsdp_prefetch``: ZeRO-3 / FSDP all-gathers the next layer's weights while the current one computes (PyTorch FSDP
  forward/backward prefetch, DeepSpeed ``stage3_prefetch_bucket_size``); without it every gather is exposed.
- ``pp_p2p_overlap``: pipeline send/recv of activations run concurrently with the compute of the neighbouring
  micro-batch chunks (Megatron-Core's interleaved schedule, ``overlap_p2p_comm``); without it every transfer is
  exposed.
- ``dp_bucket_overlap``: data-parallel gradient buckets are reduced while backward still runs (PyTorch DDP buckets,
  Megatron ``--overlap-grad-reduce``, DeepSpeed ``overlap_comm``); without it the whole reduction is exposed.
- ``grad_reduce_fp32``: gradients are all-reduced / reduce-scattered in fp32 (4 B each), not in the 16-bit compute
  dtype: twice the bytes of every data-parallel gradient collective of 16-bit training (weights are still
  gathered in 16 bits). torchtitan's ``training.mixed_precision_reduce`` defaults to ``"float32"`` (FSDP2
  ``MixedPrecisionPolicy(reduce_dtype=torch.float32)``); Composer's FSDP ``mixed_precision: DEFAULT`` (the
  llm-foundry benchmark rows' "MP mode DEFAULT") is ``param_dtype`` bf16 with ``reduce_dtype`` fp32; NeMo 2 and
  Megatron-Bridge recipes set Megatron-Core's ``DistributedDataParallelConfig(grad_reduce_in_fp32=True)``, which
  the ``megatron-core`` preset does not assume yet (see its comment). DeepSpeed (``communication_data_type``
  defaults to the gradients' 16-bit dtype) and Accelerate's FSDP bf16 policy reduce in 16 bits; the
  ``megatron-2021`` preset (BLOOM's DeepSpeed ZeRO-1, the 2021 GPT-3 run) is left at 16 bits.
- ``fp8_all_gather``: in fp8 training, ZeRO-3 / FSDP casts the sharded weights of the fp8 linear layers to fp8
  before gathering them, 1 B per weight instead of 2 (torchao ``Float8Linear`` with
  ``enable_fsdp_float8_all_gather``; torchtitan ``float8.enable_fsdp_float8_all_gather``, off by default); the
  embeddings, norms and output head are still gathered in 16 bits. No effect in 16-bit training.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from scaleright.errors import InputError

__all__ = ["Framework", "FRAMEWORKS", "DEFAULT_FRAMEWORK", "ATTENTION_KINDS", "CP_VARIANTS", "PIPELINE_SCHEDULES",
           "framework_of"]  # fmt: skip

ATTENTION_KINDS = ("flash", "materialized")
CP_VARIANTS = ("ring", "allgather", "ulysses")
PIPELINE_SCHEDULES = ("1f1b", "interleaved", "zero-bubble")
_BOOL_FIELDS = ("tp_comm_overlap", "tp_bwd_overlap", "fsdp_prefetch", "dp_bucket_overlap", "pp_p2p_overlap",
                "grad_reduce_fp32", "fp8_all_gather")  # fmt: skip
# (forward, backward) speed of FlashAttention-2 relative to FlashAttention-3 on Hopper (Shah et al. 2024: 35 % vs
# 75 % utilisation forward; backward 1.5-1.75x faster with FA3, the upper figure at the long sequences training uses)
FA2_ON_HOPPER = (0.35 / 0.75, 1 / 1.75)


@dataclass(frozen=True)
class Framework:
    """The framework behaviour a training estimate assumes (module docstring for each field)."""

    name: str
    tp_comm_overlap: bool = False
    tp_bwd_overlap: bool = False
    attention: str = "flash"
    flash_version: int = 2
    cp_variant: str = "ring"
    pipeline_schedule: str = "interleaved"
    fsdp_prefetch: bool = True
    dp_bucket_overlap: bool = True
    pp_p2p_overlap: bool = False
    grad_reduce_fp32: bool = False
    fp8_all_gather: bool = False
    description: str = ""

    def __post_init__(self) -> None:
        for key, allowed in (("attention", ATTENTION_KINDS), ("cp_variant", CP_VARIANTS),
                             ("pipeline_schedule", PIPELINE_SCHEDULES)):  # fmt: skip
            v = getattr(self, key)
            if v not in allowed:
                raise InputError(f"framework {key}={v!r} not allowed; allowed: {', '.join(allowed)}")
        for key in _BOOL_FIELDS:
            if not isinstance(getattr(self, key), bool):
                raise InputError(f"framework {key}={getattr(self, key)!r} must be true or false")
        if self.flash_version not in (2, 3) or isinstance(self.flash_version, bool):
            raise InputError(f"framework flash_version={self.flash_version!r} not allowed; allowed: 2, 3")
        if not isinstance(self.name, str) or not self.name:
            raise InputError("framework name must be non-empty text")

    def with_overrides(self, **changes: Any) -> Framework:
        """This framework with some fields changed (None leaves a field as it is); the name records the change."""
        changes = {k: v for k, v in changes.items() if v is not None}
        allowed = {f.name for f in fields(self)} - {"name", "description"}
        unknown = set(changes) - allowed
        if unknown:
            raise InputError(f"framework field(s) {', '.join(sorted(unknown))} not known; allowed: "
                             f"{', '.join(sorted(allowed))}")
        changed = {k: v for k, v in changes.items() if getattr(self, k) != v}
        if not changed:
            return self
        tag = ", ".join(f"{k}={_word(v)}" for k, v in changed.items())
        return replace(self, name=f"{self.name} ({tag})", **changed)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """One line for terminal output."""
        attn = f"flash-attention {self.flash_version}" if self.attention == "flash" else "materialized attention"
        bwd = " (backward async)" if self.tp_bwd_overlap and not self.tp_comm_overlap else ""
        return (f"{self.name}: TP-comm overlap {'on' if self.tp_comm_overlap else 'off'}{bwd}, {attn}, "
                f"CP {self.cp_variant}, pipeline {self.pipeline_schedule}, FSDP prefetch "
                f"{_word(self.fsdp_prefetch)}, DP bucket overlap {_word(self.dp_bucket_overlap)}, gradient reduce "
                f"{'fp32' if self.grad_reduce_fp32 else '16-bit'}"
                + (", FSDP fp8 all-gather" if self.fp8_all_gather else ""))


def _word(v: Any) -> str:
    return ("on" if v else "off") if isinstance(v, bool) else str(v)


FRAMEWORKS: dict[str, Framework] = {
    f.name: f
    for f in (
        Framework(
            "megatron-2021",
            # Megatron-LM 2021-22 and Megatron-DeepSpeed (GPT-3 175B runs, BLOOM): TP all-reduces on the critical path
            # (Narayanan et al. 2021 section 3.3; Korthikanti et al. 2022 Table 4 times them inside each layer)
            tp_comm_overlap=False,
            tp_bwd_overlap=True,  # async input-gradient all-reduce behind the weight-gradient GEMM (Megatron-LM 2021)
            # fused scale-mask-softmax over a materialised s×s matrix, then dropout (Korthikanti et al. 2022, 4.1:
            # 2as²b + 2as²b + as²b + 2as²b bytes; flash attention arrived in Megatron in 2023)
            attention="materialized",
            flash_version=2,  # not used: materialised attention
            cp_variant="ring",  # no context parallelism then; ring is what came later
            # the interleaved schedule is Narayanan et al. 2021's own (--num-layers-per-virtual-pipeline-stage)
            pipeline_schedule="interleaved",
            fsdp_prefetch=True,  # not used: these frameworks ran ZeRO-1 at most
            dp_bucket_overlap=True,  # gradient all-reduce overlapped with backward (DDP-style buckets)
            description="Megatron-LM / Megatron-DeepSpeed 2021-22 (GPT-3 175B, BLOOM-176B)",
        ),
        Framework(
            "megatron-core",
            # Megatron-Core / NeMo 2023+: --tp-comm-overlap (Transformer Engine userbuffers) overlaps the SP
            # all-gather / reduce-scatter with the GEMMs (NeMo performance docs, "Communication overlaps")
            tp_comm_overlap=True,
            tp_bwd_overlap=True,  # kept from Megatron-LM (and subsumed by the userbuffers overlap)
            attention="flash",  # Transformer Engine fused (cuDNN / FlashAttention) attention
            flash_version=3,  # TE's cuDNN fused attention runs Hopper-native (wgmma / TMA) kernels
            cp_variant="ring",  # Megatron-Core context parallelism: ring attention with P2P K/V exchange
            pipeline_schedule="interleaved",  # virtual pipeline (VP) in every large-model recipe
            fsdp_prefetch=True,
            dp_bucket_overlap=True,  # --overlap-grad-reduce, --overlap-param-gather
            # the interleaved schedule's send/recv run during the neighbouring chunks' forward and backward
            # (Megatron-LM: on unless --no-overlap-p2p-communication; schedules.py forward_backward_pipelining
            # _with_interleaving, overlap_p2p_comm)
            pp_p2p_overlap=True,
            # Megatron-LM reduces bf16 gradients in fp32 (--accumulate-allreduce-grads-in-fp32, forced for bf16) and
            # NeMo 2 / Megatron-Bridge recipes set DistributedDataParallelConfig(grad_reduce_in_fp32=True), but the
            # preset stays at 16 bits until the Megatron-LM weak-scaling rows are explained: with fp32 they go from
            # 5.9 % to 8.7 % median. That is not an overlap term (train.zero1_exposed_s follows Megatron-Core's
            # schedules): GPT 32B tp8 pp1 dp48 at the rows' assumed micro-batch 1 is 4 micro-batches, and Megatron
            # reduces only in the last one's backward (~0.13 s modelled) a 16 GB fp32 reduce-scatter (~0.34 s at
            # one 400 Gb/s rail per GPU), which the measured 459.6 TFLOP/s (~0.07 s left) cannot contain; the
            # unstated micro-batch or the compute, not the overlap, is what is off
            grad_reduce_fp32=False,
            description="Megatron-Core / NeMo / Megatron-Bridge 2023+",
        ),
        Framework(
            "deepspeed",
            tp_comm_overlap=False,  # DeepSpeed's TP (AutoTP / Megatron-style) runs its all-reduces blocking
            tp_bwd_overlap=False,
            attention="flash",  # HF models under DeepSpeed use SDPA / FlashAttention-2
            flash_version=2,
            cp_variant="ulysses",  # DeepSpeed-Ulysses sequence parallelism (Jacobs et al. 2023)
            pipeline_schedule="1f1b",  # DeepSpeed PipelineEngine TrainSchedule (1F1B, no interleaving)
            fsdp_prefetch=True,  # ZeRO-3 stage3_prefetch_bucket_size
            dp_bucket_overlap=True,  # overlap_comm
            description="DeepSpeed ZeRO stages 1-3 (with Hugging Face models)",
        ),
        Framework(
            "fsdp2",
            # torchtitan's async TP (experimental.enable_async_tensor_parallel, torch symmetric memory) overlaps TP;
            # it is off by default in its configs
            tp_comm_overlap=False,
            tp_bwd_overlap=False,  # DTensor TP waits on each collective unless async TP is on
            attention="flash",  # F.scaled_dot_product_attention
            flash_version=2,  # SDPA's flash backend is FlashAttention-2 (torch.nn.attention.SDPBackend.FLASH_ATTENTION)
            cp_variant="allgather",  # torch context_parallel: all-gather K/V by default (rotate method)
            pipeline_schedule="1f1b",  # torchtitan default pipeline_parallel_schedule "1F1B"
            fsdp_prefetch=True,  # FSDP2 implicit forward/backward prefetch
            dp_bucket_overlap=True,
            grad_reduce_fp32=True,  # torchtitan training.mixed_precision_reduce = "float32" (its default)
            description="PyTorch FSDP2 / torchtitan",
        ),
        Framework(
            "accelerate",
            tp_comm_overlap=False,  # Accelerate wraps FSDP / DeepSpeed; no TP-comm overlap
            attention="flash",  # transformers' SDPA / FlashAttention-2
            flash_version=2,
            cp_variant="allgather",  # Accelerate context parallelism delegates to torch context_parallel
            pipeline_schedule="1f1b",
            fsdp_prefetch=True,  # FSDP backward_prefetch=BACKWARD_PRE (Accelerate's default)
            dp_bucket_overlap=True,  # DDP buckets
            description="Hugging Face Accelerate (FSDP / DeepSpeed backends)",
        ),
        Framework(
            "llm-foundry",
            # MosaicML llm-foundry 2023 (Composer + PyTorch FSDP1, FlashAttention via Triton / flash-attn 2)
            tp_comm_overlap=False,
            attention="flash",  # attn_impl: flash (flash-attn) or triton, both FlashAttention-2-era kernels (2023)
            flash_version=2,
            cp_variant="allgather",
            pipeline_schedule="1f1b",
            fsdp_prefetch=True,  # Composer FSDP backward_prefetch BACKWARD_PRE, limit_all_gathers
            dp_bucket_overlap=True,
            grad_reduce_fp32=True,  # Composer FSDP mixed_precision DEFAULT: reduce_dtype fp32 (the rows' MP mode)
            description="MosaicML llm-foundry (Composer + PyTorch FSDP)",
        ),
    )
}
# The default assumes no TP-comm overlap (the conservative choice, and torchtitan's / Hugging Face's default):
# an estimate never credits an overlap the user's framework may not do.
DEFAULT_FRAMEWORK = FRAMEWORKS["fsdp2"]


def framework_of(value: str | Mapping[str, Any] | Framework | None, *, field: str = "framework") -> Framework:
    """A ``Framework`` from a preset name, a mapping ``{name: <preset>, <field>: <value>, ...}`` or a
    ``Framework``; None is the default (``fsdp2``)."""
    if value is None:
        return DEFAULT_FRAMEWORK
    if isinstance(value, Framework):
        return value
    if isinstance(value, str):
        key = value.strip().lower()
        if key not in FRAMEWORKS:
            raise InputError(f"{field}={value!r} not known; allowed: {', '.join(FRAMEWORKS)}")
        return FRAMEWORKS[key]
    if isinstance(value, Mapping):
        items = dict(value)
        base = framework_of(items.pop("name", None) or DEFAULT_FRAMEWORK.name, field=f"{field}.name")
        for k, v in items.items():
            if k in _BOOL_FIELDS and not isinstance(v, bool):
                raise InputError(f"{field}.{k}={v!r} must be true or false")
        try:
            return base.with_overrides(**items)
        except InputError as exc:
            raise InputError(f"{field}: {exc}") from None
    raise InputError(f"{field} must be a framework name ({', '.join(FRAMEWORKS)}) or a mapping, not "
                     f"{type(value).__name__}")
