"""``run_train_bench``: one torchrun job per world size, each stored as soon as it finishes, then scaling efficiency.

Combining ranks (``bench/worker.py`` gives raw per-rank timings): a synchronous step takes as long as its slowest
rank, so step i's time is the max over ranks; the median and spread are taken over steps. tokens/s = world_size x
micro_batch x seq_len / median step time (global throughput). Peak memory is reported per rank and as the max.
A failed world size is stored with ``status="failed"`` and its error, then ``BenchRunError`` is raised; world sizes
that finished before it stay stored. The raised error (and a ``KeyboardInterrupt``, after torchrun and its workers
were stopped) carries ``.result``: the sweep so far, in the shape ``run_train_bench`` returns, the failed run last.

A catalog decoder is checked against each rank's memory before anything starts (``bench/fit.py``); a world size
that does not fit is refused with one line naming what would. Every run records the build path (``layout.init``),
the estimate and capacity it was checked against, the loss of the first and last step (the mean over ranks) and
the parameter bytes each rank held (``param_bytes_per_rank``: its shards under FSDP).
"""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np

from scaleright.bench._torch import check_torch
from scaleright.bench.config import TrainBenchConfig
from scaleright.bench.db import RunStore
from scaleright.bench.errors import BenchRunError
from scaleright.bench.fingerprint import hardware_info, software_info
from scaleright.bench.fit import FitCheck, build_path, check_fits, fit_checks
from scaleright.bench.launch import REMOTE, Launch, run_ranks, worker_config
from scaleright.bench.progress import Reporter
from scaleright.bench.resources import oversubscription, shared_hardware_warning
from scaleright.bench.scaling import scaling_curve
from scaleright.bench.spec import DecoderSpec
from scaleright.bench.stats import coefficient_of_variation, elementwise_max, spread_warning, summarize
from scaleright.bench.validate import validated
from scaleright.bench.worker import COMM_METHOD

__all__ = ["run_train_bench", "train_launch", "train_metrics", "train_layout", "train_warnings"]

WORKER = "scaleright.bench.worker"


def _threads_env(nproc_per_node: int) -> tuple[tuple[str, str], ...]:
    """One OMP thread per rank (torchrun's own default for several ranks), unless the user set OMP_NUM_THREADS.

    Every world size then gets the same resources per rank, so speedup and scaling efficiency compare like with
    like. Giving a lone rank all cores instead was measured here to be up to 100x slower on a 2-core, quota-limited
    machine (OpenMP spin-waiting on a throttled core), which made world size 2 look 58x faster than 1.
    """
    if "OMP_NUM_THREADS" in os.environ:
        return ()
    return (("OMP_NUM_THREADS", "1"),)


def train_launch(cfg: TrainBenchConfig, nproc_per_node: int) -> Launch:
    """The torchrun launch of the training worker at one world size."""
    return Launch(WORKER, nproc_per_node, cfg.launch, env=_threads_env(nproc_per_node))


def train_metrics(ranks: list[dict], *, micro_batch: int, seq_len: int) -> dict[str, Any]:
    """Every measured number of one run from the ranks' raw timings (see module doc)."""
    n = len(ranks)
    step = elementwise_max([r["step_times_s"] for r in ranks])
    data = elementwise_max([r["data_times_s"] for r in ranks])
    m: dict[str, Any] = summarize(step, "step_time_s")
    median = m["step_time_s_median"]
    m["tokens_per_s"] = n * micro_batch * seq_len / median
    m["tokens_per_s_per_rank"] = m["tokens_per_s"] / n
    m["data_time_s_median"] = float(np.median(data))
    comm = 0.0
    if ranks[0]["synced_backward_s"]:
        synced = elementwise_max([r["synced_backward_s"] for r in ranks])
        unsynced = elementwise_max([r["unsynced_backward_s"] for r in ranks])
        comm = max(0.0, float(np.median(synced) - np.median(unsynced)))
        m["backward_synced_s_median"] = float(np.median(synced))
        m["backward_unsynced_s_median"] = float(np.median(unsynced))
    m["comm_time_s_median"] = comm
    m["comm_method"] = COMM_METHOD if ranks[0]["synced_backward_s"] else "no communication (one rank)"
    m["compute_time_s_median"] = max(0.0, median - comm - m["data_time_s_median"])
    m["comm_fraction"] = comm / median
    per_rank = [r["peak_memory_bytes"] / 1e9 for r in ranks]
    m["peak_memory_gb"] = max(per_rank)
    m["peak_memory_gb_per_rank"] = per_rank
    m["peak_memory_method"] = ranks[0]["peak_memory_method"]
    m["steps"] = len(step)
    m["step_time_s_cv"] = coefficient_of_variation(step)
    if all(r.get("losses") for r in ranks):
        m["loss_initial"] = float(np.mean([r["losses"][0] for r in ranks]))
        m["loss_final"] = float(np.mean([r["losses"][-1] for r in ranks]))
    if all("param_bytes_local" in r for r in ranks):
        m["param_bytes_per_rank"] = [int(r["param_bytes_local"]) for r in ranks]
    return m


