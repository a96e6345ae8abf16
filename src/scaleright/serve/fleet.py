"""A fleet of replica pools serving several services: the cluster levers of issue #10.

- **Pools.** A pool is a set of identical replicas (one model, layout, engine, scheduler) behind a router. Its
  replica count is fixed or set by an ``Autoscale`` policy.
- **Services** each bring their own request stream (arrival times and lengths) and a ``priority``. Several services
  sent to one pool share its replicas (pooling); where their priorities differ the replicas' queues serve the
  highest priority first (first come first served within one).
- **Tiered model routing** (a cascade, FrugalGPT, Chen et al. 2023): a service names tiers of pools, smallest model
  first, and the share of each tier's requests that must escalate to the next one. An escalated request is served
  whole on the small tier first (its prefill and output, which are then judged insufficient) and sent again to the
  next tier: it pays every tier it passes. Its latencies run from its original arrival to its final tier's first
  token and completion.
- **Autoscaling** (the Kubernetes HPA rule): every ``interval_s``, desired = ⌈replicas · metric / target⌉ with the
  metric the pool's busy share over the last interval (``utilisation``) or the requests waiting per replica
  (``queue``), clamped to ``[min_replicas, max_replicas]``. New replicas serve after ``cold_start_s`` (weights
  load, engine start) and are billed from the request. Scaling down follows the HPA's stabilisation window
  (``scale_down_delay_s``): the pool keeps the highest desired count of the ticks of the last window (its start
  count counting as one at time 0), so a falling load is followed with that delay rather than in steps to the
  latest count; only idle replicas are removed. With
  ``min_replicas = 0`` (scale to zero, serverless) the first request to an empty pool starts a replica at once and
  waits its cold start.
- **Billing.** Both ways are reported for every pool: per-second billing (serverless: every replica-second from a
  replica's start request to its removal, cold starts included) and always-on (the pool's largest replica count
  for the whole span). Idle cost = billed GPU-seconds not spent running an iteration, times the price.
- **Disaggregated prefill and decode** (DistServe, Zhong et al. 2024; Splitwise, Patel et al. 2024): a prefill pool
  runs each prompt and samples the first token, then sends the request's KV cache to a decode pool over the tier
  between them: each of the replica's GPUs sends its shard to its counterpart at once, one send/recv of
  ``kv_bytes_per_token · prompt tokens`` timed by ``estimate.collectives`` on that tier (``kv_link``: ``intra-node``
  or ``network``). The decode replica admits it with its KV in place.

Pipeline parallelism: a replica of an engine that keeps pp micro-batches in flight (``IterationModel.micro_batches``
> 1) is ``serve.pipelined.PipelinedReplica``, pp schedulers with a pp-th of its KV blocks each; else one scheduler
whose iterations pass the stages one after another (llama.cpp).

Every random draw (escalation decisions) comes from the environment's generator after the arrivals: same seed,
same result.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scaleright.errors import InputError
from scaleright.serve.kernel import Environment, Priority
from scaleright.serve.metrics import summary
from scaleright.serve.pipelined import PipelinedReplica
from scaleright.serve.replica import Replica, SchedulerConfig, StepCost
from scaleright.serve.request import MIGRATED, REJECTED, Request
from scaleright.serve.router import make_router

__all__ = ["AUTOSCALE_METRICS", "Autoscale", "Fleet", "FleetResult", "PoolSpec", "ServiceSpec", "run_fleet"]

AUTOSCALE_METRICS = ("utilisation", "queue")
_ARRIVAL = Priority.ARRIVAL
_SCHED = Priority.SCHEDULE


@dataclass(frozen=True)
class Autoscale:
    """An autoscaling policy of one pool (module docstring)."""

    max_replicas: int
    min_replicas: int = 1
    metric: str = "utilisation"  # "utilisation": busy share of the serving replicas; "queue": waiting per replica
    target: float = 0.7
    interval_s: float = 15.0  # Kubernetes HPA sync period 15 s
    cold_start_s: float = 60.0
    scale_down_delay_s: float = 300.0  # HPA scale-down stabilisation window 300 s

    def __post_init__(self) -> None:
        if self.metric not in AUTOSCALE_METRICS:
            raise InputError(f"autoscale metric={self.metric!r} not allowed; allowed: {', '.join(AUTOSCALE_METRICS)}")
        for name in ("target", "interval_s"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise InputError(f"autoscale {name}={v!r} must be a finite positive number")
        if self.metric == "utilisation" and self.target > 1:
            raise InputError(f"autoscale target={self.target} is a busy share: it must lie in (0, 1]")
        for name in ("cold_start_s", "scale_down_delay_s"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise InputError(f"autoscale {name}={v!r} must be a finite number >= 0")
        if not (isinstance(self.min_replicas, int) and isinstance(self.max_replicas, int)
                and 0 <= self.min_replicas <= self.max_replicas and self.max_replicas >= 1):  # fmt: skip
            raise InputError(f"autoscale min_replicas={self.min_replicas!r}, max_replicas={self.max_replicas!r}: need "
                             "integers with 0 <= min_replicas <= max_replicas and max_replicas >= 1")  # fmt: skip


@dataclass
class PoolSpec:
    """One pool: ``model`` (an ``IterationModel`` or a wrapper of it), its scheduler limits and KV blocks, and
    ``replicas`` (the fixed count, or the start count under ``autoscale``: default its ``min_replicas``).
    ``role``: "serve" (prefill and decode), "prefill" (sends each request to ``decode_pool`` after its first
    token, over ``kv_link``) or "decode"."""

    name: str
    model: StepCost
    config: SchedulerConfig
    kv_blocks: int
    gpus_per_replica: int
    replicas: int | None = None
    autoscale: Autoscale | None = None
    router: str = "least-outstanding"
    price_usd_per_gpu_hour: float | None = None
    role: str = "serve"
    decode_pool: str | None = None
    kv_link: str = "network"
    kv_transfer_s: Callable[[int], float] | None = None  # prompt tokens -> seconds (prefill pools)

    def start_replicas(self) -> int:
        if self.replicas is not None:
            return self.replicas
        return self.autoscale.min_replicas if self.autoscale is not None else 1


@dataclass
class ServiceSpec:
    """One service: its request stream, priority, SLOs and the pools it is sent to (``tiers``: one pool, or a
    cascade smallest first with ``escalate[i]`` the share of tier i's requests sent on to tier i + 1)."""

    name: str
    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    tiers: Sequence[str]
    escalate: Sequence[float] = ()
    priority: int = 0
    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None

    def __post_init__(self) -> None:
        if not self.tiers:
            raise InputError(f"service {self.name!r}: give at least one pool")
        if len(self.escalate) != len(self.tiers) - 1:
            raise InputError(f"service {self.name!r}: {len(self.tiers)} tiers need {len(self.tiers) - 1} escalation "
                             f"shares (one per tier but the last), got {len(self.escalate)}")  # fmt: skip
        for f in self.escalate:
            if not (isinstance(f, (int, float)) and 0 <= f <= 1):
                raise InputError(f"service {self.name!r}: escalation share {f!r} must lie in [0, 1]")


class _Pool:
    """Runtime state of one pool: its replicas (serving, starting, removed), pending requests, scaling clock."""

    def __init__(self, fleet: Fleet, spec: PoolSpec, priorities: bool):
        self.fleet, self.spec, self.priorities = fleet, spec, priorities
        self.router = make_router(spec.router)
        self.active: list[Replica | PipelinedReplica] = []
        self.starting = 0
        # (replica, billed from, removed at: inf while alive)
        self.all: list[tuple[Replica | PipelinedReplica, float, float]] = []
        self._live: dict[int, int] = {}  # replica index -> position in ``all``
        self.pending: list[Request] = []  # arrived while no replica serves (scale from zero)
        self.timeline: list[tuple[float, int, int]] = [(0.0, 0, 0)]  # (time, serving, billed)
        # (time, desired) of the autoscaler's ticks within the scale-down window; the start count at time 0
        self.recent: list[tuple[float, int]] = [(0.0, spec.start_replicas())]
        self._busy_mark = 0.0
        self._busy_removed = 0.0
        self.peak_billed = 0

    def _note(self, env: Environment) -> None:
        billed = len(self.active) + self.starting
        self.peak_billed = max(self.peak_billed, billed)
        self.timeline.append((env.now, len(self.active), billed))

    def _new_replica(self, env: Environment) -> Replica | PipelinedReplica:
        s = self.spec
        k = getattr(s.model, "micro_batches", 1)
        if k > 1:  # pp micro-batches in flight: k schedulers sharing the replica's KV blocks
            return PipelinedReplica(env, s.model, s.config, kv_blocks=s.kv_blocks, micro_batches=k,
                                    index=len(self.all), on_finish=self.fleet._hop_done,
                                    priorities=self.priorities)  # fmt: skip
        rep = Replica(env, s.model, s.config, kv_blocks=s.kv_blocks, index=len(self.all),
                      on_finish=self.fleet._hop_done, priorities=self.priorities)  # fmt: skip
        return rep

    def start(self, env: Environment, n: int, *, cold: bool) -> None:
        """Bring ``n`` replicas up: at once (the start of the run) or after the cold start."""
        for _ in range(n):
            if cold and self.spec.autoscale is not None and self.spec.autoscale.cold_start_s > 0:
                self.starting += 1
                env.schedule(env.now + self.spec.autoscale.cold_start_s, _ARRIVAL, self._ready, env.now, True)
            else:
                self._ready(env, env.now, False)
        self._note(env)

    def _ready(self, env: Environment, billed_from: float, cold: bool) -> None:
        rep = self._new_replica(env)
        if cold:
            self.starting -= 1
        self._live[rep.index] = len(self.all)
        self.all.append((rep, billed_from, math.inf))
        self.active.append(rep)
        self._note(env)
        pending, self.pending = self.pending, []
        for req in pending:
            self.dispatch(env, req)

    def dispatch(self, env: Environment, req: Request) -> None:
        reps = self.active
        if not reps:
            self.pending.append(req)
            if not self.starting and self.spec.autoscale is not None:  # scale from zero now
                self.start(env, 1, cold=True)
            return
        reps[self.router.pick(reps) % len(reps) if len(reps) > 1 else 0].submit(env, req)

    def waiting(self) -> int:
        return len(self.pending) + sum(len(r.waiting) for r in self.active)

    def busy_s(self) -> float:
        return self._busy_removed + sum(r.busy_s for r in self.active)

    def autoscale_tick(self, env: Environment) -> None:
        a = self.spec.autoscale
        assert a is not None
        n = len(self.active)
        busy = self.busy_s()
        if a.metric == "utilisation":
            metric = (busy - self._busy_mark) / (n * a.interval_s) if n else (1.0 if self.pending else 0.0)
        else:
            metric = self.waiting() / n if n else float(len(self.pending))
        self._busy_mark = busy
        current = n + self.starting
        desired = math.ceil(max(current, 1) * metric / a.target - 1e-9)
        desired = min(max(desired, a.min_replicas), a.max_replicas)
        self.recent = [(t, d) for t, d in self.recent if env.now - t <= a.scale_down_delay_s]
        self.recent.append((env.now, desired))
        if desired > current:
            self.start(env, desired - current, cold=True)
        else:
            keep = max(d for _, d in self.recent)  # the HPA's stabilised recommendation for scaling down
            if keep < n:
                idle = [r for r in self.active if r.in_system == 0 and not r.busy]
                for rep in idle[: n - keep]:
                    self._remove(env, rep)

    def _remove(self, env: Environment, rep: Replica | PipelinedReplica) -> None:
        self.active.remove(rep)
        i = self._live.pop(rep.index)
        r, since, _ = self.all[i]
        self.all[i] = (r, since, env.now)
        self._busy_removed += rep.busy_s  # its busy time stays in busy_s()
        self._note(env)


@dataclass(frozen=True)
class FleetResult:
    """Per-service latency and goodput, per-pool replicas over time and cost (``as_dict``: the JSON form)."""

    services: dict[str, dict]
    pools: dict[str, dict]
    duration_s: float
    usd_per_second_billing: float | None
    usd_always_on: float | None
    idle_usd: float | None
    peak_gpus: int
    events: int
    records: dict = field(default_factory=dict, repr=False, compare=False)

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "records"}


