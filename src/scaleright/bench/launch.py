"""Start the ranks with torchrun (``python -m torch.distributed.run``), enforce the timeout, collect per-rank JSON.

torchrun is PyTorch's own launcher (docs: "torchrun (Elastic Launch)"): one node uses ``--standalone`` (a local
rendezvous on a free port); several nodes use the c10d rendezvous, ``--nnodes N --rdzv-backend c10d
--rdzv-endpoint HOST:PORT --rdzv-id ID`` on every node. Global ranks are assigned by the rendezvous; the node that
hosts global rank 0 receives ``result.json`` (``bench/rank.py``).

Timeout: torchrun runs in its own session; when ``timeout_s`` passes, the parent sends SIGTERM to torchrun's process
group, then SIGKILL to it and to each worker's own process group (torchrun starts workers with
``start_new_session=True``; their pids are in the progress beacons). The least-advanced rank is named as the one that
hung (``bench/progress.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel

from scaleright.bench.config import LaunchSpec
from scaleright.bench.errors import BenchRunError
from scaleright.bench.progress import read_progress
from scaleright.bench.rank import DIR_ENV

__all__ = ["Launch", "torchrun_command", "rank_configs", "worker_config", "run_ranks", "diagnose", "REMOTE"]

KEEP_ENV = "SCALERIGHT_BENCH_KEEP"  # set to keep the run directory (config, beacons, torchrun.log) for debugging
REMOTE: Final = "remote"  # marker: this node's ranks finished; global rank 0 lives on another node


@dataclass(frozen=True)
class Launch:
    """One torchrun invocation: a worker module at one world size."""

    module: str  # e.g. scaleright.bench.worker
    nproc_per_node: int
    spec: LaunchSpec
    env: tuple[tuple[str, str], ...] = ()  # extra environment for torchrun and its workers

    @property
    def world_size(self) -> int:
        """Ranks in the job."""
        return self.nproc_per_node * self.spec.nnodes


def torchrun_command(launch: Launch) -> list[str]:
    """The exact argv that starts the job (the run directory is passed in ``SCALERIGHT_BENCH_DIR``).

    The rendezvous id gets the per-node process count appended (``ID-n4``), so every node computes the same id for
    the same world size and consecutive world sizes never share a rendezvous."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(launch.nproc_per_node)]
    s = launch.spec
    if s.rdzv_endpoint:
        rdzv_id = f"{s.rdzv_id}-n{launch.nproc_per_node}"
        cmd += ["--nnodes", str(s.nnodes), "--node-rank", str(s.node_rank), "--rdzv-backend", "c10d",
                "--rdzv-endpoint", s.rdzv_endpoint, "--rdzv-id", rdzv_id]
    else:
        cmd += ["--standalone", "--nnodes", "1"]
    cmd += ["--max-restarts", "0", "--module", launch.module]
    return cmd


def rank_configs(launch: Launch, config: dict) -> list[dict]:
    """What each local rank of this node will run with (for ``--dry-run``)."""
    out = []
    n = launch.nproc_per_node
    for local in range(n):
        device, backend = {"cuda": (f"cuda:{local}", "nccl"), "cpu": ("cpu", "gloo")}.get(
            config.get("device", "auto"), (f"cuda:{local} if available, else cpu", "nccl on cuda, gloo on cpu"))
        global_rank = "assigned by rendezvous" if launch.spec.nnodes > 1 else local
        out.append({"local_rank": local, "rank": global_rank, "world_size": launch.world_size, "device": device,
                    "backend": backend, "env": dict(launch.env), "config": config})
    return out


def worker_config(cfg: BaseModel, nproc_per_node: int) -> dict:
    """The config the workers of one world size read: the sweep's config narrowed to this ``nproc``."""
    return cfg.model_copy(update={"nproc": (nproc_per_node,)}).model_dump(mode="json")


def _kill_all(proc: subprocess.Popen, run_dir: Path) -> None:
    """SIGTERM torchrun's group, then SIGKILL it and every worker's group."""
    for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=wait_s)
            break
        except subprocess.TimeoutExpired:
            continue
    for beacon in read_progress(run_dir).values():
        try:
            os.killpg(int(beacon["pid"]), signal.SIGKILL)
        except (ProcessLookupError, PermissionError, KeyError, ValueError):
            pass


