"""``simulate``: serve a request stream on ``gpus / (tp · pp)`` replicas and measure it; ``capacity``: the highest
request rate a layout sustains under TTFT and TPOT p99 limits.

The KV cache of a replica is what the engine leaves after weights, activation workspace and runtime overheads
(``estimate.memory.inference_memory_arrays``) of ``gpu_memory_utilization`` of each GPU's memory (0.9 by
default: vLLM's default for years; vLLM 0.33.0's parser says 0.92), in blocks of 16 tokens. Everything random
(arrivals, lengths) is drawn from the environment's seeded generator: the same seed and inputs give the same
result, bit for bit.

Pipeline parallelism: an engine that overlaps its stages (``EngineProfile.overlaps_pipeline_stages``: TensorRT-LLM,
vLLM, SGLang) keeps ``pp`` micro-batches in flight; each replica then runs ``pp`` schedulers (vLLM V0's virtual
engines), each with a ``pp``-th of the replica's KV blocks and the scheduler's own ``max_num_seqs`` and token budget
(TensorRT-LLM: ``pp · max_batch_size`` sequences per replica), every iteration one micro-batch's
(``IterationModel.micro_batches``: all ``pp`` stages long, and at least ``pp`` times the slowest stage's GPU time, which
assumes the other micro-batches as busy: at light load the modelled iteration is up to ``(pp − 1)`` head GEMMs longer
than the engine's, conservative). The router spreads requests over every scheduler of every replica; ``replicas``,
``kv_blocks_per_replica`` and the timeline's replica count are physical replicas. A request must fit one scheduler's
blocks. llama.cpp runs the stages in turn: one scheduler per replica.

The engine profile's frontend latency (HTTP, tokenisation) is added to each request's TTFT and end-to-end latency:
for an open-loop stream that equals delaying every arrival by it; closed-loop clients send their next request
without it.

``capacity`` brackets the rate by doubling (or halving) from 1 request/s, never above the rate the layout completes
under a permanent backlog (``saturated_rate``), and bisects to ``rel_tol``, every trial with the same seed and
request count, so the SLO test is a deterministic function of the rate.
"""

from __future__ import annotations

import gc
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from scaleright.errors import InputError
from scaleright.estimate.calibration import DEFAULT_CALIBRATION, Calibration
from scaleright.estimate.comm import Cluster as Network
from scaleright.estimate.engines import EngineProfile, get_engine
from scaleright.estimate.iteration import IterationModel, serving_layout
from scaleright.estimate.memory import GB, inference_memory_arrays
from scaleright.limits import check_limit
from scaleright.serve.arrivals import arrival_times, read_trace
from scaleright.serve.cluster import Cluster
from scaleright.serve.kernel import Environment
from scaleright.serve.lengths import draw_lengths
from scaleright.serve.metrics import TIMELINE_POINTS, Timeline, meets_slos, summary, weighted_summary
from scaleright.serve.replica import BLOCK_TOKENS, SchedulerConfig
from scaleright.serve.router import make_router
from scaleright.serve.speculative import SpeculativeModel
from scaleright.workload.spec import TransformerSpec

__all__ = ["BINDINGS", "MAX_REQUESTS", "Capacity", "CapacityTrial", "SimulationResult", "build_model", "capacity",
           "find_capacity", "kv_blocks_per_replica", "saturated_rate", "simulate"]

MAX_REQUESTS = 10_000_000  # requests per simulation: 10**7 keeps one run under minutes and its records in memory
SLO_SPANS = 20  # a capacity trial's arrivals span at least this many TTFT limits (``capacity``)
MAX_TRIAL_REQUESTS = 200_000
SATURATION_WAVES = 8  # ``saturated_rate``: requests per closed-loop client
WAIT_BOUND_MEANS = 10.0  # ``capacity``: a TTFT limit beyond this many mean waits near saturation cannot bind
MIN_RATE = 1 / 1024  # requests/s: ``capacity`` gives up below it


