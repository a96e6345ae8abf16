"""What one job costs on one GPU or many: completion time, scaling efficiency and direct GPU cost.

Source: the seed article *Single GPU vs Multi-GPU Server Guide*, sections "Does Four GPUs Deliver Four Times the
Performance?" (scaling efficiency = measured speedup / number of GPUs x 100%) and "How to Calculate Multi-GPU Cost
Efficiency" (total job cost = hourly rate x completion hours; multi-GPU completion time = single-GPU time /
measured speedup). Its worked example: one GPU at $1.00/h for 100 h costs $100; four GPUs at $4.00/h with a 3.2x
speedup finish in 31.25 h for $125, at 80% scaling efficiency.

When the price per GPU-hour is the same at every count, cost(n) / cost(1) = 1 / scaling efficiency: a
multi-GPU job costs the same as on one GPU only at perfect scaling. Storage, networking, setup, retries and
operations are not included (the article excludes them too).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.plan.economics._validate import checked, out

__all__ = ["cost_per_job_usd", "job_time_h", "scaling_efficiency"]


def cost_per_job_usd(
    *, gpus: ArrayLike, price_usd_per_gpu_hour: ArrayLike, time_h: ArrayLike
) -> float | NDArray[np.float64]:
    """Direct GPU cost of a job: ``gpus x price_usd_per_gpu_hour x time_h``.

    The seed's "Total job cost = Hourly infrastructure rate x Job completion hours", with the hourly rate written
    per GPU (a four-GPU server at $4.00/h is ``gpus=4, price_usd_per_gpu_hour=1.0``). Pass ``gpus=1`` and a
    whole-server price to price a server instead. Broadcasts over arrays.
    """
    g = checked("gpus", gpus, gt=0)
    p = checked("price_usd_per_gpu_hour", price_usd_per_gpu_hour, ge=0)
    t = checked("time_h", time_h, ge=0)
    return out(g * p * t)


def job_time_h(*, single_gpu_time_h: ArrayLike, speedup: ArrayLike) -> float | NDArray[np.float64]:
    """Completion time on the larger configuration: ``single_gpu_time_h / speedup``.

    The seed's "Multi-GPU completion time = Single-GPU completion time / Measured speedup" (100 h / 3.2 = 31.25 h).
    ``speedup`` is measured (or modelled) throughput relative to the single-GPU run, not the GPU count.
    """
    t1 = checked("single_gpu_time_h", single_gpu_time_h, ge=0)
    s = checked("speedup", speedup, gt=0)
    return out(t1 / s)


def scaling_efficiency(
    *, speedup: ArrayLike, gpus: ArrayLike, base_gpus: ArrayLike = 1
) -> float | NDArray[np.float64]:
    """Fraction of ideal scaling achieved: ``speedup / (gpus / base_gpus)``.

    The seed's "Scaling efficiency = Measured speedup / Number of GPUs x 100%" (3.2 / 4 = 80%), returned as a
    fraction (0.8), generalised to a speedup measured against ``base_gpus`` GPUs rather than one. 1.0 is
    perfect (linear) scaling; above 1.0 is super-linear (e.g. the model stops spilling once sharded).
    """
    s = checked("speedup", speedup, gt=0)
    g = checked("gpus", gpus, gt=0)
    b = checked("base_gpus", base_gpus, gt=0)
    return out(s / (g / b))