def train_layout(cfg: TrainBenchConfig, nproc_per_node: int, rank0: dict | None,
                 fit: FitCheck | None = None) -> dict[str, Any]:
    """How the run was laid out: strategy, sizes, precision, recompute, device, build path and memory check."""
    world = nproc_per_node * cfg.launch.nnodes
    checked = {"memory_estimate_gb": fit.estimate_gb, "memory_capacity_gb": fit.capacity_gb,
               "memory_capacity_source": fit.capacity_source} if fit is not None else {}
    return {**checked, "init": build_path(cfg),
        "strategy": cfg.strategy.value,
        "world_size": world,
        "nproc_per_node": nproc_per_node,
        "nnodes": cfg.launch.nnodes,
        "micro_batch": cfg.micro_batch,
        "global_batch": cfg.micro_batch * world,
        "precision": cfg.precision,
        "activation_checkpointing": cfg.activation_checkpointing,
        "device_type": rank0["device_type"] if rank0 else cfg.device,
        "device_name": rank0["device_name"] if rank0 else None,
        "backend": rank0["backend"] if rank0 else None,
        "cpu_threads_per_rank": rank0["cpu_threads"] if rank0 else None,
        "warmup_steps": cfg.warmup,
        "seed": cfg.seed,
    }


def run_train_bench(config: TrainBenchConfig | dict, *, store: RunStore | None = None,
                    on_run: Callable[[dict], None] | None = None,
                    progress: Reporter | None = None, fit: list[FitCheck] | None = None) -> dict[str, Any]:
    """Run the sweep; store each world size in ``store`` (if given) as it finishes.

    Returns ``{"sweep_id", "model", "fit": [...], "runs": [...], "scaling_efficiency": {"N": eff}, "speedup":
    {"N": s}, "warnings": [...]}`` (``model``: what each run stores; ``fit``: ``FitCheck.as_dict`` per world size of
    a catalog decoder); each run has ``run_id, world_size, status, init`` (the build path), every metric of
    ``train_metrics`` and ``shared_hardware`` (why its ranks time-shared CPU cores or GPUs, ``bench/resources.py``;
    None when they did not). ``warnings``: one line per
    world size whose steps disagree beyond ``SPREAD_CV_LIMIT`` or whose ranks shared their hardware. ``on_run`` is
    called per finished run; ``progress`` reports each world size and the ranks' progress while it runs. ``fit``:
    the memory checks already made (``bench.fit.fit_checks``), else they are made here; the result's ``fit`` lists
    them. Raises ``InputError`` before anything starts when a catalog decoder does not fit, ``BenchRunError``
    (after storing the failed run) when a world size fails.
    """
    cfg = validated(TrainBenchConfig, config, what="train config")
    checks = fit_checks(cfg) if fit is None else fit
    check_fits(cfg, checks)
    check_torch()
    by_world = {c.world_size: c for c in checks}
    sweep_id = uuid.uuid4().hex[:12]
    model = cfg.model.as_dict() if isinstance(cfg.model, DecoderSpec) else {**cfg.model.as_dict(), "preset": cfg.preset}
    fits = [c.as_dict() for c in checks]
    runs: list[dict[str, Any]] = []
    try:
        for i, nproc in enumerate(cfg.nproc):
            launch = train_launch(cfg, nproc)
            if progress is not None:
                progress.phase(f"world_size={launch.world_size} ({i + 1} of {len(cfg.nproc)}), {cfg.warmup} warm-up "
                               f"+ {cfg.steps} timed steps")  # fmt: skip
            try:
                ranks = run_ranks(launch, worker_config(cfg, nproc),
                                  on_progress=progress.tick if progress is not None else None)  # fmt: skip
            except BenchRunError as exc:
                run_id = None
                if store is not None:
                    run_id = store.add(kind="train", model=model, metrics={},
                                       layout=train_layout(cfg, nproc, None, by_world.get(launch.world_size)),
                                       hardware=hardware_info(), software=software_info(), status="failed",
                                       error=str(exc), sweep_id=sweep_id)
                runs.append({"run_id": run_id, "world_size": launch.world_size, "status": "failed", "error": str(exc)})
                raise
            if ranks == REMOTE:
                runs.append({"run_id": None, "world_size": launch.world_size, "status": "remote"})
                continue
            r0 = ranks[0]
            metrics = train_metrics(ranks, micro_batch=cfg.micro_batch, seq_len=cfg.model.seq_len)
            metrics["shared_hardware"] = oversubscription(
                ranks_per_node=nproc, device_type=r0["device_type"], threads_per_rank=r0.get("cpu_threads"),
                gpus_per_node=len(r0.get("cuda_devices") or []))  # fmt: skip
            layout = train_layout(cfg, nproc, r0, by_world.get(launch.world_size))
            run_id = None
            if store is not None:
                run_id = store.add(kind="train", model=model, layout=layout, metrics=metrics, sweep_id=sweep_id,
                                   hardware=hardware_info(r0["cuda_devices"]),
                                   software=software_info(torch_cuda=r0["torch_cuda"], backend=r0["backend"]))
            run = {"run_id": run_id, "world_size": launch.world_size, "status": "ok", "strategy": cfg.strategy.value,
                   "precision": cfg.precision, "device_type": r0["device_type"], "init": layout["init"], **metrics}
            runs.append(run)
            if on_run is not None:
                on_run(run)
    except (BenchRunError, KeyboardInterrupt) as exc:  # the sweep so far travels with the error
        exc.result = _sweep_result(sweep_id, runs, model, fits)  # type: ignore[union-attr]
        raise
    return _sweep_result(sweep_id, runs, model, fits)


