"""``bench serve``: drive a real OpenAI-compatible server with the simulator's traffic and measure it.

The workload is the one ``scaleright serve simulate`` draws for the same flags and seed (``draw_workload``: the
arrival process of ``serve.arrivals`` and the lengths of ``serve.lengths``, drawn from one generator in the
simulator's order: arrival times, then input lengths, then output lengths), so a stored run can be simulated
request for request (``bench compare-serving``). Open loop (``rate``): request ``i`` is sent at its arrival time
after the start, whatever is in flight, up to ``max_concurrency`` requests at once (a request that finds every
slot taken waits, and the wait is not in its latencies, as in ``vllm bench serve
--max-concurrency``; ``send_delay_ms`` says how late requests were sent after their arrival times, from a full
slot or a busy client). Closed loop (``concurrency``): that many clients each send their next request when the
last one finishes.

Metrics (``summarise``) are those of ``serve.metrics``, with the simulator's JSON names: ``ttft_ms``, ``tpot_ms``,
``itl_ms``, ``e2e_ms`` each ``{mean, p50, p90, p99}``; ITL is over every gap between chunks; TPOT per request is
(end-to-end − TTFT) / (output tokens − 1) over requests with more than one output token; throughputs divide by the
span from the first send to the last completion; goodput counts the requests that meet every SLO given.

Bounds: the request count, the in-flight requests and the wall time of the whole run (``max_duration_s``) and of
one request (``request_timeout_s``) are each capped (``scaleright.limits``). When the wall time runs out or the
run is interrupted (``stop``, set by Ctrl-C in the CLI), no new request is sent, the ones in flight are cancelled
and the completed ones are summarised.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import signal
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from scaleright.bench.serve_client import PROMPT_TOKEN_IDS, RequestResult, check_endpoint, identify, one_request
from scaleright.errors import InputError
from scaleright.limits import check_limit
from scaleright.serve.arrivals import ARRIVALS, arrival_times
from scaleright.serve.lengths import draw_lengths
from scaleright.serve.metrics import meets_slos, summary

__all__ = ["ServeBenchConfig", "ServeBenchResult", "draw_workload", "run_serve_bench", "summarise", "store_run"]

LENGTH_DISTS = ("fixed", "lognormal")
LENGTH_CV = 0.5  # the coefficient of variation of lognormal lengths: serve simulate's default (length_cv)
CONNECT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ServeBenchConfig:
    """What to send, how fast, and the bounds of the run. ``describe`` the server for comparison with the
    simulator: ``sim_model`` (catalog model or config path), ``gpu``, ``gpus``, ``tp``, ``pp``, ``precision``,
    ``max_num_seqs``, ``max_num_batched_tokens`` (the engine's settings; vLLM's defaults when not given)."""

    endpoint: str
    model: str
    input_len: int = 512
    output_len: int = 128
    rate: float | None = None
    concurrency: int | None = None
    arrival: str = "poisson"
    burstiness: float = 1.0
    diurnal_period_s: float = 86_400.0
    diurnal_amplitude: float = 0.5
    requests: int = 200
    length_dist: str = "fixed"
    length_cv: float = LENGTH_CV
    seed: int = 0
    max_concurrency: int = 256
    max_duration_s: float = 3_600.0
    request_timeout_s: float = 600.0
    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None
    engine_profile: str | None = None  # overrides the engine found from the server
    sim_model: str | None = None
    gpu: str | None = None
    gpus: int = 1
    tp: int = 1
    pp: int = 1
    precision: str = "bf16"
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192

    def __post_init__(self) -> None:
        object.__setattr__(self, "endpoint", check_endpoint(self.endpoint))
        from scaleright.bench.config import SEED_MAX

        for flag, count in (("--input-len", self.input_len), ("--output-len", self.output_len),
                        ("--requests", self.requests), ("--max-concurrency", self.max_concurrency),
                        ("--concurrency", self.concurrency), ("--seed", self.seed), ("--gpus", self.gpus),
                        ("--tp", self.tp), ("--pp", self.pp), ("--max-num-seqs", self.max_num_seqs),
                        ("--max-num-batched-tokens", self.max_num_batched_tokens)):  # fmt: skip
            if count is not None and (isinstance(count, bool) or not isinstance(count, int)):
                raise InputError(f"{flag}={count!r} must be a whole number")
        if not isinstance(self.model, str) or not self.model.strip() or len(self.model) > 512:
            raise InputError("--model: the model name the server serves (1 to 512 characters)")
        check_limit("--input-len", self.input_len, "tokens_per_request", low=1)
        check_limit("--output-len", self.output_len, "tokens_per_request", low=1)
        if (self.rate is None) == (self.concurrency is None):
            raise InputError("give exactly one of --rate or --concurrency")
        if self.rate is not None:
            check_limit("--rate", self.rate, "requests_per_s")
            if not self.rate > 0:
                raise InputError(f"--rate={self.rate} must be a positive number of requests per second")
        if self.concurrency is not None:
            check_limit("--concurrency", self.concurrency, "batch", low=1)
        if self.arrival not in ARRIVALS:
            raise InputError(f"--arrival={self.arrival!r} not allowed; allowed: {', '.join(ARRIVALS)}")
        if self.length_dist not in LENGTH_DISTS:
            raise InputError(f"--length-dist={self.length_dist!r} not allowed; allowed: {', '.join(LENGTH_DISTS)}")
        for flag, v in (("--burstiness", self.burstiness), ("--diurnal-period-s", self.diurnal_period_s)):
            if not (math.isfinite(v) and v > 0):
                raise InputError(f"{flag}={v} must be a finite positive number")
        if not 0 <= self.diurnal_amplitude <= 1:
            raise InputError(f"--diurnal-amplitude={self.diurnal_amplitude} must lie in [0, 1]")
        check_limit("--requests", self.requests, "batch", low=1)
        check_limit("--max-concurrency", self.max_concurrency, "batch", low=1)
        check_limit("--max-duration-s", self.max_duration_s, "timeout_s", low=0)
        check_limit("--request-timeout-s", self.request_timeout_s, "timeout_s", low=0)
        for flag, v in (("--max-duration-s", self.max_duration_s), ("--request-timeout-s", self.request_timeout_s)):
            if not v > 0:
                raise InputError(f"{flag}={v} must be positive")
        for flag, s in (("--slo-ttft-ms", self.slo_ttft_ms), ("--slo-tpot-ms", self.slo_tpot_ms)):
            if s is not None:
                check_limit(flag, s / 1e3, "latency_s")
                if not s > 0:
                    raise InputError(f"{flag}={s} must be a positive number of milliseconds")
        if not 0 <= self.seed <= SEED_MAX:
            raise InputError(f"--seed must be from 0 to {SEED_MAX:,} (got {self.seed})")
        check_limit("--gpus", self.gpus, "gpus", low=1)
        check_limit("--tp", self.tp, "parallel_degree", low=1)
        check_limit("--pp", self.pp, "parallel_degree", low=1)
        check_limit("--max-num-seqs", self.max_num_seqs, "batch", low=1)
        check_limit("--max-num-batched-tokens", self.max_num_batched_tokens, "tokens_per_request", low=1)
        if self.engine_profile is not None:
            from scaleright.estimate.engines import engine_names

            if self.engine_profile not in engine_names():
                raise InputError(f"--engine={self.engine_profile!r} not allowed; allowed: {', '.join(engine_names())}")

    def workload(self) -> dict[str, Any]:
        """The fields that fix the traffic (stored with the run; ``draw_workload`` takes them back)."""
        keys = ("input_len", "output_len", "rate", "concurrency", "arrival", "burstiness", "diurnal_period_s",
                "diurnal_amplitude", "requests", "length_dist", "length_cv", "seed")  # fmt: skip
        return {k: getattr(self, k) for k in keys}

    def server(self) -> dict[str, Any]:
        """The server as the user described it (for the simulator)."""
        keys = ("sim_model", "gpu", "gpus", "tp", "pp", "precision", "max_num_seqs", "max_num_batched_tokens")
        return {k: getattr(self, k) for k in keys}


def draw_workload(w: dict[str, Any]) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """(arrival times s or None for closed loop, input tokens, output tokens) of workload ``w``: the draws of
    ``serve.simulate`` for the same seed (one ``default_rng(seed)``, arrivals first, then inputs, then outputs)."""
    rng = np.random.default_rng(w["seed"])
    n = int(w["requests"])
    arrivals = None
    if w.get("rate") is not None:
        arrivals = arrival_times(rng, w["arrival"], rate=w["rate"], n=n, burstiness=w["burstiness"],
                                 period_s=w["diurnal_period_s"], amplitude=w["diurnal_amplitude"])  # fmt: skip
    inputs = draw_lengths(rng, w["length_dist"], n=n, mean=w["input_len"], cv=w["length_cv"], field="input length")
    outputs = draw_lengths(rng, w["length_dist"], n=n, mean=w["output_len"], cv=w["length_cv"],
                           field="output length")  # fmt: skip
    return arrivals, inputs, outputs


@dataclass
class ServeBenchResult:
    """The run's metrics (``metrics`` has the simulator's JSON names), the server's identity and the requests."""

    metrics: dict[str, Any]
    server: dict[str, Any]
    requests: list[RequestResult]
    stopped: str | None  # None (all requests sent and done), "interrupted" or "max_duration_s"


