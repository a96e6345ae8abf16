"""How fast the serving simulator runs: simulated requests per second of wall time (issue #10, item 5).

Workload: Llama 3.1 8B on H100 SXM (vLLM profile, bf16), 512 prompt / 128 output tokens, Poisson arrivals at
16 requests/s per replica (p99 TTFT ~80 ms: loaded, below capacity), 100,000 requests; once on one replica, once
on a 64-replica fleet (round robin, 1,024 requests/s). Timed end to end through ``scaleright.serve.simulate``
(arrival draws, event loop, metrics). Protocol (STYLE habit 11): one warm-up run of 2,000 requests, then
``--repeat`` runs each; the median and the spread are printed with the Python and numpy versions, and requests
per CPU second beside the wall-time figure (on a shared machine the two differ).
Target: >= 50,000 simulated requests/s for one replica. Vidur (microsoft/vidur) is not installed here, so its
figure is ``na``. Last line: ``one_replica_requests_per_s=<n> fleet_requests_per_s=<n> vidur_requests_per_s=na``.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=100_000, help="requests per run")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per case (median reported)")
    ap.add_argument("--fleet", type=int, default=64, help="replicas of the fleet case")
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
    print("vidur: microsoft/vidur is not installed here (not benchmarked), so its figure is na")
    print(f"one_replica_requests_per_s={one:.0f} fleet_requests_per_s={fleet:.0f} vidur_requests_per_s=na")


if __name__ == "__main__":
    main()
