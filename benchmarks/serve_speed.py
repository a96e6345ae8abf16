"""How fast the serving simulator runs: simulated requests per second of wall time (issue #10, item 5).

Workload: Llama 3.1 8B on H100 SXM (vLLM profile, bf16), 512 prompt / 128 output tokens, Poisson arrivals at
16 requests/s per replica (p99 TTFT ~80 ms: loaded, below capacity), 100,000 requests; once on one replica, once
on a 64-replica fleet (round robin, 1,024 requests/s). Timed end to end through ``scaleright.serve.simulate``
(arrival draws, event loop, metrics). Protocol (STYLE habit 11): one warm-up run of 2,000 requests, then
``--repeat`` runs each; the median and the spread are printed with the Python and numpy versions, and requests
per CPU second beside the wall-time figure (on a shared machine the two differ).
Target: >= 50,000 simulated requests/s for one replica.

Vidur (microsoft/vidur, ``pip install vidur`` into a separate virtual environment, never a dependency of scaleright)
runs the same one-replica workload in the same run — Llama 3 8B on H100, vLLM scheduler, fixed 512 / 128 tokens,
Poisson 16 requests/s, the same request count, metrics writing off — as ``python -m vidur.main`` in a subprocess of
that environment (``--vidur-python``, default ``/tmp/vidurvenv/bin/python``), timed end to end, and only when it
completes is its figure printed. Vidur times iterations from profiling data sets it fetches from the Hugging Face
Hub (``project-vajra/...``, not in its wheel); the benchmark runs it offline (``HF_HUB_OFFLINE=1``), so without a
local copy of those data sets the figure is ``n/a`` and the reason is printed. Last line:
``one_replica_requests_per_s=<n> fleet_requests_per_s=<n> vidur_requests_per_s=<n or n/a>``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import numpy as np

from scaleright.catalog import get_gpu
from scaleright.serve import simulate
from scaleright.workload import load_model

RATE_PER_REPLICA = 16.0


def _rate(spec, gpu, *, replicas: int, requests: int, repeat: int) -> tuple[float, list[float], float, object]:
    kw = dict(gpu=gpu, gpus=replicas, input_len=512, output_len=128, rate=RATE_PER_REPLICA * replicas, engine="vllm")
    simulate(spec, requests=2000, **kw)  # warm-up
    walls, cpus, res = [], [], None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        res = simulate(spec, requests=requests, **kw)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return requests / statistics.median(walls), walls, requests / statistics.median(cpus), res


def _vidur(python: str, requests: int, timeout_s: float) -> tuple[float | None, str]:
    """(Vidur's simulated requests per second of wall time on the one-replica workload, or None; what happened)."""
    if not Path(python).exists():
        return None, f"no Vidur environment at {python} (python -m venv /tmp/vidurvenv && /tmp/vidurvenv/bin/pip " \
            "install vidur)"  # fmt: skip
    with tempfile.TemporaryDirectory() as out:
        cmd = [python, "-m", "vidur.main", "--replica_config_device", "h100", "--replica_config_model_name",
               "meta-llama/Llama-3-8B", "--cluster_config_num_replicas", "1", "--replica_scheduler_config_type",
               "vllm", "--vllm_scheduler_config_batch_size_cap", "256", "--request_generator_config_type",
               "synthetic", "--synthetic_request_generator_config_num_requests", str(requests),
               "--length_generator_config_type", "fixed", "--fixed_request_length_generator_config_prefill_tokens",
               "512", "--fixed_request_length_generator_config_decode_tokens", "128",
               "--interval_generator_config_type", "poisson", "--poisson_request_interval_generator_config_qps",
               str(RATE_PER_REPLICA), "--no-metrics_config_write_metrics", "--metrics_config_output_dir", out,
               "--seed", "0"]  # fmt: skip
        env = os.environ | {"HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled"}
        t0 = time.perf_counter()
        try:
            p = subprocess.run(cmd, cwd=out, env=env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None, f"did not finish {requests:,} requests within {timeout_s:.0f} s"
        wall = time.perf_counter() - t0
    if p.returncode != 0:
        tail = [ln.strip() for ln in (p.stderr or p.stdout).splitlines() if ln.strip()]
        why = tail[-1] if tail else f"exit {p.returncode}"
        if "LocalEntryNotFoundError" in why or "outgoing traffic has been disabled" in why:
            why = ("its profiling data sets (Hugging Face Hub, project-vajra/dev-staging-meta-llama-llama-3-8b-h100 "
                   "and -h100-dgx) are not in the wheel and not cached here; the benchmark does not download data "
                   "sets")  # fmt: skip
        return None, f"vidur exited {p.returncode}: {why[:300]}"
    return requests / wall, f"{wall:.1f} s for {requests:,} requests (import and predictor set-up included)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=100_000, help="requests per run")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per case (median reported)")
    ap.add_argument("--fleet", type=int, default=64, help="replicas of the fleet case")
    ap.add_argument("--vidur-python", default="/tmp/vidurvenv/bin/python", help="python of a venv with vidur")
    ap.add_argument("--vidur-timeout-s", type=float, default=600.0, help="wall-time limit of the Vidur run")
    args = ap.parse_args()
    spec, gpu = load_model("llama-3.1-8b"), get_gpu("h100-sxm")
    print(f"python {platform.python_version()} numpy {np.__version__} on {platform.machine()} "
          f"({platform.processor() or 'cpu'})")  # fmt: skip
    one, w1, c1, r1 = _rate(spec, gpu, replicas=1, requests=args.requests, repeat=args.repeat)
    print(f"one replica: {one:,.0f} requests/s of wall time (runs {', '.join(f'{w:.2f}' for w in w1)} s; "
          f"{c1:,.0f} per CPU second); events {r1.events:,}, iterations {r1.iterations:,}, "
          f"p99 TTFT {r1.ttft_ms['p99']:.1f} ms")  # fmt: skip
    fleet, wf, cf, rf = _rate(spec, gpu, replicas=args.fleet, requests=args.requests, repeat=args.repeat)
    print(f"{args.fleet} replicas: {fleet:,.0f} requests/s of wall time (runs {', '.join(f'{w:.2f}' for w in wf)} s;"
          f" {cf:,.0f} per CPU second); events {rf.events:,}, p99 TTFT {rf.ttft_ms['p99']:.1f} ms")  # fmt: skip
    vid, how = _vidur(args.vidur_python, args.requests, args.vidur_timeout_s)
    print(f"vidur, one replica, same workload: {f'{vid:,.0f} requests/s of wall time' if vid else 'n/a'} ({how})")
    print(f"one_replica_requests_per_s={one:.0f} fleet_requests_per_s={fleet:.0f} "
          f"vidur_requests_per_s={f'{vid:.0f}' if vid else 'n/a'}")  # fmt: skip


if __name__ == "__main__":
    main()
