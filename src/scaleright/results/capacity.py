"""``scaleright serve capacity --json``: the highest request rate a layout sustains with p99 TTFT and p99 TPOT
under their limits, what set it, and the simulation at that rate (``serve.simulate.find_capacity``).

The metrics at the rate are the keys of ``serve simulate --json`` (``SimulateResult``), at the top level beside
``max_rate_per_s``; they are absent when the rate is 0 (no rate met the limits, or a request does not fit the KV
cache), so each is optional here.
"""

import dataclasses
from typing import TYPE_CHECKING, Literal, Self

from scaleright.results.common import OptReal, Part, Real, Result
from scaleright.results.simulate import Percentiles, SimulateLayout

if TYPE_CHECKING:
    from scaleright.serve.simulate import Capacity

__all__ = ["CapacityResult", "CapacityTrialRecord"]


class CapacityTrialRecord(Part):
    """One rate the search tried."""

    rate_per_s: Real
    meets_slo: bool
    ttft_p99_ms: Real
    tpot_p99_ms: Real  # null when no request decodes (one output token each)
    rejected: int  # requests longer than a replica's whole KV cache


class CapacityResult(Result):
    """``max_rate_per_s``, what bound it (``binding``: ``ttft_p99`` or ``tpot_p99``, the limit the first refused
    rate above it missed; ``throughput``, within the search's tolerance of ``saturated_rate_per_s``, the rate the
    layout completes under a permanent backlog; ``kv_cache``, a request longer than the KV cache), every trial, and
    the ``serve simulate`` metrics at ``max_rate_per_s``."""

    max_rate_per_s: Real
    binding: Literal["ttft_p99", "tpot_p99", "throughput", "kv_cache"]
    saturated_rate_per_s: Real
    slo_ttft_p99_ms: Real
    slo_tpot_p99_ms: Real
    trials: list[CapacityTrialRecord]
    model: str
    gpu: str
    price_usd_per_gpu_hour: OptReal
    price_source: str | None
    engine_status: str
    # the simulation at max_rate_per_s (SimulateResult's metric keys; absent at rate 0)
    ttft_ms: Percentiles | None = None
    tpot_ms: Percentiles | None = None
    itl_ms: Percentiles | None = None
    e2e_ms: Percentiles | None = None
    output_tokens_per_s: OptReal = None
    input_tokens_per_s: OptReal = None
    requests_per_s: OptReal = None
    goodput_requests_per_s: OptReal = None
    gpu_utilisation: OptReal = None
    kv_utilisation: OptReal = None
    mean_queue_length: OptReal = None
    mean_requests_in_system: OptReal = None
    preemptions: int | None = None
    swapped_kv_tokens: int | None = None
    result_cache_hits: int | None = None
    requests: int | None = None
    rejected: int | None = None
    duration_s: OptReal = None
    replicas: int | None = None
    kv_blocks_per_replica: int | None = None
    iterations: int | None = None
    events: int | None = None
    usd_per_1m_output_tokens: OptReal = None
    usd_per_1m_input_tokens: OptReal = None
    layout: SimulateLayout | None = None
    engine: str | None = None

    @classmethod
    def of(cls, c: "Capacity", *, model: str, gpu: str, price_usd_per_gpu_hour: float | None,
           price_source: str | None, engine_status: str) -> Self:  # fmt: skip
        """The result of the search ``c`` for ``model`` on ``gpu``, with the price its costs use."""
        d = {"max_rate_per_s": c.max_rate_per_s, "binding": c.binding, "saturated_rate_per_s": c.saturated_rate_per_s,
             "slo_ttft_p99_ms": c.slo_ttft_p99_ms, "slo_tpot_p99_ms": c.slo_tpot_p99_ms,
             "trials": [dataclasses.asdict(t) for t in c.trials],  # CapacityTrial's fields: CapacityTrialRecord's
             "model": model, "gpu": gpu, "price_usd_per_gpu_hour": price_usd_per_gpu_hour,
             "price_source": price_source, "engine_status": engine_status}  # fmt: skip
        return cls.from_dict(d | (c.result.as_dict() if c.result is not None else {}))
