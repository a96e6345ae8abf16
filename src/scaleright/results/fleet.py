"""``scaleright serve simulate --fleet FILE --json``: every service's latency and goodput, every pool's replicas,
use and cost (``serve.fleet.FleetResult``; latencies in ms, money in USD over the simulated span)."""

from typing import TYPE_CHECKING, Literal, Self

from scaleright.results.common import OptReal, Part, Real, Result
from scaleright.results.simulate import Percentiles

if TYPE_CHECKING:
    from scaleright.serve.fleet import FleetResult as FleetRun

__all__ = ["FleetResult", "FleetService", "FleetPool"]


class FleetService(Part):
    """One service's requests, as simulated."""

    requests: int  # completed
    rejected: int  # longer than a replica's whole KV cache
    ttft_ms: Percentiles
    tpot_ms: Percentiles
    e2e_ms: Percentiles
    requests_per_s: Real
    goodput_requests_per_s: Real  # requests meeting the service's SLOs, per second (all of them without SLOs)
    served_by_tier: list[int]  # requests finished at each tier of the service's routing (tier 1 first)
    priority: int


class FleetPool(Part):
    """One pool: its replicas over the span, their use and (with a price) their cost."""

    role: Literal["serve", "prefill", "decode"]
    kv_link: str | None = None  # prefill pools only: the tier the KV cache crosses to the decode pool
    gpus_per_replica: int
    peak_replicas: int
    replica_seconds_billed: Real
    gpu_seconds_billed: Real
    gpu_seconds_busy: Real
    gpu_utilisation: Real
    mean_replicas: Real
    mean_requests_in_system: Real
    preemptions: int
    replicas_over_time: list[list[Real]]  # [time_s, replicas serving, replicas billed] at each change
    price_usd_per_gpu_hour: OptReal
    usd_per_second_billing: OptReal = None  # absent without a price
    usd_always_on: OptReal = None
    idle_usd: OptReal = None


class FleetResult(Result):
    """Pools and services of a fleet file, as simulated (``serve.fleet.run_fleet``)."""

    services: dict[str, FleetService]
    pools: dict[str, FleetPool]
    duration_s: Real
    usd_per_second_billing: OptReal  # None when a pool has no price
    usd_always_on: OptReal
    idle_usd: OptReal
    peak_gpus: int
    events: int
    fleet: str  # the fleet file
    seed: int

    @classmethod
    def of(cls, res: "FleetRun", *, fleet: str, seed: int) -> Self:
        """The result of the run ``res`` of fleet file ``fleet`` with ``seed``."""
        return cls.from_dict(res.as_dict() | {"fleet": fleet, "seed": seed})
