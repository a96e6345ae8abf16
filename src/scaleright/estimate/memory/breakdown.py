"""Memory per GPU by component: the result type shared by the training and inference models."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["GB", "MemoryBreakdown"]

GB = 1e9


@dataclass(frozen=True)
class MemoryBreakdown:
    """Memory per GPU in GB (1e9 bytes), by component. Keys of ``as_dict`` are a stable contract."""

    weights: float
    gradients: float
    optimizer: float
    activations: float
    kv_cache: float
    overhead: float
    gathered: float = 0.0  # ZeRO-3 / FSDP transient unsharded layers and gradients (not model states)
    gpu_memory_gb: float | None = None
    details: dict[str, float] = field(default_factory=dict)

    @property
    def total_gb(self) -> float:
        return (self.weights + self.gradients + self.optimizer + self.gathered + self.activations + self.kv_cache
                + self.overhead)

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
            "gathered": self.gathered,
            "activations": self.activations,
            "kv_cache": self.kv_cache,
            "overhead": self.overhead,
        }



def _breakdown(arrs: dict[str, np.ndarray], gpu_memory_gb: float | None, **details: float) -> MemoryBreakdown:
    vals = {k: float(np.asarray(v)) / GB for k, v in arrs.items()}
    return MemoryBreakdown(**vals, gpu_memory_gb=gpu_memory_gb, details=details)

