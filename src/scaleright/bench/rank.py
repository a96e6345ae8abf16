"""What every torchrun worker shares: read the run config, start the process group, report faults, gather results.

Protocol with the parent (``bench/launch.py``), all files in the run directory named by ``SCALERIGHT_BENCH_DIR``:
- ``config.json`` (written by the parent): the benchmark config as JSON.
- ``rank{r}.progress``: progress beacon (``bench/progress.py``).
- ``rank{r}.error.json``: written by a rank that failed in Python: ``{"rank", "cause", "error", "phase", "time"}``
  with cause ``crash`` or ``oom`` (an exception; exit 1), ``interrupt`` (``KeyboardInterrupt``; exit 130) or
  ``exit`` (``SystemExit``, also recorded as ``"code"``; the rank exits with that code); torchrun then stops the
  others. A rank killed by a signal or leaving through a bare ``os._exit`` writes nothing: the parent learns its
  exit status from torchrun (``bench/launch.py``).
- ``result.json``: written by global rank 0 after ``all_gather_object`` of every rank's result: ``{"ranks": [...]}``.
  Only the node hosting global rank 0 gets it, which is how multi-node runs are collected without parsing stdout.
Workers leave through ``os._exit`` once their files are written, skipping interpreter teardown (see ``_exit``).
A worker dies with its torchrun agent and with the launcher (``bench/lifeline.py``): SIGKILL on the agent's exit
(``PR_SET_PDEATHSIG``) and a watchdog thread that ends the rank once either is gone.
Backend: NCCL on CUDA devices, gloo on CPU (PyTorch ``torch.distributed`` docs, "Backends").
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scaleright.bench.lifeline import (
    LAUNCHER_ENV,
    set_parent_death_signal,
    watch_parent,
)
from scaleright.bench.progress import Progress

__all__ = ["RankContext", "run_rank", "DIR_ENV", "write_json_atomic", "is_oom"]

DIR_ENV = "SCALERIGHT_BENCH_DIR"


@dataclass
class RankContext:
    """This rank's place in the job and its handles."""

    rank: int  # global rank
    local_rank: int  # rank on this node
    world_size: int  # ranks in the job
    device: Any  # torch.device
    progress: Progress  # beacon for the parent

    def sync(self) -> None:
        """Wait for queued device work (CUDA); CPU ops are synchronous."""
        if self.device.type == "cuda":
            import torch

            torch.cuda.synchronize(self.device)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to a temp file and rename it over ``path``, so readers never see half a file."""
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def is_oom(exc: BaseException) -> bool:
    """True for CUDA OOM, Python MemoryError, and the CPU allocator's failure (a RuntimeError)."""
    import torch

    return isinstance(exc, (torch.OutOfMemoryError, MemoryError)) or "can't allocate memory" in str(exc)


def _resolve_device(name: str, local_rank: int):
    import torch

    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("--device cuda was asked but torch.cuda.is_available() is False")
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def run_rank(body: Callable[[RankContext, dict], dict]) -> None:
    """Run ``body(ctx, config)`` on this rank under the protocol above; exit 1 after reporting a failure."""
    run_dir = Path(os.environ[DIR_ENV])
    rank = int(os.environ["RANK"])
    _follow_parents()
    progress = Progress(run_dir / f"rank{rank}.progress")
    progress.mark("start")
    try:
        import torch.distributed as dist

        config = json.loads((run_dir / "config.json").read_text())
        local_rank, world_size = int(os.environ["LOCAL_RANK"]), int(os.environ["WORLD_SIZE"])
        device = _resolve_device(config["device"], local_rank)
        progress.mark("init_process_group")
        if device.type == "cuda":  # device_id binds the NCCL communicator to this rank's GPU eagerly
            dist.init_process_group("nccl", device_id=device)
        else:
            dist.init_process_group("gloo")
        ctx = RankContext(rank, local_rank, world_size, device, progress)
        result = {"rank": rank, "local_rank": local_rank, **body(ctx, config)}
        progress.mark("gather results")
        gathered: list[Any] = [None] * world_size
        dist.all_gather_object(gathered, result)
        if rank == 0:
            write_json_atomic(run_dir / "result.json", {"ranks": gathered})
        dist.destroy_process_group()
        progress.mark("done")
    except BaseException as exc:  # every way out of the body is reported, then the rank leaves
        first_line = (str(exc).strip().splitlines() or [""])[0][:300]
        record = {"rank": rank, "error": f"{type(exc).__name__}: {first_line}".rstrip(": "),
                  "phase": progress.label, "time": time.time()}
        if isinstance(exc, SystemExit):
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            record.update(cause="exit", code=exc.code if isinstance(exc.code, (int, str)) else None)
        elif isinstance(exc, KeyboardInterrupt):
            code = 130
            record.update(cause="interrupt")
        else:
            code = 1
            record.update(cause="oom" if is_oom(exc) else "crash")
        write_json_atomic(run_dir / f"rank{rank}.error.json", record)
        traceback.print_exc()
        _exit(code, progress)
    _exit(0, progress)


def _follow_parents() -> None:
    """Die with the torchrun agent (SIGKILL from the kernel) and end the rank once the agent or the launcher is
    gone (watchdog thread); see ``bench/lifeline.py``."""
    import signal

    set_parent_death_signal(signal.SIGKILL)
    launcher = os.environ.get(LAUNCHER_ENV, "")
    launcher_pid = int(launcher) if launcher.isdigit() else None
    watch_parent(lambda: os._exit(1), launcher_pid=launcher_pid)


def _exit(code: int, progress: Progress) -> None:
    """Flush and leave without interpreter teardown: gloo's threads can abort the process (SIGABRT,
    "terminate called without an active exception") while being destroyed, after the results are already written."""
    progress.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