def run_ranks(launch: Launch, config: dict) -> list[dict] | Literal["remote"]:
    """Run the job; return the per-rank results (sorted by rank), or ``REMOTE`` on a node without rank 0.

    Raises ``BenchRunError`` naming the failed rank and the cause.
    """
    run_dir = Path(tempfile.mkdtemp(prefix="scaleright-bench-"))
    try:
        (run_dir / "config.json").write_text(json.dumps(config))
        env = {**os.environ, **dict(launch.env), DIR_ENV: str(run_dir)}
        log_path = run_dir / "torchrun.log"
        timed_out = False
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(torchrun_command(launch), env=env, stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                proc.wait(timeout=launch.spec.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_all(proc, run_dir)
            except BaseException:  # Ctrl-C in the parent: do not leave ranks behind
                _kill_all(proc, run_dir)
                raise
        return diagnose(run_dir, world_size=launch.world_size, returncode=proc.returncode, timed_out=timed_out,
                        timeout_s=launch.spec.timeout_s, multi_node=launch.spec.nnodes > 1,
                        log_tail=_last_meaningful_line(log_path))
    finally:
        if os.environ.get(KEEP_ENV):
            print(f"scaleright: kept run directory {run_dir}", file=sys.stderr)
        else:
            shutil.rmtree(run_dir, ignore_errors=True)


def _last_meaningful_line(log_path: Path) -> str:
    """The last log line that is not a separator or blank (torchrun frames its summary in ===== lines)."""
    lines = log_path.read_text(errors="replace").splitlines()
    return next((ln.strip() for ln in reversed(lines) if ln.strip().strip("=*-") ), "")


def diagnose(run_dir: Path, *, world_size: int, returncode: int | None, timed_out: bool, timeout_s: float,
             multi_node: bool, log_tail: str = "") -> list[dict] | Literal["remote"]:
    """Results, ``REMOTE``, or the ``BenchRunError`` that explains why there are none (see module doc)."""
    at = f"at world_size={world_size}"
    errors = []
    for path in run_dir.glob("rank*.error.json"):
        try:
            errors.append(json.loads(path.read_text()))
        except ValueError:
            continue
    if errors:  # the earliest failure is the cause; later ones are ranks losing their peers
        first = min(errors, key=lambda e: e["time"])
        what = "ran out of memory" if first["cause"] == "oom" else "crashed"
        raise BenchRunError(f"rank {first['rank']} {what} {at} during '{first['phase']}': {first['error']}",
                            rank=first["rank"], cause=first["cause"], world_size=world_size)
    if timed_out:
        beacons = read_progress(run_dir)
        missing = sorted(set(range(world_size)) - set(beacons)) if not multi_node else []
        if missing:
            who, where = missing, "never started"
        else:
            low = min(b["seq"] for b in beacons.values())
            who = sorted(r for r, b in beacons.items() if b["seq"] == low)
            where = f"made no progress past '{beacons[who[0]]['label']}'"
            ahead = {b["label"] for r, b in beacons.items() if b["seq"] > low}
            if ahead:
                where += f" (other ranks reached '{sorted(ahead)[0]}')"
        ranks = f"rank {who[0]}" if len(who) == 1 else "ranks " + ", ".join(map(str, who))
        raise BenchRunError(f"{ranks} hung {at}: {where} within --timeout-s={timeout_s:g}; killed the process group",
                            rank=who[0], cause="hang", world_size=world_size)
    result = run_dir / "result.json"
    beacons = read_progress(run_dir)
    all_done = len(beacons) == world_size and all(b["label"] == "done" for b in beacons.values())
    if result.exists() and (returncode == 0 or all_done):  # a crash in teardown after every rank finished
        return sorted(json.loads(result.read_text())["ranks"], key=lambda r: r["rank"])
    if returncode == 0 and multi_node:
        return REMOTE
    hint = " (the failing rank may be on another node)" if multi_node else ""
    raise BenchRunError(f"torchrun exited with code {returncode} {at} and no local rank reported a cause{hint}; "
                        f"last log line: {log_tail.strip()[:300]}", cause="crash", world_size=world_size)
