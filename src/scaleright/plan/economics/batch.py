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

A service on a serverless endpoint (``serverless_service_gpu_hours``): in each slot of the day (an hour of a
diurnal load, or the service's hours) the load needs ``x = rate x (1 + headroom) / capacity_per_worker`` workers.
From one worker up the endpoint keeps ``ceil(x)`` warm, and each rise in that count from one slot to the next is a
cold start. Below one worker it scales to zero: with Poisson arrivals at ``rate`` and a worker kept warm
``idle_timeout_s`` after a request of ``service_s`` seconds, a gap between arrivals is exponential, so the worker is
billed a share ``min(1, 1 - exp(-rate x idle_timeout_s) + rate x service_s)`` of the slot (``E[min(gap,
timeout)] = (1 - exp(-rate x timeout)) / rate`` per arrival, plus the work) and a request finds it cold with
probability ``exp(-rate x idle_timeout_s)``, each such request a cold start.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.plan.economics._units import HOURS_PER_MONTH, SECONDS_PER_HOUR
from scaleright.plan.economics._validate import checked, out

__all__ = ["batch_run_h", "batch_costs_usd", "serverless_cost_usd", "serverless_service_gpu_hours"]


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


def serverless_service_gpu_hours(
    *, rate_per_s: ArrayLike, slot_h: ArrayLike, capacity_per_worker_per_s: float, gpus_per_worker: int,
    cold_start_s: float, idle_timeout_s: float, service_s: float, headroom: float = 0.0,
) -> dict[str, float]:  # fmt: skip
    """GPU-hours a serverless endpoint bills over the slots (one cycle, e.g. a day), cold starts included (module
    docstring): ``{"warm_gpu_h", "cold_start_gpu_h", "gpu_h", "cold_starts"}``."""
    lam = checked("rate_per_s", rate_per_s, ge=0).reshape(-1)
    h = np.broadcast_to(checked("slot_h", slot_h, ge=0), lam.shape).astype(float)
    cap = float(checked("capacity_per_worker_per_s", capacity_per_worker_per_s, gt=0))
    g = float(checked("gpus_per_worker", gpus_per_worker, gt=0))
    cs = float(checked("cold_start_s", cold_start_s, ge=0))
    tau = float(checked("idle_timeout_s", idle_timeout_s, ge=0))
    svc = float(checked("service_s", service_s, ge=0))
    hr = float(checked("headroom", headroom, ge=0))
    x = lam * (1 + hr) / cap
    full = x >= 1
    n = np.where(full, np.ceil(x - 1e-9), 1.0)
    share = np.minimum(1.0, 1.0 - np.exp(-lam * tau) + lam * svc)
    warm = np.where(full, n, share) * h
    rises = np.maximum(n - np.roll(n, 1), 0.0) * full  # a rise into a slot of full workers (cyclic)
    sporadic = np.where(full, 0.0, lam * np.exp(-lam * tau) * h * SECONDS_PER_HOUR)
    cold = float((rises + sporadic).sum())
    warm_gpu_h = float(warm.sum()) * g
    cold_gpu_h = cold * cs / SECONDS_PER_HOUR * g
    return {"warm_gpu_h": warm_gpu_h, "cold_start_gpu_h": cold_gpu_h, "gpu_h": warm_gpu_h + cold_gpu_h,
            "cold_starts": cold}
