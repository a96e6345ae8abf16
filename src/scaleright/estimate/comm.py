"""α–β cost of collectives, and which network tier a process group crosses.

Ring algorithms on ``n`` ranks moving ``S`` bytes per rank (Thakur et al. 2005; nccl-tests doc/PERFORMANCE.md):
all-reduce 2(n−1)/n · S / B + 2(n−1)·α; all-gather, reduce-scatter and all-to-all (n−1)/n · S / B + (n−1)·α;
point-to-point S / B + α. ``S`` is the full buffer (all-gather: the gathered output; reduce-scatter: the input).
``B`` is the bus bandwidth of the slowest tier the group crosses: the GPU's one-direction link inside a node
(NVLink/NVSwitch, or PCIe), or between nodes the NICs of the group's members on one node (one rail each), each
times its achievable fraction.

Groups are laid out Megatron-style, tensor-parallel innermost: ranks of a group of size ``n`` whose members are
``stride`` ranks apart stay inside one node when ``n · stride ≤ gpus_per_node``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.estimate.calibration import Calibration

if TYPE_CHECKING:
    from scaleright.catalog.gpus import Accelerator

__all__ = ["Cluster", "collective_time_s", "group_bandwidth", "COLLECTIVES"]

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p")


@dataclass(frozen=True)
class Cluster:
    """The network a job runs on. Knows nothing of models or prices."""

    gpus_per_node: int  # GPUs sharing the intra-node fabric
    intra_node_gb_per_s: float  # one-direction bandwidth per GPU inside a node (GB/s)
    inter_node_gbps_per_gpu: float  # NIC bandwidth per GPU between nodes (Gb/s, as NICs are sold)

    @property
    def inter_node_gb_per_s(self) -> float:
        return self.inter_node_gbps_per_gpu / 8.0

    @classmethod
    def for_gpu(cls, gpu: Accelerator, *, gpus_per_node: int | None = None,
                inter_node_gbps_per_gpu: float | None = None,
                intra_node_gb_per_s: float | None = None) -> Cluster:  # fmt: skip
        """The typical node of a catalog accelerator, with optional overrides."""
        return cls(
            gpus_per_node=gpus_per_node or gpu.gpus_per_node,
            intra_node_gb_per_s=intra_node_gb_per_s or gpu.intra_node_gb_per_s_per_gpu,
            inter_node_gbps_per_gpu=inter_node_gbps_per_gpu or gpu.nic_gbps_per_gpu,
        )


def group_bandwidth(
    cluster: Cluster, cal: Calibration, *, size: ArrayLike, stride: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(bytes/s, α seconds) for a group of ``size`` ranks ``stride`` apart (array-friendly)."""
    size = np.asarray(size, dtype=float)
    stride = np.asarray(stride, dtype=float)
    inside = size * stride <= cluster.gpus_per_node
    intra = cluster.intra_node_gb_per_s * 1e9 * cal.intra_link_efficiency
    # A group with r members per node spreads its rings over r NICs (NCCL uses one channel per NIC rail), so the
    # bus bandwidth across nodes is r NICs' worth per rank, never more than the intra-node link (nccl-tests on
    # DGX A100: ~190 GB/s all-reduce busbw across nodes with 8 x 200 Gb/s HDR).
    per_node = np.clip(np.floor(cluster.gpus_per_node / stride), 1.0, size)
    inter = np.minimum(cluster.inter_node_gb_per_s * 1e9 * cal.inter_link_efficiency * per_node, intra)
    bw = np.where(inside, intra, inter)
    alpha = np.where(inside, cal.intra_latency_s, cal.inter_latency_s)
    return bw, alpha


def collective_time_s(
    kind: str, size_bytes: ArrayLike, n: ArrayLike, bw_bytes_per_s: float | NDArray[np.float64],
    alpha_s: float | NDArray[np.float64],
) -> NDArray[np.float64]:
    """Time of one ring collective; zero when ``n`` is 1 (array-friendly)."""
    n = np.asarray(n, dtype=float)
    s = np.asarray(size_bytes, dtype=float)
    if kind == "all_reduce":
        t = 2 * (n - 1) / n * s / bw_bytes_per_s + 2 * (n - 1) * alpha_s
    elif kind in ("all_gather", "reduce_scatter", "all_to_all"):
        t = (n - 1) / n * s / bw_bytes_per_s + (n - 1) * alpha_s
    elif kind == "p2p":
        t = s / bw_bytes_per_s + alpha_s
    else:
        raise ValueError(f"collective {kind!r}; allowed: {COLLECTIVES}")
    return np.where(n > 1, t, 0.0)
