"""What a training framework keeps in memory: its state format, its loss, its attention and its CUDA stack.

``memory_profile`` reads a ``estimate.framework.Framework`` (the presets ``megatron-2021``, ``megatron-core``,
``deepspeed``, ``fsdp2``, ``accelerate``, ``llm-foundry``) as the memory model's inputs; every field can be given
explicitly instead (``training_memory(states=, cross_entropy=, flash_attention=, overheads=)``).

- ``megatron-2021`` (Megatron-LM / Megatron-DeepSpeed 2021-22): without ZeRO, Megatron's fp32 ``main_grad``
  buffer (states ``megatron``). Megatron-LM had no optimizer sharding before its distributed optimizer (2022), so a
  ZeRO stage under this profile is DeepSpeed's (Megatron-DeepSpeed, as BLOOM ran it): ``BF16_Optimizer`` with fp32
  gradient accumulation for bf16 (``deepspeed-bf16``), the ZeRO fp16 optimizer otherwise (``deepspeed-fp16``).
  Megatron's vocab-parallel cross entropy (``fused``); attention materialised (the framework's ``attention``); a
  CUDA 11.x stack without lazy module loading (``overheads.EAGER_LOADING_RUNTIME_GB``).
- ``megatron-core`` (2023+): ``megatron`` states (the distributed optimizer is ZeRO-1 over the same formula),
  ``fused`` loss, flash attention, lazy loading; Transformer Engine's linear layers, which under FP8 / NVFP4 save
  quantised GEMM inputs (``quantised_gemm_inputs``).
- ``deepspeed``: DeepSpeed picks ``BF16_Optimizer`` for bf16 without ZeRO or with ZeRO stage 1 (its engine's
  optimizer choice: bf16 + fp32 gradient accumulation + stage <= 1), ``deepspeed-bf16``; ZeRO-2/3 and fp16 use the
  ZeRO optimizer's 16-bit gradients and fp32 gradient partition, ``deepspeed-fp16``. Hugging Face models compute
  the loss with ``F.cross_entropy`` on fp32 logits: ``eager``.
- ``fsdp2`` (PyTorch FSDP2 / torchtitan): ``fsdp2`` states (fp32 sharded parameters as the master copy), torchtitan's
  eager ``F.cross_entropy(pred.float())`` (``compiled`` when the run compiles the loss, 2025 torchtitan with
  ``compile.enable``); tensor parallelism is DTensor's (``dtensor_tp``): under tp > 1 the loss runs in
  ``loss_parallel()`` (``loss-parallel``) and the output head saves its all-gathered input (``training``).
- ``accelerate``: FSDP with a mixed-precision policy or DDP under autocast keeps fp32 parameters as the optimizer's
  master (``fsdp2`` states), the transformers loss is ``eager``.
- ``llm-foundry``: Composer FSDP keeps fp32 sharded parameters (``fsdp2`` states); its pretraining YAMLs use
  flash-attn's fused cross entropy (``loss_fn: fused_crossentropy``), which keeps no fp32 copy of the logits:
  ``flash-attn``.

Under pipeline parallelism DeepSpeed's ``PipelineEngine`` and ``torch.distributed.pipelining`` keep each in-flight
micro-batch's stage output until its backward, Megatron's schedule does not (``MemoryProfile.pipeline_outputs``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from scaleright.estimate.framework import FRAMEWORKS, Framework, framework_of
from scaleright.estimate.memory.overheads import EAGER_LOADING_RUNTIME_GB, Overheads

__all__ = ["NO_FRAMEWORK", "MemoryProfile", "memory_profile", "resolve_profile"]


@dataclass(frozen=True)
class MemoryProfile:
    """The memory model's framework inputs (module docstring)."""

    framework: str
    states: str
    cross_entropy: str
    flash_attention: bool
    runtime_gb: float
    # tensor parallelism through DTensor's ``parallelize_module`` plan (torchtitan): the loss runs in
    # ``loss_parallel()`` and the output head's all-gathered input is saved whole (``cross_entropy_tp``, ``training``)
    dtensor_tp: bool = False
    # Transformer Engine's linear layers (Megatron-Core): under FP8 / NVFP4 GEMMs each saves a quantised copy of its
    # input for backward, not the 16-bit input (``activations.GEMM_INPUT_BYTES``). torchao's Float8Linear
    # (torchtitan) saves the high-precision input and casts again in backward, so ``fsdp2`` keeps 16-bit inputs.
    quantised_gemm_inputs: bool = False

    @property
    def cross_entropy_tp(self) -> str:
        """The loss under tensor parallelism (tp > 1): torchtitan's eager ``F.cross_entropy`` on vocab-sharded
        DTensor logits inside ``loss_parallel()`` (``activations.CROSS_ENTROPY["loss-parallel"]``), else the same
        loss as without it."""
        return "loss-parallel" if self.dtensor_tp and self.cross_entropy == "eager" else self.cross_entropy

    @property
    def pipeline_outputs(self) -> bool:
        """The pipeline keeps each in-flight micro-batch's stage output until its backward, and a received-gradient
        buffer: DeepSpeed's ``PipelineEngine`` (``runtime/pipe/engine.py``: ``_exec_forward_pass`` stores
        ``pipe_buffers['outputs'][buffer_id]``, ``_exec_backward_pass`` releases it; ``grad_layer`` receives the
        gradient), which every run with DeepSpeed's optimizer states and pp > 1 uses (Megatron-DeepSpeed builds its
        model as a ``PipelineModule``), and ``torch.distributed.pipelining`` under FSDP2 (torchtitan:
        ``_PipelineStageBase.forward_one_chunk`` caches ``(output_tuple, inputs)`` in ``fwd_cache`` until the
        chunk's backward). Megatron-LM's own schedule frees the output's data once sent
        (``deallocate_output_tensor``)."""
        return self.states in ("deepspeed-fp16", "deepspeed-bf16", "fsdp2")

    @property
    def overheads(self) -> Overheads:
        return Overheads(runtime_gb=self.runtime_gb)

    def summary(self) -> str:
        attn = "flash attention" if self.flash_attention else "materialized attention (s x s scores through HBM)"
        name = "no framework (the ZeRO paper's accounting)" if self.framework == NO_FRAMEWORK else self.framework
        pipe = ", pipeline stages keep their outputs until backward (pp > 1)" if self.pipeline_outputs else ""
        if self.quantised_gemm_inputs:
            pipe += ", linear layers save FP8 / NVFP4 inputs under FP8 / NVFP4 training"
        ce = self.cross_entropy if self.cross_entropy_tp == self.cross_entropy else \
            f"{self.cross_entropy} ({self.cross_entropy_tp} under tp > 1)"  # fmt: skip
        return (f"{name}: states {self.states}, {ce} cross-entropy, {attn}, CUDA context "
                f"{self.runtime_gb:g} GB{pipe}")

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["attention"] = "flash" if d.pop("flash_attention") else "materialized"
        d["cuda_context_gb"] = d.pop("runtime_gb")
        d["pipeline_keeps_stage_outputs"] = self.pipeline_outputs
        d.pop("dtensor_tp")  # (shown by the summary's cross-entropy: "eager (loss-parallel under tp > 1)")
        d.pop("quantised_gemm_inputs")  # (shown by the summary)
        return d


