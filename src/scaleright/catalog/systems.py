"""A system as the collective model sees it: an ordered list of network tiers, innermost first.

A ``Tier`` is one fabric level: the NVLink/NVSwitch domain (8 GPUs on HGX, 72 on NVL72), an Infinity Fabric mesh,
PCIe with or without peer-to-peer (GeForce cards without P2P stage every transfer through host memory), a TPU ICI
torus, or the NICs between nodes (InfiniBand, RoCE, EFA, Ethernet). Each has the number of GPUs one domain of it
reaches, the one-direction bandwidth of one link, and how many GPUs share that link (``shared_by_gpus``: 1 for
rail-optimised NICs, one per GPU; 8 for one NIC in an 8-GPU box; 0.5 for two NICs per GPU). A ``System`` is the
host size (GPUs sharing one host's NICs) and its tiers; it knows nothing of models, layouts or prices, and the
``Accelerator`` keeps chip facts only. Every tier carries its source; tiers built from an accelerator's
``intra_node_*`` / ``nic_*`` catalog fields where no better source exists say ``derived: true``.

A system also carries its host memory (``HostMemory``): the DRAM bandwidth of one host, shared by its GPUs. It
times what runs on or passes through the host: the CPU optimizer step of ZeRO-Offload and the host-staged copies of
PCIe without peer-to-peer. A peak figure is derived as ``sockets x channels_per_socket x MT/s x 8 B`` (a 64-bit DDR
channel moves 8 bytes per transfer) and the validator checks the product; a measured figure (Grace's LPDDR5X, STREAM)
says so in ``basis``. ``assumed: true`` marks a host whose CPU no source of the system states (a typical server of
the GPU's generation, named in ``notes``). A system without ``host_memory`` (TPU, Trainium and Inferentia hosts,
whose CPUs are not published with the system) gets ``DEFAULT_HOST_MEMORY``, explicitly: ``System.host`` returns it
with ``basis: default`` and its source says why, so an output can print it as assumed.

Built-in systems: ``data/systems.yaml``; the first system that lists an accelerator is its default
(``system_for``). Units are in the field names and converted to SI by the collective model (1 GB = 1e9 B).
"""

from __future__ import annotations

import functools
import itertools
from importlib.resources import files
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from scaleright.catalog.store import _read_yaml_list, _validate
from scaleright.errors import InputError, UnknownNameError

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

__all__ = ["DEFAULT_HOST_MEMORY", "FABRIC_OF_KIND", "TIER_KINDS", "HostMemory", "System", "Tier", "list_systems",
           "peak_gb_per_s", "system_for"]

TIER_KINDS = ("nvswitch", "nvlink", "xgmi", "neuronlink", "ici", "roce-mesh", "pcie-p2p", "pcie-host",
              "infiniband", "roce", "efa", "ethernet")  # fmt: skip
TierKind = Literal["nvswitch", "nvlink", "xgmi", "neuronlink", "ici", "roce-mesh", "pcie-p2p", "pcie-host",
                   "infiniband", "roce", "efa", "ethernet"]  # fmt: skip
SCALE_OUT_KINDS = ("infiniband", "roce", "efa", "ethernet")  # NICs: the tier between hosts

# The fabric whose fitted efficiency and latency (data/collective_fits.yaml) a tier kind uses. InfiniBand, RoCE
# and Ethernet NICs share one family ("nic": each kind alone has too few sources); AWS EFA (SRD through libfabric)
# is its own, for its latency is an order of magnitude higher (collectives.csv: ~400 µs vs ~40 µs small all-reduce).
FABRIC_OF_KIND = {
    "nvswitch": "nvswitch", "nvlink": "nvswitch", "xgmi": "xgmi", "neuronlink": "neuronlink", "ici": "ici",
    "roce-mesh": "nic", "pcie-p2p": "pcie-p2p", "pcie-host": "pcie-host",
    "infiniband": "nic", "roce": "nic", "efa": "efa", "ethernet": "nic",
}  # fmt: skip


