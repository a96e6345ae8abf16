"""Rent or buy: the daily use and the number of months at which owning costs the same as renting.

Source: the seed article *Multi-GPU vs Single-GPU Scaling Economics: The 2026 Guide*, "Operational reality:
capex, opex and break-even math" and its Capex vs Opex Decision Matrix ("Utilisation 4-6 h/day for > 18
months: buy single cards. You'll break even in the second year"). Owning follows ``ownership.tco_usd`` (cash:
capex less resale, plus running costs); renting costs ``gpus x rent x hours_per_day x (365/12) x months``.
With ``c`` the owned running cost per GPU-hour (electricity with PUE, plus ops) and ``r`` the rent, both grow
linearly in hours of use, so over a horizon of ``H`` months

    break-even hours/day = (net_capex(H) + capital(H)) / ((r - c) x gpus x (365/12) x H)

and, at ``h`` hours/day, with monthly saving ``s = (r - c) x gpus x h x (365/12)`` less the monthly cost of
capital (``ownership.capital_charge_usd_per_month``), facility upgrade ``F``, net
capex per hardware generation ``K = gpus x (purchase x (1 - resale_fraction) + server_share)`` and service life
``D`` months, owning catches up during the k-th generation at ``t = (F + k K) / s`` for the least k >= 1 with
``k (s D - K) >= F``: with a single generation (``t <= D``) that is the plain undiscounted payback
``(F + K) / s``. "Never" (rent at or below the running cost, no use, more than 24 h/day needed, or savings per
service life below the net capex per generation) is ``inf``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.plan.economics._units import DAYS_PER_MONTH, HOURS_PER_DAY, MONTHS_PER_YEAR
from scaleright.plan.economics._validate import checked, out
from scaleright.plan.economics.ownership import (
    OwnershipCosts,
    capital_charge_usd,
    capital_charge_usd_per_month,
    net_capex_usd,
    owned_running_cost_usd_per_gpu_hour,
    tco_usd,
)

__all__ = ["rented_cost_usd", "break_even_hours_per_day", "break_even_months", "capex_opex_matrix"]

_RTOL = 1e-12  # relative slack when comparing a generation's savings with its net capex


def rented_cost_usd(
    *, gpus: ArrayLike, rent_usd_per_gpu_hour: ArrayLike, hours_per_day: ArrayLike, horizon_months: ArrayLike
) -> float | NDArray[np.float64]:
    """Renting the same use: ``gpus x rent_usd_per_gpu_hour x hours_per_day x (365/12) x horizon_months``."""
    g = checked("gpus", gpus, gt=0)
    r = checked("rent_usd_per_gpu_hour", rent_usd_per_gpu_hour, ge=0)
    h = checked("hours_per_day", hours_per_day, ge=0, le=HOURS_PER_DAY)
    m = checked("horizon_months", horizon_months, ge=0)
    return out(g * r * h * DAYS_PER_MONTH * m)


def _ratio_or_inf(num: NDArray[np.float64], den: NDArray[np.float64]) -> NDArray[np.float64]:
    """num / den where den > 0, else inf (no positive saving: owning never catches up)."""
    shape = np.broadcast(num, den).shape
    return np.divide(num, den, out=np.full(shape, np.inf), where=den > 0)


def break_even_hours_per_day(
    *, costs: OwnershipCosts, rent_usd_per_gpu_hour: ArrayLike
) -> float | NDArray[np.float64]:
    """Hours of use per day at which owning over ``costs.horizon_months`` costs the same as renting.

    ``net_capex / ((rent - running) x gpus x (365/12) x horizon_months)``; ``costs.hours_per_day`` is ignored
    (it is what is solved for). Above it, buying is cheaper over the horizon. ``inf`` when the rent does not
    exceed the owned running cost or the answer is over 24 h/day.
    """
    r = checked("rent_usd_per_gpu_hour", rent_usd_per_gpu_hour, ge=0)
    saving = r - np.asarray(owned_running_cost_usd_per_gpu_hour(costs=costs))
    days = DAYS_PER_MONTH * np.asarray(costs.horizon_months)
    fixed = np.asarray(net_capex_usd(costs=costs)) + np.asarray(capital_charge_usd(costs=costs))
    h = _ratio_or_inf(fixed, saving * np.asarray(costs.gpus) * days)
    return out(np.where(h > HOURS_PER_DAY, np.inf, h))


def break_even_months(
    *, costs: OwnershipCosts, rent_usd_per_gpu_hour: ArrayLike, hours_per_day: ArrayLike | None = None
) -> float | NDArray[np.float64]:
    """Months of use after which owning has cost the same as renting (undiscounted payback).

    ``(F + k K) / s`` for the least hardware generation ``k`` that pays for itself (module docstring), with
    ``hours_per_day`` defaulting to ``costs.hours_per_day``; ``costs.horizon_months`` does not enter. It is the
    horizon at which ``tco_usd`` first equals ``rented_cost_usd``. ``inf`` when that never happens.
    """
    h = np.asarray(costs.hours_per_day) if hours_per_day is None else checked(
        "hours_per_day", hours_per_day, ge=0, le=HOURS_PER_DAY
    )
    r = checked("rent_usd_per_gpu_hour", rent_usd_per_gpu_hour, ge=0)
    g = np.asarray(costs.gpus)
    saving_per_month = (r - np.asarray(owned_running_cost_usd_per_gpu_hour(costs=costs))) * g * h * DAYS_PER_MONTH
    saving_per_month = saving_per_month - np.asarray(capital_charge_usd_per_month(costs=costs))
    facility = np.asarray(costs.facility_upgrade_usd)
    per_generation = g * (
        np.asarray(costs.purchase_usd_per_gpu) * (1.0 - np.asarray(costs.resale_fraction))
        + np.asarray(costs.server_share_usd_per_gpu)
    )
    life_months = np.asarray(costs.depreciation_years) * MONTHS_PER_YEAR
    # Each generation saves s*D and costs K: the surplus s*D - K must eventually repay the facility upgrade F.
    surplus = saving_per_month * life_months - per_generation
    tol = _RTOL * np.maximum(per_generation, 1.0)
    k = np.where(
        surplus > tol,
        np.maximum(1.0, np.ceil(_ratio_or_inf(facility, np.where(surplus > tol, surplus, 1.0)) - 1e-9)),
        np.where((np.abs(surplus) <= tol) & (facility == 0), 1.0, np.inf),
    )
    with np.errstate(invalid="ignore"):
        months = _ratio_or_inf(facility + k * per_generation, saving_per_month)
    return out(np.where(np.isfinite(k), months, np.inf))


def capex_opex_matrix(
    *,
    costs: OwnershipCosts,
    rent_usd_per_gpu_hour: ArrayLike,
    hours_per_day: ArrayLike,
    horizon_months: ArrayLike,
) -> dict[str, NDArray[np.float64] | NDArray[np.bool_]]:
    """The seed's Capex vs Opex Decision Matrix, computed: own vs rent cost over a grid of use x horizon.

    Rows are ``hours_per_day`` (1-D), columns ``horizon_months`` (1-D); ``costs`` must have scalar fields and its
    own ``hours_per_day`` / ``horizon_months`` are replaced by the grid. Returns ``hours_per_day``,
    ``horizon_months``, ``own_usd`` (``tco_usd`` total), ``rent_usd``, ``own_minus_rent_usd`` (2-D) and ``buy``
    (True where owning is strictly cheaper; the article's "rent" cells are False).
    """
    h = checked("hours_per_day", hours_per_day, ge=0, le=HOURS_PER_DAY).reshape(-1)
    m = checked("horizon_months", horizon_months, gt=0).reshape(-1)
    grid = dataclasses.replace(costs, hours_per_day=h[:, None], horizon_months=m[None, :])
    own = np.asarray(tco_usd(costs=grid)["total_usd"], dtype=float)
    rent = np.asarray(
        rented_cost_usd(
            gpus=costs.gpus,
            rent_usd_per_gpu_hour=rent_usd_per_gpu_hour,
            hours_per_day=h[:, None],
            horizon_months=m[None, :],
        ),
        dtype=float,
    )
    own, rent = np.broadcast_arrays(own, rent)
    return {
        "hours_per_day": h,
        "horizon_months": m,
        "own_usd": own.copy(),
        "rent_usd": rent.copy(),
        "own_minus_rent_usd": own - rent,
        "buy": own < rent,
    }
