"""Load test of the dashboard on loopback: 50 concurrent users for a bounded time, p50 / p99 latency and 5xx count.

The server is a real uvicorn process (one worker, as ``scaleright dashboard`` runs it) on a free loopback port;
each simulated user loops over the pages a person uses — the editor, a catalog search, a plan through the JSON API
(a small scenario: planned once, then served from the plan cache, as repeated clicks are) and the health check —
with an async httpx client. Run:

    python benchmarks/dashboard_load.py                 # 50 users, 20 s
    python benchmarks/dashboard_load.py --users 50 --duration-s 60

Last line: ``users=… requests=… p50_ms=… p99_ms=… errors_5xx=… other_errors=…``.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
import time
from collections import defaultdict

import httpx
import numpy as np

SCENARIO = ("name: tiny LoRA\nmodel: llama-3.2-1b\ntask: lora\ntraining: {tokens: 1.0e+8}\n"
            "constraints: {gpu_types: [h100-sxm, l40s], max_gpus: 8}\n")  # fmt: skip
ROUTES = (("GET /", "GET", "/", None), ("GET /catalog?q=h100", "GET", "/catalog?q=h100", None),
          ("POST /api/plan", "POST", "/api/plan", SCENARIO), ("GET /healthz", "GET", "/healthz", None))  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _user(client: httpx.AsyncClient, until: float, lat: dict[str, list[float]], codes: dict[int, int]) -> None:
    i = 0
    while time.monotonic() < until:
        name, method, path, body = ROUTES[i % len(ROUTES)]
        i += 1
        t0 = time.perf_counter()
        try:
            r = await client.request(method, path, content=body,
                                     headers={"content-type": "application/yaml"} if body else None)  # fmt: skip
            codes[r.status_code] += 1
        except httpx.HTTPError:
            codes[-1] += 1
            continue
        lat[name].append(time.perf_counter() - t0)


async def _run(base: str, users: int, duration_s: float) -> tuple[dict[str, list[float]], dict[int, int]]:
    lat: dict[str, list[float]] = defaultdict(list)
    codes: dict[int, int] = defaultdict(int)
    limits = httpx.Limits(max_connections=users, max_keepalive_connections=users)
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as client:
        warm = await client.post("/api/plan", content=SCENARIO, headers={"content-type": "application/yaml"})
        warm.raise_for_status()
        until = time.monotonic() + duration_s
        await asyncio.gather(*(_user(client, until, lat, codes) for _ in range(users)))
    return lat, codes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=50)
    ap.add_argument("--duration-s", type=float, default=20.0)
    args = ap.parse_args()
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "scaleright.cli.main", "dashboard", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            sys.exit(f"dashboard did not start: {server.stderr.read().decode()[-500:] if server.stderr else ''}")
        lat, codes = asyncio.run(_run(base, args.users, args.duration_s))
    finally:
        server.terminate()
        server.wait(10)
    every = np.array([x for v in lat.values() for x in v]) * 1e3
    print(f"{args.users} users for {args.duration_s:g} s on {base} (one uvicorn worker)")
    for name, _, _, _ in ROUTES:
        v = np.array(lat[name]) * 1e3
        if len(v):
            print(f"  {name:22s} n={len(v):6d}  p50 {np.median(v):8.1f} ms  p99 {np.percentile(v, 99):8.1f} ms")
    print("  status codes: " + ", ".join(f"{k}: {n}" for k, n in sorted(codes.items())))
    errors_5xx = sum(n for k, n in codes.items() if k >= 500)
    other = sum(n for k, n in codes.items() if k < 0 or 400 <= k < 500)
    print(f"users={args.users} requests={len(every)} p50_ms={np.median(every):.1f} "
          f"p99_ms={np.percentile(every, 99):.1f} errors_5xx={errors_5xx} other_errors={other}")


if __name__ == "__main__":
    main()
