"""Time of one collective on the tiers its group spans, from measured nccl-tests bus bandwidth (issue #9).

Inputs are separate (STYLE habit 2): the collective (kind, message bytes ``S``), the group's placement (``size``
ranks ``stride`` apart, Megatron-style, and how many groups of the same shape communicate at once on a host), the
``System`` (tiers innermost first, ``scaleright.catalog.systems``) and the fitted per-fabric parameters
(``data/collective_fits.yaml``, written by ``validation/collectives_fit.py`` from
``validation/reference/components/collectives.csv`` and ``pcie_p2p.csv``; the product only reads the file).

Bus bandwidth (nccl-tests ``doc/PERFORMANCE.md``): ``busbw = algbw · f`` with ``algbw = S / t`` and
``f = 2(n−1)/n`` (all-reduce), ``(n−1)/n`` (all-gather, reduce-scatter, all-to-all), ``1`` (broadcast, send/recv).
``S`` is the whole buffer (all-gather: the gathered output; reduce-scatter: the input). ``busbw`` is the per-rank
link rate a ring needs, so it is comparable with the link's spec; the model predicts it as

    t(S) = α_total + S · f / B,      busbw(S) = B / (1 + α_total · B / (S · f)),

rising with ``S`` and saturating at ``B`` (the α–β model, Hockney 1994; Thakur, Rabenseifner & Gropp 2005).

Placement. Members of a group inside one domain of tier ``i``: ``m_i = min(n, max(1, D_i // stride))`` (``D`` the
tier's ``domain_gpus``; the last tier is unbounded, ``m = n``). The group uses tier ``i`` when ``m_i > m_{i−1}``
(``m_{−1} = 1``).

Bandwidth ``B`` of a ring (NCCL builds one ring channel per link that crosses a boundary) is the slowest tier the
group uses: ``B = min_i m_{i−1} · b_i · η(fabric_i)``: every one of the ``m_{i−1}`` members of an inner domain
carries its share of the ring across tier ``i`` on its own link. ``b_i`` per GPU:

- switch or point-to-point link (NVSwitch, NVLink, PCIe): the tier's ``bandwidth_gb_per_s``;
- full mesh (xGMI, Gaudi RoCE): ``min(bandwidth, (m_i − 1) · peer_link)``: a GPU reaches each peer on one link;
- torus (ICI, NeuronLink): ``bandwidth · a / d``: a chip's links split evenly over its ``d`` axes and a group that
  spans ``a`` of them (in order, ``size · stride`` against the cumulative extents) uses those;
- NICs, shared by the host's GPUs that cross them at once: ``q = min(G, m_host · c)`` GPUs of a host of ``G`` (``c``
  groups of this shape; by default every GPU of the host communicates) share ``G / shared_by`` links, each GPU
  reaching at most ``max(1, 1/shared_by)`` of them: ``b = bandwidth · min(max(1, 1/shared_by), G / (shared_by·q))``.
  A DP/FSDP group holding all 8 GPUs of each 8-rail node therefore gets one rail per GPU; its ring still shows a
  busbw of up to 8 rails, because each GPU carries only 1/8 of the ring's inter-node traffic (multi-node rows of
  collectives.csv: 381.8 GB/s on 4 B200 nodes and 369 GB/s on 2 MI355X nodes, each with 8 × 50 GB/s NICs).
- PCIe without peer-to-peer (``pcie-host``): the same link, at the fitted host-staged fraction (P2P-disabled rows
  of ``pcie_p2p.csv``: every transfer is a device-to-host then host-to-device copy), and never more than the host's
  DRAM allows: each staged byte is written to host memory once and read once, and the ``q`` GPUs of the host that
  stage at once (counted as for NICs) share its bandwidth ``H`` (``System.host``): ``b·η ≤ H / (2q)`` per GPU.
  (Intel DDIO can land part of a staging buffer in the last-level cache; the bound assumes DRAM.)

``η`` is the achieved fraction of the link spec, fitted per fabric. Two NCCL protocols are modelled: Simple
(``η``, ``α``) and LL (low latency: ``η_LL``, ``α_LL``, lower latency and bandwidth), and NCCL takes the faster
one at each size (NCCL's tuning model, ``src/graph/tuning.cc``, has a latency and a bandwidth per algorithm and
protocol). Fabrics without small-message rows have no LL pair and borrow ``α`` (the fit file says so).

Algorithms (``algorithm="auto"`` takes the fastest of ring, tree and NVLS, as NCCL's tuner does):

- ring: NCCL pipelines chunks around the ring, so a chunk's latency is the sum of the hop latencies on its way:
  ``α_total = passes · Σ_i h_i · α_i`` with ``h_i = n/m_{i−1} − n/m_i`` ring hops that cross tier ``i``
  (``Σ h_i = n − 1``) and ``passes = 2`` for all-reduce (reduce-scatter then all-gather), 1 for all-gather,
  reduce-scatter, broadcast and all-to-all; send/recv pays the outermost tier's α once (NCCL's tuner model:
  intra-node hops at the intra latency, ``nNodes − 1`` hops at the network's): latency ∝ n. On a torus
  (ICI, NeuronLink) the collective runs one ring per axis in turn: ``h = Σ_j (extent_j − 1)`` over the axes the
  group covers;
- tree (all-reduce and broadcast of groups that span more than one domain; NCCL's double binary tree between
  nodes, a chain inside one, Sanders, Speck & Träff 2009): hops ``m_0 − 1`` on the innermost tier used and
  ``⌈log2(m_i / m_{i−1})⌉`` on each outer one, twice for all-reduce (reduce then broadcast): latency ∝ log n. A
  double binary tree moves the same bytes per node as a ring, but NCCL's reaches a lower fraction of it: its
  bandwidth is ``tree_ratio · B`` with ``tree_ratio`` fitted on the outermost tier's fabric (the multi-node rows
  switch from tree to ring between 16 and 512 MiB, where the ring's latency stops dominating);
- NVLS (all-reduce inside one NVSwitch domain with in-network reduction, H100 and later): each GPU sends and
  receives ``S`` once, the switch adds: ``t = α_NVLS + S / (η_NVLS · b)``; its busbw can exceed the link spec
  (``f = 2(n−1)/n`` against one transfer of ``S``), as the NVLS rows do (480 GB/s on 450 GB/s links).
- hierarchical (all-reduce of a group that spans more than one domain, ``g`` members in each domain just inside the
  outermost tier it uses): reduce-scatter inside (ring on ``g``), all-reduce of ``S/g`` across the ``n/g`` domains
  (each GPU on its own link, the best of ring and tree), all-gather inside, one phase after the other (Thakur et
  al. 2005; Horovod's and NCCL CollNet's two-level schedules). Its NIC bytes per GPU are ``2(k−1)/k · S/g`` against
  the flat ring's ``2(n−1)/n · S/g``, so it can win for few nodes when the intra-node phases are cheap; NCCL's flat
  ring, pipelined across every tier, wins for many nodes. NCCL does not choose it (the multi-node rows of
  collectives.csv are rings and trees, and letting ``auto`` take it worsens the RoCE fit from 9 % to 13 %), so
  ``auto`` picks among ring, tree and NVLS as NCCL's tuner does, and ``algorithm="hierarchical"`` asks for it.

Send/recv (a pipeline or context-parallel hop) is one pair of GPUs: ``B = min_i b_i · η_i`` over the tiers the
group spans, without the ``m_{i−1}`` channels of a ring, and latency the largest ``α`` once.

All-to-all is not a ring: every rank sends ``S/n`` to each peer, so the bytes crossing tier ``i`` per GPU are
``S · (m_i − m_{i−1}) / n`` on its own link: ``t = Σ_i h_i·α_i + max_i S·(m_i − m_{i−1}) / (n · b_i · η_i)``.

``size == 1`` costs nothing. Every function takes scalars or numpy arrays (broadcast together).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.resources import files
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.catalog.systems import System, Tier
from scaleright.errors import InputError
from scaleright.textfile import read_text

__all__ = ["ALGORITHMS", "COLLECTIVE_KINDS", "CollectiveCost", "CollectiveFits", "FabricFit", "bus_factor",
           "collective_cost", "collective_time_s"]  # fmt: skip

COLLECTIVE_KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p", "broadcast")
ALGORITHMS = ("auto", "ring", "tree", "nvls", "hierarchical")


@dataclass(frozen=True)
class FabricFit:
    """Fitted parameters of one fabric family (see ``data/collective_fits.yaml``)."""

    eta: float  # Simple protocol: achieved fraction of the link's one-direction spec
    alpha_us: float  # Simple protocol: latency of one algorithm step (µs)
    ll_eta: float | None = None  # LL protocol fraction; None: the fabric has no small-message rows
    ll_alpha_us: float | None = None  # LL protocol step latency (µs)
    nvls_eta: float | None = None  # NVLS: achieved fraction of the link for one transfer of S
    nvls_alpha_us: float | None = None  # NVLS latency (µs), once per collective
    tree_ratio: float | None = None  # tree bandwidth / ring bandwidth when the group spans this tier; None: 1
    status: str = "fitted"  # fitted | borrowed from <fabric> (no measured rows)


@dataclass(frozen=True)
class CollectiveFits:
    """Per-fabric parameters, as written by ``validation/collectives_fit.py``."""

    fabrics: Mapping[str, FabricFit]
    rows_sha256: str = ""
    fitted_on: str = ""
    meta: Mapping[str, object] = field(default_factory=dict)

    def fabric(self, name: str) -> FabricFit:
        if name not in self.fabrics:
            raise InputError(f"fabric {name!r} has no fitted parameters; known: {', '.join(self.fabrics)}")
        return self.fabrics[name]

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> CollectiveFits:
        fabrics = {}
        for name, entry in data["fabrics"].items():
            params = {k: (v["value"] if isinstance(v, dict) else v) for k, v in entry["params"].items()}
            fabrics[name] = FabricFit(**params, status=entry.get("status", "fitted"))
        return cls(MappingProxyType(fabrics), str(data.get("rows_sha256", "")), str(data.get("fitted_on", "")),
                   MappingProxyType({k: v for k, v in data.items() if k != "fabrics"}))  # fmt: skip

    @classmethod
    @functools.cache
    def builtin(cls) -> CollectiveFits:
        """The package's ``data/collective_fits.yaml``."""
        from scaleright.catalog.cache import cached_data

        path = files("scaleright.catalog") / "data" / "collective_fits.yaml"

        def parse() -> dict[str, Any]:  # package data: libyaml's C parser where PyYAML has it
            import yaml

            loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
            return yaml.load(read_text(path), Loader=loader)  # type: ignore[no-any-return]

        # the parsed file from the catalog cache (keyed by its bytes): an estimate imports no YAML library
        return cls.from_mapping(cached_data("collective_fits", path, parse))


