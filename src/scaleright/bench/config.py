"""Typed, frozen configs of the three benchmarks and of the launch (torchrun) layout.

Model (``GPTSpec``, or for training a catalog ``DecoderSpec``), parallel layout (strategy, world sizes, micro batch,
precision, recompute) and launch (nodes, rendezvous) stay separate fields; nothing here knows about hardware.
Unknown keys are errors (``extra="forbid"``). Message sizes accept decimal (``KB``/``MB``/``GB`` = 10^3/10^6/10^9
bytes) and binary (``KiB``/``MiB``/``GiB``) units, and are stored in bytes. Every count is bounded by
``scaleright.limits.LIMITS`` (a world size of 2**63 is refused before anything is built); an rdzv endpoint must be
``HOST:PORT`` (``parse_endpoint``).
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from scaleright.bench.spec import DecoderSpec, GPTSpec
from scaleright.errors import InputError
from scaleright.limits import LIMITS, check_limit

__all__ = [
    "Strategy",
    "CommOp",
    "LaunchSpec",
    "TrainBenchConfig",
    "CommBenchConfig",
    "InferBenchConfig",
    "parse_int_list",
    "parse_sizes",
    "parse_strategy",
    "parse_ops",
    "parse_endpoint",
]

Precision = Literal["fp32", "bf16"]
Device = Literal["auto", "cpu", "cuda"]


class Strategy(str, Enum):
    """How the model is spread over ranks (PyTorch DDP or FSDP2 ``fully_shard``)."""

    SINGLE = "single"  # one process, no wrapper
    DDP = "ddp"  # DistributedDataParallel: replicated params, all-reduced grads
    FSDP_FULL = "fsdp-full"  # FULL_SHARD: fully_shard(reshard_after_forward=True)
    FSDP_GRAD_OP = "fsdp-grad-op"  # SHARD_GRAD_OP: fully_shard(reshard_after_forward=False)


_STRATEGY_ALIASES = {"fsdp": Strategy.FSDP_FULL}


def parse_strategy(text: str) -> Strategy:
    """``'ddp'`` -> ``Strategy.DDP``; ``'fsdp'`` is an alias of ``fsdp-full``."""
    key = text.strip().lower()
    if key in _STRATEGY_ALIASES:
        return _STRATEGY_ALIASES[key]
    try:
        return Strategy(key)
    except ValueError:
        valid = [s.value for s in Strategy] + list(_STRATEGY_ALIASES)
        raise InputError(f"unknown strategy '{text}'; valid: {', '.join(valid)}") from None


class CommOp(str, Enum):
    """Collectives measured by ``bench comm`` (names as in nccl-tests)."""

    ALL_REDUCE = "all-reduce"
    ALL_GATHER = "all-gather"
    REDUCE_SCATTER = "reduce-scatter"


def parse_ops(text: str) -> tuple[CommOp, ...]:
    """``'all-reduce,all-gather'`` -> ops; underscores are accepted for dashes."""
    ops = []
    for item in _split(text, "--ops"):
        try:
            ops.append(CommOp(item.lower().replace("_", "-")))
        except ValueError:
            raise InputError(f"unknown op '{item}' in --ops; valid: {', '.join(o.value for o in CommOp)}") from None
    return tuple(ops)


MAX_ITEMS = 64  # values in one comma-separated list (world sizes, batch sizes, message sizes): one run or row each


def _split(text: str, flag: str) -> list[str]:
    items = [t.strip() for t in text.split(",")]
    if not any(items):
        raise InputError(f"{flag} is empty; give a comma-separated list")
    if not all(items):  # '1,,2' or '1,2,': a typo, not a shorter list
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise InputError(f"{flag}={shown!r} has an empty item; give values separated by single commas")
    return items


def parse_int_list(text: str, flag: str, kind: str | None = None) -> tuple[int, ...]:
    """``'1,2,4'`` -> ``(1, 2, 4)``; every item a positive integer (at most ``LIMITS[kind]`` when ``kind`` is
    given), duplicates removed, order kept."""
    out: list[int] = []
    items = _split(text, flag)
    if len(items) > MAX_ITEMS:
        raise InputError(f"{flag} lists {len(items):,} values; give at most {MAX_ITEMS} (one run each)")
    for item in items:
        if not (item.isascii() and item.isdigit()) or len(item) > 30 or int(item) < 1:
            shown = item if len(item) <= 30 else item[:27] + "..."
            raise InputError(f"{flag} must be positive integers separated by commas; got '{shown}'")
        if kind is not None:
            check_limit(flag, int(item), kind, low=1)
        if int(item) not in out:
            out.append(int(item))
    return tuple(out)


def parse_endpoint(text: str, flag: str = "--rdzv-endpoint") -> str:
    """``HOST:PORT`` with a non-empty host (an IPv6 address in brackets, ``[::1]:29500``) and a port in 1..65535;
    returns it stripped. torchrun would otherwise fail late, or wait for a rendezvous that cannot happen."""
    value = text.strip()
    m = re.fullmatch(r"(\[[0-9A-Fa-f:.]+(%[\w.-]+)?\]|[A-Za-z0-9._-]+):(\d{1,5})", value, re.ASCII)
    if not m or not 1 <= int(m.group(3)) <= 65535:
        shown = value if len(value) <= 60 else value[:57] + "..."
        raise InputError(f"{flag}='{shown}' must be HOST:PORT with a non-empty host (IPv6 in brackets, "
                         f"[::1]:29500) and a port from 1 to 65535")
    return value


_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}


def parse_sizes(text: str) -> tuple[int, ...]:
    """``'1KB,1MiB,64MB'`` -> bytes ``(1000, 1048576, 64000000)``."""
    out = []
    items = _split(text, "--sizes")
    if len(items) > MAX_ITEMS:
        raise InputError(f"--sizes lists {len(items):,} values; give at most {MAX_ITEMS}")
    for item in items:
        m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([A-Za-z]*)", item)
        unit = m.group(2).upper() if m else None
        if not m or unit not in _UNITS:
            raise InputError(f"bad size '{item}' in --sizes; use a number with B, KB, MB, GB, KiB, MiB or GiB")
        if len(m.group(1)) > 30:
            raise InputError(f"size '{item[:27]}...' in --sizes is too long; give at most {LIMITS['bytes'].high:g}B")
        size = int(float(m.group(1)) * _UNITS[unit])
        check_limit(f"size '{item}' in --sizes", size, "bytes")
        if size < 1:
            raise InputError(f"size '{item}' in --sizes is under one byte; give at least 1B")
        out.append(size)
    return tuple(out)


class LaunchSpec(BaseModel):
    """Where the ranks run: torchrun's node and rendezvous flags."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)  # .inf / nan are errors

    nnodes: int = Field(1, ge=1, le=LIMITS["nnodes"].high, description="nodes; world size = nnodes * nproc per node")
    node_rank: int = Field(0, ge=0, description="this node's index, 0..nnodes-1 (static rendezvous only)")
    rdzv_endpoint: str | None = Field(None, description="host:port of the c10d rendezvous; None = --standalone")
    rdzv_id: str = Field("scaleright", description="rendezvous job id, shared by all nodes")
    timeout_s: float = Field(600.0, gt=0, le=LIMITS["timeout_s"].high,
                             description="longest time a rank may make no progress, startup included (s)")

    @field_validator("rdzv_endpoint")
    @classmethod
    def _host_port(cls, v: str | None) -> str | None:
        if v is None:
            return v
        try:
            return parse_endpoint(v, "rdzv_endpoint")
        except InputError as exc:
            raise ValueError(str(exc)) from None

    @model_validator(mode="after")
    def _multi_node_needs_endpoint(self) -> LaunchSpec:
        if self.nnodes > 1 and not self.rdzv_endpoint:
            raise ValueError(f"nnodes={self.nnodes} needs --rdzv-endpoint HOST:PORT")
        if self.node_rank >= self.nnodes:
            raise ValueError(f"node_rank={self.node_rank} must be < nnodes={self.nnodes}")
        return self


