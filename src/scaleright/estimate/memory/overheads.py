"""Memory that is not a tensor of the model: the CUDA context, library workspaces, communicator buffers and the
caching allocator's reserve."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Overheads"]


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