def bus_factor(kind: str, n: ArrayLike) -> NDArray[np.float64]:
    """nccl-tests busbw / algbw for ``kind`` on ``n`` ranks (doc/PERFORMANCE.md)."""
    r = np.asarray(n, dtype=np.float64)  # ranks (a new name: mypy keeps the float64 dtype)
    if kind == "all_reduce":
        return 2.0 * (r - 1.0) / r
    if kind in ("all_gather", "reduce_scatter", "all_to_all"):
        return (r - 1.0) / r
    if kind in ("p2p", "broadcast"):
        return np.ones_like(r)
    raise InputError(f"collective {kind!r}; allowed: {', '.join(COLLECTIVE_KINDS)}")


@dataclass(frozen=True)
class CollectiveCost:
    """One collective's time and what set it (arrays, broadcast over the inputs)."""

    time_s: np.ndarray  # seconds; 0 where size == 1
    busbw_gb_per_s: np.ndarray  # nccl-tests bus bandwidth the model predicts (1e9 B/s); 0 where size == 1
    algorithm: np.ndarray  # "ring", "tree", "nvls" or "none" (size 1)
    nic_gb_per_s_per_gpu: np.ndarray  # NIC spec bandwidth one GPU of the group gets (0 when no NIC is crossed)
    tiers_used: np.ndarray  # number of tiers the group spans (0 for size 1)


