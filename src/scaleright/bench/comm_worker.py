"""Collective timing, one process per rank, started by torchrun (``python -m scaleright.bench.comm_worker``).

For each op and message size S (bytes, the nccl-tests convention in ``bench/busbw.py``): allocate the buffers once,
run ``warmup`` untimed calls, barrier, then time ``iters`` calls, each bracketed by device synchronises. The parent
takes, per call, the slowest rank's time and reports the median. S is rounded down to a whole number of elements
per rank (all-gather and reduce-scatter split S into n equal chunks).
"""

from __future__ import annotations

import time

from scaleright.bench.rank import RankContext, run_rank

__all__ = ["comm_rank", "elements_for"]


def elements_for(size_bytes: int, *, world_size: int, element_bytes: int) -> int:
    """Elements in the full buffer: S / element size, rounded down to a multiple of ``world_size`` (at least n)."""
    per_rank = max(1, size_bytes // element_bytes // world_size)
    return per_rank * world_size


def comm_rank(ctx: RankContext, config: dict) -> dict:
    """Time every (op, size) of the config on this rank."""
    import torch
    import torch.distributed as dist

    from scaleright.bench.config import CommBenchConfig, CommOp
    from scaleright.bench.faults import inject

    cfg = CommBenchConfig.model_validate(config)
    dtype = getattr(torch, cfg.dtype)
    esize = torch.empty((), dtype=dtype).element_size()
    n, dev = ctx.world_size, ctx.device
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    rows = []
    inject(ctx.rank, dev)
    for op in cfg.ops:
        for size in cfg.sizes_bytes:
            count = elements_for(size, world_size=n, element_bytes=esize)
            full = torch.zeros(count, dtype=dtype, device=dev)
            chunk = torch.zeros(count // n, dtype=dtype, device=dev)
            call = {
                CommOp.ALL_REDUCE: lambda: dist.all_reduce(full),  # noqa: B023 (called in this iteration only)
                CommOp.ALL_GATHER: lambda: gather(full, chunk),  # noqa: B023
                CommOp.REDUCE_SCATTER: lambda: scatter(chunk, full),  # noqa: B023
            }[op]
            ctx.progress.mark(f"{op.value} {count * esize} B")
            for _ in range(cfg.warmup):
                call()
            ctx.sync()
            dist.barrier()
            times = []
            for _ in range(cfg.iters):
                t0 = time.perf_counter()
                call()
                ctx.sync()
                times.append(time.perf_counter() - t0)
            rows.append({"op": op.value, "size_bytes": count * esize, "elements": count, "times_s": times})
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    return {"rows": rows, "device_type": dev.type, "device_name": name, "backend": dist.get_backend(),
            "cuda_devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            if dev.type == "cuda" else []}


if __name__ == "__main__":
    run_rank(comm_rank)
