"""The layout search: every allowed GPU type × count × parallel layout, evaluated as numpy arrays.

For training, the axes are GPU count (1, 2, 4, ... below one host of the system, then every whole number of hosts),
tensor parallel (divisors of the heads that the KV heads allow, dividing the scale-up domain: 8 on HGX, 72 on
NVL72), pipeline stages (up to the layers, any count that divides the GPUs left), interleaved virtual stages,
context parallel (long sequences), expert parallel and expert tensor parallel (MoE, with Megatron-Core's parallel
folding), ZeRO stage, micro-batch (any divisor of the per-replica batch), recomputation and sequence parallelism;
then, for the layouts that do not fit, optimizer and activation offload (``estimate.memory.offload``).
Valid layouts are enumerated, not masked out of a full ``meshgrid``: the structural tuples (count, tp, cp, pp, dp)
come from a loop over divisors (a few thousand), then each further axis expands only the rows it is valid for
(``numpy.nonzero`` of a rows × values mask). Memory is evaluated for all valid layouts at once, the performance
model for those that fit, and only what the plan and its explanations read is kept: the fastest layout of each
GPU count and of each parallelism family at each count. No Python loop runs over layouts.

For inference, each GPU type × tensor-parallel size is evaluated over a grid of batch sizes up to the KV-cache
capacity; the largest batch meeting the latency SLOs sets a replica's capacity, and enough replicas are added to
carry the request rate.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scaleright.catalog.systems import System
from scaleright.errors import InputError
from scaleright.estimate.calibration import DEFAULT_CALIBRATION, Calibration
from scaleright.estimate.comm import Cluster, system_of
from scaleright.estimate.framework import Framework, framework_of
from scaleright.estimate.layout import RECOMPUTE, LayoutArrays, divisors
from scaleright.estimate.memory import (
    GB,
    STATE_FORMATS,
    LoraConfig,
    model_state_bytes,
    resolve_profile,
    training_memory_arrays,
)
from scaleright.estimate.memory.offload import host_link_bytes_per_s, resident_states
from scaleright.estimate.train import TIME_KEYS, train_step_arrays
from scaleright.workload.spec import TransformerSpec

__all__ = ["TrainCandidates", "InferCandidate", "SEARCH_LIMITS", "gpu_counts", "train_layout_grid",
           "evaluate_training", "evaluate_inference", "tp_domain", "family"]  # fmt: skip

RECOMPUTE_NAMES = RECOMPUTE  # index = the grid's recompute code

CP_FROM_SEQ_LEN = 32768  # context parallelism is searched from this sequence length
CPS = (1, 2, 4, 8)
HOSTS_EVERY = 64  # every whole number of hosts up to this many; beyond, 16 counts per doubling
EP_MAX = 256  # largest expert-parallel group searched (DeepSeek-V3 trained with EP64, its inference used EP320)

# The grid's bounds (printed with every plan): what the search does and does not try.
SEARCH_LIMITS = {
    "gpus": f"1, 2, 4, ... below one host, then every whole number of hosts up to {HOSTS_EVERY} hosts and 16 "
            "counts per doubling beyond, up to max_gpus",
    "tp": "divisors of the attention heads that the KV heads allow, dividing the scale-up domain (8 on HGX, 72 on "
          "NVL72)",
    "pp": "any count up to the layers that divides the GPUs left (uneven stages: the fullest one is timed)",
    "virtual_stages": "interleaved 1F1B with v > 1 chunks per stage when the framework runs an interleaved schedule "
                      "(megatron-core; --pipeline-schedule), pp·v divides the layers and the micro-batches are a "
                      "multiple of pp (Megatron's rule); else 1",
    "cp": "1, 2, 4, 8 from 32k-token sequences, else 1",
    "ep": f"divisors of the experts up to {EP_MAX} (MoE only), ep·etp dividing tp·cp·dp (MoE parallel folding)",
    "etp": "1 or tp (MoE only)",
    "zero": "0-3 (LoRA/QLoRA: 0 or 3), and ZeRO-3 as HSDP (sharded over the data-parallel ranks of one scale-up "
            "domain, replicated across; dense models)",
    "offload": "optimizer offload (ZeRO-Offload, ZeRO >= 1) and activation offload, each and both, only for layouts "
               "that do not fit without them, on parts whose host link (PCIe generation) the catalog gives; full "
               "training only",
    "micro_batch": "any divisor of the per-replica batch (global batch / dp)",
    "recompute": "none, selective (with sequence parallelism when tp > 1), full",
    "inference": "tp in 1, 2, 4, 8, 16 inside the scale-up domain, pp = 1, batch up to 4096 sequences per replica",
}
INFER_BATCH_LIMIT = 4096


# glibc's M_TOP_PAD: bytes the heap keeps above its top when it grows and when freed memory is trimmed
_M_TOP_PAD = -2
HEAP_TOP_PAD_BYTES = 128 * 2**20


@functools.cache
def _keep_heap_top() -> None:
    """Let the C heap keep ``HEAP_TOP_PAD_BYTES`` free at its top (glibc ``mallopt(M_TOP_PAD)``), once per process.

    The search allocates and frees tens of MB of numpy temporaries per GPU type; with glibc's default pad (128 KiB)
    every free at the top of the heap is returned to the kernel and page-faulted back in by the next allocation,
    which cost a third of the search's CPU time (system time) on the benchmark. Only the pad changes (no result
    does); elsewhere (no glibc, other platforms) nothing is done."""
    if not sys.platform.startswith("linux"):
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    mallopt(_M_TOP_PAD, HEAP_TOP_PAD_BYTES)


def gpu_counts(gpus_per_node: int, max_gpus: int) -> list[int]:
    """1, 2, 4, ... below one host, then whole numbers of hosts up to ``max_gpus``: every one up to
    ``HOSTS_EVERY`` hosts, beyond that those with at most five significant bits (k·2^e hosts, k < 32: 16 counts per
    doubling, at most 3 % apart), so a limit of a million GPUs stays a search of a few hundred counts."""
    out = []
    n = 1
    while n < gpus_per_node and n <= max_gpus:
        out.append(n)
        n *= 2
    hosts = 1
    while hosts * gpus_per_node <= max_gpus:
        out.append(hosts * gpus_per_node)
        step = 1 if hosts < HOSTS_EVERY else 1 << max(hosts.bit_length() - 5, 0)
        hosts = (hosts // step + 1) * step
    return out


def _pow2_upto(n: int) -> list[int]:
    out, x = [], 1
    while x <= n:
        out.append(x)
        x *= 2
    return out


def _divisors_upto(n: int, limit: int) -> list[int]:
    """Divisors of ``n`` not above ``limit``, ascending (trial division to the square root)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    both = sorted(set(small + [n // d for d in small]))
    return [d for d in both if d <= limit]


def _expand(rows: dict[str, np.ndarray], name: str, values: np.ndarray, ok: np.ndarray) -> dict[str, np.ndarray]:
    """Every (row, value) pair that ``ok`` (rows × values) allows, as new rows with ``name`` set to the value."""
    r, j = np.nonzero(ok)
    out = {k: v[r] for k, v in rows.items()}
    out[name] = values[j]
    return out


@functools.lru_cache(maxsize=16)
def _state_rows(spec: TransformerSpec, counts: tuple[int, ...], gpus_per_node: int, long_seq: bool,
                global_batch: int, frozen: bool) -> dict[str, np.ndarray]:  # fmt: skip
    """The valid layouts over the axes that set model states (count, tp, cp, pp, dp, ep, etp, ZeRO, HSDP shard
    group),
    read-only; shared by every GPU type with the same tensor-parallel domain."""
    tps = [t for t in divisors(spec.heads) if gpus_per_node % t == 0
           and (spec.mla or spec.kv_heads % t == 0 or t % spec.kv_heads == 0)]  # fmt: skip
    cps = list(CPS) if long_seq else [1]
    gb = global_batch
    # ---- structural tuples: count = tp · cp · pp · dp, dp dividing the global batch ------------------------------
    cols: dict[str, list[int]] = {"tp": [], "cp": [], "pp": [], "dp": []}
    for n in counts:
        for t in tps:
            for c in cps:
                if n % (t * c):
                    continue
                rest = n // (t * c)
                for p in _divisors_upto(rest, spec.layers):
                    d = rest // p
                    if gb % d == 0:
                        for k, x in zip(("tp", "cp", "pp", "dp"), (t, c, p, d), strict=True):
                            cols[k].append(x)
    rows = {k: np.asarray(v, dtype=np.int64) for k, v in cols.items()}
    rows["parent"] = np.arange(rows["tp"].size, dtype=np.int64)  # the structural tuple each row expands
    one = np.ones(rows["tp"].shape, dtype=np.int64)
    # ---- experts: ep divides the experts, ep·etp divides tp·cp·dp (MoE parallel folding) -----------------------
    if spec.moe:
        e = spec.moe
        eps = np.asarray([x for x in divisors(e.num_experts) if x <= EP_MAX], dtype=np.int64)
        stage = rows["tp"] * rows["cp"] * rows["dp"]
        rows = _expand(rows, "ep", eps, (stage[:, None] % eps[None, :]) == 0)
        # etp: 0 stands for "= tp" (Megatron's default), 1 for 1 (folded); resolved below
        codes = np.asarray([0, 1], dtype=np.int64)
        etp_of = np.where(codes[None, :] == 0, rows["tp"][:, None], 1)
        stage = rows["tp"] * rows["cp"] * rows["dp"]
        ok = (stage[:, None] % (rows["ep"][:, None] * etp_of) == 0) & (e.expert_ffn_hidden % etp_of == 0)
        ok[:, 1] &= rows["tp"] > 1  # etp = 1 = tp is the first column already
        rows = _expand(rows, "etp", codes, ok)
        rows["etp"] = np.where(rows["etp"] == 0, rows["tp"], 1)
    else:
        rows["ep"], rows["etp"] = one, rows["tp"].copy()
    # ---- ZeRO: stage 0 over one rank ---------------------------------------------------------------------------
    zeros = np.asarray([0, 3] if frozen else [0, 1, 2, 3], dtype=np.int64)
    shard = rows["dp"] * rows["cp"]
    rows = _expand(rows, "zero", zeros, (zeros[None, :] == 0) | (shard[:, None] > 1))
    # ---- HSDP: ZeRO-3 sharded over the dp·cp ranks of one scale-up domain, replicated across (dense models) -----
    group = rows["dp"] * rows["cp"]
    inside = np.gcd(group, np.maximum(gpus_per_node // rows["tp"], 1))
    hsdp = (rows["zero"] == 3) & (inside > 1) & (inside < group) & (spec.moe is None)
    codes = np.asarray([0, 1], dtype=np.int64)
    rows = _expand(rows, "dp_shard", codes, np.stack([np.ones_like(hsdp), hsdp], axis=1))
    group = rows["dp"] * rows["cp"]
    rows["dp_shard"] = np.where(rows["dp_shard"] == 1, np.gcd(group, np.maximum(gpus_per_node // rows["tp"], 1)),
                                group)  # fmt: skip
    for v in rows.values():
        v.flags.writeable = False
    return rows


def train_layout_grid(spec: TransformerSpec, *, counts: list[int], gpus_per_node: int, seq_len: int,
                      global_batch: int, task: str,
                      prune: Callable[[dict[str, np.ndarray]], np.ndarray] | None = None,
                      count_pruned: list[int] | None = None, interleaved: bool = True,
                      offload: Callable[[dict[str, np.ndarray]], np.ndarray] | None = None,
                      ) -> LayoutArrays:  # fmt: skip
    """All valid training layouts (module docstring), ``gpus_per_node`` being the tensor-parallel domain;
    ``interleaved=False`` (a framework without an interleaved schedule) searches no virtual stages.

    ``prune(rows)`` (optional) sees the layouts before micro-batch, virtual stages, recompute and sequence
    parallelism are expanded (those do not change model states) and returns which to keep; the number of valid
    layouts it ruled out is appended to ``count_pruned``. ``offload(rows)`` (optional) says which of the rows
    ``prune`` rules out fit with optimizer offload: those are kept as ``offload_optimizer`` layouts (searched only
    where the layout cannot fit without it).

    Order: structural tuple, micro-batch, then the model-state axes (ep, etp, ZeRO, shard group), virtual stages,
    recompute/SP. Consecutive layouts then share the inputs of most collectives (TP and pipeline traffic depend on
    the micro-batch, data-parallel traffic on the ZeRO stage), which the step model evaluates once per run."""
    frozen = task in ("lora", "qlora")
    gb = global_batch
    rows = dict(_state_rows(spec, tuple(counts), gpus_per_node, seq_len >= CP_FROM_SEQ_LEN, global_batch, frozen))
    # ---- the axes below do not change model states: count, then drop, the rows ``prune`` rules out -------------
    mbs = np.asarray(_divisors_upto(gb, gb), dtype=np.int64)
    vs = np.asarray(divisors(spec.layers) if interleaved else [1], dtype=np.int64)
    rc_sp = np.asarray([0, 1, 2, 3, 4], dtype=np.int64)  # (rc, sp): (0,0) (0,1) (1,1) (2,0) (2,1); tp = 1: (1,0)
    rc_of, sp_of = np.asarray([0, 0, 1, 2, 2]), np.asarray([0, 1, 1, 0, 1])

    def v_ok(r: dict[str, np.ndarray]) -> np.ndarray:  # interleaving: pp·v divides the layers, m a multiple of pp
        n_micro = gb // (r["dp"] * r["micro_batch"])
        pp_ = r["pp"][:, None]
        return (vs[None, :] == 1) | ((pp_ > 1) & (spec.layers % (pp_ * vs[None, :]) == 0)
                                     & (n_micro[:, None] % pp_ == 0))  # fmt: skip

    def rc_ok(r: dict[str, np.ndarray]) -> np.ndarray:  # SP needs tp > 1; selective without SP is dominated
        tp1 = r["tp"][:, None] == 1
        return np.where(tp1, sp_of[None, :] == 0, True) | (tp1 & (rc_sp[None, :] == 2))

    def mb_ok(r: dict[str, np.ndarray]) -> np.ndarray:  # any divisor of the per-replica batch
        return ((gb // r["dp"])[:, None] % mbs[None, :]) == 0

    pruned = 0
    rows["offload_optimizer"] = np.zeros(rows["tp"].shape, dtype=bool)
    if prune is not None:
        keep = prune(rows)
        if offload is not None:
            rows["offload_optimizer"] = offload(rows) & ~keep
            keep = keep | rows["offload_optimizer"]
        if not keep.all():
            # the layouts each ruled-out row stood for, counted without building them: per micro-batch, plain 1F1B
            # plus every interleaved v the rule allows, times the recompute/SP variants
            gone = {k: v[~keep] for k, v in rows.items()}
            m = gb // (gone["dp"][:, None] * mbs[None, :])
            pp_ = gone["pp"][:, None]
            n_v = ((pp_ > 1) & (spec.layers % (pp_ * vs[None, :]) == 0) & (vs[None, :] > 1)).sum(axis=1)
            per_mb = 1 + n_v[:, None] * (m % pp_ == 0)
            pruned = int(((mb_ok(gone) * per_mb).sum(axis=1) * rc_ok(gone).sum(axis=1)).sum())
            rows = {k: v[keep] for k, v in rows.items()}
    # ---- micro-batch per structural tuple, then that tuple's model-state variants (rows of one parent) ---------
    parent = rows.pop("parent")  # non-decreasing: every expansion keeps its rows' order
    first = np.flatnonzero(np.r_[True, parent[1:] != parent[:-1]]) if parent.size else parent
    n_var = np.diff(np.r_[first, parent.size])  # variants of each structural tuple
    struct = {k: rows[k][first] for k in ("tp", "cp", "pp", "dp")}
    struct["start"], struct["n_var"] = first, n_var
    struct = _expand(struct, "micro_batch", mbs, mb_ok(struct))
    reps = struct.pop("n_var")
    at = np.repeat(struct.pop("start") - np.cumsum(reps) + reps, reps) + np.arange(int(reps.sum()))
    out = {k: np.repeat(v, reps) for k, v in struct.items()} | {k: rows[k][at] for k in rows if k not in struct}
    out = _expand(out, "virtual_stages", vs, v_ok(out))
    out = _expand(out, "rc_sp", rc_sp, rc_ok(out))
    code = out.pop("rc_sp")
    out["recompute"] = rc_of[code]
    out["sequence_parallel"] = (sp_of[code] == 1) & (out["tp"] > 1)
    out["offload_activations"] = np.zeros(out["tp"].shape, dtype=bool)
    if count_pruned is not None:
        count_pruned.append(pruned)
    return LayoutArrays(**out)


def family(tp: int, pp: int, dp: int, zero: int) -> str:
    """The seed articles' name for a layout's parallelism (the Parallelism Selector's rows)."""
    if tp == 1 and pp == 1:
        return "data parallel" + (" (sharded)" if zero else "") if dp > 1 else "single GPU"
    if pp == 1:
        return "tensor parallel" if dp == 1 else "tensor + data parallel"
    if tp == 1:
        return "pipeline parallel" if dp == 1 else "pipeline + data parallel"
    return "3D hybrid (tensor + pipeline + data)"


def _family_code(tp: np.ndarray, pp: np.ndarray, dp: np.ndarray, zero: np.ndarray) -> np.ndarray:
    """``family`` as an integer per layout (same cases, vectorised)."""
    t1, p1, d1 = tp == 1, pp == 1, dp == 1
    return np.select(
        [t1 & p1 & d1, t1 & p1 & (zero == 0), t1 & p1, p1 & d1, p1, t1 & d1, t1],
        [0, 1, 2, 3, 4, 5, 6], default=7,
    )  # fmt: skip


def _winners(gpus: np.ndarray, fam: np.ndarray, tokens_per_s: np.ndarray, micro_batch: np.ndarray,
             counts: list[int] | None = None) -> np.ndarray:  # fmt: skip
    """Indices of the fastest layout per GPU count and per (count, family); on exact ties the larger micro-batch
    (fewer kernel launches, which the model does not time). One pass (``np.maximum.at``), no sort of all layouts
    (``counts``: the GPU counts searched, ascending, which index the counts; default: those of ``gpus``)."""
    if counts is None:
        _, count_id = np.unique(gpus, return_inverse=True)
    else:
        count_id = np.searchsorted(np.asarray(counts), gpus)
    key = count_id * 8 + fam
    best = np.full(int(key.max()) + 1, -np.inf)
    np.maximum.at(best, key, tokens_per_s)
    cand = np.flatnonzero(tokens_per_s == best[key])  # the fastest of each group, with its exact ties
    order = cand[np.lexsort((-micro_batch[cand], key[cand]))]
    first = np.ones(order.size, dtype=bool)
    first[1:] = key[order][1:] != key[order][:-1]
    return np.sort(order[first])


@dataclass
class TrainCandidates:
    """Evaluated training layouts of one GPU type: what the plan and its explanations need (the fastest layout per
    GPU count and per parallelism family at each count), as flat arrays."""

    gpu: str
    precision: str
    n_evaluated: int  # valid layouts whose memory was evaluated (model states first; activations if those fit)
    n_fit: int  # layouts that fit, each of which received the performance model
    arrays: dict[str, np.ndarray]  # Layout field names + gpus, step_time_s, tokens_per_s, mfu, memory_gb, t_* ...
    note: str | None = None
    n_fit_offload: int = 0  # of n_fit, the layouts that fit only with optimizer and/or activation offload

    def layouts(self) -> LayoutArrays:
        """The kept layouts as a ``LayoutArrays``."""
        return LayoutArrays(**{k: self.arrays[k] for k in LayoutArrays.__dataclass_fields__})


def tp_domain(system: System) -> int:
    """GPUs a tensor-parallel group may span: the innermost (scale-up) domain, at most the whole host when that
    domain is unbounded or larger than it (an NVL72 rack: 72)."""
    d = system.tiers[0].domain_gpus
    return d if d is not None else system.gpus_per_node


def evaluate_training(spec: TransformerSpec, *, gpu, counts: list[int], seq_len: int, global_batch: int,
                      precision: str, task: str, optimizer: str, lora_rank: int,
                      cal: Calibration = DEFAULT_CALIBRATION, system: System | None = None,
                      cluster: Cluster | None = None, tp_comm_overlap: bool | None = None,
                      framework: Framework | str | None = None, ep_comm_overlap: bool = False,
                      keep: str = "winners", allow_offload: bool = True) -> TrainCandidates:  # fmt: skip
    """Evaluate every valid layout of ``spec`` on ``gpu`` in ``system`` (default: ``system_of(gpu, cluster=...)``;
    see module docstring). ``keep="winners"`` keeps the fastest layout per count and per (count, family);
    ``keep="all"`` every layout that fits. ``framework`` (default fsdp2) sets the step model's behaviour and the
    memory model's inputs alike (``estimate.memory.profiles``, per ZeRO stage): which layouts fit, and their
    memory figures, are those of ``estimate_train`` with the same framework. ``allow_offload=False``
    (the scenario's ``constraints.allow_offload``) searches no offload layout."""
    _keep_heap_top()
    system = system_of(gpu, system=system, cluster=cluster)
    fallback, note = gpu.tensor_precision(precision)  # a part without the requested rate runs its fallback
    if fallback is None:
        return TrainCandidates(gpu.id, precision, 0, 0, {}, note=note)
    prec = fallback
    lora = LoraConfig(rank=lora_rank) if task in ("lora", "qlora") else None

    # offload is searched where the catalog gives the part a host link, for full training (a frozen base has no
    # optimizer states to move), and only for layouts that cannot fit without it
    link = host_link_bytes_per_s(gpu) if allow_offload and task not in ("lora", "qlora") else None
    cap = gpu.memory_gb
    # the framework's memory behaviour (``memory.profiles``), resolved once per ZeRO stage for this GPU type: the
    # state format the pruning below counts, and what ``training_memory_arrays`` assumes for every layout
    fw = framework_of(framework)
    state_of = {z: resolve_profile(fw, zero=z, precision=prec).states for z in range(4)}

    def states_gb(r: dict[str, np.ndarray], offload: bool) -> np.ndarray:
        """Sharded weights, gradients and optimizer states per GPU (``model_state_bytes``) in the framework's state
        format at each row's ZeRO stage, with optimizer offload what stays on the GPU (``memory.offload``)."""
        zero = np.asarray(r["zero"])
        out = np.zeros(zero.shape)
        for fmt in dict.fromkeys(state_of.values()):  # one evaluation per state format, on its rows only
            stages = [z for z, f in state_of.items() if f == fmt]
            rows = slice(None) if len(stages) == len(state_of) else np.isin(zero, stages)
            at = {k: np.asarray(r[k])[rows] for k in ("tp", "pp", "dp", "cp", "ep", "etp", "zero", "dp_shard")}
            w, g_, o = model_state_bytes(spec, tp=at["tp"], pp=at["pp"], dp=at["dp"], cp=at["cp"], ep=at["ep"],
                                         etp=at["etp"], zero=at["zero"], dp_shard=at["dp_shard"], precision=prec,
                                         optimizer=optimizer, states=fmt)  # fmt: skip
            if offload:
                w, g_, o = resident_states(w, g_, o, True, fp32_master_weights=(
                    prec != "fp32" and STATE_FORMATS[fmt].fp32_weights))  # fmt: skip
            out[rows] = (w + g_ + o) / GB
        return out

    def states_fit(r: dict[str, np.ndarray]) -> np.ndarray:
        """States within the GPU's memory: they do not depend on activations, so a layout whose states alone
        overflow cannot fit."""
        return states_gb(r, False) <= cap

    def fits_offloaded(r: dict[str, np.ndarray]) -> np.ndarray:  # ZeRO-Offload needs ZeRO >= 1
        return (r["zero"] >= 1) & (states_gb(r, True) <= cap)

    pruned: list[int] = []
    interleaved = fw.pipeline_schedule == "interleaved"  # v > 1 needs an interleaved schedule
    grid = train_layout_grid(spec, counts=counts, gpus_per_node=tp_domain(system), seq_len=seq_len,
                             global_batch=global_batch, task=task, count_pruned=pruned, interleaved=interleaved,
                             prune=None if task in ("lora", "qlora") else states_fit,
                             offload=None if link is None else fits_offloaded)  # fmt: skip
    n_eval = len(grid) + sum(pruned)
    if len(grid) == 0:
        note = note or ("no valid layout for these GPU counts" if n_eval == 0 else None)
        return TrainCandidates(gpu.id, prec, n_eval, 0, {}, note=note)

    def memory(g: LayoutArrays) -> tuple[dict[str, np.ndarray], np.ndarray]:
        m = training_memory_arrays(spec, seq_len=seq_len, n_micro=global_batch // (g.dp * g.micro_batch),
                                   precision=prec, optimizer=optimizer, task=task, lora=lora, framework=fw,
                                   **g.kwargs())  # fmt: skip
        tot = m["weights"] + m["gradients"]
        for k in ("optimizer", "gathered", "activations", "overhead"):
            tot += m[k]
        tot /= GB
        return m, tot

    mem, total = memory(grid)
    fit = total <= cap
    parts: list[_Part] = [(grid, mem, total, np.flatnonzero(fit), np.arange(len(grid)))]
    if link is not None and not fit.all():
        variants, n_var = _offload_variants(grid, mem, total, fit, cap, memory)
        parts += variants
        n_eval += n_var
    n_fit = sum(int(p[3].size) for p in parts)
    if n_fit == 0:
        return TrainCandidates(gpu.id, prec, n_eval, 0, {}, note=note)
    # the fitting layouts: grid rows (one take) with each part's offload flags
    sub = grid.take(np.concatenate([p[4][p[3]] for p in parts]))
    if len(parts) > 1:
        sub = dataclasses.replace(sub, **{k: np.concatenate([getattr(p[0], k)[p[3]] for p in parts])
                                          for k in ("offload_optimizer", "offload_activations")})  # fmt: skip
    perf = train_step_arrays(spec, gpu=gpu, system=system, seq_len=seq_len, global_batch=global_batch,
                             precision=prec, task=task, lora=lora, cal=cal, tp_comm_overlap=tp_comm_overlap,
                             framework=framework, ep_comm_overlap=ep_comm_overlap, optimizer=optimizer,
                             **sub.kwargs())  # fmt: skip
    gpus = sub.gpus
    if keep == "all":
        idx = np.arange(n_fit)
    else:
        fam = _family_code(sub.tp, sub.pp, sub.dp, sub.zero)
        idx = _winners(gpus, fam, np.asarray(perf["tokens_per_s"]), sub.micro_batch, sorted(counts))
    arrays = sub.take(idx).as_dict()
    arrays["gpus"] = gpus[idx]
    # each kept layout's memory, from the part it was evaluated in
    ends = np.cumsum([p[3].size for p in parts])
    part_of = np.searchsorted(ends, idx, side="right")
    names = ("weights", "gradients", "optimizer", "gathered", "activations", "overhead")
    arrays["memory_gb"] = np.empty(idx.size)
    for k in names:
        arrays[f"mem_{k}"] = np.empty(idx.size)
    for j, (_, m, tot, ok, _rows) in enumerate(parts):
        here = part_of == j
        at = ok[idx[here] - (ends[j] - ok.size)]
        arrays["memory_gb"][here] = tot[at]
        for k in names:
            arrays[f"mem_{k}"][here] = m[k][at] / GB
    arrays.update({k: np.asarray(v)[idx] for k, v in perf.items()})
    n_off = int((sub.offload_optimizer | sub.offload_activations).sum())
    return TrainCandidates(gpu.id, prec, n_eval, n_fit, arrays, note=note, n_fit_offload=n_off)


# layouts evaluated, their memory, its GB, those that fit, the grid row of each layout
_Part = tuple[LayoutArrays, dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]


def _offload_variants(grid: LayoutArrays, mem: dict[str, np.ndarray], total: np.ndarray, fit: np.ndarray,
                      cap: float, memory: Callable[[LayoutArrays], tuple[dict[str, np.ndarray], np.ndarray]]
                      ) -> tuple[list[_Part], int]:  # fmt: skip
    """The offload variants of the layouts that do not fit (``fit`` false): optimizer offload (ZeRO >= 1),
    activation offload, and both where neither alone fits; a layout already offloading its optimizer (its states
    fit no other way) may add activation offload. A variant's memory is evaluated only where a lower bound says
    it could fit (its memory without what it moves off the GPU and without the overheads, which only shrink with
    it); returns the parts (``_Part``) and the number of variants evaluated."""
    miss = np.flatnonzero(~fit)
    gb = {k: mem[k][miss] / GB for k in ("gradients", "optimizer", "activations", "overhead")}
    base = total[miss] - gb["overhead"]
    plain = ~grid.offload_optimizer[miss]
    zero_ok = grid.zero[miss] >= 1
    out: list[_Part] = []
    n_var, fits_one = 0, np.zeros(miss.size, dtype=bool)

    def evaluate(sel: np.ndarray, opt: bool, act: bool) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
        nonlocal n_var
        idx = np.flatnonzero(sel)
        v = grid.take(miss[idx])
        v = dataclasses.replace(v, offload_optimizer=v.offload_optimizer | opt,
                                offload_activations=np.full(idx.size, act))
        m, tot = memory(v) if idx.size else ({k: np.zeros(0) for k in mem}, np.zeros(0))
        ok = tot <= cap
        n_var += idx.size
        fits_one[idx[ok]] = True
        if idx.size:
            out.append((v, m, tot, np.flatnonzero(ok), miss[idx]))
        return idx, m, tot

    # both: at least what either single variant left once the other's share is gone as well
    both = base - gb["gradients"] - gb["optimizer"] - gb["activations"]
    idx, m, tot = evaluate(plain & zero_ok & (base - gb["gradients"] - gb["optimizer"] <= cap), True, False)
    both[idx] = np.maximum(both[idx], tot - (m["activations"] + m["overhead"]) / GB)
    idx, m, tot = evaluate(plain & (base - gb["activations"] <= cap), False, True)
    both[idx] = np.maximum(both[idx], tot - (m["gradients"] + m["optimizer"] + m["overhead"]) / GB)
    evaluate(~fits_one & plain & zero_ok & (both <= cap), True, True)
    evaluate(~plain & (base - gb["activations"] <= cap), True, True)  # already offloading: add activations
    return out, n_var


def layout_dict(arrays: dict[str, np.ndarray], i: int) -> dict:
    """The layout of entry ``i`` as plain values (``Layout``'s field names; ``recompute`` by name)."""
    d: dict[str, Any] = {k: int(arrays[k][i]) for k in ("tp", "pp", "dp", "cp", "ep", "etp", "zero", "dp_shard",
                                                        "micro_batch", "virtual_stages")}  # fmt: skip
    d["recompute"] = RECOMPUTE_NAMES[int(arrays["recompute"][i])]
    for k in ("sequence_parallel", "offload_optimizer", "offload_activations"):
        d[k] = bool(arrays[k][i])
    return d


def time_breakdown(arrays: dict[str, np.ndarray], i: int) -> dict[str, float]:
    return {k: float(arrays[f"t_{k}"][i]) for k in TIME_KEYS}


# ----------------------------------------------------------------------------------------------------------------
# Inference
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class InferCandidate:
    """The cheapest way to carry the load with one GPU type and TP size."""

    gpu: str
    tp: int
    fits: bool
    reason: str | None
    batch_per_replica: int = 0
    max_batch: int = 0
    replicas: int = 0
    gpus: int = 0
    capacity_requests_per_s: float = 0.0  # all replicas
    ttft_s: float = math.inf
    tpot_s: float = math.inf
    e2e_latency_s: float = math.inf
    utilisation: float = 0.0
    curve: dict[str, list] = field(default_factory=dict)  # batch -> throughput/latency of one replica
    memory_breakdown_gb: dict[str, float] = field(default_factory=dict)  # per GPU at batch_per_replica


def evaluate_inference(spec: TransformerSpec, *, gpu, tp: int, rate_rps: float, input_len: int,
                       output_len: int, precision: str, kv_precision: str, ttft_slo_s: float | None,
                       tpot_slo_s: float | None, max_gpus: int, cal: Calibration = DEFAULT_CALIBRATION,
                       batch_limit: int | None = None, system: System | None = None,
                       cluster: Cluster | None = None) -> InferCandidate:  # fmt: skip
    """Largest SLO-meeting batch per replica (at most ``batch_limit``), then replicas = ceil(rate / capacity);
    ``system`` is the network (default: ``system_of(gpu, cluster=...)``)."""
    from scaleright.estimate.infer import max_batch  # serving only: a training plan never loads it
    from scaleright.estimate.memory import inference_memory_arrays

    system = system_of(gpu, system=system, cluster=cluster)
    try:
        mb = max_batch(spec, gpu=gpu, context=input_len + output_len, tp=tp, precision=precision,
                       kv_precision=kv_precision, limit=INFER_BATCH_LIMIT)  # fmt: skip
    except InputError as exc:
        return InferCandidate(gpu.id, tp, False, str(exc))
    if mb < 1:
        return InferCandidate(gpu.id, tp, False, f"model and one {input_len + output_len}-token sequence do not fit")
    if batch_limit is not None:
        mb = min(mb, batch_limit)
    batches = np.unique(np.concatenate([np.asarray(_pow2_upto(mb)), [mb]]))
    try:
        arr = _infer(spec, gpu, system, tp, batches, input_len, output_len, precision, kv_precision, cal)
    except InputError as exc:
        return InferCandidate(gpu.id, tp, False, str(exc), max_batch=mb)
    ok = np.ones(batches.shape, dtype=bool)
    if ttft_slo_s is not None:
        ok &= arr["ttft_s"] <= ttft_slo_s
    if tpot_slo_s is not None:
        ok &= arr["tpot_s"] <= tpot_slo_s
    curve = {k: np.asarray(v).tolist() for k, v in arr.items()} | {"batch": batches.tolist()}
    if not ok.any():
        which = []
        if ttft_slo_s is not None and arr["ttft_s"][0] > ttft_slo_s:
            which.append(f"TTFT {arr['ttft_s'][0]:.3g} s > SLO {ttft_slo_s:g} s")
        if tpot_slo_s is not None and arr["tpot_s"][0] > tpot_slo_s:
            which.append(f"TPOT {arr['tpot_s'][0]:.3g} s > SLO {tpot_slo_s:g} s")
        return InferCandidate(gpu.id, tp, False, "even batch 1 misses the SLO: " + "; ".join(which), max_batch=mb,
                              curve=curve)  # fmt: skip
    i = int(np.flatnonzero(ok)[-1])
    cap = float(arr["requests_per_s"][i])
    need = rate_rps / cap
    if not math.isfinite(need):  # a rate no finite number of replicas carries (never an int of infinity)
        return InferCandidate(gpu.id, tp, False, f"{rate_rps:g} requests/s needs more replicas than max_gpus "
                              f"{max_gpus} allows", max_batch=mb, curve=curve)  # fmt: skip
    replicas = max(math.ceil(need - 1e-12), 1)
    gpus = replicas * tp
    fits = gpus <= max_gpus
    mem = inference_memory_arrays(spec, batch=int(batches[i]), context=input_len + output_len, tp=tp,
                                  precision=precision, kv_precision=kv_precision)  # fmt: skip
    return InferCandidate(
        gpu.id, tp, fits, None if fits else f"needs {gpus} GPUs > max_gpus {max_gpus}",
        batch_per_replica=int(batches[i]), max_batch=mb, replicas=replicas, gpus=gpus,
        capacity_requests_per_s=cap * replicas, ttft_s=float(arr["ttft_s"][i]), tpot_s=float(arr["tpot_s"][i]),
        e2e_latency_s=float(arr["e2e_latency_s"][i]), utilisation=rate_rps / (cap * replicas), curve=curve,
        memory_breakdown_gb={k: float(v) / GB for k, v in mem.items()},
    )  # fmt: skip


def _infer(spec, gpu, system, tp, batches, input_len, output_len, precision, kv_precision, cal):
    from scaleright.estimate.infer import infer_arrays

    return infer_arrays(spec, gpu=gpu, system=system, tp=tp, pp=1, batch=batches, input_len=input_len,
                        output_len=output_len, precision=precision, kv_precision=kv_precision, cal=cal)
