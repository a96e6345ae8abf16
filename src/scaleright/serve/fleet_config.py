"""A fleet from YAML (``serve simulate --fleet FILE``): pools, services, and how they are wired.

    seed: 0
    pools:
      - name: small                       # unique
        model: llama-3.2-1b               # catalog name or config.json path
        gpu: h100-sxm
        tp: 1                             # pp, ep too; engine, precision, kv_precision, max_num_seqs,
                                          # max_num_batched_tokens, prefix_cache_hit_rate, gpu_memory_utilization
        replicas: 2                       # fixed count (or the start count under autoscale)
        autoscale: {min_replicas: 0, max_replicas: 8, metric: utilisation, target: 0.7, interval_s: 15,
                    cold_start_s: 60, scale_down_delay_s: 300}
        price_usd_per_gpu_hour: 2.5       # default: the catalog's on-demand price
        role: serve                       # or prefill (with decode_pool and kv_link) or decode
        speculative: {acceptance: 0.7, tokens: 4, draft_cost: 0.05}
    services:
      - name: chat
        pools: [small, large]             # one pool, or tiers smallest first
        escalate: [0.2]                   # share of each tier's requests sent on to the next
        priority: 1                       # higher first where services share a pool
        rate: 5                           # requests/s (or trace: FILE)
        arrival: poisson                  # gamma (burstiness), diurnal (diurnal_period_s, diurnal_amplitude)
        requests: 1000                    # or duration_s
        input_len: 512
        output_len: 128
        length_dist: fixed                # or lognormal (length_cv)
        slo_ttft_ms: 500
        slo_tpot_ms: 50

Every key is checked (unknown keys refused); an error is one line naming the file and the field.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from scaleright.errors import InputError
from scaleright.limits import LIMITS, bounds, text_bounds
from scaleright.userdata import validation_line

__all__ = ["FleetFile", "build_fleet", "load_fleet", "parse_fleet"]

_Name = Annotated[str, *text_bounds("name_chars")]
_PathText = Annotated[str, *text_bounds("path_chars")]
_Degree = Annotated[int, *bounds("parallel_degree")]
_Replicas = Annotated[int, *bounds("gpus")]
_Batch = Annotated[int, *bounds("batch")]
_Tokens = Annotated[int, *bounds("tokens_per_request")]
_PerS = Annotated[float, *bounds("requests_per_s")]
_Seconds = Annotated[float, *bounds("latency_s")]
_Hours = Annotated[float, *bounds("hours")]
_UsdHour = Annotated[float, *bounds("usd_per_hour")]
_MAX_ITEMS = int(LIMITS["list_items"].high)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class AutoscaleIn(_Strict):
    min_replicas: _Replicas = Field(1, ge=0)
    max_replicas: _Replicas = Field(ge=1)
    metric: Literal["utilisation", "queue"] = "utilisation"
    target: float = Field(0.7, gt=0, le=10_000)
    interval_s: _Seconds = Field(15.0, gt=0)
    cold_start_s: _Seconds = Field(60.0, ge=0)
    scale_down_delay_s: _Seconds = Field(300.0, ge=0)

    @model_validator(mode="after")
    def _order(self) -> AutoscaleIn:
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas={self.min_replicas} exceeds max_replicas={self.max_replicas}")
        if self.metric == "utilisation" and self.target > 1:
            raise ValueError(f"target={self.target:g} is a busy share for metric utilisation: it must lie in (0, 1]")
        return self


class SpeculativeIn(_Strict):
    acceptance: float = Field(ge=0, le=1)
    tokens: int = Field(4, ge=1, le=16)
    draft_cost: float = Field(0.05, ge=0, le=1)


class PoolIn(_Strict):
    name: _Name = Field(min_length=1)
    model: _PathText = Field(min_length=1)
    gpu: _Name = "h100-sxm"
    tp: _Degree = Field(1, ge=1)
    pp: _Degree = Field(1, ge=1)
    ep: _Degree = Field(1, ge=1)
    engine: str = "vllm"  # a built-in engine profile or one stored by calibrate --serving --name
    precision: str = "bf16"
    kv_precision: str | None = None
    max_num_seqs: _Batch = Field(256, ge=1)
    max_num_batched_tokens: _Tokens = Field(8192, ge=1)
    prefix_cache_hit_rate: float = Field(0.0, ge=0, lt=1)
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    replicas: _Replicas | None = Field(None, ge=0)
    autoscale: AutoscaleIn | None = None
    router: Literal["round-robin", "least-outstanding"] = "least-outstanding"
    price_usd_per_gpu_hour: _UsdHour | None = Field(None, ge=0)
    role: Literal["serve", "prefill", "decode"] = "serve"
    decode_pool: _Name | None = None
    kv_link: Literal["intra-node", "network"] = "network"
    speculative: SpeculativeIn | None = None

    @field_validator("engine")
    @classmethod
    def _engine(cls, v: str) -> str:
        from scaleright.estimate.engine_store import check_engine_name

        return check_engine_name(v)

    @model_validator(mode="after")
    def _count(self) -> PoolIn:
        if self.replicas is None and self.autoscale is None:
            raise ValueError("give replicas (a fixed count) or autoscale")
        if self.replicas == 0 and self.autoscale is None:
            raise ValueError("replicas=0 without autoscale serves nothing")
        if self.autoscale is not None and self.replicas is not None and not (
                self.autoscale.min_replicas <= self.replicas <= self.autoscale.max_replicas):  # fmt: skip
            raise ValueError(f"replicas={self.replicas} must lie in autoscale [min_replicas, max_replicas]")
        if (self.role == "prefill") != (self.decode_pool is not None):
            raise ValueError("decode_pool is given exactly for role prefill (the pool its requests decode on)")
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise ValueError(f"max_num_batched_tokens={self.max_num_batched_tokens} must be >= max_num_seqs="
                             f"{self.max_num_seqs}")  # fmt: skip
        return self


class ServiceIn(_Strict):
    name: _Name = Field(min_length=1)
    pools: list[_Name] = Field(min_length=1, max_length=8)
    escalate: list[float] = Field([], max_length=7)
    priority: int = Field(0, ge=-1000, le=1000)
    rate: _PerS | None = Field(None, gt=0)
    trace: _PathText | None = None
    arrival: Literal["poisson", "gamma", "diurnal"] = "poisson"
    burstiness: float = Field(1.0, gt=0, le=1000)
    diurnal_period_s: _Seconds = Field(86_400.0, gt=0)
    diurnal_amplitude: float = Field(0.5, ge=0, le=1)
    requests: _Batch | None = Field(None, ge=1)
    duration_s: _Hours | None = Field(None, gt=0)
    input_len: _Tokens = Field(512, ge=1)
    output_len: _Tokens = Field(128, ge=1)
    length_dist: Literal["fixed", "lognormal"] = "fixed"
    length_cv: float = Field(0.5, gt=0, le=10)
    slo_ttft_ms: float | None = Field(None, gt=0)
    slo_tpot_ms: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _stream(self) -> ServiceIn:
        if (self.rate is None) == (self.trace is None):
            raise ValueError("give exactly one of rate and trace")
        if self.requests is not None and self.duration_s is not None:
            raise ValueError("requests and duration_s are alternatives; give one")
        if len(self.escalate) != len(self.pools) - 1:
            raise ValueError(f"{len(self.pools)} pools need {len(self.pools) - 1} escalate shares (one per tier but "
                             f"the last), got {len(self.escalate)}")  # fmt: skip
        if any(not 0 <= f <= 1 for f in self.escalate):
            raise ValueError(f"escalate shares {self.escalate} must lie in [0, 1]")
        return self


class FleetFile(_Strict):
    seed: int = Field(0, ge=0, le=2**32 - 1)
    pools: list[PoolIn] = Field(min_length=1, max_length=_MAX_ITEMS)
    services: list[ServiceIn] = Field(min_length=1, max_length=_MAX_ITEMS)

    @model_validator(mode="after")
    def _wiring(self) -> FleetFile:
        names = [p.name for p in self.pools]
        if len(set(names)) != len(names):
            raise ValueError(f"pool names must be unique, got {names}")
        roles = {p.name: p.role for p in self.pools}
        for p in self.pools:
            if p.decode_pool is not None and roles.get(p.decode_pool) != "decode":
                raise ValueError(f"pool {p.name!r}: decode_pool {p.decode_pool!r} is not a pool of role decode")
        for s in self.services:
            for t in s.pools:
                if t not in roles:
                    raise ValueError(f"service {s.name!r}: unknown pool {t!r}; pools: {', '.join(names)}")
                if roles[t] == "decode":
                    raise ValueError(f"service {s.name!r}: pool {t!r} is a decode pool; send to its prefill pool")
        return self


def parse_fleet(data: object, *, source: str = "fleet") -> FleetFile:
    if not isinstance(data, dict):
        raise InputError(f"{source}: expected a mapping with pools and services at the top level")
    try:
        return FleetFile.model_validate(data)
    except ValidationError as exc:
        raise InputError(validation_line(exc, source)) from None


def load_fleet(path: Path | str) -> FleetFile:
    from scaleright.textfile import check_input_file, read_text
    from scaleright.userdata import load_yaml

    p = check_input_file("--fleet", path)
    return parse_fleet(load_yaml(read_text(p), str(p)), source=str(p))


def build_fleet(f: FleetFile, *, catalog=None, cal=None, source: str = "fleet"):
    """(environment, pools, services) ready for ``serve.fleet.run_fleet``."""
    from scaleright.catalog import find_price, get_gpu
    from scaleright.estimate.calibration import DEFAULT_CALIBRATION
    from scaleright.estimate.collectives import collective_time_s
    from scaleright.estimate.comm import scaled_fits, system_of
    from scaleright.estimate.iteration import serving_layout
    from scaleright.serve.arrivals import arrival_times, read_trace
    from scaleright.serve.fleet import Autoscale, PoolSpec, ServiceSpec
    from scaleright.serve.kernel import Environment
    from scaleright.serve.lengths import draw_lengths
    from scaleright.serve.replica import SchedulerConfig
    from scaleright.serve.simulate import MAX_REQUESTS, build_model, kv_blocks_per_replica
    from scaleright.workload import load_model
    from scaleright.workload.precision import KV_PRECISIONS, STORAGE_PRECISIONS, check_gguf_engine

    cal = cal or DEFAULT_CALIBRATION
    env = Environment(f.seed)
    pools = []
    for i, p in enumerate(f.pools):
        where = f"{source}: pools.{i} ({p.name})"
        if p.precision not in STORAGE_PRECISIONS:
            raise InputError(f"{where}: precision={p.precision!r}; allowed: {', '.join(STORAGE_PRECISIONS)}")
        check_gguf_engine(p.precision, p.engine, field=f"{where}: precision")
        if p.kv_precision is not None and p.kv_precision not in KV_PRECISIONS:
            raise InputError(f"{where}: kv_precision={p.kv_precision!r}; allowed: {', '.join(KV_PRECISIONS)}")
        spec = load_model(p.model, catalog=catalog)
        gpu = get_gpu(p.gpu, catalog=catalog)
        serving_layout(spec, tp=p.tp, pp=p.pp, ep=p.ep)
        system = system_of(gpu)
        sp = (p.speculative.acceptance, p.speculative.tokens, p.speculative.draft_cost) if p.speculative else None
        model = build_model(spec, gpu=gpu, system=system, tp=p.tp, pp=p.pp, ep=p.ep, precision=p.precision,
                            kv_precision=p.kv_precision, engine=p.engine, cal=cal, max_num_seqs=p.max_num_seqs,
                            max_num_batched_tokens=p.max_num_batched_tokens, speculative=sp)  # fmt: skip
        blocks = kv_blocks_per_replica(spec, model, gpu=gpu, tp=p.tp, pp=p.pp, ep=p.ep, precision=p.precision,
                                       max_num_seqs=p.max_num_seqs, max_num_batched_tokens=p.max_num_batched_tokens,
                                       gpu_memory_utilization=p.gpu_memory_utilization)  # fmt: skip
        price = p.price_usd_per_gpu_hour
        if price is None:
            try:
                price = find_price(gpu.id, "on-demand", catalog=catalog).usd
            except InputError:
                price = None
        a = p.autoscale
        transfer = None
        if p.role == "prefill":
            stride = 1 if p.kv_link == "intra-node" else system.gpus_per_node
            per_token = model.kv_bytes_per_token  # per GPU: each GPU sends its shard to its counterpart at once
            fits = scaled_fits(cal)
            cache: dict[int, float] = {}

            def transfer(tokens: int, _c=cache, _b=per_token, _s=system, _st=stride, _f=fits) -> float:
                t = _c.get(tokens)
                if t is None:
                    t = _c[tokens] = float(collective_time_s("p2p", _b * tokens, system=_s, size=2, stride=_st,
                                                             fits=_f))  # fmt: skip
                return t

        pools.append(PoolSpec(
            name=p.name, model=model,
            config=SchedulerConfig(p.max_num_seqs, p.max_num_batched_tokens, p.prefix_cache_hit_rate),
            kv_blocks=blocks, gpus_per_replica=p.tp * p.pp, replicas=p.replicas,
            autoscale=Autoscale(max_replicas=a.max_replicas, min_replicas=a.min_replicas, metric=a.metric,
                                target=a.target, interval_s=a.interval_s, cold_start_s=a.cold_start_s,
                                scale_down_delay_s=a.scale_down_delay_s) if a else None,
            router=p.router, price_usd_per_gpu_hour=price, role=p.role, decode_pool=p.decode_pool,
            kv_link=p.kv_link, kv_transfer_s=transfer,
        ))  # fmt: skip
    services = []
    rng = env.rng
    for s in f.services:
        if s.trace is not None:
            arr, inp, out = read_trace(s.trace, flag=f"services.{s.name}.trace")
            if s.requests is not None:
                arr, inp, out = arr[: s.requests], inp[: s.requests], out[: s.requests]
            if s.duration_s is not None:
                keep = arr <= s.duration_s
                arr, inp, out = arr[keep], inp[keep], out[keep]
        else:
            assert s.rate is not None
            if s.duration_s is not None:
                n = int(s.rate * s.duration_s * 1.1 + 10 * math.sqrt(s.rate * s.duration_s) + 10)
            else:
                n = s.requests or 1000
            if n > MAX_REQUESTS:
                raise InputError(f"{source}: service {s.name!r}: {n:,} requests exceed {MAX_REQUESTS:,}")
            kw = dict(rate=s.rate, burstiness=s.burstiness, period_s=s.diurnal_period_s, amplitude=s.diurnal_amplitude)
            arr = arrival_times(rng, s.arrival, n=n, **kw)
            while s.duration_s is not None and arr[-1] < s.duration_s and n < MAX_REQUESTS:
                n = min(2 * n, MAX_REQUESTS)
                arr = arrival_times(rng, s.arrival, n=n, **kw)
            if s.duration_s is not None:
                arr = arr[arr <= s.duration_s]
                n = len(arr)
            inp = draw_lengths(rng, s.length_dist, n=n, mean=s.input_len, cv=s.length_cv, field="input length")
            out = draw_lengths(rng, s.length_dist, n=n, mean=s.output_len, cv=s.length_cv, field="output length")
        services.append(ServiceSpec(name=s.name, arrival_s=np.asarray(arr, dtype=float), input_tokens=np.asarray(inp),
                                    output_tokens=np.asarray(out), tiers=list(s.pools), escalate=list(s.escalate),
                                    priority=s.priority, slo_ttft_ms=s.slo_ttft_ms,
                                    slo_tpot_ms=s.slo_tpot_ms))  # fmt: skip
    return env, pools, services