def summarise(results: list[RequestResult], *, requested: int, slo_ttft_ms: float | None = None,
              slo_tpot_ms: float | None = None, send_delay_s: list[float] | None = None) -> dict[str, Any]:  # fmt: skip
    """Percentiles, throughput, goodput and errors of the measured requests (module docstring)."""
    ok = [r for r in results if r.ok]
    failed = [r for r in results if r.error is not None]
    ttft = np.array([r.ttft_s for r in ok], dtype=float)
    e2e = np.array([r.e2e_s for r in ok], dtype=float)
    out = np.array([r.output_tokens for r in ok], dtype=float)
    inp = np.array([r.input_tokens for r in ok], dtype=float)
    multi = out > 1
    tpot = (e2e[multi] - ttft[multi]) / (out[multi] - 1)
    itl = [g for r in ok for g in r.itl_s]
    if ok:
        start = min(r.sent_s for r in ok)
        span = max(r.sent_s + (r.e2e_s or 0.0) for r in ok) - start
    else:
        span = 0.0

    def per_s(x: float) -> float:
        return x / span if span > 0 else float("nan")

    goodput = None
    if slo_ttft_ms is not None or slo_tpot_ms is not None:
        good = meets_slos(ttft, e2e, out, slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms, multi=multi)
        goodput = per_s(float(good.sum()))
    errors: dict[str, int] = {}
    for r in failed:
        errors[r.error or ""] = errors.get(r.error or "", 0) + 1
    return {
        "ttft_ms": summary(ttft), "tpot_ms": summary(tpot), "itl_ms": summary(itl), "e2e_ms": summary(e2e),
        "output_tokens_per_s": per_s(float(out.sum())), "input_tokens_per_s": per_s(float(inp.sum())),
        "requests_per_s": per_s(float(len(ok))), "goodput_requests_per_s": goodput,
        "slo_ttft_ms": slo_ttft_ms, "slo_tpot_ms": slo_tpot_ms,
        "requests": len(ok), "requests_planned": requested, "errors": len(failed),
        "not_completed": requested - len(ok) - len(failed),
        "error_messages": [{"error": k, "count": v} for k, v in sorted(errors.items(), key=lambda kv: -kv[1])[:5]],
        "duration_s": span, "output_tokens": int(out.sum()), "input_tokens": int(inp.sum()),
        "output_tokens_from_usage": all(r.usage_reported for r in ok) if ok else None,
        "send_delay_ms": summary(send_delay_s or []),
    }  # fmt: skip


