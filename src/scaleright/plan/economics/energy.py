"""Electricity and carbon of running GPUs: energy from power x time x PUE, CO2e from energy x grid intensity.

    energy_kwh = gpus x (tdp_w x load_fraction + server_overhead_w_per_gpu) x hours x pue / 1000

GPU board power is approximated as ``tdp_w x load_fraction`` (linear between 0 and TDP, no idle floor).
``server_overhead_w_per_gpu`` is the host's share (CPU, RAM, fans, PSU losses) per GPU; it defaults to 0 so a
bare call counts the GPU alone. The seed article's home-lab figures imply about 100 W: "~US$64 per month per
GPU at US$0.16/kWh" (*Multi-GPU vs Single-GPU Scaling Economics: The 2026 Guide*, "What this does NOT solve"
under Cost Economics) is 64 / 0.16 / 730 h = 548 W drawn 24/7 by an RTX 4090 build whose card is rated 450 W
(NVIDIA RTX 4090 specifications, total graphics power).
PUE (power usage effectiveness, The Green Grid, "PUE: a comprehensive examination of the metric", 2012) is
facility energy / IT energy, >= 1; ``pue - 1`` of the IT energy is cooling and power distribution.

CO2e = energy_kwh x grid_kg_per_kwh (location-based Scope 2 accounting, GHG Protocol Scope 2 Guidance, 2015).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.plan.economics._units import W_PER_KW
from scaleright.plan.economics._validate import checked, out

__all__ = ["energy_kwh", "electricity_cost_usd", "co2e_kg"]


def energy_kwh(
    *,
    gpus: ArrayLike,
    tdp_w: ArrayLike,
    load_fraction: ArrayLike,
    hours: ArrayLike,
    pue: ArrayLike,
    server_overhead_w_per_gpu: ArrayLike = 0.0,
) -> float | NDArray[np.float64]:
    """Facility energy: ``gpus x (tdp_w x load_fraction + server_overhead_w_per_gpu) x hours x pue / 1000``.

    ``server_overhead_w_per_gpu`` defaults to 0 (GPU board power only); ~100 W reproduces the seed's home-lab
    bill (module docstring). Pass ``pue=1`` for IT energy alone.
    """
    g = checked("gpus", gpus, ge=0)
    tdp = checked("tdp_w", tdp_w, ge=0)
    load = checked("load_fraction", load_fraction, ge=0, le=1)
    h = checked("hours", hours, ge=0)
    p = checked("pue", pue, ge=1)
    host = checked("server_overhead_w_per_gpu", server_overhead_w_per_gpu, ge=0)
    return out(g * (tdp * load + host) * h * p / W_PER_KW)


def electricity_cost_usd(
    *, energy_kwh: ArrayLike, electricity_usd_per_kwh: ArrayLike
) -> float | NDArray[np.float64]:
    """Electricity bill: ``energy_kwh x electricity_usd_per_kwh``."""
    e = checked("energy_kwh", energy_kwh, ge=0)
    price = checked("electricity_usd_per_kwh", electricity_usd_per_kwh, ge=0)
    return out(e * price)


def co2e_kg(*, energy_kwh: ArrayLike, grid_kg_per_kwh: ArrayLike) -> float | NDArray[np.float64]:
    """Location-based emissions: ``energy_kwh x grid_kg_per_kwh`` (kg CO2-equivalent)."""
    e = checked("energy_kwh", energy_kwh, ge=0)
    g = checked("grid_kg_per_kwh", grid_kg_per_kwh, ge=0)
    return out(e * g)
