"""Total cost of owning GPUs over a horizon (TCO), and what an owned GPU-hour costs at a given daily use.

The standard TCO definition (capital cost net of resale, plus operating cost over the period; e.g. Barroso,
Clidaras & Hölzle, *The Datacenter as a Computer*, 3rd ed., 2018, chapter 6 "Modeling Costs"), counted as cash
with the seed article's items (*Multi-GPU vs Single-GPU Scaling Economics: The 2026 Guide*, "Cost Economics -
Capex vs Opex & Unit Economics": purchase, power-distribution and cooling upgrades, operational overhead per
GPU-hour, electricity, and depreciation "e.g. selling a US$1,200 RTX 4090 for US$600 after two years"):

    purchases          = ceil(horizon_years / depreciation_years)   (hardware bought again every service life)
    capex_usd          = purchases x gpus x (purchase_usd_per_gpu + server_share_usd_per_gpu) + facility_upgrade_usd
    resale_credit_usd  = purchases x resale_fraction x gpus x purchase_usd_per_gpu   (only the GPUs resell)
    used_gpu_h         = gpus x hours_per_day x (365/12) x horizon_months
    power_usd          = used_gpu_h x (tdp_w x load_fraction + server_overhead_w_per_gpu) / 1000 x $/kWh
    cooling_usd        = power_usd x (pue - 1)       (PUE's overhead share: cooling and power distribution)
    ops_usd            = used_gpu_h x ops_overhead_usd_per_gpu_hour
    capital_usd        = cost_of_capital_per_year x horizon_years x average_invested_usd
    average_invested   = gpus x (purchase + server_share + resale_fraction x purchase) / 2 + facility_upgrade / 2
    total_usd          = capex - resale_credit + power + cooling + ops + capital

``capital_usd`` is the cost of the money tied up (a loan's interest, or what the cash would have earned: the
buyer's cost of capital), charged on the average invested amount as each item declines linearly from its price to
its end value (resale for the GPUs, nothing for the host and the facility), the "interest on average investment"
form of engineering-economy ownership costs. Like the other site-dependent parts (server share, facility, operations)
it is 0 here unless given (a calculator counts what it is told); the planner gives the cited default of
``defaults.ownership_defaults`` (8.91 %/year for a data centre: the US 10-year Treasury yield plus Damodaran's implied
equity risk premium, start of 2025; 4.58 % for a home lab), and 0 makes the capital free, as the seed articles' worked
examples count it.

``depreciation_years`` is the service life: at its end the GPUs are sold for ``resale_fraction`` of their price
and replaced; GPUs still in service at the horizon are also sold for that fraction (conservative when they are
younger). The facility upgrade is bought once and never resold; the host (server share) is replaced with the GPUs
and not resold. Power, cooling and operations are charged per hour of use: a GPU is assumed off (or idle at
negligible power) outside ``hours_per_day``. ``owned_cost_per_gpu_hour_usd`` = total_usd / used_gpu_h is the figure
to compare with a rental price.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.errors import InputError
from scaleright.plan.economics._units import DAYS_PER_MONTH, HOURS_PER_DAY, MONTHS_PER_YEAR, W_PER_KW
from scaleright.plan.economics._validate import checked, out

__all__ = [
    "OwnershipCosts",
    "purchases",
    "net_capex_usd",
    "owned_running_cost_usd_per_gpu_hour",
    "tco_usd",
    "owned_cost_per_gpu_hour_usd",
    "capital_charge_usd",
    "true_cost_per_gpu_hour_usd",
    "utilisation_for_true_cost",
    "capital_charge_usd_per_month",
]

_CEIL_SLACK = 1e-9  # 36 months / 1.5 years must count 2 purchases despite float rounding

# field -> bounds passed to ``checked`` (ge / gt / le)
_BOUNDS: dict[str, dict[str, float]] = {
    "gpus": {"gt": 0},
    "purchase_usd_per_gpu": {"ge": 0},
    "server_share_usd_per_gpu": {"ge": 0},
    "facility_upgrade_usd": {"ge": 0},
    "electricity_usd_per_kwh": {"ge": 0},
    "pue": {"ge": 1},
    "load_fraction": {"ge": 0, "le": 1},
    "tdp_w": {"ge": 0},
    "server_overhead_w_per_gpu": {"ge": 0},
    "ops_overhead_usd_per_gpu_hour": {"ge": 0},
    "depreciation_years": {"gt": 0},
    "resale_fraction": {"ge": 0, "le": 1},
    "hours_per_day": {"ge": 0, "le": HOURS_PER_DAY},
    "horizon_months": {"gt": 0},
    "cost_of_capital_per_year": {"ge": 0, "le": 1},
}


@dataclass(frozen=True, kw_only=True)
class OwnershipCosts:
    """What owning GPUs costs. Every field takes a scalar or a numpy array (arrays broadcast together)."""

    gpus: ArrayLike  # GPUs bought (count); facility_upgrade_usd is shared by all of them
    purchase_usd_per_gpu: ArrayLike  # price of one GPU card or module, USD; the only part that resells
    tdp_w: ArrayLike  # GPU board power rating (TDP / total graphics power), W
    electricity_usd_per_kwh: ArrayLike  # electricity tariff, USD per kWh
    depreciation_years: ArrayLike  # service life, years: GPUs and host are sold and bought again after it
    hours_per_day: ArrayLike  # hours each GPU is in use per day, 0..24 (powered at load, paying ops)
    horizon_months: ArrayLike  # period the TCO covers, months (> 0)
    server_share_usd_per_gpu: ArrayLike = 0.0  # host per GPU (CPU, RAM, board, PSU, chassis), USD; 0 = none; no resale
    facility_upgrade_usd: ArrayLike = 0.0  # one-off power-distribution and cooling upgrades, whole site, USD; 0 = none
    pue: ArrayLike = 1.0  # facility energy / IT energy, >= 1; 1.0 = no cooling or distribution overhead (home lab)
    load_fraction: ArrayLike = 1.0  # GPU power while in use as a fraction of tdp_w; 1.0 = at TDP
    server_overhead_w_per_gpu: ArrayLike = 0.0  # host power per GPU while in use, W; 0 = GPU only (~100 W home lab)
    ops_overhead_usd_per_gpu_hour: ArrayLike = 0.0  # staff, support, network per GPU-hour of use, USD; 0 = none
    resale_fraction: ArrayLike = 0.0  # share of purchase_usd_per_gpu recovered per GPU sold (end of life or horizon)
    # interest or required return on the money invested, per year; 0 = free (the plan's default: ``defaults``)
    cost_of_capital_per_year: ArrayLike = 0.0

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = checked(f.name, getattr(self, f.name), **_BOUNDS[f.name])
            object.__setattr__(self, f.name, out(value))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> OwnershipCosts:
        """Build from a user's mapping (e.g. a YAML section); unknown or missing keys are an ``InputError``."""
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise InputError(f"unknown ownership cost field(s) {', '.join(unknown)}; allowed: {', '.join(names)}")
        required = [f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING]
        missing = [n for n in required if n not in data]
        if missing:
            raise InputError(f"missing ownership cost field(s) {', '.join(missing)}")
        return cls(**data)