class Tier(BaseModel):
    """One fabric level of a system. Unknown keys are an error."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, defer_build=True)

    kind: TierKind
    domain_gpus: int | None = Field(default=None, ge=1)  # GPUs one domain of this tier joins; None: unbounded
    bandwidth_gb_per_s: float = Field(gt=0)  # one direction, one link (a GPU's NVLink total; one NIC), 1e9 B/s
    shared_by_gpus: float = Field(default=1.0, gt=0)  # GPUs sharing one link (NICs per host vs GPUs per host)
    peer_link_gb_per_s: float | None = Field(default=None, gt=0)  # full mesh: one direction to each peer
    torus_dims: list[int] | None = None  # ICI / NeuronLink torus extent per axis (product = domain_gpus)
    in_network_reduction: bool = False  # NVLS (NVSwitch gen 3+) or SHARP: the switch adds, all-reduce halves
    latency_us: float | None = Field(default=None, gt=0)  # measured one-hop latency here; None: fitted α
    derived: bool = False  # built from the accelerator's catalog fields, not from a system source
    source: str  # where bandwidth, domain and sharing were read
    notes: str = ""

    @model_validator(mode="after")
    def _shape(self) -> Tier:
        if self.torus_dims is not None:
            prod = 1
            for d in self.torus_dims:
                if d < 1:
                    raise ValueError(f"torus_dims {self.torus_dims}: every axis must be >= 1")
                prod *= d
            if self.domain_gpus is not None and prod != self.domain_gpus:
                raise ValueError(f"torus_dims {self.torus_dims} multiply to {prod}, not domain_gpus={self.domain_gpus}")
        if self.kind in SCALE_OUT_KINDS and self.domain_gpus is not None:
            raise ValueError(f"kind {self.kind} is a NIC tier between hosts: domain_gpus must be empty (unbounded)")
        return self

    @property
    def fabric(self) -> str:
        """The fitted-parameter family of this tier (``FABRIC_OF_KIND``)."""
        return FABRIC_OF_KIND[self.kind]

    @property
    def scale_out(self) -> bool:
        return self.kind in SCALE_OUT_KINDS


class HostMemory(BaseModel):
    """DRAM bandwidth of one host (all its sockets), GB/s (1e9 B/s). Unknown keys are an error.

    ``basis``: ``peak`` (derived: ``sockets x channels_per_socket x mt_per_s x 8 B``, all three given and checked),
    ``measured`` (a benchmark such as STREAM, below the peak), ``override`` (given by the user), or ``default``
    (``DEFAULT_HOST_MEMORY``: the system states none).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, defer_build=True)

    gb_per_s: float = Field(gt=0)
    basis: Literal["peak", "measured", "override", "default"]
    memory: str = ""  # e.g. DDR5-4800, LPDDR5X
    sockets: int | None = Field(default=None, ge=1)
    channels_per_socket: int | None = Field(default=None, ge=1)
    mt_per_s: int | None = Field(default=None, ge=1)  # transfers per second of one channel, millions
    assumed: bool = False  # no source of the system names its CPU: a typical host of the GPU's generation
    source: str
    notes: str = ""

    @model_validator(mode="after")
    def _derivation(self) -> HostMemory:
        parts = (self.sockets, self.channels_per_socket, self.mt_per_s)
        if self.basis == "peak":
            if any(p is None for p in parts):
                raise ValueError("a peak host_memory needs sockets, channels_per_socket and mt_per_s (its derivation)")
            want = peak_gb_per_s(*parts)  # type: ignore[arg-type]
            if abs(self.gb_per_s - want) > 1e-6 * want:
                raise ValueError(f"gb_per_s={self.gb_per_s} but {self.sockets} sockets x {self.channels_per_socket} "
                                 f"channels x {self.mt_per_s} MT/s x 8 B = {want:g} GB/s")  # fmt: skip
        return self

    @property
    def derivation(self) -> str:
        """How the figure was obtained, in one line (``2 x 8 x DDR5-4800 x 8 B = 614.4 GB/s (peak)``)."""
        if self.basis == "peak":
            return (f"{self.sockets} x {self.channels_per_socket} x {self.memory or f'{self.mt_per_s} MT/s'} x 8 B = "
                    f"{self.gb_per_s:g} GB/s (peak{', assumed host' if self.assumed else ''})")  # fmt: skip
        return f"{self.gb_per_s:g} GB/s ({self.basis}{', assumed host' if self.assumed else ''}): {self.source}"