def _tier_gpu_bw(tier: Tier, m_here: np.ndarray, m_inner: np.ndarray | None, span: np.ndarray, system: System,
                 sharers: np.ndarray) -> np.ndarray:  # fmt: skip
    """Spec bandwidth (B/s) one GPU of the group gets on ``tier``, before the fabric's efficiency."""
    b = tier.bandwidth_gb_per_s * 1e9
    if tier.scale_out:
        per_link_cap = max(1.0, 1.0 / tier.shared_by_gpus)
        links = system.gpus_per_node / tier.shared_by_gpus
        return b * np.minimum(per_link_cap, links / sharers)
    if tier.peer_link_gb_per_s is not None:
        peers = np.maximum(m_here - 1.0, 1.0) if m_inner is None else np.maximum(m_here / m_inner - 1.0, 1.0)
        return np.minimum(b, peers * tier.peer_link_gb_per_s * 1e9)
    if tier.torus_dims is not None:
        dims = np.asarray(tier.torus_dims, dtype=float)
        cum = np.cumprod(dims)
        axes = 1.0 + np.sum(np.asarray(span, dtype=float)[..., None] > cum[:-1], axis=-1) if len(dims) > 1 \
            else np.ones_like(np.asarray(span, dtype=float))  # fmt: skip
        return b * axes / len(dims)
    return b * np.ones_like(np.asarray(m_here, dtype=float))