def _f(x: ArrayLike) -> NDArray[np.float64]:
    return np.asarray(x, dtype=float)


def purchases(*, costs: OwnershipCosts) -> float | NDArray[np.float64]:
    """Hardware generations bought over the horizon: ``ceil(horizon_years / depreciation_years)`` (>= 1)."""
    cycles = _f(costs.horizon_months) / MONTHS_PER_YEAR / _f(costs.depreciation_years)
    return out(np.maximum(np.ceil(cycles - _CEIL_SLACK), 1.0))


def net_capex_usd(*, costs: OwnershipCosts) -> float | NDArray[np.float64]:
    """Capital spent over the horizon less resale: ``capex_usd - resale_credit_usd`` of ``tco_usd``."""
    per_purchase = _f(costs.gpus) * (
        _f(costs.purchase_usd_per_gpu) * (1.0 - _f(costs.resale_fraction)) + _f(costs.server_share_usd_per_gpu)
    )
    return out(_f(purchases(costs=costs)) * per_purchase + _f(costs.facility_upgrade_usd))


def owned_running_cost_usd_per_gpu_hour(*, costs: OwnershipCosts) -> float | NDArray[np.float64]:
    """Marginal cost of one owned GPU-hour of use: electricity incl. PUE overhead, plus operations.

    ``(tdp_w x load_fraction + server_overhead_w_per_gpu) / 1000 x pue x electricity_usd_per_kwh
    + ops_overhead_usd_per_gpu_hour``. Owning beats renting only where the rent exceeds this.
    """
    kw = (_f(costs.tdp_w) * _f(costs.load_fraction) + _f(costs.server_overhead_w_per_gpu)) / W_PER_KW
    return out(kw * _f(costs.pue) * _f(costs.electricity_usd_per_kwh) + _f(costs.ops_overhead_usd_per_gpu_hour))


def _used_gpu_h(costs: OwnershipCosts) -> NDArray[np.float64]:
    return _f(costs.gpus) * _f(costs.hours_per_day) * DAYS_PER_MONTH * _f(costs.horizon_months)


