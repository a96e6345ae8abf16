"""The system a job runs on (``system_of``), and the older α–β ``Cluster`` kept for callers that still pass one.

The training and inference estimators cost every collective with ``scaleright.estimate.collectives`` (measured
nccl-tests bus bandwidth on the tiers of a ``catalog.systems.System``). ``system_of`` finds that system: the
catalog's system for the accelerator (``system_for``), with a ``Cluster``'s or the caller's overrides, or, for an
accelerator no built-in system lists (a user catalog entry), a two-tier system derived from its ``intra_node_*`` and
``nic_*`` fields.

The rest of this module is the legacy α–β model (``Cluster``, ``group_bandwidth``, ``collective_time_s`` with the
``Calibration`` link efficiencies); the estimators no longer use it.

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

import dataclasses
import functools
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.catalog.systems import System, Tier, system_for
from scaleright.errors import UnknownNameError
from scaleright.estimate.calibration import Calibration
from scaleright.estimate.collectives import CollectiveFits, FabricFit

if TYPE_CHECKING:
    from scaleright.catalog.gpus import Accelerator

__all__ = ["Cluster", "collective_time_s", "group_bandwidth", "COLLECTIVES", "system_of", "scaled_fits"]

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


# the tier kind of an accelerator's ``intra_node_link`` catalog field, for systems derived from it
_KIND_OF_LINK = {"nvlink": "nvswitch", "pcie": "pcie-p2p", "infinity-fabric": "xgmi", "ici": "ici",
                 "neuronlink": "neuronlink", "roce": "roce-mesh"}  # fmt: skip


def _derived_system(gpu: Accelerator, gpus_per_node: int | None, nic_gbps_per_gpu: float | None,
                    intra_node_gb_per_s: float | None) -> System:  # fmt: skip
    """A two-tier system from ``gpu``'s catalog fields: its intra-node link over ``gpus_per_node`` GPUs, then one NIC
    per GPU."""
    g = gpus_per_node or gpu.gpus_per_node
    inner = Tier(kind=_KIND_OF_LINK.get(gpu.intra_node_link, "pcie-p2p"), domain_gpus=g,
                 bandwidth_gb_per_s=intra_node_gb_per_s or gpu.intra_node_gb_per_s_per_gpu, derived=True,
                 source=f"derived from {gpu.id} intra_node_link / intra_node_gb_per_s_per_gpu")  # fmt: skip
    nic = Tier(kind="infiniband", bandwidth_gb_per_s=(nic_gbps_per_gpu or gpu.nic_gbps_per_gpu) / 8.0, derived=True,
               source=f"derived from {gpu.id} nic_gbps_per_gpu")  # fmt: skip
    return System(id="derived", name=f"{gpu.id} (derived from its catalog fields)", accelerators=[gpu.id],
                  gpus_per_node=g, tiers=[inner, nic], source="derived")  # fmt: skip


def system_of(gpu: Accelerator, *, system: System | str | None = None, cluster: Cluster | None = None,
              gpus_per_node: int | None = None, nic_gbps_per_gpu: float | None = None,
              p2p: bool | None = None) -> System:  # fmt: skip
    """The ``System`` a job on ``gpu`` runs on.

    ``system``: a ``System`` (returned as is) or a built-in system id; None: the accelerator's default system.
    ``cluster``: a legacy ``Cluster``; the fields where it differs from ``Cluster.for_gpu(gpu)`` become overrides.
    ``gpus_per_node``, ``nic_gbps_per_gpu`` (Gb/s per GPU) and ``p2p`` are overrides (``system_for``).
    """
    if isinstance(system, System):
        return system
    intra = None
    if cluster is not None:
        typical = Cluster.for_gpu(gpu)
        if cluster.gpus_per_node != typical.gpus_per_node:
            gpus_per_node = gpus_per_node or cluster.gpus_per_node
        if cluster.inter_node_gbps_per_gpu != typical.inter_node_gbps_per_gpu:
            nic_gbps_per_gpu = nic_gbps_per_gpu or cluster.inter_node_gbps_per_gpu
        if cluster.intra_node_gb_per_s != typical.intra_node_gb_per_s:
            intra = cluster.intra_node_gb_per_s
    try:
        return system_for(gpu.id, system=system, gpus_per_node=gpus_per_node, nic_gbps_per_gpu=nic_gbps_per_gpu,
                          intra_node_gb_per_s=intra, p2p=p2p)  # fmt: skip
    except UnknownNameError:
        if system is not None:
            raise
        return _derived_system(gpu, gpus_per_node, nic_gbps_per_gpu, intra)


@functools.cache
def _scaled(bandwidth: float, latency: float) -> CollectiveFits:
    base = CollectiveFits.builtin()

    def one(f: FabricFit) -> FabricFit:
        mul = {k: getattr(f, k) * bandwidth for k in ("eta", "ll_eta", "nvls_eta") if getattr(f, k) is not None}
        mul |= {k: getattr(f, k) * latency for k in ("alpha_us", "ll_alpha_us", "nvls_alpha_us")
                if getattr(f, k) is not None}  # fmt: skip
        return dataclasses.replace(f, **mul)

    return dataclasses.replace(base, fabrics=MappingProxyType({k: one(f) for k, f in base.fabrics.items()}))


def scaled_fits(cal: Calibration) -> CollectiveFits:
    """The built-in collective fits with ``cal``'s ``collective_bandwidth_scale`` and ``collective_latency_scale``
    applied to every fabric (the built-in object itself when both are 1)."""
    if cal.collective_bandwidth_scale == 1.0 and cal.collective_latency_scale == 1.0:
        return CollectiveFits.builtin()
    return _scaled(float(cal.collective_bandwidth_scale), float(cal.collective_latency_scale))
