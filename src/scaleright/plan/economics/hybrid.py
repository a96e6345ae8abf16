"""Hybrid fleets: own a baseline of N GPUs, rent the bursts, for a demand profile; the cheapest N.

Source of the question: the seed article *Multi-GPU vs Single-GPU Scaling Economics: The 2026 Guide* ("If you need
a mix -> adopt a hybrid model: own a small rig, rent for big jobs"; "baseline capacity + bursts: hybrid").

A demand profile is GPUs busy in each of ``T`` slots, each slot lasting ``slot_h`` hours of a month (a typical day
of 24 one-hour slots repeated over the month's days; or a month's jobs run one after another, one slot per job).
Owning ``N`` GPUs, a slot with demand ``d`` runs ``min(d, N)`` GPUs on owned hardware and rents ``max(d - N, 0)``:

    owned_gpu_h(N)  = sum_t min(d_t, N) x slot_h_t
    rented_gpu_h(N) = sum_t max(d_t - N, 0) x slot_h_t
    cost(N)         = fixed_usd_per_month(N) + running x owned_gpu_h(N) + rent x rented_gpu_h(N)

with ``fixed_usd_per_month(N)`` the owned fleet's capital cost per month (net capex and cost of capital over the
horizon, ``ownership``; 0 for N = 0) and ``running`` the owned running cost per GPU-hour (electricity with PUE,
operations). Every N from 0 to the peak demand is evaluated and the cheapest kept (ties: fewer owned GPUs). With a
fixed cost ``F`` per owned GPU-month and no shared facility cost, the k-th owned GPU pays for itself when it is busy
``H_k = sum_t [d_t >= k] slot_h_t`` hours a month with ``(rent - running) x H_k >= F`` (the load-duration-curve
rule of capacity planning), so the optimum owns every GPU that is busy at least ``F / (rent - running)`` hours a
month; the search reproduces that and also handles the facility upgrade, which is shared by the whole fleet.
Demand is in whole GPUs; a job does not wait for an owned GPU (bursts are rented at once).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.errors import InputError
from scaleright.plan.economics._validate import checked

__all__ = ["owned_and_rented_gpu_hours", "hybrid_costs_usd", "cheapest_baseline"]


def _profile(demand_gpus: ArrayLike, slot_h: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    d = checked("demand_gpus", demand_gpus, ge=0).reshape(-1)
    w = np.broadcast_to(checked("slot_h", slot_h, ge=0), d.shape).astype(float)
    if d.size == 0:
        raise InputError("demand_gpus: empty profile; give the GPUs busy in at least one slot")
    if np.any(d != np.round(d)):
        raise InputError("demand_gpus: whole GPUs per slot (a GPU is owned or rented whole)")
    return d, w


def owned_and_rented_gpu_hours(*, owned_gpus: ArrayLike, demand_gpus: ArrayLike,
                               slot_h: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:  # fmt: skip
    """(owned GPU-hours, rented GPU-hours) per month for each ``owned_gpus`` (array of N): module docstring."""
    d, w = _profile(demand_gpus, slot_h)
    n = checked("owned_gpus", owned_gpus, ge=0).reshape(-1, 1)
    owned = (np.minimum(d[None, :], n) * w[None, :]).sum(axis=1)
    rented = (np.maximum(d[None, :] - n, 0.0) * w[None, :]).sum(axis=1)
    return owned, rented


def hybrid_costs_usd(*, owned_gpus: ArrayLike, demand_gpus: ArrayLike, slot_h: ArrayLike,
                     fixed_usd_per_month: ArrayLike, running_usd_per_gpu_hour: float,
                     rent_usd_per_gpu_hour: float) -> NDArray[np.float64]:  # fmt: skip
    """Monthly cost of each baseline ``owned_gpus`` (``fixed_usd_per_month`` aligned with it): module docstring."""
    owned_h, rented_h = owned_and_rented_gpu_hours(owned_gpus=owned_gpus, demand_gpus=demand_gpus, slot_h=slot_h)
    fixed = checked("fixed_usd_per_month", fixed_usd_per_month, ge=0).reshape(-1)
    c = float(checked("running_usd_per_gpu_hour", running_usd_per_gpu_hour, ge=0))
    r = float(checked("rent_usd_per_gpu_hour", rent_usd_per_gpu_hour, ge=0))
    return np.asarray(fixed + c * owned_h + r * rented_h, dtype=float)


def cheapest_baseline(*, demand_gpus: ArrayLike, slot_h: ArrayLike, fixed_usd_per_month: Callable[[int], float],
                      running_usd_per_gpu_hour: float, rent_usd_per_gpu_hour: float) -> dict:  # fmt: skip
    """The cheapest owned baseline for the profile: ``{owned_gpus, owned_gpu_hours, rented_gpu_hours,
    cost_usd_per_month, all_rent_usd_per_month, all_own_usd_per_month, demand_gpu_hours, costs_usd_per_month}``
    (the last one per N = 0..peak). ``fixed_usd_per_month(N)`` gives the owned fleet's capital cost per month."""
    d, w = _profile(demand_gpus, slot_h)
    peak = int(d.max())
    ns = np.arange(peak + 1)
    fixed = np.array([0.0] + [float(fixed_usd_per_month(int(n))) for n in ns[1:]])
    costs = hybrid_costs_usd(owned_gpus=ns, demand_gpus=d, slot_h=w, fixed_usd_per_month=fixed,
                             running_usd_per_gpu_hour=running_usd_per_gpu_hour,
                             rent_usd_per_gpu_hour=rent_usd_per_gpu_hour)  # fmt: skip
    best = int(np.argmin(costs))  # first minimum: the fewest owned GPUs among ties
    owned_h, rented_h = owned_and_rented_gpu_hours(owned_gpus=best, demand_gpus=d, slot_h=w)
    return {
        "owned_gpus": best, "owned_gpu_hours": float(owned_h[0]), "rented_gpu_hours": float(rented_h[0]),
        "cost_usd_per_month": float(costs[best]), "all_rent_usd_per_month": float(costs[0]),
        "all_own_usd_per_month": float(costs[-1]), "demand_gpu_hours": float((d * w).sum()),
        "costs_usd_per_month": costs.tolist(),
    }  # fmt: skip