def _sweep_result(sweep_id: str, runs: list[dict[str, Any]], model: dict[str, Any],
                  fits: list[dict[str, Any]]) -> dict[str, Any]:
    """What ``run_train_bench`` returns for ``runs`` (scaling over the ok ones)."""
    ok = [r for r in runs if r["status"] == "ok"]
    curve = scaling_curve({r["world_size"]: r["tokens_per_s"] for r in ok})
    return {
        "sweep_id": sweep_id,
        "model": model,
        "fit": fits,
        "runs": runs,
        "scaling_efficiency": {str(n): c["scaling_efficiency"] for n, c in curve.items()},
        "speedup": {str(n): c["speedup"] for n, c in curve.items()},
        "warnings": train_warnings(ok),
    }


def train_warnings(runs: list[dict[str, Any]]) -> list[str]:
    """One line per ok run whose timed steps disagree (``bench/stats.py``) or whose ranks shared hardware."""
    out = []
    for r in runs:
        spread = spread_warning(r.get("step_time_s_cv"), r["steps"], f"world_size={r['world_size']} step time")
        if spread is not None:
            out.append(spread)
        losses = [r[k] for k in ("loss_initial", "loss_final") if k in r]
        if any(not math.isfinite(v) for v in losses):
            out.append(f"world_size={r['world_size']}: the loss is not finite ({', '.join(f'{v:g}' for v in losses)}"
                       "): the timed steps computed NaN or infinity")
        if r.get("shared_hardware"):
            out.append(shared_hardware_warning(r["world_size"], r["shared_hardware"],
                                               "its throughput, speedup and scaling efficiency are not meaningful"))
    return out
