"""``scaleright estimate memory --json``: memory per GPU by component for one layout, and what would make it fit."""

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, Self

from scaleright.results.common import MemoryBreakdownGb, OptReal, Part, Real, Result

if TYPE_CHECKING:
    from scaleright.catalog import Accelerator
    from scaleright.estimate.memory import MemoryBreakdown
    from scaleright.estimate.memory.hints import FitHint as Hint
    from scaleright.estimate.memory.profiles import MemoryProfile

__all__ = ["MemoryResult", "FitHint", "MemoryCalibration", "MemoryAccounting"]


class FitHint(Part):
    """One single change under which the layout fits (``estimate.memory.hints``)."""

    change: str  # the CLI flags that make the change, e.g. "--gpus 2 --tp 2"
    total_gb: Real  # memory per GPU after the change
    gpu: str
    gpus: int


class MemoryCalibration(Part):
    """The memory model has no fitted parameters; the record says so (``MEMORY_CALIBRATION_RECORD``)."""

    name: str
    source: str


class MemoryAccounting(Part):
    """The framework inputs a training estimate assumed (``estimate.memory.profiles.MemoryProfile.as_dict``)."""

    framework: str  # a preset name, or "none": the ZeRO paper's accounting
    states: str  # the state format (``estimate.memory.STATE_FORMATS``)
    cross_entropy: str
    attention: Literal["flash", "materialized"]
    cuda_context_gb: Real
    pipeline_keeps_stage_outputs: bool


class MemoryResult(Result):
    """Memory per GPU (GB = 1e9 bytes) of one training or inference setup on one GPU type."""

    fits: bool | None  # None without a GPU memory to compare with
    total_gb: Real  # what must fit: allocated + allocator reserve + CUDA context + NCCL buffers
    gpu_memory_gb: OptReal
    headroom_gb: OptReal
    allocated_gb: Real  # torch.cuda.max_memory_allocated at the peak
    reserved_gb: Real  # torch.cuda.max_memory_reserved at the peak
    memory_breakdown_gb: MemoryBreakdownGb
    model: str
    gpu: str
    task: Literal["pretrain", "full-finetune", "lora", "qlora", "inference"]
    allocator_reserve_gb: Real
    cuda_context_gb: Real
    nccl_buffers_gb: Real
    trainable_params: OptReal = None  # LoRA / QLoRA only: the adapters' parameters
    calibration: MemoryCalibration
    fit_hints: list[FitHint]  # empty when it fits or no single change does
    memory_accounting: MemoryAccounting | None = None  # training only: the framework inputs assumed

    @classmethod
    def of(cls, mem: "MemoryBreakdown", *, model: str, gpu: "Accelerator", task: str,
           hints: "Sequence[Hint]" = (), accounting: "MemoryProfile | None" = None) -> Self:  # fmt: skip
        """The result of ``mem`` (``estimate.memory``, computed with ``gpu_memory_gb=gpu.memory_gb``) for
        ``model`` on ``gpu``, with the single changes that would make it fit (``estimate.memory.hints``) and, for
        training, the framework inputs it assumed (``estimate.memory.profiles``)."""
        from scaleright.estimate.calibration import MEMORY_CALIBRATION_RECORD

        return cls.from_dict({
            "fits": mem.fits, "total_gb": mem.total_gb, "gpu_memory_gb": gpu.memory_gb, "headroom_gb": mem.headroom_gb,
            "allocated_gb": mem.allocated_gb, "reserved_gb": mem.reserved_gb,
            "memory_breakdown_gb": mem.as_dict(), "model": model, "gpu": gpu.id, "task": task, **mem.details,
            "calibration": MEMORY_CALIBRATION_RECORD, "fit_hints": [h.as_dict() for h in hints],
            **({"memory_accounting": accounting.as_dict()} if accounting is not None else {}),
        })  # fmt: skip
