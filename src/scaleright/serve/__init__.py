"""Serving under real traffic: a deterministic discrete-event simulator of continuous-batching replicas.

``simulate`` serves a request stream (Poisson, gamma, diurnal or a trace; or closed-loop clients) on replicas whose
iterations are timed by ``scaleright.estimate.iteration``; ``capacity`` finds the highest rate within TTFT and
TPOT p99 limits. The kernel (``kernel``), arrivals, lengths, replica scheduler, router and metrics are one file each.
"""

from scaleright.serve.kernel import Environment, Priority
from scaleright.serve.simulate import SimulationResult, capacity, simulate

__all__ = ["Environment", "Priority", "SimulationResult", "capacity", "simulate"]