def _ring_hops(tier: Tier, m: NDArray[np.float64], inner: NDArray[np.float64], n: NDArray[np.float64]
               ) -> NDArray[np.float64]:  # fmt: skip
    """Ring hops that cross ``tier`` on one pass: ``n/m_{i−1} − n/m_i``; on a torus the collective runs one ring per
    axis in turn, so a group of ``m`` chips pays ``Σ_j (extent_j − 1)`` hops over the axes it covers, not ``m − 1``."""
    if tier.torus_dims is None:
        return n / inner - n / m
    covered = np.ones_like(m)
    hops = np.zeros_like(m)
    for d in tier.torus_dims:
        along = np.clip(np.ceil(m / covered), 1.0, float(d))
        hops = hops + along - 1.0
        covered = covered * along
    return hops * (n / m)  # each of the n/m torus domains of the group in turn (n/m = 1 unless a NIC joins them)


def collective_cost(kind: str, message_bytes: ArrayLike, *, system: System, size: ArrayLike, stride: ArrayLike = 1,
                    concurrent_groups: ArrayLike | None = None, algorithm: str = "auto",
                    fits: CollectiveFits | None = None, _nested: bool = False) -> CollectiveCost:  # fmt: skip
    """Time of one ``kind`` collective of ``message_bytes`` on a group of ``size`` ranks ``stride`` apart.

    ``concurrent_groups``: groups of this shape communicating at once on one host (default: enough to keep every
    GPU of the host busy, as when all data-parallel groups reduce their gradients together).
    """
    if kind not in COLLECTIVE_KINDS:
        raise InputError(f"collective {kind!r}; allowed: {', '.join(COLLECTIVE_KINDS)}")
    if algorithm not in ALGORITHMS:
        raise InputError(f"algorithm {algorithm!r}; allowed: {', '.join(ALGORITHMS)}")
    fits = fits if fits is not None else CollectiveFits.builtin()
    s_bytes, n, st = np.broadcast_arrays(np.asarray(message_bytes, dtype=float), np.asarray(size, dtype=float),
                                         np.asarray(stride, dtype=float))  # fmt: skip
    if np.any(n < 1) or np.any(st < 1) or np.any(s_bytes < 0):
        raise InputError(f"size={size!s}, stride={stride!s}, message_bytes={message_bytes!s}: need size >= 1, "
                         f"stride >= 1, message_bytes >= 0")  # fmt: skip
    g = float(system.gpus_per_node)

    # members per domain, innermost first; a tier is used when it adds members
    ms, used = [], []
    prev = np.ones_like(n)
    for t in system.tiers:
        m = n.copy() if t.domain_gpus is None else np.minimum(n, np.maximum(1.0, np.floor(t.domain_gpus / st)))
        m = np.maximum(m, prev)
        ms.append(m)
        used.append(m > prev)
        prev = m
    uncovered = ms[-1] < n  # the outermost tier is bounded and the group is bigger than its domain
    if np.any(uncovered):
        raise InputError(f"a group of size={size!s} stride={stride!s} does not fit the {system.id} system's largest "
                         f"domain ({system.tiers[-1].domain_gpus} GPUs) and the system has no NIC tier")  # fmt: skip

    # GPUs of one host crossing the NICs at once
    m_before_nic = ms[-2] if len(ms) > 1 else np.ones_like(n)
    m_host = np.minimum(m_before_nic, np.maximum(1.0, np.floor(g / st)))
    if concurrent_groups is None:
        sharers = np.full_like(n, g)
    else:
        c = np.asarray(concurrent_groups, dtype=float)
        if np.any(c < 1):
            raise InputError(f"concurrent_groups={concurrent_groups!s}: must be >= 1")
        sharers = np.clip(m_host * c, 1.0, g)

    # GPUs of one host staging through its memory at once (pcie-host): this group's members on the host, times c
    m_in_host = np.minimum(n, np.maximum(1.0, np.floor(g / st)))
    stagers = sharers if concurrent_groups is None else np.clip(m_in_host * c, 1.0, g)
    host_cap = system.host.gb_per_s * 1e9 / (2.0 * stagers)  # B/s one GPU can stage: write once, read once

    inf = np.full_like(n, np.inf)
    bw = {"simple": inf.copy(), "ll": inf.copy()}
    alpha = {"simple": np.zeros_like(n), "ll": np.zeros_like(n)}
    a2a_time = {"simple": np.zeros_like(n), "ll": np.zeros_like(n)}
    tree_lat = {"simple": np.zeros_like(n), "ll": np.zeros_like(n)}
    ring_lat = {"simple": np.zeros_like(n), "ll": np.zeros_like(n)}  # one pass around the ring: Σ hops · α
    nic_bw = np.zeros_like(n)
    tree_ratio = np.ones_like(n)
    n_used = np.zeros_like(n)
    first_used = np.ones_like(n, dtype=bool)
    inner = np.ones_like(n)
    below_outer = np.ones_like(n)  # members per domain just inside the outermost tier the group uses
    for t, m, u in zip(system.tiers, ms, used, strict=True):
        fit = fits.fabric(t.fabric)
        b_gpu = _tier_gpu_bw(t, m, None if t is system.tiers[0] else inner, m * st, system, sharers)
        if t.scale_out:
            nic_bw = np.where(u, b_gpu / 1e9, nic_bw)
        tree_ratio = np.where(u, fit.tree_ratio if fit.tree_ratio is not None else 1.0, tree_ratio)
        for proto in ("simple", "ll"):
            eta = fit.eta if proto == "simple" or fit.ll_eta is None else fit.ll_eta
            a_us = fit.alpha_us if proto == "simple" or fit.ll_alpha_us is None else fit.ll_alpha_us
            a = (t.latency_us if t.latency_us is not None else a_us) * 1e-6
            b_ach = b_gpu * eta if t.kind != "pcie-host" else np.minimum(b_gpu * eta, host_cap)
            ring_b = (1.0 if kind == "p2p" else inner) * b_ach  # one send/recv pair: one GPU's link
            bw[proto] = np.where(u, np.minimum(bw[proto], ring_b), bw[proto])
            alpha[proto] = np.where(u, np.maximum(alpha[proto], a), alpha[proto])
            ring_lat[proto] = ring_lat[proto] + np.where(u, _ring_hops(t, m, inner, n) * a, 0.0)
            a2a_time[proto] = np.where(u, np.maximum(a2a_time[proto], s_bytes * (m - inner) / n / b_ach),
                                       a2a_time[proto])  # fmt: skip
            hops = np.where(first_used, m / inner - 1.0, np.ceil(np.log2(np.maximum(m / inner, 1.0))))
            tree_lat[proto] = tree_lat[proto] + np.where(u, hops * a, 0.0)
        n_used = n_used + u
        first_used = first_used & ~u
        below_outer = np.where(u, inner, below_outer)
        inner = m

    f = bus_factor(kind, n)
    passes = 2.0 if kind == "all_reduce" else 1.0
    cands: dict[str, np.ndarray] = {}
    ring = {}
    for proto in ("simple", "ll"):
        lat = alpha[proto] if kind == "p2p" else passes * ring_lat[proto]
        ring[proto] = lat + (a2a_time[proto] if kind == "all_to_all" else s_bytes * f / bw[proto])
    cands["ring"] = np.minimum(ring["simple"], ring["ll"])
    if kind in ("all_reduce", "broadcast"):
        mult = 2.0 if kind == "all_reduce" else 1.0
        tree = np.minimum(*(mult * tree_lat[p] + s_bytes * f / (bw[p] * tree_ratio) for p in ("simple", "ll")))
        cands["tree"] = np.where(n_used >= 2, tree, np.inf)
    t0 = system.tiers[0]
    fit0 = fits.fabric(t0.fabric)
    if kind == "all_reduce" and t0.in_network_reduction and fit0.nvls_eta is not None:
        b0 = _tier_gpu_bw(t0, ms[0], None, ms[0] * st, system, sharers)
        nvls = (fit0.nvls_alpha_us or 0.0) * 1e-6 + s_bytes / (b0 * fit0.nvls_eta)
        cands["nvls"] = np.where((n_used == 1) & used[0], nvls, np.inf)
    hier_ok = (n_used >= 2) & (below_outer > 1) & (below_outer < n)
    if kind == "all_reduce" and algorithm == "hierarchical" and not _nested and np.any(hier_ok):
        g_in = np.where(hier_ok, below_outer, 1.0)
        k = np.where(hier_ok, n / g_in, 1.0)
        c_out = None if concurrent_groups is None else np.asarray(concurrent_groups, dtype=float) * g_in
        rs = collective_cost("reduce_scatter", s_bytes, system=system, size=g_in, stride=st, algorithm="ring",
                             fits=fits, _nested=True).time_s  # fmt: skip
        ar = collective_cost("all_reduce", s_bytes / g_in, system=system, size=k, stride=st * g_in,
                             concurrent_groups=c_out, fits=fits, _nested=True).time_s  # fmt: skip
        ag = collective_cost("all_gather", s_bytes, system=system, size=g_in, stride=st, algorithm="ring",
                             fits=fits, _nested=True).time_s  # fmt: skip
        cands["hierarchical"] = np.where(hier_ok, rs + ar + ag, np.inf)
    if algorithm == "auto":
        names = list(cands)
        stack = np.stack([cands[k] for k in names])
        best = np.argmin(stack, axis=0)
        time = np.take_along_axis(stack, best[None], axis=0)[0]
        algo = np.asarray(names, dtype=object)[best]
    else:
        if algorithm not in cands:
            raise InputError(f"algorithm {algorithm!r} does not apply to {kind} on {system.id}; "
                             f"available: {', '.join(cands)}")  # fmt: skip
        time = cands[algorithm]
        algo = np.full(n.shape, algorithm, dtype=object)
        if np.any(np.isinf(time) & (n > 1)):
            raise InputError(f"algorithm {algorithm!r} does not apply to every group given (size={size!s})")
    one = n <= 1
    time = np.where(one, 0.0, time)
    with np.errstate(divide="ignore", invalid="ignore"):
        busbw = np.where(one | (time <= 0), 0.0, s_bytes * f / np.where(time > 0, time, 1.0) / 1e9)
    return CollectiveCost(time_s=time, busbw_gb_per_s=busbw, algorithm=np.where(one, "none", algo),
                          nic_gb_per_s_per_gpu=np.where(one, 0.0, nic_bw), tiers_used=n_used)  # fmt: skip


def collective_time_s(kind: str, message_bytes: ArrayLike, *, system: System, size: ArrayLike, stride: ArrayLike = 1,
                      concurrent_groups: ArrayLike | None = None, algorithm: str = "auto",
                      fits: CollectiveFits | None = None) -> np.ndarray:  # fmt: skip
    """Seconds for one collective (``collective_cost(...).time_s``); 0 when ``size`` is 1."""
    return collective_cost(kind, message_bytes, system=system, size=size, stride=stride,
                           concurrent_groups=concurrent_groups, algorithm=algorithm, fits=fits).time_s  # fmt: skip