@dataclass(frozen=True)
class SimulationResult:
    """Measured serving metrics (the ``as_dict`` keys are the CLI's JSON contract; latencies in ms)."""

    ttft_ms: dict[str, float]
    tpot_ms: dict[str, float]
    itl_ms: dict[str, float]
    e2e_ms: dict[str, float]
    output_tokens_per_s: float
    input_tokens_per_s: float
    requests_per_s: float
    goodput_requests_per_s: float | None  # requests meeting every SLO given, per second (None: no SLO given)
    gpu_utilisation: float
    kv_utilisation: float
    mean_queue_length: float  # requests waiting, time average over the fleet
    mean_requests_in_system: float  # waiting or running, time average over the fleet (Little's L)
    preemptions: int
    swapped_kv_tokens: int  # KV tokens moved to host memory and back (preemption="swap")
    result_cache_hits: int  # requests answered from the result cache (in TTFT, end-to-end, throughput; not TPOT)
    requests: int  # completed
    rejected: int  # longer than a replica's whole KV cache
    duration_s: float  # first arrival to last completion
    replicas: int
    kv_blocks_per_replica: int
    iterations: int
    events: int
    usd_per_1m_output_tokens: float | None
    usd_per_1m_input_tokens: float | None
    layout: dict
    engine: str
    records: dict = field(default_factory=dict, repr=False, compare=False)  # per-request arrays (not in as_dict)
    chrome_trace: dict | None = field(default=None, repr=False, compare=False)
    # fleet time series per sampling interval (``metrics.Timeline.series``; not in as_dict)
    timeline: dict = field(default_factory=dict, repr=False, compare=False)

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__
                if k not in ("records", "chrome_trace", "timeline")}  # fmt: skip