# Without a framework: the ZeRO paper's accounting (Rajbhandari et al. 2020: 16-bit weights and gradients, K = 12),
# Megatron's fused loss, flash attention, a lazily loading CUDA stack
NO_FRAMEWORK = "none"
_PAPER = MemoryProfile(framework=NO_FRAMEWORK, states="zero", cross_entropy="fused", flash_attention=True,
                       runtime_gb=Overheads().runtime_gb)  # fmt: skip


def _preset(fw: Framework) -> str:
    """The preset a (possibly overridden) framework comes from: ``with_overrides`` names it "<preset> (<changes>)"."""
    base = fw.name.split(" (", 1)[0]
    return base if base in FRAMEWORKS else "fsdp2"


def memory_profile(framework: Framework | str, *, zero: int = 0, precision: str = "bf16") -> MemoryProfile:
    """The memory inputs of ``framework`` for a run at ZeRO stage ``zero`` and ``precision`` (module docstring)."""
    fw = framework_of(framework)
    preset = _preset(fw)
    bf16 = precision != "fp16"  # bf16 and fp8 runs keep bf16 weights and gradients
    runtime = Overheads().runtime_gb
    quantised = False
    if preset == "megatron-2021":
        states = "megatron" if zero == 0 else ("deepspeed-bf16" if bf16 else "deepspeed-fp16")
        ce = "fused"
        runtime = EAGER_LOADING_RUNTIME_GB
    elif preset == "megatron-core":
        states, ce = "megatron", "fused"
        quantised = True
    elif preset == "deepspeed":
        states = "deepspeed-bf16" if bf16 and zero <= 1 else "deepspeed-fp16"
        ce = "eager"
    elif preset == "llm-foundry":
        states, ce = "fsdp2", "flash-attn"
    else:  # fsdp2, accelerate
        states, ce = "fsdp2", "eager"
    return MemoryProfile(framework=fw.name, states=states, cross_entropy=ce,
                         flash_attention=fw.attention == "flash", runtime_gb=runtime,
                         dtensor_tp=preset == "fsdp2", quantised_gemm_inputs=quantised)  # fmt: skip


def resolve_profile(
    framework: Framework | str | None, *, zero: int = 0, precision: str = "bf16", states: str | None = None,
    cross_entropy: str | None = None, flash_attention: bool | None = None,
) -> MemoryProfile:
    """The memory inputs a run uses: ``framework``'s (``memory_profile``; None: the ZeRO paper's accounting) with
    every field given explicitly taking precedence."""
    base = _PAPER if framework is None else memory_profile(framework, zero=zero, precision=precision)
    given: dict[str, Any] = {"states": states, "cross_entropy": cross_entropy, "flash_attention": flash_attention}
    return replace(base, **{k: v for k, v in given.items() if v is not None})