def _payload(cfg: ServeBenchConfig, prompt: list[int], max_tokens: int) -> dict[str, Any]:
    return {"model": cfg.model, "prompt": prompt, "max_tokens": int(max_tokens), "stream": True,
            "stream_options": {"include_usage": True}, "ignore_eos": True, "temperature": 0.0}  # fmt: skip


async def _drive(cfg: ServeBenchConfig, client: Any, inputs: np.ndarray, outputs: np.ndarray,
                 arrivals: np.ndarray | None, results: list[RequestResult], waits: list[float]) -> None:  # fmt: skip
    """Send every request (open or closed loop); ``results`` and ``waits`` grow as they finish."""
    lo, hi = PROMPT_TOKEN_IDS
    t0 = time.perf_counter()

    async def send(i: int) -> None:
        # request i's prompt ids from a stream of its own (seed, 1, i): the same whatever order the clients send in,
        # and apart from the workload's draws
        prompt = np.random.default_rng([cfg.seed, 1, i]).integers(lo, hi, size=int(inputs[i])).tolist()
        res = RequestResult(index=i, input_tokens=int(inputs[i]))
        results.append(res)
        await one_request(client, _payload(cfg, prompt, int(outputs[i])), res, t0)

    if arrivals is None:
        assert cfg.concurrency is not None
        nxt = iter(range(len(inputs)))

        async def client_loop() -> None:
            for i in nxt:
                await send(i)

        async with asyncio.TaskGroup() as tg:
            for _ in range(min(cfg.concurrency, len(inputs))):
                tg.create_task(client_loop())
        return
    slots = asyncio.Semaphore(cfg.max_concurrency)

    async def timed(i: int, due: float) -> None:
        async with slots:
            waits.append(max(0.0, time.perf_counter() - due))
            await send(i)

    async with asyncio.TaskGroup() as tg:
        for i, a in enumerate(arrivals):
            due = t0 + float(a)
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tg.create_task(timed(i, due))