class Fleet:
    """Pools and services on one environment (module docstring)."""

    def __init__(self, env: Environment, pools: Sequence[PoolSpec], services: Sequence[ServiceSpec]):
        names = [p.name for p in pools]
        if len(set(names)) != len(names):
            raise InputError(f"pool names must be unique, got {names}")
        self.env = env
        by_name = {p.name: p for p in pools}
        for p in pools:
            if p.role == "prefill":
                if p.decode_pool not in by_name or by_name[p.decode_pool].role != "decode":
                    raise InputError(f"pool {p.name!r}: a prefill pool names its decode pool (a pool of role "
                                     f"'decode'), got decode_pool={p.decode_pool!r}")  # fmt: skip
            elif p.role not in ("serve", "decode"):
                raise InputError(f"pool {p.name!r}: role={p.role!r}; allowed: serve, prefill, decode")
        prio_pools = {t for s in services for t in s.tiers if len({x.priority for x in services
                                                                  if t in x.tiers}) > 1}  # fmt: skip
        self.pools = {p.name: _Pool(self, p, p.name in prio_pools) for p in pools}
        self._by_replica: dict[int, _Pool] = {}
        for s in services:
            for t in s.tiers:
                if t not in self.pools:
                    raise InputError(f"service {s.name!r}: unknown pool {t!r}; pools: {', '.join(names)}")
                if self.pools[t].spec.role == "decode":
                    raise InputError(f"service {s.name!r}: pool {t!r} is a decode pool; send to its prefill pool")
        self.services = list(services)
        # one job per request of every service, in service order
        self.job_service: list[int] = []
        self.job_index: list[int] = []
        offs = 0
        self.offsets = []
        for k, s in enumerate(services):
            n = len(s.arrival_s)
            self.offsets.append(offs)
            self.job_service += [k] * n
            self.job_index += list(range(n))
            offs += n
        n_jobs = offs
        self.first = np.full(n_jobs, np.nan)
        self.finish = np.full(n_jobs, np.nan)
        self.tier_done = np.zeros(n_jobs, dtype=np.int64)  # tiers served (1 + escalations)
        self.rejected = np.zeros(n_jobs, dtype=bool)
        # escalation draws: one uniform per job and tier boundary, after the arrivals were drawn
        self.escalates = [env.rng.random((len(s.arrival_s), max(len(s.tiers) - 1, 0))) < np.asarray(s.escalate)
                          for s in services]  # fmt: skip
        self.open = n_jobs
        for pool in self.pools.values():
            pool.start(env, pool.spec.start_replicas(), cold=False)
            if pool.spec.autoscale is not None:
                env.schedule(pool.spec.autoscale.interval_s, _SCHED, self._tick, pool)
        self._next = [0] * len(services)
        for k, s in enumerate(services):
            if len(s.arrival_s):
                env.schedule(float(s.arrival_s[0]), _ARRIVAL, self._arrive, k)
        self._hop_pool: dict[int, tuple[_Pool, int]] = {}  # id(request) -> (pool, tier)

    # -- arrivals and hops -------------------------------------------------------------------------------------
    def _send(self, env: Environment, job: int, tier: int) -> None:
        k, i = self.job_service[job], self.job_index[job]
        s = self.services[k]
        pool = self.pools[s.tiers[tier]]
        out = int(s.output_tokens[i])
        req = Request(job, env.now, int(s.input_tokens[i]), 1 if pool.spec.role == "prefill" else out)
        req.priority = s.priority
        req.job = job
        self._hop_pool[id(req)] = (pool, tier)
        pool.dispatch(env, req)

    def _arrive(self, env: Environment, k: int) -> None:
        s = self.services[k]
        i = self._next[k]
        self._next[k] = i + 1
        self._send(env, self.offsets[k] + i, 0)
        if i + 1 < len(s.arrival_s):
            env.schedule(float(s.arrival_s[i + 1]), _ARRIVAL, self._arrive, k)

    def _hop_done(self, env: Environment, req: Request) -> None:
        pool, tier = self._hop_pool.pop(id(req))
        job = req.job
        k, i = self.job_service[job], self.job_index[job]
        s = self.services[k]
        if req.state == REJECTED:
            self.rejected[job] = True
            self._close(job)
            return
        out = int(s.output_tokens[i])
        if pool.spec.role == "prefill" and out > 1:  # send the KV to the decode pool
            first = req.first_token_s
            assert pool.spec.kv_transfer_s is not None, "a prefill pool needs its KV transfer time"
            env.schedule(env.now + pool.spec.kv_transfer_s(req.input_tokens), _ARRIVAL, self._migrate, job, tier,
                         first)  # fmt: skip
            return
        if tier + 1 < len(s.tiers) and self.escalates[k][i, tier]:
            self._send(env, job, tier + 1)
            return
        self.first[job] = req.first_token_s
        self.finish[job] = env.now
        self.tier_done[job] = tier + 1
        self._close(job)

    def _migrate(self, env: Environment, job: int, tier: int, first: float) -> None:
        k, i = self.job_service[job], self.job_index[job]
        s = self.services[k]
        prefill = self.pools[s.tiers[tier]]
        decode = self.pools[prefill.spec.decode_pool]  # type: ignore[index]
        req = Request(job, env.now, int(s.input_tokens[i]), int(s.output_tokens[i]))
        req.state = MIGRATED
        req.done = req.input_tokens  # KV of the prompt is in place; the first token was sampled on the prefill side
        req.generated = 1
        req.first_token_s = first
        req.priority = s.priority
        req.job = job
        self._hop_pool[id(req)] = (decode, tier)
        decode.dispatch(env, req)

    def _close(self, job: int) -> None:
        self.open -= 1

    def _tick(self, env: Environment, pool: _Pool) -> None:
        pool.autoscale_tick(env)
        if self.open > 0:
            env.schedule(env.now + pool.spec.autoscale.interval_s, _SCHED, self._tick, pool)  # type: ignore[union-attr]

    # -- results -----------------------------------------------------------------------------------------------
    def result(self) -> FleetResult:
        env = self.env
        start = min((float(s.arrival_s[0]) for s in self.services if len(s.arrival_s)), default=0.0)
        end = float(np.nanmax(self.finish)) if np.isfinite(self.finish).any() else start
        span = max(end - start, 0.0)
        services = {}
        for k, s in enumerate(self.services):
            sl = slice(self.offsets[k], self.offsets[k] + len(s.arrival_s))
            ok = np.isfinite(self.finish[sl])
            arr = np.asarray(s.arrival_s, dtype=float)[ok]
            first, fin = self.first[sl][ok], self.finish[sl][ok]
            out = np.asarray(s.output_tokens, dtype=float)[ok]
            ttft, e2e = first - arr, fin - arr
            multi = out > 1
            tpot = (fin[multi] - first[multi]) / (out[multi] - 1)
            good = np.ones(len(arr), dtype=bool)
            if s.slo_ttft_ms is not None:
                good &= ttft * 1e3 <= s.slo_ttft_ms
            if s.slo_tpot_ms is not None:
                good &= np.where(multi, (fin - first) / np.maximum(out - 1, 1), 0.0) * 1e3 <= s.slo_tpot_ms
            tiers = self.tier_done[sl][ok]
            services[s.name] = {
                "requests": int(ok.sum()), "rejected": int(self.rejected[sl].sum()),
                "ttft_ms": summary(ttft), "tpot_ms": summary(tpot), "e2e_ms": summary(e2e),
                "requests_per_s": float(ok.sum()) / span if span > 0 else float("nan"),
                "goodput_requests_per_s": float(good.sum()) / span if span > 0 else float("nan"),
                "served_by_tier": [int((tiers == t + 1).sum()) for t in range(len(s.tiers))],
                "priority": s.priority,
            }  # fmt: skip
        # billing and replica counts run over [0, end]: replicas stand from time 0
        pools: dict[str, dict[str, Any]] = {}
        usd_sec, usd_on, idle = 0.0, 0.0, 0.0
        priced = True
        for name, p in self.pools.items():
            for r, _, _ in p.all:
                r.close(end)  # brings the in-system integral to the end (a removed replica holds nothing)
            g = p.spec.gpus_per_replica
            billed_s = sum(min(until, end) - since for _, since, until in p.all if since < end)
            busy = sum(r.busy_s for r, _, _ in p.all)
            peak = max(p.peak_billed, 1)
            price = p.spec.price_usd_per_gpu_hour
            d: dict[str, Any] = {
                "role": p.spec.role, **({"kv_link": p.spec.kv_link} if p.spec.role == "prefill" else {}),
                "gpus_per_replica": g, "peak_replicas": p.peak_billed, "replica_seconds_billed": billed_s,
                "gpu_seconds_billed": billed_s * g, "gpu_seconds_busy": busy * g,
                "gpu_utilisation": busy / billed_s if billed_s > 0 else 0.0,
                "mean_replicas": billed_s / end if end > 0 else float(p.peak_billed),
                "mean_requests_in_system": sum(r.system_s for r, _, _ in p.all) / end if end > 0 else 0.0,
                "preemptions": sum(r.preemptions for r, _, _ in p.all),
                "replicas_over_time": [list(x) for x in _thin(p.timeline)],
                "price_usd_per_gpu_hour": price,
            }  # fmt: skip
            if price is None:
                priced = False
            else:
                d["usd_per_second_billing"] = billed_s * g * price / 3600
                d["usd_always_on"] = peak * end * g * price / 3600
                d["idle_usd"] = (billed_s - busy) * g * price / 3600
                usd_sec += d["usd_per_second_billing"]
                usd_on += d["usd_always_on"]
                idle += d["idle_usd"]
            pools[name] = d
        return FleetResult(
            services=services, pools=pools, duration_s=span, usd_per_second_billing=usd_sec if priced else None,
            usd_always_on=usd_on if priced else None, idle_usd=idle if priced else None,
            peak_gpus=sum(max(p.peak_billed, 0) * p.spec.gpus_per_replica for p in self.pools.values()),
            events=env.events_processed,
            records={"first_token_s": self.first, "finish_s": self.finish, "tiers": self.tier_done,
                     "arrival_s": np.concatenate([np.asarray(s.arrival_s, dtype=float) for s in self.services])
                     if self.services else np.zeros(0),
                     "output_tokens": np.concatenate([np.asarray(s.output_tokens, dtype=float)
                                                      for s in self.services]) if self.services else np.zeros(0),
                     "service": np.asarray(self.job_service, dtype=np.int64),
                     "service_names": [s.name for s in self.services]},
        )  # fmt: skip


def _thin(timeline: list[tuple[float, int, int]], most: int = 2000) -> list[tuple[float, int, int]]:
    """The replica timeline, one point per change of count (at most ``most`` points, evenly kept)."""
    out = [timeline[0]]
    for t in timeline[1:]:
        if (t[1], t[2]) != (out[-1][1], out[-1][2]):
            out.append(t)
    if len(out) > most:
        step = len(out) / most
        out = [out[int(i * step)] for i in range(most)]
    return out


def run_fleet(env: Environment, pools: Sequence[PoolSpec], services: Sequence[ServiceSpec]) -> FleetResult:
    """Serve ``services`` on ``pools`` on ``env`` (whose generator drew the arrivals) until every request is
    done."""
    import gc

    fleet = Fleet(env, pools, services)
    was_enabled = gc.isenabled()
    gc.disable()  # as in ``simulate``: one object per request, no cycles; the collector would rescan them all
    try:
        env.run()
    finally:
        if was_enabled:
            gc.enable()
    return fleet.result()
