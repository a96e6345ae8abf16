"""The training-step benchmark, one process per rank, started by torchrun (``python -m scaleright.bench.worker``).

Protocol per rank (STYLE.md habit 11): build and wrap the model (``bench/parallelize.build_model``: a catalog
decoder under FSDP on the meta device, then only this rank's shards materialised), run ``warmup`` untimed
steps, barrier, then ``steps`` timed steps, each ending in a device synchronise. A step is: generate a random batch
(timed separately as data-loading time), forward, cross-entropy loss, backward, AdamW step, zero grads. Each
step's loss is read after the step's closing synchronise (outside its timing): the first is the loss at the
random initialisation, ~ln(vocab) plus half the logits' variance.

Communication time (exposed, i.e. not hidden behind compute) is measured after the timed steps by interleaving
``steps`` pairs of backward passes on fresh batches: one with gradient reduction switched off (DDP ``no_sync``;
FSDP2 ``set_requires_gradient_sync(False)``) and one with it on, each bracketed by synchronises. comm = median(synced
backward) - median(unsynced backward), floored at 0. It counts the gradient all-reduce (DDP) or reduce-scatter (FSDP)
that backward waits for; FSDP's parameter all-gathers stay in compute. Compute = step - comm - data. With one rank
or ``single`` there is no communication and comm = 0.
"""

from __future__ import annotations

import time

from scaleright.bench.rank import RankContext, run_rank

__all__ = ["train_rank"]

COMM_METHOD = (
    "median(backward with gradient sync) - median(backward without: DDP no_sync / FSDP2 "
    "set_requires_gradient_sync(False)), interleaved pairs after the timed steps"
)


def train_rank(ctx: RankContext, config: dict) -> dict:
    """Time ``config['steps']`` training steps on this rank; return raw per-step timings."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    from scaleright.bench.config import Strategy, TrainBenchConfig
    from scaleright.bench.faults import inject
    from scaleright.bench.memory import PeakMemory
    from scaleright.bench.parallelize import autocast_context, build_model, gradient_sync, local_param_bytes

    cfg = TrainBenchConfig.model_validate(config)
    spec, dev, mark = cfg.model, ctx.device, ctx.progress.mark
    torch.manual_seed(cfg.seed)  # same initial weights on every rank
    gen = torch.Generator(device=dev).manual_seed(cfg.seed * 1_000_003 + ctx.rank)  # different data per rank

    mem = PeakMemory(dev)
    mem.start()
    mark("build model")
    model = build_model(cfg, dev)
    param_bytes = local_param_bytes(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    autocast = autocast_context(strategy=cfg.strategy, precision=cfg.precision, device=dev)

    def batch() -> tuple[torch.Tensor, torch.Tensor]:
        tokens = torch.randint(0, spec.vocab, (cfg.micro_batch, spec.seq_len + 1), device=dev, generator=gen)
        return tokens[:, :-1], tokens[:, 1:]  # inputs, next-token targets

    def loss_of(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with autocast:
            logits = model(x)
        return F.cross_entropy(logits.float().reshape(-1, spec.vocab), y.reshape(-1))

    losses: list[float] = []

    def step(label: str) -> tuple[float, float]:
        mark(f"{label}: data")
        t0 = time.perf_counter()
        x, y = batch()
        ctx.sync()
        t_data = time.perf_counter() - t0
        mark(f"{label}: forward")
        loss = loss_of(x, y)
        mark(f"{label}: backward")
        loss.backward()
        mark(f"{label}: optimizer")
        opt.step()
        opt.zero_grad(set_to_none=True)
        ctx.sync()
        elapsed = time.perf_counter() - t0
        losses.append(float(loss.detach()))
        return elapsed, t_data

    for i in range(cfg.warmup):
        step(f"warmup {i}")
    mark("barrier")
    dist.barrier()
    step_times, data_times = [], []
    for i in range(cfg.steps):
        if i == 0:
            mark("step 0: start")
            inject(ctx.rank, dev)
        t_step, t_data = step(f"step {i}")
        step_times.append(t_step)
        data_times.append(t_data)
    ctx.sync()
    peak = mem.peak_bytes()
    mark("barrier")
    dist.barrier()

    synced: list[float] = []
    unsynced: list[float] = []
    if ctx.world_size > 1 and cfg.strategy is not Strategy.SINGLE:
        sync_grads = gradient_sync(model, cfg.strategy)
        for i in range(cfg.steps):
            for enabled, out in ((False, unsynced), (True, synced)):
                mark(f"comm probe {i}: sync={enabled}")
                with sync_grads(enabled):
                    loss = loss_of(*batch())
                    ctx.sync()
                    t0 = time.perf_counter()
                    loss.backward()
                    ctx.sync()
                    out.append(time.perf_counter() - t0)
                opt.zero_grad(set_to_none=True)

    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    cuda_devices = ([torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
                    if dev.type == "cuda" else [])
    return {
        "step_times_s": step_times,
        "data_times_s": data_times,
        "synced_backward_s": synced,
        "unsynced_backward_s": unsynced,
        "peak_memory_bytes": peak,
        "param_bytes_local": param_bytes,
        "losses": losses,
        "peak_memory_method": mem.method,
        "device_type": dev.type,
        "device_name": name,
        "cuda_devices": cuda_devices,
        "backend": dist.get_backend(),
        "torch_cuda": torch.version.cuda,
        "cpu_threads": torch.get_num_threads(),
    }


if __name__ == "__main__":
    run_rank(train_rank)
