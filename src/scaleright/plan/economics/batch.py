"""Batch jobs vs services: an occasional inference job costed per run, against keeping the same fleet always on,
and against a serverless endpoint billed per second of work plus its cold starts.

Source of the question: the seed article *Single GPU vs Multi-GPU Server Guide*, "Workload Recommendations"
("Occasional inference jobs | Single GPU or serverless | May reduce idle capacity costs"), "Mistake 7: Measuring
Only Hourly Cost" ("Cost per completed training job or inference request can be more informative"), "Mistake 8:
Ignoring Idle GPUs" and "Serverless Recommendation" ("Compare worker startup time, warm capacity, model memory,
request throughput, and billable utilization").

A run of ``requests`` requests on a fleet that sustains ``capacity_requests_per_s`` (all replicas, at their
largest batch) is paid for from start-up (provisioning and loading the weights) to its last request:

    work_h         = requests / capacity_requests_per_s / 3600
    run_h          = work_h + startup_s / 3600
    usd_per_run    = gpus x usd_per_gpu_hour x run_h
    usd_per_month  = usd_per_run x runs_per_month

The same fleet kept up as an always-on service is paid for every hour of the month (730 h); what it costs beyond
the runs' own hours is its idle cost:

    always_on_usd_per_month = gpus x usd_per_gpu_hour x 730
    idle_usd_per_month      = always_on_usd_per_month - gpus x usd_per_gpu_hour x work_h x runs_per_month

(the start-up hours are idle too: the fleet does no work while loading). A serverless endpoint bills only while a
worker is up, cold start included (RunPod's serverless pricing documentation bills a worker from its start,
cold start and idle timeout included), at its own per-second price, per run:

    serverless_usd = gpus x serverless_usd_per_gpu_hour x (work_h + cold_starts x cold_start_s / 3600)
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.plan.economics._units import HOURS_PER_MONTH, SECONDS_PER_HOUR
from scaleright.plan.economics._validate import checked, out

__all__ = ["batch_run_h", "batch_costs_usd", "serverless_cost_usd"]


def batch_run_h(
    *, requests: ArrayLike, capacity_requests_per_s: ArrayLike, startup_s: ArrayLike = 0.0
) -> float | NDArray[np.float64]:
    """Paid hours of one run: ``requests / capacity_requests_per_s / 3600 + startup_s / 3600``."""
    n = checked("requests", requests, gt=0)
    cap = checked("capacity_requests_per_s", capacity_requests_per_s, gt=0)
    s = checked("startup_s", startup_s, ge=0)
    return out((n / cap + s) / SECONDS_PER_HOUR)


def batch_costs_usd(
    *, gpus: ArrayLike, usd_per_gpu_hour: ArrayLike, work_h: ArrayLike, startup_s: ArrayLike, runs_per_month: ArrayLike
) -> dict[str, float | NDArray[np.float64]]:
    """Per run and per month of runs, against the same fleet always on (module docstring). Keys: ``run_h``,
    ``usd_per_run``, ``usd_per_month``, ``always_on_usd_per_month``, ``idle_usd_per_month`` (the always-on
    fleet's cost beyond the work), ``always_on_over_batch`` (how many times the runs' cost always-on costs)."""
    g = checked("gpus", gpus, gt=0)
    p = checked("usd_per_gpu_hour", usd_per_gpu_hour, ge=0)
    w = checked("work_h", work_h, ge=0)
    s = checked("startup_s", startup_s, ge=0)
    r = checked("runs_per_month", runs_per_month, gt=0)
    run_h = w + s / SECONDS_PER_HOUR
    per_run = g * p * run_h
    per_month = per_run * r
    always = g * p * HOURS_PER_MONTH
    idle = always - g * p * w * r
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(per_month > 0, always / np.where(per_month > 0, per_month, 1.0), np.nan)
    return {"run_h": out(run_h), "usd_per_run": out(per_run), "usd_per_month": out(per_month),
            "always_on_usd_per_month": out(always), "idle_usd_per_month": out(idle),
            "always_on_over_batch": out(ratio)}  # fmt: skip


def serverless_cost_usd(
    *, gpus: ArrayLike, serverless_usd_per_gpu_hour: ArrayLike, work_h: ArrayLike, cold_starts: ArrayLike,
    cold_start_s: ArrayLike,
) -> float | NDArray[np.float64]:  # fmt: skip
    """Serverless bill: ``gpus x serverless_usd_per_gpu_hour x (work_h + cold_starts x cold_start_s / 3600)``
    (cold starts are billed: the worker is up while it loads the model)."""
    g = checked("gpus", gpus, gt=0)
    p = checked("serverless_usd_per_gpu_hour", serverless_usd_per_gpu_hour, ge=0)
    w = checked("work_h", work_h, ge=0)
    c = checked("cold_starts", cold_starts, ge=0)
    s = checked("cold_start_s", cold_start_s, ge=0)
    return out(g * p * (w + c * s / SECONDS_PER_HOUR))
