"""The Utilisation Efficiency Curve, computed: per GPU count, scaling efficiency, job time and job cost, and the
economically optimal count (cheapest job that meets the deadline).

Source: the seed article *Multi-GPU vs Single-GPU Scaling Economics: The 2026 Guide*, "Utilisation Efficiency
Curve" ("plot GPU count on the x-axis and utilisation (%) on the y-axis ... the optimal point, where incremental
GPUs deliver diminishing returns, marks your economically efficient cluster size"), made precise with the
*Single GPU vs Multi-GPU Server Guide*'s cost of a completed job (see ``job.py``): utilisation is read as scaling
efficiency ``speedup / gpus``, and "economically efficient" as the least cost per job among the counts that
finish by the deadline (ties go to the faster, then the smaller, configuration). Speedups are inputs (measured,
or from the estimate layer); nothing here models communication.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from scaleright.errors import InputError
from scaleright.plan.economics._validate import checked

__all__ = ["utilisation_curve"]

_TIE_RTOL = 1e-9  # costs within this relative distance of the minimum count as tied


def utilisation_curve(
    *,
    gpus: ArrayLike,
    speedup: ArrayLike,
    single_gpu_time_h: float,
    price_usd_per_gpu_hour: ArrayLike,
    deadline_h: float | None = None,
) -> dict[str, Any]:
    """Scaling efficiency, time and cost per job for each GPU count, and the cheapest count meeting the deadline.

    ``gpus`` is strictly increasing (1-D); ``speedup`` is measured against one GPU, same length;
    ``price_usd_per_gpu_hour`` is one price or one per count (prices need not scale with count). Returns arrays
    ``gpus``, ``speedup``, ``scaling_efficiency`` (= speedup / gpus), ``time_h`` (= single_gpu_time_h / speedup),
    ``cost_usd`` (= gpus x price x time_h), ``marginal_speedup_per_gpu`` (speedup gained per GPU added over the
    previous count; the first entry is measured from zero GPUs), ``meets_deadline`` (all True without a
    deadline), and ``optimal_index`` / ``optimal_gpus`` (``None`` when no count meets the deadline).
    """
    g = checked("gpus", gpus, gt=0)
    s = checked("speedup", speedup, gt=0)
    if g.ndim != 1 or g.size == 0:
        raise InputError(f"gpus must be a non-empty 1-D sequence of GPU counts (got shape {g.shape})")
    if s.shape != g.shape:
        raise InputError(f"speedup must have one entry per GPU count: len(speedup)={s.size} != len(gpus)={g.size}")
    if np.any(np.diff(g) <= 0):
        raise InputError(f"gpus must be strictly increasing (got {g.tolist()})")
    t1 = checked("single_gpu_time_h", single_gpu_time_h, ge=0)
    if t1.ndim != 0:
        raise InputError("single_gpu_time_h must be one number")
    price = checked("price_usd_per_gpu_hour", price_usd_per_gpu_hour, ge=0)
    if price.ndim != 0 and price.shape != g.shape:
        raise InputError(
            f"price_usd_per_gpu_hour must be one price or one per GPU count: len={price.size} != len(gpus)={g.size}"
        )
    time_h = t1 / s
    cost = g * price * time_h
    if deadline_h is None:
        meets = np.ones(g.shape, dtype=bool)
    else:
        d = checked("deadline_h", deadline_h, gt=0)
        if d.ndim != 0:
            raise InputError("deadline_h must be one number")
        meets = time_h <= d
    marginal = np.diff(np.concatenate(([0.0], s))) / np.diff(np.concatenate(([0.0], g)))

    optimal_index: int | None = None
    if meets.any():
        best = cost[meets].min()
        tied = meets & (cost <= best * (1 + _TIE_RTOL))
        candidates = np.flatnonzero(tied)
        # fastest among the cheapest; lexsort's last key is primary, so sort by (time, gpus)
        optimal_index = int(candidates[np.lexsort((g[candidates], time_h[candidates]))[0]])
    return {
        "gpus": g,
        "speedup": s,
        "scaling_efficiency": s / g,
        "time_h": time_h,
        "cost_usd": cost,
        "marginal_speedup_per_gpu": marginal,
        "meets_deadline": meets,
        "optimal_index": optimal_index,
        "optimal_gpus": None if optimal_index is None else float(g[optimal_index]),
    }
