"""Algorithm and bus bandwidth of collectives, as nccl-tests defines them.

Source: NVIDIA nccl-tests, ``doc/PERFORMANCE.md`` (https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md):
  algbw = S / t, with S the operation's size in bytes and t its time;
  busbw = algbw * factor, the bandwidth each link would need under the optimal ring, comparable to hardware peak:
    all-reduce            factor = 2 (n - 1) / n
    all-gather            factor = (n - 1) / n      (S = the gathered output, n * per-rank chunk)
    reduce-scatter        factor = (n - 1) / n      (S = the input, n * per-rank output chunk)
Bandwidths are reported in GB/s = 10^9 bytes/s, like nccl-tests.
"""

from __future__ import annotations

from scaleright.bench.config import CommOp
from scaleright.errors import InputError

__all__ = ["bus_factor", "algbw_gb_per_s", "busbw_gb_per_s"]


def bus_factor(op: CommOp | str, world_size: int) -> float:
    """nccl-tests' busbw / algbw ratio for ``op`` on ``world_size`` ranks."""
    if world_size < 1:
        raise InputError(f"world_size must be >= 1, got {world_size}")
    n = world_size
    op = CommOp(op)
    return 2 * (n - 1) / n if op is CommOp.ALL_REDUCE else (n - 1) / n


def algbw_gb_per_s(*, size_bytes: float, time_s: float) -> float:
    """S / t in GB/s."""
    if time_s <= 0:
        raise InputError(f"time_s must be > 0, got {time_s}")
    return size_bytes / time_s / 1e9


def busbw_gb_per_s(*, op: CommOp | str, size_bytes: float, time_s: float, world_size: int) -> float:
    """algbw * bus_factor(op, n) in GB/s."""
    return algbw_gb_per_s(size_bytes=size_bytes, time_s=time_s) * bus_factor(op, world_size)
