"""``scaleright serve simulate --json`` (one pool): latency percentiles, throughput and utilisation under a
request stream (``serve.simulate.SimulationResult``; latencies in ms)."""

from typing import TYPE_CHECKING, Self

from scaleright.results.common import OptReal, Part, Real, Result

if TYPE_CHECKING:
    from scaleright.serve.simulate import SimulationResult

__all__ = ["SimulateResult", "Percentiles", "SimulateLayout"]


class Percentiles(Part):
    """Milliseconds; null when no request produced the metric."""

    mean: Real
    p50: Real
    p90: Real
    p99: Real


class SimulateLayout(Part):
    tp: int
    pp: int
    ep: int
    replicas: int
    gpus: int


class SimulateResult(Result):
    """One pool of replicas serving a request stream, as simulated (``serve.simulate.simulate``)."""

    ttft_ms: Percentiles
    tpot_ms: Percentiles
    itl_ms: Percentiles
    e2e_ms: Percentiles
    output_tokens_per_s: Real
    input_tokens_per_s: Real
    requests_per_s: Real
    goodput_requests_per_s: OptReal  # requests meeting every SLO given, per second (None: no SLO given)
    gpu_utilisation: Real
    kv_utilisation: Real
    mean_queue_length: Real
    mean_requests_in_system: Real
    preemptions: int
    swapped_kv_tokens: int
    result_cache_hits: int
    requests: int  # completed
    rejected: int  # longer than a replica's whole KV cache
    duration_s: Real
    replicas: int
    kv_blocks_per_replica: int
    iterations: int
    events: int
    usd_per_1m_output_tokens: OptReal  # None without a price
    usd_per_1m_input_tokens: OptReal
    layout: SimulateLayout
    engine: str
    model: str
    gpu: str
    price_usd_per_gpu_hour: OptReal
    price_source: str | None
    engine_status: str  # the engine profile's status: fitted, or a scenario without measured rows

    @classmethod
    def of(cls, res: "SimulationResult", *, model: str, gpu: str, price_usd_per_gpu_hour: float | None,
           price_source: str | None, engine_status: str) -> Self:  # fmt: skip
        """The result of ``res`` for ``model`` on ``gpu``, with the price its costs use and where it came from."""
        return cls.from_dict(res.as_dict() | {"model": model, "gpu": gpu,
                                              "price_usd_per_gpu_hour": price_usd_per_gpu_hour,
                                              "price_source": price_source, "engine_status": engine_status})
