"""Memory that is not a tensor of the model: the CUDA context, communicator buffers and the caching allocator's
reserve. What each memory counter reads:

- ``torch.cuda.max_memory_allocated``: the peak of live tensors (weights, gradients, optimizer states, gathered
  buffers, activations, the loss transient, KV cache): ``MemoryBreakdown.allocated_gb``.
- ``torch.cuda.max_memory_reserved``: the peak of what PyTorch's caching allocator holds from CUDA, allocated
  tensors plus cached free blocks it could not reuse (block rounding, segments split by smaller requests; PyTorch
  docs, "CUDA semantics: memory management"): ``reserved_gb``. torchtitan's memory monitor logs this counter
  (``max_reserved``, in GiB), so the torchtitan and torchao rows of ``memory_measured.csv`` are reserved peaks.
- ``nvidia-smi``: everything the process holds on the device: reserved memory plus the CUDA context and the
  buffers NCCL allocates with ``cudaMalloc`` outside PyTorch's allocator: ``total_gb``, the figure that must fit in
  the GPU's memory (the BLOOM rows of ``train_measured.csv`` are such snapshots).

Terms and their basis (``Overheads``):

- Allocator reserve: GMLake (Guo et al., ASPLOS 2024, "GMLake: Efficient and Transparent GPU Memory
  Defragmentation for Large-scale DNN Training with Virtual Memory Stitching", abstract) cut the PyTorch caching
  allocator's fragmentation (1 − allocated / reserved) by 15 % on average (up to 33 %; 9.2 GB on average, up to
  25 GB) across eight LLM training workloads with recomputation and ZeRO on A100-80GB, so at least that share of
  PyTorch's reserved memory was not allocated. Fragmentation needs allocations that come and go: a block freed and
  then split for a smaller request keeps its segment from being released. We take f = 0.15 over the dynamic
  allocations (activations, gathered buffers, the loss transient, and the gradients a framework frees and
  re-allocates every step, ``states.StateFormat.dynamic_grad_b``): reserve = dynamic · f / (1 − f). Tensors
  allocated once (weights, optimizer states, contiguous gradient buffers) leave no holes. This reserve is also what
  must fit: when ``cudaMalloc`` fails the allocator frees its unsplit cached segments and retries, but memory
  trapped in split segments stays. Not fitted to the reference rows.
- CUDA context: the driver's per-process state and the loaded kernel images, outside the allocator. "0.5–2 GB
  depending on the GPU, CUDA and PyTorch version" for PyTorch's preloaded kernels (S. Bekman, Machine Learning
  Engineering, "Preloaded CUDA kernels memory usage"); CUDA 11.7+ lazy module loading (``CUDA_MODULE_LOADING=LAZY``,
  which recent PyTorch releases set by default) loads kernels on first use and sits at the low end. Default
  0.5 GB; a stack without lazy loading (CUDA < 11.7, as in 2021-22) loads every kernel image at start and sits at
  the top, ``EAGER_LOADING_RUNTIME_GB`` = 2 GB (the ``megatron-2021`` profile, ``profiles``).
- NCCL buffers: per communicator and channel, one receive buffer per peer connection and protocol: Simple
  ``NCCL_BUFFSIZE`` = 4 MiB (NCCL docs, environment variables), LL128 4,915,200 B and LL 524,288 B (NCCL source
  defaults ``DEFAULT_LL128_BUFFSIZE`` / ``DEFAULT_LL_BUFFSIZE``), about 9.6 MB; with 8 channels and ring plus tree
  connections, about 0.15 GB per communicator (an assumption on the channel count, which NCCL picks per topology).
  A rank holds one communicator for each parallel group of size > 1 (tp, pp, dp·cp, cp, ep).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.errors import InputError

__all__ = ["EAGER_LOADING_RUNTIME_GB", "Overheads", "allocator_reserve_bytes", "nccl_buffer_bytes"]

GB = 1e9
# CUDA context with every kernel image loaded at start (no lazy module loading, CUDA < 11.7): the top of the cited
# 0.5-2 GB range (module docstring)
EAGER_LOADING_RUNTIME_GB = 2.0


@dataclass(frozen=True)
class Overheads:
    """Memory that is not weights, gradients, optimizer states, gathered buffers, activations or KV cache."""

    runtime_gb: float = 0.5  # CUDA context and kernel images per process (module docstring)
    # share of the allocator's reserve not allocated, over dynamic allocations (GMLake's average: 0.15)
    fragmentation_fraction: float = 0.15
    nccl_gb_per_group: float = 0.15  # NCCL buffers per communicator (module docstring)

    def __post_init__(self) -> None:
        if not 0.0 <= self.fragmentation_fraction < 1.0:
            raise InputError(f"fragmentation_fraction={self.fragmentation_fraction} must be in [0, 1)")
        if self.runtime_gb < 0 or self.nccl_gb_per_group < 0:
            raise InputError(f"runtime_gb={self.runtime_gb} and nccl_gb_per_group={self.nccl_gb_per_group} "
                             "must be >= 0")  # fmt: skip


def allocator_reserve_bytes(dynamic: ArrayLike, overheads: Overheads) -> NDArray[np.float64]:
    """Reserved but unallocated bytes at the peak: dynamic · f / (1 − f)."""
    f = overheads.fragmentation_fraction
    return np.asarray(dynamic, dtype=float) * f / (1.0 - f)


def nccl_buffer_bytes(
    overheads: Overheads, *, tp: ArrayLike = 1, pp: ArrayLike = 1, dp: ArrayLike = 1, cp: ArrayLike = 1,
    ep: ArrayLike = 1,
) -> NDArray[np.float64]:
    """NCCL buffers per GPU: one communicator per parallel group of size > 1."""
    groups = sum((np.asarray(x, dtype=float) > 1).astype(float)
                 for x in (tp, pp, np.asarray(dp, dtype=float) * np.asarray(cp, dtype=float), cp, ep))  # fmt: skip
    return np.asarray(groups * overheads.nccl_gb_per_group * GB, dtype=float)