def _bounded(values: tuple[int, ...], field: str, kind: str) -> tuple[int, ...]:
    """``values`` when each is at most ``LIMITS[kind]`` (pydantic turns the ValueError into a field error)."""
    high = LIMITS[kind].high
    big = [n for n in values if n > high]
    if big:
        raise ValueError(f"{field} must be <= {int(high):,} ({LIMITS[kind].why})")
    return values


_STEPS = LIMITS["steps"].high
SEED_MAX = 2**32 - 1  # torch.manual_seed takes 64 bits; the workers derive per-rank seeds as seed * 1_000_003 + rank


class TrainBenchConfig(BaseModel):
    """A training sweep: one model, one strategy, several world sizes (per-rank micro batch fixed)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)  # .inf / nan are errors

    model: GPTSpec | DecoderSpec = Field(description="decoder shape: a nanoGPT preset's or a catalog decoder's")
    preset: str | None = Field(None, description="preset or catalog name the dims came from (a label; dims rule)")
    strategy: Strategy = Field(Strategy.DDP, description="parallel strategy")
    nproc: tuple[int, ...] = Field((1,), min_length=1, description="processes per node, one run per value")
    micro_batch: int = Field(8, ge=1, le=LIMITS["micro_batch"].high, description="sequences per rank per step")
    precision: Precision = Field("fp32", description="fp32, or bf16 mixed precision with fp32 master weights")
    activation_checkpointing: bool = Field(False, description="recompute each block's activations in backward")
    device: Device = Field("auto", description="auto = cuda when available, else cpu")
    warmup: int = Field(3, ge=0, le=_STEPS, description="untimed steps before measuring")
    steps: int = Field(10, ge=1, le=_STEPS, description="timed steps")
    seed: int = Field(0, ge=0, le=SEED_MAX, description="seed for weights and random tokens")
    launch: LaunchSpec = Field(default_factory=LaunchSpec, description="nodes and rendezvous")

    @field_validator("strategy", mode="before")
    @classmethod
    def _alias(cls, v: object) -> object:
        return parse_strategy(v) if isinstance(v, str) else v

    @field_validator("nproc")
    @classmethod
    def _positive(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if any(n < 1 for n in v):
            raise ValueError(f"nproc must be >= 1, got {list(v)}")
        return _bounded(v, "nproc", "nproc")

    @model_validator(mode="after")
    def _single_is_one_process(self) -> TrainBenchConfig:
        big = [n * self.launch.nnodes for n in self.nproc if n * self.launch.nnodes > 1]
        if self.strategy is Strategy.SINGLE and big:
            raise ValueError(
                f"strategy=single runs one process but world_size={big[0]} was asked "
                f"(nproc={list(self.nproc)}, nnodes={self.launch.nnodes}); use ddp or fsdp-full"
            )
        return self


class CommBenchConfig(BaseModel):
    """A collective-communication sweep over ops and message sizes."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)  # .inf / nan are errors

    nproc: tuple[int, ...] = Field((2,), min_length=1, description="processes per node, one run per value")

    @field_validator("nproc")
    @classmethod
    def _nproc_bounded(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        return _bounded(v, "nproc", "nproc")

    sizes_bytes: tuple[int, ...] = Field((10**3, 10**6, 64 * 10**6), min_length=1, description="message sizes (B)")
    ops: tuple[CommOp, ...] = Field(tuple(CommOp), min_length=1, description="collectives to time")
    dtype: Literal["float32", "bfloat16"] = Field("float32", description="element type of the buffers")
    device: Device = Field("auto", description="auto = cuda when available, else cpu")
    warmup: int = Field(2, ge=0, le=_STEPS, description="untimed repetitions per op and size")
    iters: int = Field(10, ge=1, le=_STEPS, description="timed repetitions per op and size")
    launch: LaunchSpec = Field(default_factory=LaunchSpec, description="nodes and rendezvous")


class InferBenchConfig(BaseModel):
    """Prefill and KV-cache decode throughput against batch size, in one process."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)  # .inf / nan are errors

    model: GPTSpec = Field(description="decoder shape (random weights)")
    preset: str | None = Field(None, description="preset name the dims came from")
    batch_sizes: tuple[int, ...] = Field((1, 4, 16), min_length=1, description="sequences decoded together")
    prompt_len: int = Field(32, ge=1, le=LIMITS["seq_len"].high, description="prompt tokens per sequence (prefill)")
    gen_len: int = Field(16, ge=1, le=LIMITS["seq_len"].high, description="generated tokens per sequence (decode)")
    precision: Precision = Field("fp32", description="weights and activations dtype")
    device: Device = Field("auto", description="auto = cuda when available, else cpu")
    warmup: int = Field(1, ge=0, le=_STEPS, description="untimed repetitions per batch size")
    repeats: int = Field(3, ge=1, le=_STEPS, description="timed repetitions per batch size")
    seed: int = Field(0, ge=0, le=SEED_MAX, description="seed for weights and prompts")

    @field_validator("batch_sizes")
    @classmethod
    def _batch_bounded(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        return _bounded(v, "batch_sizes", "batch")

    @model_validator(mode="after")
    def _fits_context(self) -> InferBenchConfig:
        if self.prompt_len + self.gen_len > self.model.seq_len:
            raise ValueError(
                f"prompt_len={self.prompt_len} + gen_len={self.gen_len} exceeds the model's "
                f"seq_len={self.model.seq_len}"
            )
        return self
