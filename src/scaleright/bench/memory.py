"""Peak memory of one rank, in GB (10^9 bytes), and the method that measured it.

- CUDA: ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats`` (tensors only; the caching
  allocator's reserve and the CUDA context are not counted).
- CPU: growth of the process's peak resident set size, ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` (KiB on
  Linux, bytes on macOS; getrusage(2)) between a baseline taken after imports and process-group start and the end
  of the timed steps. It is a high-water mark of the whole process, so it includes allocator slack.
"""

from __future__ import annotations

import resource
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["PeakMemory"]

CUDA_METHOD = "torch.cuda.max_memory_allocated"
CPU_METHOD = "process peak RSS delta (resource.getrusage ru_maxrss)"


def _maxrss_bytes() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024


class PeakMemory:
    """``start()`` then ``peak_bytes()``; ``method`` says how it was measured."""

    def __init__(self, device: torch.device):
        self.device = device
        self.method = CUDA_METHOD if getattr(device, "type", "cpu") == "cuda" else CPU_METHOD
        self._base = 0

    def start(self) -> None:
        """Begin a measurement window."""
        if self.method == CUDA_METHOD:
            import torch

            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            self._base = _maxrss_bytes()

    def peak_bytes(self) -> int:
        """Peak bytes in the window (CPU: peak RSS growth since ``start``)."""
        if self.method == CUDA_METHOD:
            import torch

            return int(torch.cuda.max_memory_allocated(self.device))
        return max(0, _maxrss_bytes() - self._base)
