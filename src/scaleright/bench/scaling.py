"""Speedup, scaling efficiency and cost per completed job, from measured throughput.

Source: the seed guide "Single GPU vs Multi-GPU Server", section "Scaling Efficiency Formula":
  scaling efficiency = measured speedup / number of GPUs  (4 GPUs at 3.2x -> 80 %),
generalised to a base that is not one GPU: efficiency = speedup / (N / N_base). Speedup is throughput (tokens/s)
at N over throughput at N_base, with the per-rank micro batch held fixed (weak scaling).
Cost, section "How to Calculate Multi-GPU Cost Efficiency": job cost = hourly rate x completion hours; with a
per-GPU price, cost = N x price_usd_per_gpu_hour x job_time_h (4 GPUs, $1/GPU-h, 100 h / 3.2 -> $125).
"""

from __future__ import annotations

from collections.abc import Mapping

from scaleright.errors import InputError
from scaleright.plan import economics as econ

__all__ = ["speedup", "scaling_efficiency", "job_time_h", "job_cost_usd", "scaling_curve", "scaling_line"]


def _positive(**values: float) -> None:
    for name, v in values.items():
        if not v > 0:
            raise InputError(f"{name} must be > 0, got {v}")


def speedup(*, throughput: float, base_throughput: float) -> float:
    """throughput / base_throughput."""
    _positive(throughput=throughput, base_throughput=base_throughput)
    return throughput / base_throughput


def scaling_efficiency(*, speedup: float, world_size: int, base_world_size: int = 1) -> float:
    """speedup / (world_size / base_world_size); 1.0 is perfect linear scaling (``plan.economics`` formula)."""
    _positive(speedup=speedup, world_size=world_size, base_world_size=base_world_size)
    return float(econ.scaling_efficiency(speedup=speedup, gpus=world_size, base_gpus=base_world_size))


def job_time_h(*, job_tokens: float, tokens_per_s: float) -> float:
    """Hours to process ``job_tokens`` at ``tokens_per_s``."""
    _positive(job_tokens=job_tokens, tokens_per_s=tokens_per_s)
    return job_tokens / tokens_per_s / 3600.0


def job_cost_usd(*, world_size: int, price_usd_per_gpu_hour: float, job_time_h: float) -> float:
    """N x price x time: the GPU-hours billed for one completed job (``plan.economics.cost_per_job_usd``)."""
    _positive(world_size=world_size, job_time_h=job_time_h)
    return float(econ.cost_per_job_usd(gpus=world_size, price_usd_per_gpu_hour=price_usd_per_gpu_hour,
                                       time_h=job_time_h))  # fmt: skip


def scaling_curve(tokens_per_s: Mapping[int, float]) -> dict[int, dict[str, float]]:
    """``{world_size: {"speedup", "scaling_efficiency"}}`` against the smallest world size measured."""
    if not tokens_per_s:
        return {}
    base = min(tokens_per_s)
    out = {}
    for n in sorted(tokens_per_s):
        s = speedup(throughput=tokens_per_s[n], base_throughput=tokens_per_s[base])
        out[n] = {"speedup": s, "scaling_efficiency": scaling_efficiency(speedup=s, world_size=n, base_world_size=base)}
    return out


def scaling_line(curve: Mapping[int, Mapping[str, float]], shared: Mapping[int, str] | None = None) -> str:
    """The terminal line of a sweep's scaling: efficiency per world size against the smallest, each world size
    whose ranks shared their hardware (``shared``: world size -> why, ``bench/resources.py``) marked as not
    meaningful. One world size has no scaling to report: the line says so instead of printing 100 %."""
    shared = shared or {}
    if len(curve) < 2:
        only = ", ".join(f"N={n}" for n in curve) or "none"
        return f"scaling efficiency: needs two or more world sizes (measured: {only}); e.g. --nproc 1,2"
    parts = []
    for n, c in curve.items():
        mark = f" (not meaningful: {shared[n]})" if n in shared else ""
        parts.append(f"N={n}: {c['scaling_efficiency']:.0%}{mark}")
    return f"scaling efficiency (speedup / (N / N_base)): {', '.join(parts)}"
