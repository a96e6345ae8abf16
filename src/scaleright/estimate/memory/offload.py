"""Offload to host memory: what leaves the GPU, over which link, and how fast the host runs what moved there.

Optimizer offload is ZeRO-Offload (Ren et al. 2021, "ZeRO-Offload: Democratizing Billion-Scale Model Training",
USENIX ATC '21; DeepSpeed ``offload_optimizer``, ZeRO stage >= 1): the fp32 master weights, the optimizer's moments
and the gradients live in host memory and the optimizer step runs on the CPU (CPU-Adam); the GPU keeps the 16-bit
parameters and runs forward and backward. Per step each GPU sends its gradient partition down over PCIe as
backward produces it (DeepSpeed copies it every micro-batch and accumulates on the host) and, after the CPU step,
receives its updated 16-bit parameter partition back (the paper's 2M + 2M bytes of PCIe traffic for M parameters
on one GPU, 1/N of that per GPU of an N-way data-parallel group). The one-step delayed update (DPU) that hides the
CPU step behind the next step is not modelled: the step waits for the CPU.

Activation offload copies the activations each layer saves for backward to host memory during forward and back
during backward, overlapped with compute (Megatron-Core / TransformerEngine CPU offloading, PyTorch
``save_on_cpu``; DeepSpeed's ``cpu_checkpointing`` for the checkpointed inputs): the GPU holds
``OFFLOAD_BUFFER_LAYERS`` layers' worth (the one computing and the one in transfer) instead of every layer of every
in-flight micro-batch.

The host link is the accelerator's PCIe generation in the catalog (``Accelerator.pcie_gen``; x16 per-direction
rates from PCI-SIG) at the fraction of it that host/device copies reach (``HOST_COPY_EFFICIENCY``, measured); a
part the catalog lists without a host link (NVLink-C2C superchips, TPUs, Trainium) is not offered offload. The CPU
step runs at the host's DRAM bandwidth, a field of the system (``System.host``, ``catalog/data/systems.yaml``: e.g.
409.6 GB/s for a DGX A100's two EPYC 7742, 614.4 for a DGX H100's two Xeon 8480C; a system that states none gets
``systems.DEFAULT_HOST_MEMORY``, marked ``basis: default``), shared by the host's GPUs. This module holds the memory
side (``resident_states``, ``resident_activations``) and the link and host figures the step model
(``estimate.train``) costs the traffic with.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.catalog.gpus import PCIE_X16_GB_PER_S

if TYPE_CHECKING:
    from scaleright.catalog.gpus import Accelerator
    from scaleright.catalog.systems import System

__all__ = ["HOST_COPY_EFFICIENCY", "OFFLOAD_BUFFER_LAYERS", "host_link_bytes_per_s", "host_memory_bytes_per_s_per_gpu",
           "resident_activations", "resident_states"]  # fmt: skip

# Host<->device copies reach this fraction of the x16 rate: the median of the PCIe H2D / D2H rows of
# validation/reference/components/pcie_p2p.csv (nvbandwidth / TransferBench, H2D / D2H: H200 node 88.0 / 87.4 %,
# Azure H100 81.0 / 82.5 %, Azure H200 82.5 / 82.5 %, Azure A100 H2D 84.8 %, Azure MI300X 87.3 / 88.9 %; the Azure
# A100 D2H row, 20 %, is left out as that VM's anomaly).
HOST_COPY_EFFICIENCY = 0.848
OFFLOAD_BUFFER_LAYERS = 2  # layers of activations kept on the GPU under activation offload (double buffering)


def host_link_bytes_per_s(gpu: Accelerator) -> float | None:
    """Achieved host<->device bandwidth per direction of one GPU (B/s), or None when the catalog gives no host
    link (``pcie_gen``) for it: offload cannot be costed there."""
    gen = gpu.pcie_gen
    if gen is None or gen not in PCIE_X16_GB_PER_S:
        return None
    return PCIE_X16_GB_PER_S[gen] * 1e9 * HOST_COPY_EFFICIENCY


def host_memory_bytes_per_s_per_gpu(system: System) -> float:
    """Host DRAM bandwidth (B/s) one GPU's CPU optimizer step gets: the host's (``System.host``) shared by its
    ``gpus_per_node`` GPUs, whose steps run at once. CPU-Adam is bound by memory bandwidth (Ren et al. 2021, section
    5.1); at a peak figure (``basis: peak``) the step time is a lower bound."""
    return system.host.gb_per_s * 1e9 / system.gpus_per_node


def resident_states(weights: ArrayLike, grads: ArrayLike, opt: ArrayLike, offload_optimizer: ArrayLike, *,
                    fp32_master_weights: bool) -> tuple[NDArray[np.float64], NDArray[np.float64],
                                                        NDArray[np.float64]]:  # fmt: skip
    """(weights, gradients, optimizer) bytes left on the GPU where ``offload_optimizer`` holds: the 16-bit
    parameters only (ZeRO-Offload). Where the format's persistent weights are the fp32 master itself
    (``fp32_master_weights``: FSDP2), the master moves to the host and a 16-bit copy of the shard stays."""
    on = np.asarray(offload_optimizer, dtype=bool)
    w = np.asarray(weights, dtype=float)
    if fp32_master_weights:
        w = np.where(on, w / 2.0, w)
    zero = np.zeros(np.broadcast(w, on).shape)
    return (w + zero, np.where(on, 0.0, np.asarray(grads, dtype=float)) + zero,
            np.where(on, 0.0, np.asarray(opt, dtype=float)) + zero)  # fmt: skip


def resident_activations(stored: ArrayLike, per_layer: ArrayLike, offload_activations: ArrayLike
                         ) -> NDArray[np.float64]:  # fmt: skip
    """Saved activations left on the GPU: ``stored`` (every layer of every in-flight micro-batch), or, where
    ``offload_activations`` holds, at most ``OFFLOAD_BUFFER_LAYERS`` layers of ``per_layer`` bytes."""
    s = np.asarray(stored, dtype=float)
    cap = OFFLOAD_BUFFER_LAYERS * np.asarray(per_layer, dtype=float)
    return np.asarray(np.where(np.asarray(offload_activations, dtype=bool), np.minimum(s, cap), s))