def tco_usd(*, costs: OwnershipCosts) -> dict[str, float | NDArray[np.float64]]:
    """Total cost of ownership over ``horizon_months`` as a breakdown (formulas in the module docstring).

    Keys: ``capex_usd`` (all purchases and the facility upgrade), ``resale_credit_usd`` (subtracted),
    ``power_usd`` (IT electricity), ``cooling_usd`` (``power_usd x (pue - 1)``: the cooling and distribution
    overhead PUE stands for), ``ops_usd``, ``capital_usd`` (cost of capital), ``total_usd``, ``used_gpu_h``
    (GPU-hours of use the total buys) and ``purchases`` (hardware generations bought).
    """
    n = _f(purchases(costs=costs))
    g, price = _f(costs.gpus), _f(costs.purchase_usd_per_gpu)
    capex = n * g * (price + _f(costs.server_share_usd_per_gpu)) + _f(costs.facility_upgrade_usd)
    credit = n * g * price * _f(costs.resale_fraction)
    used = _used_gpu_h(costs)
    it_kwh = used * (_f(costs.tdp_w) * _f(costs.load_fraction) + _f(costs.server_overhead_w_per_gpu)) / W_PER_KW
    power = it_kwh * _f(costs.electricity_usd_per_kwh)
    cooling = power * (_f(costs.pue) - 1.0)
    ops = used * _f(costs.ops_overhead_usd_per_gpu_hour)
    capital = _f(capital_charge_usd(costs=costs))
    total = capex - credit + power + cooling + ops + capital
    parts = {
        "capex_usd": capex,
        "resale_credit_usd": credit,
        "power_usd": power,
        "cooling_usd": cooling,
        "ops_usd": ops,
        "capital_usd": capital,
        "total_usd": total,
        "used_gpu_h": used,
        "purchases": n,
    }
    shape = np.broadcast_shapes(*(np.shape(v) for v in parts.values()))
    return {k: out(np.broadcast_to(v, shape).copy()) for k, v in parts.items()}


def owned_cost_per_gpu_hour_usd(*, costs: OwnershipCosts) -> float | NDArray[np.float64]:
    """All-in cost of an owned GPU-hour at the stated use: ``tco_usd total / used GPU-hours``.

    Compare with a rental price per GPU-hour. ``inf`` where ``hours_per_day`` is 0 (capex buys no use).
    """
    t = tco_usd(costs=costs)
    total, used = _f(t["total_usd"]), _f(t["used_gpu_h"])
    return out(np.divide(total, used, out=np.full(np.broadcast(total, used).shape, np.inf), where=used > 0))


def _average_invested_usd(costs: OwnershipCosts) -> NDArray[np.float64]:
    g, price = _f(costs.gpus), _f(costs.purchase_usd_per_gpu)
    start = g * (price + _f(costs.server_share_usd_per_gpu)) + _f(costs.facility_upgrade_usd)
    end = g * price * _f(costs.resale_fraction)
    return (start + end) / 2.0


def capital_charge_usd(*, costs: OwnershipCosts) -> float | NDArray[np.float64]:
    """Cost of the capital tied up over the horizon: ``cost_of_capital_per_year x horizon_years x average
    invested`` (module docstring). It does not depend on the hours of use."""
    years = _f(costs.horizon_months) / MONTHS_PER_YEAR
    return out(_f(costs.cost_of_capital_per_year) * years * _average_invested_usd(costs))


def capital_charge_usd_per_month(*, costs: OwnershipCosts) -> float | NDArray[np.float64]:
    """``capital_charge_usd`` per month of ownership (what ``rent_vs_buy.break_even_months`` subtracts from the
    monthly saving)."""
    return out(_f(costs.cost_of_capital_per_year) / MONTHS_PER_YEAR * _average_invested_usd(costs))


def true_cost_per_gpu_hour_usd(*, costs: OwnershipCosts, utilisation: ArrayLike) -> float | NDArray[np.float64]:
    """The true cost of an owned GPU-hour of use at ``utilisation`` (the share of the day a GPU is busy, 0..1):
    ``owned_cost_per_gpu_hour_usd`` with ``hours_per_day = 24 x utilisation``, i.e.

        fixed_usd / (gpus x 24 x utilisation x (365/12) x horizon_months) + running_usd_per_gpu_hour

    with ``fixed_usd`` = capex - resale credit + cost of capital and the running cost electricity with PUE plus
    operations (``owned_running_cost_usd_per_gpu_hour``). Falls as 1/utilisation; ``inf`` at 0."""
    u = checked("utilisation", utilisation, ge=0, le=1)
    return owned_cost_per_gpu_hour_usd(costs=dataclasses.replace(costs, hours_per_day=u * HOURS_PER_DAY))


def utilisation_for_true_cost(*, costs: OwnershipCosts, usd_per_gpu_hour: ArrayLike) -> float | NDArray[np.float64]:
    """The utilisation at which ``true_cost_per_gpu_hour_usd`` equals ``usd_per_gpu_hour`` (e.g. a rent):
    ``fixed_usd / ((usd_per_gpu_hour - running) x gpus x 24 x (365/12) x horizon_months)``. ``inf`` when even
    full use costs more (the price is at or below the running cost, or the answer exceeds 1)."""
    target = checked("usd_per_gpu_hour", usd_per_gpu_hour, ge=0)
    fixed = _f(net_capex_usd(costs=costs)) + _f(capital_charge_usd(costs=costs))
    margin = target - _f(owned_running_cost_usd_per_gpu_hour(costs=costs))
    hours_full = _f(costs.gpus) * HOURS_PER_DAY * DAYS_PER_MONTH * _f(costs.horizon_months)
    den = margin * hours_full
    shape = np.broadcast(fixed, den).shape
    u = np.divide(fixed, den, out=np.full(shape, np.inf), where=den > 0)
    return out(np.where(u > 1.0 + 1e-12, np.inf, u))
