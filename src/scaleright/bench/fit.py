"""Before a catalog decoder is launched: does it fit each rank, and which way is it built (no torch needed).

Build path (``bench/parallelize.py``): under ``fsdp-full`` / ``fsdp-grad-op`` a catalog decoder is constructed on
the ``meta`` device (shapes, no storage), sharded with FSDP2 ``fully_shard``, then each rank allocates and
initialises only its own shards (``to_empty`` + ``init_weights``), so the whole model never exists on one device;
under ``single`` / ``ddp`` the whole model is built on every rank.

Fit: scaleright's own training-memory model (``estimate.memory.training_memory``) with the ``fsdp2`` framework
profile, which is what the harness runs: fp32 parameters (the optimizer's master copy) and fp32 gradients, AdamW's
two fp32 moments, sharded over the ranks by ZeRO stage (single/ddp 0, fsdp-grad-op 2, fsdp-full 3), the gathered
bf16/fp32 layers of FSDP, activations of ``micro_batch`` sequences (all blocks recomputed with activation
checkpointing) and ``F.cross_entropy`` on fp32 logits. Capacity per rank: on CUDA the smallest GPU's total memory
from ``nvidia-smi --query-gpu=memory.total`` (MiB); on CPU the host's ``MemAvailable`` (``/proc/meminfo``, KiB)
shared by the node's ranks, without the CUDA context and NCCL buffers the estimate adds for GPUs. A run that does
not fit is refused before anything starts, naming the single changes that would fit (``--strategy fsdp-full``,
``--activation-checkpointing``, half the micro batch), else the fewest ranks that would, each computed by the same
model.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scaleright.bench.config import Strategy, TrainBenchConfig
from scaleright.bench.spec import DecoderSpec
from scaleright.errors import InputError

__all__ = ["FitCheck", "fit_checks", "check_fits", "build_path", "memory_estimate_gb", "device_capacity_gb"]

META = "meta-device init: each rank materialises only its FSDP2 shards (to_empty + init_weights)"
WHOLE = "whole model built on every rank"
_ZERO = {Strategy.SINGLE: 0, Strategy.DDP: 0, Strategy.FSDP_GRAD_OP: 2, Strategy.FSDP_FULL: 3}
_MAX_WORLD = 1024  # the largest world size a refusal's "more ranks" hint looks at


def build_path(cfg: TrainBenchConfig) -> str:
    """How the model is built on the ranks (module docstring)."""
    fsdp = cfg.strategy in (Strategy.FSDP_FULL, Strategy.FSDP_GRAD_OP)
    return META if fsdp and isinstance(cfg.model, DecoderSpec) else WHOLE


def uses_meta_init(cfg: TrainBenchConfig) -> bool:
    """True when ``build_path`` is the meta-device path."""
    return build_path(cfg) == META


def memory_estimate_gb(spec: DecoderSpec, *, strategy: Strategy, world_size: int, micro_batch: int, precision: str,
                       activation_checkpointing: bool, device_type: str) -> float:
    """Estimated peak memory of one rank in GB (module docstring); CPU ranks carry no CUDA context or NCCL."""
    from scaleright.estimate.layout import Layout
    from scaleright.estimate.memory import Overheads, training_memory

    zero = _ZERO[strategy] if world_size > 1 else 0
    layout = Layout(dp=world_size, zero=zero, micro_batch=micro_batch,
                    recompute="full" if activation_checkpointing else "none")  # fmt: skip
    overheads = None if device_type == "cuda" else Overheads(runtime_gb=0.0, nccl_gb_per_group=0.0)
    mem = training_memory(spec.transformer_spec(), layout=layout, seq_len=spec.seq_len, precision=precision,
                          framework="fsdp2", overheads=overheads)  # fmt: skip
    return mem.total_gb


@functools.cache  # a GPU's total memory does not change while this process runs
def _nvidia_smi_memory_gb() -> float | None:
    from scaleright.bench.fingerprint import nvidia_smi_query

    rows = nvidia_smi_query("memory.total", units=False)
    try:
        mib = [float(r[0]) for r in rows or []]
    except ValueError:
        return None
    return min(mib) * 2**20 / 1e9 if mib else None


def _mem_available_gb(meminfo: Path = Path("/proc/meminfo")) -> float | None:
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024 / 1e9
    except (OSError, ValueError, IndexError):
        pass
    return None


def device_capacity_gb(device: str, nproc_per_node: int) -> tuple[str, float | None, str]:
    """``(device_type, GB per rank or None when unknown, where the figure came from)`` for ``--device``."""
    gpu = _nvidia_smi_memory_gb() if device in ("auto", "cuda") else None
    if gpu is not None:
        return "cuda", gpu, "nvidia-smi memory.total of the smallest GPU"
    if device == "cuda":
        return "cuda", None, "nvidia-smi did not report the GPUs' memory"
    host = _mem_available_gb()
    if host is None:
        return "cpu", None, "/proc/meminfo has no MemAvailable"
    per = host / nproc_per_node
    return "cpu", per, f"host MemAvailable {host:.1f} GB / {nproc_per_node} rank{'s' if nproc_per_node > 1 else ''}"


@dataclass(frozen=True)
class FitCheck:
    """The fit of one world size: estimate against capacity per rank, and the build path."""

    world_size: int
    nproc_per_node: int
    path: str
    device_type: str
    estimate_gb: float
    capacity_gb: float | None
    capacity_source: str

    @property
    def fits(self) -> bool | None:
        return None if self.capacity_gb is None else self.estimate_gb <= self.capacity_gb

    def line(self) -> str:
        cap = (f"{self.capacity_gb:.1f} GB ({self.capacity_source})" if self.capacity_gb is not None else
               f"unknown capacity ({self.capacity_source})")  # fmt: skip
        verdict = {True: "fits", False: "does not fit", None: "fit not checked"}[self.fits]
        return (f"world_size={self.world_size}: estimated {self.estimate_gb:.2f} GB per rank (estimate.memory, fsdp2 "
                f"profile) of {cap}: {verdict}; {self.path}")

    def as_dict(self) -> dict[str, Any]:
        return {"world_size": self.world_size, "path": self.path, "device_type": self.device_type,
                "estimate_gb": self.estimate_gb, "capacity_gb": self.capacity_gb,
                "capacity_source": self.capacity_source, "fits": self.fits}  # fmt: skip


def fit_checks(cfg: TrainBenchConfig) -> list[FitCheck]:
    """One ``FitCheck`` per world size of a catalog-decoder sweep; [] for a preset (a toy: nothing to check)."""
    spec = cfg.model
    if not isinstance(spec, DecoderSpec):
        return []
    out = []
    for nproc in cfg.nproc:
        world = nproc * cfg.launch.nnodes
        dev, cap, source = device_capacity_gb(cfg.device, nproc)
        est = memory_estimate_gb(spec, strategy=cfg.strategy, world_size=world, micro_batch=cfg.micro_batch,
                                 precision=cfg.precision, activation_checkpointing=cfg.activation_checkpointing,
                                 device_type=dev)  # fmt: skip
        out.append(FitCheck(world, nproc, build_path(cfg), dev, est, cap, source))
    return out


def _alternatives(cfg: TrainBenchConfig, check: FitCheck) -> list[str]:
    """The single changes under which ``check``'s world size fits, else the fewest ranks (doubling) that would with
    full sharding and recomputation; each computed by ``memory_estimate_gb``."""
    spec = cfg.model
    assert isinstance(spec, DecoderSpec) and check.capacity_gb is not None

    def need_gb(*, strategy: Strategy = cfg.strategy, world: int = check.world_size, mb: int = cfg.micro_batch,
                ac: bool = cfg.activation_checkpointing) -> float:  # fmt: skip
        return memory_estimate_gb(spec, strategy=strategy, world_size=world, micro_batch=mb, precision=cfg.precision,
                                  activation_checkpointing=ac, device_type=check.device_type)  # fmt: skip

    tries: list[tuple[str, float]] = []
    if cfg.strategy is not Strategy.FSDP_FULL and check.world_size > 1:
        tries.append(("--strategy fsdp-full", need_gb(strategy=Strategy.FSDP_FULL)))
    if not cfg.activation_checkpointing:
        tries.append(("--activation-checkpointing", need_gb(ac=True)))
    if cfg.micro_batch > 1:
        tries.append((f"--micro-batch {cfg.micro_batch // 2}", need_gb(mb=cfg.micro_batch // 2)))
    out = [f"{flags} ({gb:.1f} GB)" for flags, gb in tries if gb <= check.capacity_gb]
    world = check.world_size * 2
    per_node = _gpus_per_node() if check.device_type == "cuda" else None
    while not out and world <= _MAX_WORLD:  # more ranks, sharded and recomputed (on CPU they share the host's memory)
        nnodes = max(cfg.launch.nnodes, -(-world // per_node) if per_node else 1)
        nproc = -(-world // nnodes)  # ranks per node; nnodes x nproc >= world when the GPUs per node do not divide it
        gb = need_gb(strategy=Strategy.FSDP_FULL, world=nnodes * nproc, ac=True)
        _, cap, _ = device_capacity_gb(check.device_type, nproc)
        if cap is not None and gb <= cap:
            nodes = f"--nnodes {nnodes} " if nnodes > 1 else ""
            out.append(f"{nnodes * nproc} ranks ({nodes}--nproc {nproc} --strategy fsdp-full "
                       f"--activation-checkpointing, {gb:.1f} GB per rank)")
            break
        world *= 2
    return out


def _gpus_per_node() -> int | None:
    """GPUs nvidia-smi lists on this node (None without it): where more ranks than that need more nodes."""
    from scaleright.bench.fingerprint import _nvidia_smi

    return len(_nvidia_smi()[0]) or None


def check_fits(cfg: TrainBenchConfig, checks: list[FitCheck]) -> None:
    """Raise a one-line ``InputError`` for the first world size that does not fit, naming what would."""
    for c in checks:
        if c.fits is False:
            alts = _alternatives(cfg, c)
            what = ("; would fit: " + "; ".join(alts)) if alts else (
                f"; nothing up to {_MAX_WORLD} ranks of this device fits: truncate with --layers or --vocab")
            name = cfg.model.name if isinstance(cfg.model, DecoderSpec) else cfg.preset
            raise InputError(f"--model {name} does not fit world_size={c.world_size} "
                             f"({cfg.strategy.value}, micro batch {cfg.micro_batch}): estimated {c.estimate_gb:.1f} "
                             f"GB per rank > {c.capacity_gb:.1f} GB ({c.capacity_source}){what}")