async def _run(cfg: ServeBenchConfig, stop: asyncio.Event | None) -> ServeBenchResult:
    import httpx

    arrivals, inputs, outputs = draw_workload(cfg.workload())
    limit = cfg.concurrency if cfg.concurrency is not None else cfg.max_concurrency
    timeout = httpx.Timeout(cfg.request_timeout_s, connect=min(CONNECT_TIMEOUT_S, cfg.request_timeout_s))
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    interrupted = False

    def on_sigint() -> None:
        nonlocal interrupted
        interrupted = True
        stop.set()

    handled = False
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread, or Windows
        loop.add_signal_handler(signal.SIGINT, on_sigint)
        handled = True
    try:
        async with httpx.AsyncClient(base_url=cfg.endpoint, timeout=timeout, trust_env=False,
                                     limits=httpx.Limits(max_connections=limit, max_keepalive_connections=limit),
                                     ) as client:  # fmt: skip
            server = await identify(client, cfg.endpoint, cfg.model)
            results: list[RequestResult] = []
            waits: list[float] = []
            driver = asyncio.create_task(_drive(cfg, client, inputs, outputs, arrivals, results, waits))
            stopper = asyncio.create_task(stop.wait())
            done, _ = await asyncio.wait({driver, stopper}, timeout=cfg.max_duration_s,
                                         return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
            stopped = None
            if driver not in done:
                stopped = "interrupted" if (interrupted or stop.is_set()) else "max_duration_s"
                driver.cancel()
            stopper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await driver
            with contextlib.suppress(asyncio.CancelledError):
                await stopper
    finally:
        if handled:
            loop.remove_signal_handler(signal.SIGINT)
    if cfg.engine_profile is not None:
        server = {**server, "engine_profile": cfg.engine_profile, "engine_profile_source": "--engine"}
    metrics = summarise(results, requested=len(inputs), slo_ttft_ms=cfg.slo_ttft_ms, slo_tpot_ms=cfg.slo_tpot_ms,
                        send_delay_s=waits)  # fmt: skip
    metrics["stopped"] = stopped
    return ServeBenchResult(metrics=metrics, server=server, requests=sorted(results, key=lambda r: r.index),
                            stopped=stopped)  # fmt: skip


def run_serve_bench(cfg: ServeBenchConfig, *, stop: asyncio.Event | None = None) -> ServeBenchResult:
    """Measure ``cfg`` against its server (see the module docstring). Raises ``InputError`` when the server
    cannot be reached or does not serve the model; failed requests are counted, not raised."""
    try:
        import httpx  # noqa: F401
    except ImportError:
        from scaleright.bench.errors import BenchDependencyError

        raise BenchDependencyError("bench serve needs httpx: pip install 'scaleright[bench]'") from None
    return asyncio.run(_run(cfg, stop))


def fingerprint_of_server(hardware: dict[str, Any]) -> str:
    """12 hex digits of SHA-256 over the server's identifying fields (endpoint, engine, version, described GPUs)."""
    key = {k: hardware.get(k) for k in ("endpoint", "engine", "engine_version", "gpu", "gpus", "tp", "pp")}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]


def store_run(store: Any, cfg: ServeBenchConfig, res: ServeBenchResult) -> int:
    """Add ``res`` to ``store`` as a ``serve`` run; return its id. Status ``failed`` when no request completed."""
    from scaleright.bench.fingerprint import software_info

    srv = cfg.server()
    hardware = {"endpoint": cfg.endpoint, "engine": res.server.get("engine"),
                "engine_version": res.server.get("engine_version"), "gpu": srv["gpu"], "gpus": srv["gpus"],
                "tp": srv["tp"], "pp": srv["pp"]}  # fmt: skip
    hardware["fingerprint"] = fingerprint_of_server(hardware)
    import httpx

    software = {**software_info(), "httpx": httpx.__version__, **{k: v for k, v in res.server.items() if k != "models"}}
    failed = res.metrics["requests"] == 0
    first = res.metrics["error_messages"][0]["error"] if res.metrics["error_messages"] else "no request completed"
    return int(store.add(kind="serve", model={"name": cfg.model, "sim_model": srv["sim_model"]},
                         layout={**cfg.workload(), **srv, "max_concurrency": cfg.max_concurrency,
                                 "engine_profile": res.server.get("engine_profile")},
                         metrics=res.metrics, hardware=hardware, software=software,
                         status="failed" if failed else "ok", error=first if failed else None))  # fmt: skip


def requests_table(res: ServeBenchResult) -> list[dict[str, Any]]:
    """Per-request records (seconds), for tests and exports."""
    return [asdict(r) for r in res.requests]