def kv_blocks_per_replica(spec: TransformerSpec, model: IterationModel | SpeculativeModel, *, gpu, tp: int, pp: int,
                          ep: int, precision: str, max_num_seqs: int, max_num_batched_tokens: int,
                          gpu_memory_utilization: float = 0.9) -> int:  # fmt: skip
    """KV blocks of 16 tokens one replica holds after weights, workspace and overheads."""
    # serving splits experts over the ep ranks of the tp group, so expert weights per GPU are 1/tp as dense ones
    # (the memory model's ep is a training axis across data parallel: here it stays 1)
    del ep
    arrs = inference_memory_arrays(spec, batch=max_num_seqs, context=1, tp=tp, pp=pp, ep=1, precision=precision,
                                   kv_precision=model.kv_precision, prefill_chunk=max_num_batched_tokens)  # fmt: skip
    other = float(arrs["weights"] + arrs["activations"] + arrs["overhead"])
    free = gpu_memory_utilization * gpu.memory_gb * GB - other
    blocks = int(free // (model.kv_bytes_per_token * BLOCK_TOKENS))
    if blocks < 1:
        raise InputError(f"{spec.name} at tp={tp} pp={pp} {precision} needs {other / GB:.1f} GB per GPU before any KV "
                         f"cache; {gpu.id} offers {gpu_memory_utilization:.0%} of {gpu.memory_gb:.1f} GB")  # fmt: skip
    return blocks


def build_model(spec: TransformerSpec, *, gpu, system=None, cluster: Network | None = None, tp: int = 1, pp: int = 1,
                ep: int = 1, precision: str = "bf16", kv_precision: str | None = None,
                engine: str | EngineProfile = "vllm",
                cal: Calibration = DEFAULT_CALIBRATION, max_num_seqs: int = 256, max_num_batched_tokens: int = 8192,
                speculative: tuple[float, int, float] | None = None,
                micro_batches: int | None = None) -> IterationModel | SpeculativeModel:  # fmt: skip
    """The iteration model of one replica; ``speculative`` = (acceptance rate, tokens proposed k, draft cost)
    wraps it in ``SpeculativeModel`` (its verification rows, max_num_seqs · k, added to the row bound).
    ``micro_batches``: in flight over the pipeline stages (None: the engine's, ``IterationModel``)."""
    rows = max_num_batched_tokens + (max_num_seqs * speculative[1] if speculative else 0)
    model = IterationModel(spec, gpu=gpu, system=system, cluster=cluster, tp=tp, pp=pp, ep=ep, precision=precision,
                           kv_precision=kv_precision, engine=engine, cal=cal, max_rows=rows,
                           micro_batches=micro_batches)  # fmt: skip
    if speculative is None:
        return model
    acc, k, draft = speculative
    return SpeculativeModel(model, acceptance=acc, k=k, draft_cost=draft)


def _int_arg(name: str, v, kind: str, low: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise InputError(f"{name}={v!r} must be an integer")
    check_limit(name, int(v), kind, low=low)
    return int(v)


def simulate(
    spec: TransformerSpec,
    *,
    gpu,
    gpus: int = 1,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    cluster: Network | None = None,
    input_len: int = 512,
    output_len: int = 128,
    rate: float | None = None,
    concurrency: int | None = None,
    trace: Path | str | None = None,
    arrival: str = "poisson",
    burstiness: float = 1.0,
    requests: int | None = None,
    duration_s: float | None = None,
    input_dist: str = "fixed",
    output_dist: str = "fixed",
    length_cv: float = 0.5,
    input_samples=None,
    output_samples=None,
    diurnal_period_s: float = 86_400.0,
    diurnal_amplitude: float = 0.5,
    engine: str | EngineProfile = "vllm",
    precision: str = "bf16",
    kv_precision: str | None = None,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int = 8192,
    prefix_cache_hit_rate: float = 0.0,
    result_cache_hit_rate: float = 0.0,
    preemption: str = "recompute",
    gpu_memory_utilization: float = 0.9,
    router: str = "round-robin",
    seed: int = 0,
    slo_ttft_ms: float | None = None,
    slo_tpot_ms: float | None = None,
    price_usd_per_gpu_hour: float | None = None,
    cal: Calibration = DEFAULT_CALIBRATION,
    log: bool = False,
    chrome_trace: bool = False,
    model: IterationModel | SpeculativeModel | None = None,
    speculative: tuple[float, int, float] | None = None,
    system=None,
) -> SimulationResult:
    """Simulate serving ``spec`` on ``gpus`` GPUs as ``gpus / (tp · pp)`` replicas, under an open-loop ``rate``
    (``arrival`` process), ``concurrency`` closed-loop clients, or a ``trace`` CSV. ``requests`` (default 1000) or
    ``duration_s`` (open loop) sets the length of the run. Lengths: ``input_dist`` / ``output_dist`` fixed,
    lognormal (mean = input_len / output_len, ``length_cv``) or empirical (``input_samples`` / ``output_samples``,
    arrays of token counts, e.g. from ``serve.lengths.read_lengths``). ``speculative``: (acceptance rate, tokens
    proposed per step, draft cost), see ``serve.speculative``. ``system``: the network (``catalog.systems``).
    ``engine``: a profile name or an ``EngineProfile`` (a fitted one: its frontend latency and factors apply);
    ``max_num_seqs`` None: the engine's default cap on sequences in flight (``EngineProfile.max_num_seqs``)."""
    gpus = _int_arg("gpus", gpus, "gpus")
    for name, v in (("tp", tp), ("pp", pp), ("ep", ep)):
        _int_arg(name, v, "parallel_degree")
    serving_layout(spec, tp=tp, pp=pp, ep=ep)
    if gpus % (tp * pp):
        raise InputError(f"tp({tp}) * pp({pp}) = {tp * pp} does not divide gpus({gpus})")
    replicas = gpus // (tp * pp)
    modes = [x is not None for x in (rate, concurrency, trace)]
    if sum(modes) != 1:
        raise InputError("give exactly one of rate, concurrency or trace")
    if requests is not None and duration_s is not None:
        raise InputError("requests and duration_s are alternatives; give one")
    profile = get_engine(engine)
    if max_num_seqs is None:  # the engine's default (``EngineProfile.max_num_seqs``)
        max_num_seqs = profile.max_num_seqs
    _int_arg("max_num_seqs", max_num_seqs, "batch")
    _int_arg("max_num_batched_tokens", max_num_batched_tokens, "tokens_per_request")
    if not 0 < gpu_memory_utilization <= 1:
        raise InputError(f"gpu_memory_utilization={gpu_memory_utilization} must lie in (0, 1]")
    config = SchedulerConfig(max_num_seqs, max_num_batched_tokens, prefix_cache_hit_rate, preemption)
    if not 0 <= result_cache_hit_rate < 1:
        raise InputError(f"result_cache_hit_rate={result_cache_hit_rate} must lie in [0, 1)")
    env = Environment(seed, log=log)
    rng = env.rng
    arrivals = None
    if trace is not None:
        arrivals, inputs, outputs = read_trace(trace)
        if requests is not None:
            arrivals, inputs, outputs = arrivals[:requests], inputs[:requests], outputs[:requests]
        if duration_s is not None:
            keep = arrivals <= duration_s
            arrivals, inputs, outputs = arrivals[keep], inputs[keep], outputs[keep]
    else:
        _int_arg("input_len", input_len, "tokens_per_request")
        _int_arg("output_len", output_len, "tokens_per_request")
        if rate is not None:
            check_limit("rate", rate, "requests_per_s")
            if not (isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0):
                raise InputError(f"rate={rate!r} must be a finite positive number of requests per second")
        if duration_s is not None:
            if rate is None:
                raise InputError("duration_s needs an open-loop rate (use requests with concurrency)")
            check_limit("duration_s", duration_s, "hours", low=0)
            if not duration_s > 0:
                raise InputError(f"duration_s={duration_s} must be positive")
            n = int(rate * duration_s * 1.1 + 10 * math.sqrt(rate * duration_s) + 10)
        else:
            n = requests if requests is not None else 1000
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise InputError(f"requests={n!r} must be a positive integer")
        if n > MAX_REQUESTS:
            raise InputError(f"requests={n} must be <= {MAX_REQUESTS:,} (one simulation's records stay in memory)")
        if rate is not None:
            arrivals = arrival_times(rng, arrival, rate=rate, n=n, burstiness=burstiness, period_s=diurnal_period_s,
                                     amplitude=diurnal_amplitude)  # fmt: skip
            # a diurnal peak or a bursty stream can outrun the first estimate of the count: draw more (from the
            # same generator, so the result stays a function of the seed) until the arrivals cover duration_s
            while duration_s is not None and arrivals[-1] < duration_s and n < MAX_REQUESTS:
                n = min(2 * n, MAX_REQUESTS)
                arrivals = arrival_times(rng, arrival, rate=rate, n=n, burstiness=burstiness,
                                         period_s=diurnal_period_s, amplitude=diurnal_amplitude)  # fmt: skip
            if duration_s is not None and arrivals[-1] < duration_s:
                raise InputError(f"duration_s={duration_s:g} at rate {rate:g}/s needs more than {MAX_REQUESTS:,} "
                                 "requests; shorten the duration")  # fmt: skip
            if duration_s is not None:
                arrivals = arrivals[arrivals <= duration_s]
                n = len(arrivals)
        else:
            _int_arg("concurrency", concurrency, "batch")
        inputs = draw_lengths(rng, input_dist, n=n, mean=input_len, cv=length_cv, samples=input_samples,
                              field="input length")  # fmt: skip
        outputs = draw_lengths(rng, output_dist, n=n, mean=output_len, cv=length_cv, samples=output_samples,
                               field="output length")  # fmt: skip
    if model is None:
        model = build_model(spec, gpu=gpu, system=system, cluster=cluster, tp=tp, pp=pp, ep=ep, precision=precision,
                            kv_precision=kv_precision, engine=profile, cal=cal, max_num_seqs=max_num_seqs,
                            max_num_batched_tokens=max_num_batched_tokens, speculative=speculative)  # fmt: skip
    blocks = kv_blocks_per_replica(spec, model, gpu=gpu, tp=tp, pp=pp, ep=ep, precision=precision,
                                   max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                                   gpu_memory_utilization=gpu_memory_utilization)  # fmt: skip
    # pipeline parallelism with the stages overlapped: each replica runs its ``k`` micro-batches as ``k`` schedulers
    # (vLLM V0's virtual engines), each with a k-th of the KV blocks and the scheduler's caps, every iteration one
    # micro-batch's (``IterationModel.micro_batches``); the router spreads requests over all of them
    k = model.micro_batches
    ve_blocks = blocks // k
    if ve_blocks < 1:
        raise InputError(f"{spec.name} at tp={tp} pp={pp}: {blocks} KV blocks do not give each of the {k} "
                         "micro-batches in flight one block")  # fmt: skip
    cached = rng.random(len(inputs)) < result_cache_hit_rate if result_cache_hit_rate else None
    fleet = Cluster(env, model, config, replicas=replicas * k, kv_blocks=ve_blocks, router=make_router(router),
                    input_tokens=np.asarray(inputs), output_tokens=np.asarray(outputs), arrival_s=arrivals,
                    concurrency=concurrency, trace=chrome_trace, result_cached=cached, micro_batches=k)  # fmt: skip
    # a few hundred samples of the fleet's integrals, spaced over the arrivals (``metrics.Timeline``)
    last = float(arrivals[-1]) if arrivals is not None and len(arrivals) else 0.0
    timeline = Timeline(env, lambda: fleet.replicas,
                        lambda: fleet.issued >= fleet.n and not any(r.in_system for r in fleet.replicas),
                        dt_s=last / TIMELINE_POINTS if last > 0 else 1e-3)  # fmt: skip
    # The run allocates one object per request and keeps them all: the cyclic garbage collector would rescan that
    # growing heap again and again (runs 2x slower at 10**5 requests); nothing in the loop forms cycles.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        env.run()
    finally:
        if was_enabled:
            gc.enable()
    fleet.close(env.now)
    return _result(fleet, env, model=model, gpus=gpus, tp=tp, pp=pp, ep=ep, engine=profile, blocks=ve_blocks,
                   slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms, price=price_usd_per_gpu_hour,
                   chrome_trace=chrome_trace, timeline=timeline)  # fmt: skip


def _result(fleet: Cluster, env: Environment, *, model, gpus, tp, pp, ep, engine: EngineProfile, blocks, slo_ttft_ms,
            slo_tpot_ms, price, chrome_trace, timeline: Timeline) -> SimulationResult:  # fmt: skip
    reps = fleet.replicas  # the schedulers: ``model.micro_batches`` per replica, ``blocks`` KV blocks each
    k = model.micro_batches
    done = [r for rep in reps for r in rep.finished] + fleet.cache_hits
    done.sort(key=lambda r: r.id)
    engine_made = np.array([r.replica >= 0 for r in done], dtype=bool)  # result-cache hits never reach a replica
    arr = np.array([r.arrival_s for r in done])
    first = np.array([r.first_token_s for r in done])
    fin = np.array([r.finish_s for r in done])
    out = np.array([r.output_tokens for r in done], dtype=float)
    inp = np.array([r.input_tokens for r in done], dtype=float)
    front = engine.frontend_latency_s  # outside the engine: shifts every request's clock alike
    ttft = first - arr + front
    e2e = fin - arr + front
    multi = (out > 1) & engine_made
    tpot = (e2e[multi] - ttft[multi]) / (out[multi] - 1)
    start = min((r.arrival_s for r in fleet.requests), default=0.0)
    span = (float(fin.max()) - start) if done else 0.0
    per = (lambda x: x / span) if span > 0 else (lambda x: float("nan"))
    itl_v = [v for rep in reps for v, _ in rep.itl]
    itl_w = [w for rep in reps for _, w in rep.itl]
    goodput = None
    if slo_ttft_ms is not None or slo_tpot_ms is not None:
        ok = meets_slos(ttft, e2e, out, slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms, multi=multi)
        goodput = per(float(ok.sum()))
    out_tps, in_tps = per(float(out.sum())), per(float(inp.sum()))
    usd_h = price * gpus if price is not None else None
    busy = sum(rep.busy_s for rep in reps)
    res = SimulationResult(
        ttft_ms=summary(ttft), tpot_ms=summary(tpot), itl_ms=weighted_summary(itl_v, itl_w), e2e_ms=summary(e2e),
        output_tokens_per_s=out_tps, input_tokens_per_s=in_tps, requests_per_s=per(float(len(done))),
        goodput_requests_per_s=goodput,
        # k micro-batches' iterations share each stage, one pp-th of each iteration on it: with k = pp a stage's
        # busy share is the schedulers' summed busy time over pp, the same mean over len(reps) = replicas · k
        gpu_utilisation=busy / (len(reps) * span) if span > 0 else 0.0,
        kv_utilisation=sum(rep.kv_block_s for rep in reps) / (len(reps) * blocks * span) if span > 0 else 0.0,
        mean_queue_length=per(sum(rep.queue_s for rep in reps)),
        mean_requests_in_system=per(sum(rep.system_s for rep in reps)),
        preemptions=sum(rep.preemptions for rep in reps),
        swapped_kv_tokens=sum(rep.swapped_tokens for rep in reps), result_cache_hits=len(fleet.cache_hits),
        requests=len(done),
        rejected=sum(len(rep.rejected) for rep in reps), duration_s=span, replicas=len(reps) // k,
        kv_blocks_per_replica=blocks * k, iterations=sum(rep.iterations for rep in reps),
        events=env.events_processed - timeline.samples,
        usd_per_1m_output_tokens=usd_h / 3600 / out_tps * 1e6 if usd_h is not None and out_tps > 0 else None,
        usd_per_1m_input_tokens=usd_h / 3600 / in_tps * 1e6 if usd_h is not None and in_tps > 0 else None,
        layout={"tp": tp, "pp": pp, "ep": ep, "replicas": len(reps) // k, "gpus": gpus}, engine=engine.name,
        records={"id": np.array([r.id for r in done]), "arrival_s": arr, "first_token_s": first, "finish_s": fin,
                 "input_tokens": inp, "output_tokens": out, "log": env.log, "ttft_s": ttft, "tpot_s": tpot,
                 "e2e_s": e2e},
        timeline=_per_replica(timeline.series(blocks), k),
    )  # fmt: skip
    if chrome_trace:
        from scaleright.serve.trace import chrome_trace_events

        object.__setattr__(res, "chrome_trace", chrome_trace_events(fleet))
    return res


def _per_replica(series: dict[str, np.ndarray], k: int) -> dict[str, np.ndarray]:
    """The timeline with its scheduler count read as replicas (``k`` schedulers per replica)."""
    if k > 1:
        series["replicas"] = series["replicas"] / k
    return series


def saturated_rate(spec: TransformerSpec, *, model: IterationModel | SpeculativeModel, clients: int,
                   waves: int = SATURATION_WAVES, **kw) -> tuple[float, SimulationResult]:  # fmt: skip
    """(requests/s the layout completes under a permanent backlog, the simulation): ``clients`` closed-loop
    clients (``max_num_seqs`` per replica: every batch slot refilled the moment it frees, as a queue that never
    empties does), ``waves · clients`` requests, counted between the ``clients``-th completion and the
    ``clients``-th from last (the ramp-up of the first batch and the drain of the last left out). No open-loop
    stream above this rate is stable: its queue, and every request's wait, grows without bound. Fewer waves (three
    at least) where ``waves · clients`` would pass ``MAX_TRIAL_REQUESTS``."""
    n = max(3, min(waves, MAX_TRIAL_REQUESTS // clients)) * clients
    r = simulate(spec, concurrency=clients, requests=n, model=model, **kw)
    fin = np.sort(r.records["finish_s"])
    if fin.size == n and n > 2 * clients and fin[n - clients - 1] > fin[clients - 1]:
        return (n - 2 * clients) / float(fin[n - clients - 1] - fin[clients - 1]), r
    return r.requests_per_s, r


BINDINGS = ("ttft_p99", "tpot_p99", "throughput", "kv_cache")  # what sets a capacity (``Capacity.binding``)


@dataclass(frozen=True)
class CapacityTrial:
    """One rate ``find_capacity`` tried: whether it met both limits, and the p99s and rejections that decided it."""

    rate_per_s: float
    meets_slo: bool
    ttft_p99_ms: float
    tpot_p99_ms: float  # NaN when no request decodes (one output token each)
    rejected: int


@dataclass(frozen=True)
class Capacity:
    """What ``find_capacity`` found: the highest rate meeting both p99 limits, the simulation at it (None at rate 0),
    every trial, the layout's saturated rate (``saturated_rate``; the ceiling of the search) and what set the answer
    (``binding``, one of ``BINDINGS``):

    - ``throughput``: the answer is within the search's tolerance of the saturated rate. No limit can be told
      apart from the ceiling there; a looser one would not raise the rate.
    - ``ttft_p99`` / ``tpot_p99``: the lowest failing trial above the answer missed that limit (both missed: the
      one exceeded by the larger factor). Loosening it raises the rate, up to the saturated rate.
    - ``kv_cache``: a request is longer than a replica's whole KV cache (rate 0), or a trial failed only on
      rejected requests.
    """

    max_rate_per_s: float
    result: SimulationResult | None
    trials: tuple[CapacityTrial, ...]
    saturated_rate_per_s: float
    binding: str
    slo_ttft_p99_ms: float
    slo_tpot_p99_ms: float


def _binding(best: float, ceiling: float, rel_tol: float, trials: list[CapacityTrial], slo_ttft: float,
             slo_tpot: float) -> str:  # fmt: skip
    """``Capacity.binding``: see there."""
    if best > 0 and best * (1 + rel_tol) >= ceiling:
        return "throughput"
    above = [t for t in trials if not t.meets_slo and t.rate_per_s > best]
    if not above:
        return "throughput"  # nothing above the answer was refused: the search stopped at its trial limit
    t = min(above, key=lambda x: x.rate_per_s)
    over_ttft = t.ttft_p99_ms / slo_ttft
    over_tpot = t.tpot_p99_ms / slo_tpot if math.isfinite(t.tpot_p99_ms) else 0.0
    if max(over_ttft, over_tpot) <= 1.0:
        return "kv_cache" if t.rejected else "throughput"
    return "ttft_p99" if over_ttft >= over_tpot else "tpot_p99"


def capacity(spec: TransformerSpec, **kw) -> tuple[float, SimulationResult | None, list]:
    """``find_capacity`` as (highest rate/s, the simulation at it, the trials as (rate, passed))."""
    c = find_capacity(spec, **kw)
    return c.max_rate_per_s, c.result, [(t.rate_per_s, t.meets_slo) for t in c.trials]


def find_capacity(spec: TransformerSpec, *, slo_ttft_p99_ms: float, slo_tpot_p99_ms: float, requests: int = 1000,
                  rel_tol: float = 0.02, max_trials: int = 40, saturated: float | None = None,
                  **kw) -> Capacity:  # fmt: skip
    """The highest rate/s with p99 TTFT and p99 TPOT within their limits, the simulation at that rate, the
    trials, the saturated rate and what bound the answer (``Capacity``). Rate 0 and no simulation when even 1/1024
    request/s misses the limits, or a request is longer than the KV cache.

    The search doubles from 1 request/s (or halves) and bisects, never above the saturated rate
    (``saturated_rate``): past it the queue grows without bound, so no rate above it is sustained under any TTFT
    limit, and the search stops there — the result when the TTFT limit is so generous that only throughput binds.

    Each trial runs ``requests`` requests, or more: enough for its arrivals to span ``SLO_SPANS`` times the TTFT
    limit (at most ``MAX_TRIAL_REQUESTS``). A short burst of requests drains within a generous TTFT limit at any
    rate; over a span of many limits, a rate x % above what the fleet serves builds a backlog whose wait grows to
    about x % of the span, so the trial fails once the overload passes ~1/SLO_SPANS. For Poisson and gamma arrivals
    the limit used for that span is at most ``WAIT_BOUND_MEANS`` mean waits of a queue at ``1 − rel_tol`` of the
    saturated rate (Kingman: W ≈ (1 + c_a²)/2 · ρ/(1 − ρ) / μ, c_a² = 1 / burstiness): a longer limit cannot bind
    below the saturated rate to within the search's tolerance, and would only lengthen every trial (a one-day TTFT
    limit once ran 200,000 requests per trial). ``saturated``: the saturated rate when the caller has it
    (``saturated_rate`` with the same arguments), else it is simulated here."""
    for name, v in (("slo_ttft_p99_ms", slo_ttft_p99_ms), ("slo_tpot_p99_ms", slo_tpot_p99_ms)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise InputError(f"{name}={v!r} must be a finite positive number of milliseconds")
    if any(k in kw for k in ("rate", "concurrency", "trace", "duration_s")):
        raise InputError("capacity searches the rate itself: give no rate, concurrency, trace or duration_s")
    kw["engine"] = get_engine(kw.get("engine", "vllm"))  # read once (a stored profile), not on every trial
    if kw.get("max_num_seqs") is None:  # the engine's default, as simulate takes it
        kw["max_num_seqs"] = kw["engine"].max_num_seqs
    names = ("gpu", "system", "cluster", "tp", "pp", "ep", "precision", "kv_precision", "engine", "cal", "max_num_seqs",
             "max_num_batched_tokens", "speculative")
    model = build_model(spec, **{k: kw[k] for k in names if k in kw})
    trials: list[CapacityTrial] = []
    cache: dict[float, SimulationResult] = {}
    slos = (slo_ttft_p99_ms, slo_tpot_p99_ms)

    def done(best: float, binding: str | None = None) -> Capacity:
        b = binding or _binding(best, ceiling, rel_tol, trials, *slos)
        return Capacity(best, cache.get(best) if best > 0 else None, tuple(trials), ceiling, b, *slos)

    replicas = max(1, kw.get("gpus", 1) // (kw.get("tp", 1) * kw.get("pp", 1)))
    if saturated is None:
        saturated, sat = saturated_rate(spec, model=model, clients=kw["max_num_seqs"] * replicas * model.micro_batches,
                                        **kw)  # fmt: skip
        if sat.rejected:
            return Capacity(0.0, None, (), float(saturated), "kv_cache", *slos)
    ceiling = float(saturated)
    if not (math.isfinite(ceiling) and ceiling > 0):
        return Capacity(0.0, None, (), ceiling, "throughput", *slos)
    ttft_span_s = slo_ttft_p99_ms / 1e3
    if kw.get("arrival", "poisson") in ("poisson", "gamma"):
        ca2 = 1.0 / kw.get("burstiness", 1.0) if kw.get("arrival") == "gamma" else 1.0
        ttft_span_s = min(ttft_span_s, WAIT_BOUND_MEANS * (1 + ca2) / 2 / (rel_tol * ceiling))

    def ok(rate: float) -> bool:
        n = max(requests, min(MAX_TRIAL_REQUESTS, math.ceil(rate * SLO_SPANS * ttft_span_s)))
        r = simulate(spec, rate=rate, requests=n, model=model, **kw)
        cache[rate] = r
        tpot = r.tpot_ms["p99"]  # NaN when no request decodes (one output token each)
        good = r.rejected == 0 and r.ttft_ms["p99"] <= slo_ttft_p99_ms and (math.isnan(tpot) or tpot <= slo_tpot_p99_ms)
        trials.append(CapacityTrial(rate, good, r.ttft_ms["p99"], tpot, r.rejected))
        return good

    lo, hi = 0.0, min(1.0, ceiling)
    if ok(hi):
        while hi < ceiling:
            if len(trials) >= max_trials:
                return done(hi)
            if not ok(min(hi * 2, ceiling)):
                break
            hi = min(hi * 2, ceiling)
        else:
            return done(hi, "throughput")  # the saturated rate passes: throughput binds, not the limits
        lo, hi = hi, min(hi * 2, ceiling)
    else:
        while hi / 2 >= MIN_RATE and len(trials) < max_trials and not ok(hi / 2):
            hi /= 2
        if hi / 2 < MIN_RATE or (len(trials) >= max_trials and not trials[-1].meets_slo):
            return done(0.0)
        lo = hi / 2
    while hi - lo > rel_tol * lo and len(trials) < max_trials:
        mid = (lo + hi) / 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return done(lo)
