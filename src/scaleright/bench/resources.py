"""Whether the ranks of a benchmark had the hardware to themselves: more ranks than usable CPU cores (CPU runs) or
than GPUs (CUDA runs) means they time-share it, so the run's throughput says nothing about scaling.

Usable CPU cores: the CPUs this process may run on (``os.sched_getaffinity``), capped by a cgroup v2 CPU quota
(``cpu.max``: quota / period, rounded up) where one is set — a container limited to 2 CPUs on a 64-core host has 2.
A CPU rank uses ``threads_per_rank`` cores (the worker reports ``torch.get_num_threads()``; the harness sets one
OpenMP thread per rank unless ``OMP_NUM_THREADS`` is set). A CUDA rank needs a GPU of its own on its node.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

__all__ = ["oversubscription", "shared_hardware_warning", "usable_cpus"]

CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def _quota_cpus(path: Path = CGROUP_CPU_MAX) -> int | None:
    """CPUs allowed by a cgroup v2 quota (``"<quota> <period>"``; ``"max ..."``: none), or None."""
    try:
        quota, period = path.read_text().split()[:2]
        if quota == "max":
            return None
        return max(1, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        return None


def usable_cpus(cgroup_cpu_max: Path = CGROUP_CPU_MAX) -> int:
    """CPU cores this process can use: its affinity set, capped by a cgroup quota (module doc)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cpus = os.cpu_count() or 1
    quota = _quota_cpus(cgroup_cpu_max)
    return min(cpus, quota) if quota is not None else cpus


def oversubscription(*, ranks_per_node: int, device_type: str, threads_per_rank: int | None = None,
                     gpus_per_node: int | None = None, cpus: int | None = None) -> str | None:
    """Why ``ranks_per_node`` ranks shared their hardware, as a phrase, or None when each had its own.

    CUDA: more ranks than ``gpus_per_node``. CPU: ranks x ``threads_per_rank`` (default 1) above ``cpus``
    (default: ``usable_cpus()``)."""
    if device_type == "cuda":
        if gpus_per_node is not None and ranks_per_node > gpus_per_node:
            return f"{ranks_per_node} ranks on {gpus_per_node} GPU{'s' if gpus_per_node != 1 else ''} per node"
        return None
    have = usable_cpus() if cpus is None else cpus
    threads = max(1, threads_per_rank or 1)
    if ranks_per_node * threads > have:
        each = f" x {threads} threads each" if threads > 1 else ""
        return (f"{ranks_per_node} rank{'s' if ranks_per_node != 1 else ''}{each} on {have} usable CPU "
                f"core{'s' if have != 1 else ''}")
    return None


def shared_hardware_warning(world_size: int, why: str, spoils: str) -> str:
    """A sweep's one-line warning for a world size whose ranks shared hardware (``why``, from ``oversubscription``),
    naming what that ``spoils``."""
    return f"world_size={world_size}: {why}: the ranks time-shared the hardware, so {spoils}"
