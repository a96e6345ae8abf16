"""``scaleright estimate train --json``: step time, throughput, MFU, memory and scaling of one training layout."""

from typing import TYPE_CHECKING, Any, Literal, Self

from scaleright.results.common import (
    CalibrationRecord,
    FrameworkRecord,
    MemoryBreakdownGb,
    OptReal,
    Part,
    Real,
    Result,
    TimeBreakdownS,
)
from scaleright.results.memory import MemoryAccounting

if TYPE_CHECKING:
    from scaleright.estimate.train import TrainEstimate

__all__ = ["TrainResult", "TrainLayout"]

Recompute = Literal["none", "selective", "full", "op-selective"]


class TrainingOptionLayout(Part):
    """A training layout as a plan option carries it (``estimate.layout.Layout.kwargs``)."""

    tp: int
    pp: int
    dp: int
    cp: int
    ep: int
    etp: int
    zero: int
    dp_shard: int
    micro_batch: int
    virtual_stages: int
    recompute: Recompute
    sequence_parallel: bool
    offload_optimizer: bool  # ZeRO-Offload: optimizer states and step in host memory (estimate.memory.offload)
    offload_activations: bool  # saved activations in host memory, a two-layer buffer on the GPU


class TrainLayout(TrainingOptionLayout):
    """The parallel layout (``estimate.layout.Layout``; ``etp`` and ``dp_shard`` resolved to their values): a plan
    option's layout fields plus the global batch."""

    global_batch: int | None  # None: dp x micro_batch
    # the pipeline split counts the embedding and the loss as layer slots (Megatron-Core account_for_*_in_pipeline_
    # split; estimate train --pipeline-split-embedding-loss); the planner never sets it
    pipeline_split_embedding_loss: bool = False


class TrainResult(Result):
    """One training layout on ``gpus`` GPUs of one type (``estimate.train.TrainEstimate``)."""

    fits: bool
    reason: str | None  # why it does not fit
    memory_gb_per_gpu: Real
    memory_breakdown_gb: MemoryBreakdownGb
    step_time_s: Real
    time_breakdown_s: TimeBreakdownS
    tokens_per_s: Real
    tokens_per_s_per_gpu: Real
    model_tflops_per_gpu: Real
    hardware_tflops_per_gpu: Real
    mfu: Real  # model FLOPs utilisation, a fraction
    hfu: Real  # hardware FLOPs utilisation (recompute counted), a fraction
    scaling_efficiency: OptReal  # speedup / (gpus / base_gpus)
    train_time_h: OptReal  # with tokens
    gpu_hours: OptReal  # with tokens
    gpus: int
    gpu: str
    base_gpus: int | None  # the smallest count that fits with the same model-parallel group
    scaling_note: str | None  # why scaling_efficiency exceeds 1, where it does
    calibrated: bool  # the GPU's architecture has measured GEMM / HBM ceilings
    calibration_note: str
    framework: FrameworkRecord
    memory_accounting: MemoryAccounting  # the framework's memory inputs the memory figures assumed
    layout: TrainLayout
    model: str
    calibration: CalibrationRecord

    @classmethod
    def of(cls, est: "TrainEstimate", *, model: str, calibration: dict[str, Any]) -> Self:
        """The result of ``est`` for ``model``, with the calibration record (``Profile.record()``) behind it."""
        return cls.from_dict(est.as_dict() | {"model": model, "calibration": calibration})
