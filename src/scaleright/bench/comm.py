"""``run_comm_bench``: time all-reduce, all-gather and reduce-scatter over message sizes at each world size.

One torchrun job per world size (``bench/comm_worker.py``); per call the slowest rank's time, then the median over
calls; algbw and busbw by the nccl-tests definitions (``bench/busbw.py``). Each world size is stored as one run of
kind ``comm`` whose metrics hold one row per (op, size). As in ``bench/train.py``, a ``BenchRunError`` or
``KeyboardInterrupt`` raised out of the sweep carries ``.result``, the runs so far (the failed one last).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from scaleright.bench._torch import check_torch
from scaleright.bench.busbw import algbw_gb_per_s, bus_factor
from scaleright.bench.config import CommBenchConfig
from scaleright.bench.db import RunStore
from scaleright.bench.errors import BenchRunError
from scaleright.bench.fingerprint import hardware_info, software_info
from scaleright.bench.launch import REMOTE, Launch, run_ranks, worker_config
from scaleright.bench.progress import Reporter
from scaleright.bench.resources import oversubscription, shared_hardware_warning
from scaleright.bench.stats import SPREAD_CV_LIMIT, coefficient_of_variation, elementwise_max, summarize
from scaleright.bench.validate import validated

__all__ = ["run_comm_bench", "comm_launch", "comm_rows", "comm_warnings"]

WORKER = "scaleright.bench.comm_worker"


def comm_launch(cfg: CommBenchConfig, nproc_per_node: int) -> Launch:
    """The torchrun launch of the collective worker at one world size."""
    return Launch(WORKER, nproc_per_node, cfg.launch)


def comm_rows(ranks: list[dict]) -> list[dict[str, Any]]:
    """One row per (op, size): time spread, algbw and busbw (GB/s) from the median time."""
    n = len(ranks)
    rows = []
    for i, row in enumerate(ranks[0]["rows"]):
        times = elementwise_max([r["rows"][i]["times_s"] for r in ranks])
        stats = summarize(times, "time_s")
        t = stats["time_s_median"]
        algbw = algbw_gb_per_s(size_bytes=row["size_bytes"], time_s=t)
        rows.append({"op": row["op"], "size_bytes": row["size_bytes"], "world_size": n, **stats,
                     "time_s_cv": coefficient_of_variation(times),
                     "algbw_gb_per_s": algbw, "busbw_gb_per_s": algbw * bus_factor(row["op"], n)})
    return rows


def run_comm_bench(config: CommBenchConfig | dict, *, store: RunStore | None = None,
                   on_run: Callable[[dict], None] | None = None, progress: Reporter | None = None) -> dict[str, Any]:
    """Run the sweep; returns ``{"sweep_id", "runs": [{"run_id", "world_size", "status", "rows": [...],
    "shared_hardware"}], "warnings": [...]}``: ``shared_hardware`` says why the ranks time-shared CPU cores or GPUs
    (None when they did not, ``bench/resources.py``); ``warnings`` has one line per world size whose ranks shared
    hardware or whose timed calls disagree (coefficient of variation above ``SPREAD_CV_LIMIT``) in some rows."""
    cfg = validated(CommBenchConfig, config, what="comm config")
    check_torch()
    sweep_id = uuid.uuid4().hex[:12]
    model = {"dtype": cfg.dtype, "ops": [o.value for o in cfg.ops], "sizes_bytes": list(cfg.sizes_bytes)}
    runs: list[dict[str, Any]] = []
    try:
        for i, nproc in enumerate(cfg.nproc):
            launch = comm_launch(cfg, nproc)
            if progress is not None:
                progress.phase(f"world_size={launch.world_size} ({i + 1} of {len(cfg.nproc)})")
            layout = {"world_size": launch.world_size, "nproc_per_node": nproc, "nnodes": cfg.launch.nnodes,
                      "warmup": cfg.warmup, "iters": cfg.iters}
            try:
                ranks = run_ranks(launch, worker_config(cfg, nproc),
                                  on_progress=progress.tick if progress is not None else None)  # fmt: skip
            except BenchRunError as exc:
                run_id = None
                if store is not None:
                    run_id = store.add(kind="comm", model=model, layout=layout, metrics={}, hardware=hardware_info(),
                                       software=software_info(), status="failed", error=str(exc), sweep_id=sweep_id)
                runs.append({"run_id": run_id, "world_size": launch.world_size, "status": "failed", "error": str(exc),
                             "rows": []})
                raise
            if ranks == REMOTE:
                runs.append({"run_id": None, "world_size": launch.world_size, "status": "remote", "rows": []})
                continue
            r0 = ranks[0]
            layout.update(device_type=r0["device_type"], device_name=r0["device_name"], backend=r0["backend"])
            metrics = {"rows": comm_rows(ranks),
                       "busbw_definition": "nccl-tests doc/PERFORMANCE.md: all-reduce 2(n-1)/n, others (n-1)/n"}
            run_id = None
            if store is not None:
                run_id = store.add(kind="comm", model=model, layout=layout, metrics=metrics, sweep_id=sweep_id,
                                   hardware=hardware_info(r0["cuda_devices"]),
                                   software=software_info(backend=r0["backend"]))
            shared = oversubscription(ranks_per_node=nproc, device_type=r0["device_type"],
                                      gpus_per_node=len(r0.get("cuda_devices") or []))  # fmt: skip
            run = {"run_id": run_id, "world_size": launch.world_size, "status": "ok", "backend": r0["backend"],
                   "rows": metrics["rows"], "shared_hardware": shared}
            runs.append(run)
            if on_run is not None:
                on_run(run)
    except (BenchRunError, KeyboardInterrupt) as exc:  # the sweep so far travels with the error
        exc.result = {"sweep_id": sweep_id, "runs": runs}  # type: ignore[union-attr]
        raise
    return {"sweep_id": sweep_id, "runs": runs, "warnings": comm_warnings(runs, iters=cfg.iters)}


def comm_warnings(runs: list[dict[str, Any]], *, iters: int) -> list[str]:
    """Per ok run: one line if its ranks shared hardware, one if some rows' timed calls disagree."""
    out = []
    for r in runs:
        if r["status"] != "ok":
            continue
        if r.get("shared_hardware"):
            out.append(shared_hardware_warning(r["world_size"], r["shared_hardware"],
                                               "its times and bandwidths are not the interconnect's"))
        spread = [row for row in r["rows"] if (row.get("time_s_cv") or 0.0) > SPREAD_CV_LIMIT]
        if spread:
            worst = max(spread, key=lambda row: row["time_s_cv"])
            out.append(f"world_size={r['world_size']}: in {len(spread)} of {len(r['rows'])} (op, size) rows the "
                       f"{iters} timed calls disagree (coefficient of variation above {SPREAD_CV_LIMIT:.0%}; worst "
                       f"{worst['op']} {worst['size_bytes']:,} B at {worst['time_s_cv']:.0%}); their medians are "
                       "uncertain")  # fmt: skip
    return out