def peak_gb_per_s(sockets: int, channels_per_socket: int, mt_per_s: int) -> float:
    """Peak DRAM bandwidth (GB/s) of ``sockets`` x ``channels_per_socket`` 64-bit channels at ``mt_per_s`` MT/s."""
    return sockets * channels_per_socket * mt_per_s * 8 / 1000.0


# The host memory of a system that states none: two sockets of eight DDR5-4800 channels, the host of a DGX H100
# (two Xeon Platinum 8480C), the figure every host was given before host memory became system data. Constructed
# without validation, so that importing this module builds no validator (``defer_build``): the values are constants
# that satisfy every field's bounds, and tests/test_systems.py validates them.
DEFAULT_HOST_MEMORY = HostMemory.model_construct(
    gb_per_s=614.4, basis="default", memory="DDR5-4800", sockets=2, channels_per_socket=8, mt_per_s=4800,
    assumed=True, source="scaleright default (the system states no host memory): 2 x 8 x DDR5-4800 x 8 B, "
    "a DGX H100's two Xeon Platinum 8480C; override: system_for(..., host_memory_gb_per_s=...)")  # fmt: skip


class System(BaseModel):
    """A machine type: host size and network tiers, innermost first. Unknown keys are an error."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, defer_build=True)

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    name: str
    accelerators: list[str] = Field(min_length=1)  # catalog GPU ids this system applies to
    gpus_per_node: int = Field(ge=1)  # GPUs of one host, sharing its NICs
    tiers: list[Tier] = Field(min_length=1)  # innermost first; a NIC tier, if any, is last
    host_memory: HostMemory | None = None  # DRAM of one host; None: DEFAULT_HOST_MEMORY (see ``host``)
    source: str
    notes: str = ""

    @model_validator(mode="after")
    def _order(self) -> System:
        sizes = [t.domain_gpus for t in self.tiers]
        for i, t in enumerate(self.tiers):
            if t.scale_out and i != len(self.tiers) - 1:
                raise ValueError(f"tier {i} ({t.kind}) is a NIC tier: it must be the last one")
            if t.domain_gpus is None and i != len(self.tiers) - 1:
                raise ValueError(f"tier {i} ({t.kind}) has no domain_gpus: only the last tier may be unbounded")
        bounded = [s for s in sizes if s is not None]
        if any(b <= a for a, b in itertools.pairwise(bounded)):
            raise ValueError(f"domain_gpus {sizes} must grow strictly from the innermost tier out")
        if self.tiers[0].domain_gpus is not None and self.tiers[0].domain_gpus % self.gpus_per_node and \
                self.gpus_per_node % self.tiers[0].domain_gpus:  # fmt: skip
            raise ValueError(f"innermost domain_gpus={self.tiers[0].domain_gpus} and gpus_per_node="
                             f"{self.gpus_per_node}: one must divide the other")  # fmt: skip
        return self

    @property
    def host(self) -> HostMemory:
        """The host memory of one host: ``host_memory``, or ``DEFAULT_HOST_MEMORY`` (``basis: default``)."""
        return self.host_memory if self.host_memory is not None else DEFAULT_HOST_MEMORY

    @property
    def nic(self) -> Tier | None:
        """The tier between hosts, or None when the system is one domain (no NICs modelled)."""
        return self.tiers[-1] if self.tiers[-1].scale_out else None


@functools.cache
def _builtin() -> tuple[System, ...]:
    from scaleright.catalog.cache import cached_entries

    path = files("scaleright.catalog") / "data" / "systems.yaml"
    return cached_entries("systems", path, System, lambda: _parse(path))


def _parse(path: Traversable) -> tuple[System, ...]:
    out = [_validate(System, d, path, str(d.get("id", f"entry {i + 1}")) if isinstance(d, dict) else f"entry {i + 1}")
           for i, d in enumerate(_read_yaml_list(path))]  # fmt: skip
    ids = [s.id for s in out]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise InputError(f"{path}: system id(s) {dup} appear more than once")
    return tuple(out)


def list_systems() -> list[System]:
    """Every built-in system, in file order."""
    return list(_builtin())


def system_for(gpu_id: str, *, system: str | None = None, gpus_per_node: int | None = None,
               intra_node_gb_per_s: float | None = None, nic_gbps_per_gpu: float | None = None,
               p2p: bool | None = None, host_memory_gb_per_s: float | None = None) -> System:  # fmt: skip
    """The system of ``gpu_id`` (a catalog id): the named ``system``, else the first one listing it; with overrides.

    ``gpus_per_node`` sets the host size (and the innermost domain where it equals the host); ``intra_node_gb_per_s``
    the innermost tier's bandwidth; ``nic_gbps_per_gpu`` the NIC tier as one rail per GPU of that speed (Gb/s, as
    NICs are sold); ``p2p`` switches a PCIe innermost tier between peer-to-peer and host-staged;
    ``host_memory_gb_per_s`` the DRAM bandwidth of one host (``basis: override``).
    """
    systems = _builtin()
    if system is not None:
        found = [s for s in systems if s.id == system]
        if not found:
            raise UnknownNameError("system", system, [s.id for s in systems])
        sysm = found[0]
        if gpu_id not in sysm.accelerators:
            raise InputError(f"system {system} does not apply to GPU {gpu_id}; it applies to {sysm.accelerators}")
    else:
        found = [s for s in systems if gpu_id in s.accelerators]
        if not found:
            raise UnknownNameError("GPU with a system", gpu_id, sorted({a for s in systems for a in s.accelerators}))
        sysm = found[0]
    if all(x is None for x in (gpus_per_node, intra_node_gb_per_s, nic_gbps_per_gpu, p2p, host_memory_gb_per_s)):
        return sysm.model_copy(deep=True)  # the built-in entry, validated when it was parsed: a copy of its own
    tiers = list(sysm.tiers)
    inner = tiers[0]
    if gpus_per_node is not None:
        if gpus_per_node < 1:
            raise InputError(f"gpus_per_node={gpus_per_node}: must be >= 1")
        if inner.domain_gpus == sysm.gpus_per_node:
            inner = inner.model_copy(update={"domain_gpus": gpus_per_node})
    if intra_node_gb_per_s is not None:
        if intra_node_gb_per_s <= 0:
            raise InputError(f"intra_node_gb_per_s={intra_node_gb_per_s}: must be > 0")
        inner = inner.model_copy(update={"bandwidth_gb_per_s": intra_node_gb_per_s, "peer_link_gb_per_s": None})
    if p2p is not None:
        if inner.kind not in ("pcie-p2p", "pcie-host"):
            raise InputError(f"p2p={p2p}: the innermost tier of {sysm.id} is {inner.kind}, not PCIe")
        inner = inner.model_copy(update={"kind": "pcie-p2p" if p2p else "pcie-host"})
    tiers[0] = inner
    if nic_gbps_per_gpu is not None:
        if nic_gbps_per_gpu <= 0:
            raise InputError(f"nic_gbps_per_gpu={nic_gbps_per_gpu}: must be > 0")
        nic = sysm.nic
        base = nic if nic is not None else Tier(kind="ethernet", bandwidth_gb_per_s=1.0, source="override")
        new = base.model_copy(update={"bandwidth_gb_per_s": nic_gbps_per_gpu / 8.0, "shared_by_gpus": 1.0,
                                      "source": f"override: {nic_gbps_per_gpu} Gb/s per GPU"})  # fmt: skip
        tiers = [*tiers[:-1], new] if nic is not None else [*tiers, new]
    update: dict[str, object] = {"tiers": tiers}
    if host_memory_gb_per_s is not None:
        if not host_memory_gb_per_s > 0 or host_memory_gb_per_s == float("inf"):
            raise InputError(f"host_memory_gb_per_s={host_memory_gb_per_s}: must be a finite number > 0 (GB/s)")
        update["host_memory"] = HostMemory(gb_per_s=host_memory_gb_per_s, basis="override",
                                           source=f"override: {host_memory_gb_per_s} GB/s per host")  # fmt: skip
    if gpus_per_node is not None:
        update["gpus_per_node"] = gpus_per_node
    out = sysm.model_copy(update=update)
    return System.model_validate(out.model_dump())  # re-check the ordering rules after the overrides
