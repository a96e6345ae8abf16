"""``scaleright estimate infer --json``: latency and throughput of serving on a number of GPUs, and the
replicas-vs-tensor-parallel alternatives."""

from typing import TYPE_CHECKING, Any, Self

from scaleright.results.common import CalibrationRecord, MemoryBreakdownGb, Part, Real, Result

if TYPE_CHECKING:
    from scaleright.catalog import Accelerator
    from scaleright.estimate.infer import InferEstimate

__all__ = ["InferResult", "InferLayout", "InferAlternative"]


class InferLayout(Part):
    tp: int
    pp: int
    replicas: int
    idle_gpus: int  # GPUs no faster layout uses


class InferAlternative(Part):
    """Another tensor-parallel size on the same GPUs."""

    layout: InferLayout
    fits: bool
    output_tokens_per_s: Real
    tpot_s: Real
    ttft_s: Real
    max_batch: int


class InferResult(Result):
    """Serving ``model`` on all the GPUs together (``estimate.infer.InferEstimate``)."""

    fits: bool
    reason: str | None
    layout: InferLayout
    memory_gb_per_gpu: Real
    memory_breakdown_gb: MemoryBreakdownGb
    max_batch: int  # sequences per replica the KV cache holds
    batch: int
    ttft_s: Real
    tpot_s: Real
    e2e_latency_s: Real
    output_tokens_per_s: Real
    total_tokens_per_s: Real
    requests_per_s: Real
    alternatives: list[InferAlternative]
    model: str
    gpu: str
    calibrated: bool
    calibration_note: str
    calibration: CalibrationRecord

    @classmethod
    def of(cls, est: "InferEstimate", *, model: str, gpu: "Accelerator", calibration: dict[str, Any]) -> Self:
        """The result of ``est`` for ``model`` on ``gpu``: whether its architecture has measured ceilings, and the
        calibration record (``Profile.record()``) behind it."""
        from scaleright.estimate.calibration import arch_factors

        arch = arch_factors(gpu)
        return cls.from_dict(est.as_dict() | {"model": model, "gpu": gpu.id, "calibrated": arch.calibrated,
                                              "calibration_note": arch.note, "calibration": calibration})  # fmt: skip
