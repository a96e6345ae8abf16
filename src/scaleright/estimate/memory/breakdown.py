"""Memory per GPU by component: the result type shared by the training and inference models."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["GB", "MemoryBreakdown", "fold_overheads", "overhead_details"]

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
    details: dict[str, float] = field(default_factory=dict)  # e.g. the overhead's terms (overhead_details)

    @property
    def total_gb(self) -> float:
        return (self.weights + self.gradients + self.optimizer + self.gathered + self.activations + self.kv_cache
                + self.overhead)

    @property
    def allocated_gb(self) -> float:
        """Live tensors at the peak: what ``torch.cuda.max_memory_allocated`` reads."""
        return self.total_gb - self.overhead

    @property
    def reserved_gb(self) -> float:
        """The caching allocator's peak: ``torch.cuda.max_memory_reserved`` (allocated plus its reserve)."""
        return self.allocated_gb + self.details.get("allocator_reserve_gb", 0.0)

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



def overhead_details(parts: dict[str, np.ndarray]) -> dict[str, float]:
    """The overhead's terms in GB, from the ``overhead_*`` arrays of one layout."""
    names = {"overhead_allocator": "allocator_reserve_gb", "overhead_cuda_context": "cuda_context_gb",
             "overhead_nccl": "nccl_buffers_gb"}  # fmt: skip
    return {names[k]: float(np.asarray(v)) / GB for k, v in parts.items() if k in names}


def fold_overheads(parts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The ``overhead_*`` arrays summed into the one ``overhead`` key of the public arrays."""
    out = {k: v for k, v in parts.items() if not k.startswith("overhead_")}
    out["overhead"] = parts["overhead_allocator"] + parts["overhead_cuda_context"] + parts["overhead_nccl"]
    return out
