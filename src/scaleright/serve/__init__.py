"""Serving under real traffic: a deterministic discrete-event simulator of continuous-batching replicas.

``simulate`` serves a request stream (Poisson, gamma, diurnal or a trace; or closed-loop clients) on replicas whose
iterations are timed by ``scaleright.estimate.iteration``; ``capacity`` finds the highest rate within TTFT and
TPOT p99 limits; ``run_fleet`` serves several services on several pools (pooling with priorities, tiered routing,
autoscaling and billing, disaggregated prefill/decode; ``fleet_config`` reads them from YAML). The kernel
(``kernel``), arrivals, lengths, replica scheduler, router, speculative decoding and metrics are one file each.
"""

from scaleright.serve.fleet import FleetResult, run_fleet
from scaleright.serve.kernel import Environment, Priority
from scaleright.serve.simulate import SimulationResult, capacity, simulate

__all__ = ["Environment", "FleetResult", "Priority", "SimulationResult", "capacity", "run_fleet", "simulate"]
