"""How fast the serving simulator runs: simulated requests per second of wall time (issue #10, item 5).

Workload: Llama 3.1 8B on H100 SXM (vLLM profile, bf16), 512 prompt / 128 output tokens, Poisson arrivals at
16 requests/s per replica (p99 TTFT ~80 ms: loaded, below capacity), 100,000 requests; once on one replica, once
on a 64-replica fleet (round robin, 1,024 requests/s). Timed end to end through ``scaleright.serve.simulate``
(arrival draws, event loop, metrics). Protocol (STYLE habit 11): one warm-up run of 2,000 requests, then
``--repeat`` runs each; the median and the spread are printed with the Python and numpy versions, and requests
per CPU second beside the wall-time figure (on a shared machine the two differ).
Target: >= 50,000 simulated requests/s for one replica.

Vidur (microsoft/vidur 0.0.26, ``pip install vidur`` into a separate virtual environment, never a dependency of
scaleright) runs the same one-replica workload in the same run: Llama 3 8B on H100, TP 1, PP 1, vLLM scheduler
(batch cap 256, 8,192 tokens per batch, GPU memory utilisation 0.9, as scaleright's defaults), fixed 512 / 128
tokens, Poisson arrivals at a mean 16 requests/s (Vidur caps each exponential gap at 3 mean gaps, so its qps is
set to 16 · (1 − e⁻³) for the same mean rate), the same request count, seed 0, metrics writing and Chrome trace
off. ``vidur_runner.py`` runs it in a subprocess of that environment (``--vidur-python``, default
``/tmp/vidurvenv/bin/python``).

Vidur times iterations from profiling data sets it downloads from the Hugging Face Hub (not in its wheel); this
machine cannot reach the Hub, so **Vidur runs on synthetic profiling tables made by scaleright's own per-operation
model** (``vidur_profiles.py``, in Vidur's file layout and columns), served to it locally with no network. Its
latencies are therefore not an independent reference; only its speed is compared. Predictor: random forest (the
registry's linear-regression predictor cannot be instantiated in 0.0.26: ``_get_kv_parallel_communication_time``
is left abstract), one grid point (10 trees, depth 32, 2-fold CV), with its native (C++) lookup path on
(``--vidur-python-predictor``: Vidur's default pure-Python lookups). Vidur's figure is requests over its
simulation time: ``Simulator`` construction without the predictor, plus ``Simulator.run``. The predictor's
training (fitting and predicting every operation's grid; Vidur caches it across runs), the import and the table
generation are timed and printed beside it, not in it. Without the Vidur venv the figure is ``n/a`` and the
reason is printed. Last line:
``one_replica_requests_per_s=<n> fleet_requests_per_s=<n> vidur_requests_per_s=<n or n/a>``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np

from scaleright.catalog import get_gpu
from scaleright.serve import SimulationResult, simulate
from scaleright.workload import load_model
from vidur_profiles import VIDUR_DEVICE, VIDUR_MODEL, write_profiles

RATE_PER_REPLICA = 16.0
# Vidur's PoissonRequestIntervalGenerator caps each gap at 3 mean gaps, so its mean gap is (1 − e⁻³) / qps: a qps of
# 16 · (1 − e⁻³) gives the same mean arrival rate, 16 requests/s
VIDUR_POISSON_MEAN_FACTOR = 1.0 - math.exp(-3.0)


def _rate(spec, gpu, *, replicas: int, requests: int, repeat: int
          ) -> tuple[float, list[float], float, SimulationResult]:  # fmt: skip
    kw = dict(gpu=gpu, gpus=replicas, input_len=512, output_len=128, rate=RATE_PER_REPLICA * replicas, engine="vllm")
    simulate(spec, requests=2000, **kw)  # warm-up
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        res = simulate(spec, requests=requests, **kw)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return requests / statistics.median(walls), walls, requests / statistics.median(cpus), res


def _vidur(python: str, spec, gpu, requests: int, timeout_s: float, *, native: bool
           ) -> tuple[float | None, str]:  # fmt: skip
    """(Vidur's simulated requests per second of simulation wall time on the one-replica workload, or None; what
    happened)."""
    if not Path(python).exists():
        return None, f"no Vidur environment at {python} (python -m venv /tmp/vidurvenv && /tmp/vidurvenv/bin/pip " \
            "install vidur)"  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        compute, network = write_profiles(spec, gpu, Path(tmp) / "profiles", max_tokens=8192, max_batch=256,
                                          max_kv=8192)  # fmt: skip
        gen_s = time.perf_counter() - t0
        run_dir = Path(tmp) / "run"
        (run_dir / "out").mkdir(parents=True)
        ds_c, ds_n = "scaleright-synthetic/llama-3-8b-h100", "scaleright-synthetic/h100-dgx"
        rf = "--random_forrest_execution_time_predictor_config_"
        cmd = [python, str(Path(__file__).with_name("vidur_runner.py")), "--dataset", f"{ds_c}={compute}",
               "--dataset", f"{ds_n}={network}", "--",
               "--replica_config_device", VIDUR_DEVICE, "--replica_config_model_name", VIDUR_MODEL,
               "--replica_config_tensor_parallel_size", "1", "--replica_config_num_pipeline_stages", "1",
               "--replica_config_gpu_memory_utilization", "0.9", "--cluster_config_num_replicas", "1",
               "--replica_scheduler_config_type", "vllm", "--vllm_scheduler_config_batch_size_cap", "256",
               "--vllm_scheduler_config_max_tokens_in_batch", "8192",
               "--request_generator_config_type", "synthetic",
               "--synthetic_request_generator_config_num_requests", str(requests),
               "--length_generator_config_type", "fixed", "--fixed_request_length_generator_config_prefill_tokens",
               "512", "--fixed_request_length_generator_config_decode_tokens", "128",
               "--interval_generator_config_type", "poisson", "--poisson_request_interval_generator_config_qps",
               str(RATE_PER_REPLICA * VIDUR_POISSON_MEAN_FACTOR), "--no-metrics_config_write_metrics",
               "--no-metrics_config_enable_chrome_trace",
               "--metrics_config_output_dir", "out", "--seed", "0",
               "--execution_time_predictor_config_type", "random_forrest",
               f"{rf}model_profiling_dataset", ds_c, f"{rf}network_profiling_dataset", ds_n,
               f"{rf}num_estimators", "10", f"{rf}max_depth", "32", f"{rf}min_samples_split", "2",
               f"{rf}k_fold_cv_splits", "2", f"{rf}num_training_job_threads", "1",
               f"{rf}prediction_max_batch_size", "256", f"{rf}prediction_max_tokens_per_request", "8192",
               f"{rf}attention_decode_batching_overhead_fraction", "0",
               ("--" if native else "--no-") + rf[2:] + "use_native_execution_time_predictor"]  # fmt: skip
        env = os.environ | {"HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled"}
        t0 = time.perf_counter()
        try:
            p = subprocess.run(cmd, cwd=run_dir, env=env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None, f"did not finish {requests:,} requests within {timeout_s:.0f} s"
        wall = time.perf_counter() - t0
    lines = [ln.strip() for ln in p.stdout.splitlines() if ln.strip()]
    if p.returncode != 0 or not lines or not lines[-1].startswith("{"):
        tail = [ln.strip() for ln in (p.stderr or p.stdout).splitlines() if ln.strip()]
        return None, f"vidur exited {p.returncode}: {(tail[-1] if tail else 'no output')[:300]}"
    r = json.loads(lines[-1])
    sim_s = r["setup_s"] + r["simulate_s"]
    how = (f"vidur {r['vidur_version']} on synthetic profiling tables from scaleright's model (latencies not an "
           f"independent reference; speed only); {requests:,} requests, {r['simulated_s']:.0f} s simulated, in "
           f"{sim_s:.1f} s of simulation (set-up {r['setup_s']:.2f} s + run {r['simulate_s']:.1f} s; "
           f"{requests / r['simulation_cpu_s']:,.0f} per CPU second; "
           f"{'native' if native else 'Python'} predictor lookups); not included: predictor training "
           f"{r['predictor_s']:.1f} s, import {r['import_s']:.1f} s, table generation {gen_s:.1f} s; "
           f"{requests / wall:,.0f} requests/s over the whole {wall:.1f} s process")  # fmt: skip
    return requests / sim_s, how


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=100_000, help="requests per run")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per case (median reported)")
    ap.add_argument("--fleet", type=int, default=64, help="replicas of the fleet case")
    ap.add_argument("--vidur-python", default="/tmp/vidurvenv/bin/python", help="python of a venv with vidur")
    ap.add_argument("--vidur-timeout-s", type=float, default=600.0, help="wall-time limit of the Vidur run")
    ap.add_argument("--vidur-python-predictor", action="store_true",
                    help="Vidur's default pure-Python predictor lookups instead of its native ones")
    args = ap.parse_args()
    spec, gpu = load_model("llama-3.1-8b"), get_gpu("h100-sxm")
    print(f"python {platform.python_version()} numpy {np.__version__} on {platform.machine()} "
          f"({platform.processor() or 'cpu'}, {os.cpu_count()} CPUs), load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")  # fmt: skip
    one, w1, c1, r1 = _rate(spec, gpu, replicas=1, requests=args.requests, repeat=args.repeat)
    print(f"one replica: {one:,.0f} requests/s of wall time (runs {', '.join(f'{w:.2f}' for w in w1)} s; "
          f"{c1:,.0f} per CPU second); events {r1.events:,}, iterations {r1.iterations:,}, "
          f"p99 TTFT {r1.ttft_ms['p99']:.1f} ms")  # fmt: skip
    fleet, wf, cf, rf = _rate(spec, gpu, replicas=args.fleet, requests=args.requests, repeat=args.repeat)
    print(f"{args.fleet} replicas: {fleet:,.0f} requests/s of wall time (runs {', '.join(f'{w:.2f}' for w in wf)} s;"
          f" {cf:,.0f} per CPU second); events {rf.events:,}, p99 TTFT {rf.ttft_ms['p99']:.1f} ms")  # fmt: skip
    vid, how = _vidur(args.vidur_python, spec, gpu, args.requests, args.vidur_timeout_s,
                      native=not args.vidur_python_predictor)
    print(f"vidur, one replica, same workload: {f'{vid:,.0f} requests/s of wall time' if vid else 'n/a'} ({how})")
    print(f"load average at the end {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"one_replica_requests_per_s={one:.0f} fleet_requests_per_s={fleet:.0f} "
          f"vidur_requests_per_s={f'{vid:.0f}' if vid else 'n/a'}")  # fmt: skip


if __name__ == "__main__":
    main()
