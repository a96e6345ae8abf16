"""The Deployment Decision Tree, computed: rent, buy, hybrid, on-premises or multi-provider, with the numbers that
decide each branch and what would flip it.

Source: the seed article *Multi-GPU vs Single-GPU Scaling Economics: The 2026 Guide*, "Deployment Models - Cloud,
On-Premise & Hybrid", "Operational decision tree":

- "Daily usage [under 4 h]: Rent" and "Daily usage 4-6 h for >= 18 months: Buy. The initial investment pays off
  after two years."  Here the hours and months are not the seed's rules of thumb but the scenario's own
  break-even (``rent_vs_buy.break_even_hours_per_day`` over the horizon, ``break_even_months`` at the stated use).
- "Multi-GPU jobs: Rent or hybrid. Capex for multi-GPU rigs is high": the capital outlay is stated, and whether
  owning still pays back despite it.
- "Data sensitive: On-prem": a constraint, not a price; the premium it costs over renting is stated.
- "Regional diversity & cost arbitrage: Multi-cloud": renting away from where the data lives pays when the cheaper
  offer saves more than the egress to move the data (``pricing.data_provider``, ``data_gb``).
- "baseline capacity + bursts: Hybrid" (the same article's summary): the cheapest owned baseline for the demand
  profile (``hybrid.cheapest_baseline``) decides rent (own 0), buy (own the peak) or hybrid (in between); on a
  profile that is a flat block (the same GPUs busy the same hours) it owns all or nothing, which is the break-even
  rule again, so rent / buy / hybrid are one computation.

Precedence: data that must stay on premises rules renting out whatever it costs; otherwise the cheapest baseline
decides rent / buy / hybrid, and a rented share goes multi-provider when moving the data pays.
"""

from __future__ import annotations

import math

from scaleright.errors import InputError
from scaleright.plan.economics._units import HOURS_PER_MONTH

__all__ = ["DECISIONS", "deployment_decision"]

DECISIONS = ("rent", "buy", "hybrid", "on-prem", "multi-provider")


def _h(x: float) -> str:
    return f"{x:.1f} h/day" if math.isfinite(x) else "never"


def _usd(x: float) -> str:
    return f"${x:,.0f}" if abs(x) >= 100 else f"${x:,.2f}"


def deployment_decision(
    *,
    hours_per_day: float,
    horizon_months: float,
    gpus: int,
    rent_usd_per_gpu_hour: float,
    owned_usd_per_gpu_hour: float,
    owned_running_usd_per_gpu_hour: float,
    break_even_hours_per_day: float,
    break_even_months: float,
    capex_usd: float,
    fixed_usd_per_gpu_month: float,
    baseline: dict,
    peak_gpus: int,
    data_on_premises: bool = False,
    rented_gpu_hours: float = 0.0,
    home_rent_usd_per_gpu_hour: float | None = None,
    away_rent_usd_per_gpu_hour: float | None = None,
    egress_usd: float = 0.0,
    data_gb: float = 0.0,
) -> dict:
    """The tree for one deployment (module docstring). ``baseline`` is ``hybrid.cheapest_baseline`` for the
    demand profile and ``peak_gpus`` its peak; ``owned_usd_per_gpu_hour`` owning's true cost at ``hours_per_day``;
    ``fixed_usd_per_gpu_month`` one owned GPU's capital cost per month (net capex and capital over the horizon).
    The multi-provider branch needs the data provider's own rent (``home_``) and the cheapest elsewhere
    (``away_``) for ``rented_gpu_hours`` (per job or per month) against ``egress_usd`` to move ``data_gb`` once.

    Returns ``{"decision", "text", "branches": [{"branch", "seed_rule", "applies", "because", "flips_when",
    "numbers"}], "numbers"}``; ``decision`` is one of ``DECISIONS``.
    """
    if gpus < 1:
        raise InputError(f"gpus must be >= 1 (got {gpus})")
    for name, v in (("hours_per_day", hours_per_day), ("horizon_months", horizon_months),
                    ("rent_usd_per_gpu_hour", rent_usd_per_gpu_hour)):  # fmt: skip
        if not (math.isfinite(v) and v >= 0):
            raise InputError(f"{name} must be a finite number >= 0 (got {v!r})")
    h, be_h, be_m = hours_per_day, break_even_hours_per_day, break_even_months
    owned_n, peak = int(baseline["owned_gpus"]), max(int(peak_gpus), 1)
    margin = rent_usd_per_gpu_hour - owned_running_usd_per_gpu_hour
    # the load-duration rule: the k-th owned GPU pays for itself when busy at least this many hours a month
    own_if_busy_h = fixed_usd_per_gpu_month / margin if margin > 0 else math.inf
    pays = math.isfinite(be_h) and h >= be_h
    full_use = owned_running_usd_per_gpu_hour + fixed_usd_per_gpu_month / HOURS_PER_MONTH  # owned, used 24 h/day
    branches: list[dict] = []

    kind = "buy" if owned_n >= peak else "hybrid" if owned_n > 0 else "rent"
    branches.append({
        "branch": "rent", "seed_rule": "Daily usage under 4 h: Rent", "applies": kind == "rent",
        "because": (f"{h:.3g} h/day reaches the break-even {_h(be_h)}: owning is cheaper" if pays else
                    f"{h:.3g} h/day is below the break-even {_h(be_h)} over {horizon_months:g} months" if
                    math.isfinite(be_h) else
                    f"owning never breaks even over {horizon_months:g} months" + (
                        f" (the rent {_usd(rent_usd_per_gpu_hour)} is at or below the owned running cost "
                        f"{_usd(owned_running_usd_per_gpu_hour)}/GPU-hour)" if margin <= 0 else
                        " (not even 24 h/day repays the capital)"))
                   + f": owning costs {_usd(owned_usd_per_gpu_hour)} per GPU-hour of use at {h:.3g} h/day against "
                     f"{_usd(rent_usd_per_gpu_hour)} to rent",
        "flips_when": (f"use falls below {_h(be_h)}, or the rent falls below {_usd(owned_usd_per_gpu_hour)}/GPU-hour"
                       if pays else
                       f"use reaches {_h(be_h)}, or the rent rises above {_usd(owned_usd_per_gpu_hour)}/GPU-hour"
                       if math.isfinite(be_h) else
                       f"the rent rises above {_usd(full_use)}/GPU-hour (owning's true cost at 24 h/day), and then "
                       "use reaches the break-even"),
        "numbers": {"break_even_hours_per_day": be_h, "rent_usd_per_gpu_hour": rent_usd_per_gpu_hour,
                    "owned_usd_per_gpu_hour": owned_usd_per_gpu_hour},
    })  # fmt: skip
    branches.append({
        "branch": "buy", "seed_rule": "Daily usage 4-6 h for >= 18 months: Buy", "applies": kind == "buy",
        "because": (f"at {h:.3g} h/day owning pays back after {be_m:.1f} months, within the {horizon_months:g}-month "
                    "horizon" if math.isfinite(be_m) and be_m <= horizon_months else
                    f"at {h:.3g} h/day owning pays back after {be_m:.1f} months, beyond the {horizon_months:g}-month "
                    "horizon" if math.isfinite(be_m) else f"at {h:.3g} h/day owning never pays back"),
        "flips_when": (f"use falls below {_h(be_h)}, or the rent falls below {_usd(owned_usd_per_gpu_hour)}/GPU-hour"
                       if pays else f"use reaches {_h(be_h)} for at least {be_m:.1f} months" if math.isfinite(be_h)
                       and math.isfinite(be_m) else
                       f"the rent exceeds {_usd(owned_usd_per_gpu_hour)}/GPU-hour, owning's true cost at "
                       f"{h:.3g} h/day"),
        "numbers": {"break_even_months": be_m, "horizon_months": horizon_months},
    })  # fmt: skip
    branches.append({
        "branch": "hybrid", "seed_rule": "Baseline capacity + bursts: Hybrid", "applies": kind == "hybrid",
        "because": (f"of a peak of {peak} GPU{'s' if peak != 1 else ''} the cheapest baseline owns {owned_n} and rents "
                    f"{baseline['rented_gpu_hours']:,.0f} GPU-hours a month: "
                    f"{_usd(baseline['cost_usd_per_month'])}/month "
                    f"against {_usd(baseline['all_rent_usd_per_month'])} renting all and "
                    f"{_usd(baseline['all_own_usd_per_month'])} owning the peak"),
        "flips_when": (f"an owned GPU pays for itself when busy over {own_if_busy_h:,.0f} h a month "
                       f"(capital {_usd(fixed_usd_per_gpu_month)}/GPU-month over a rent margin of "
                       f"{_usd(margin)}/GPU-hour)"
                       + ("; a demand profile whose GPUs are busy more or less than that moves the baseline"
                          if own_if_busy_h <= HOURS_PER_MONTH else
                          f", more than a month's {HOURS_PER_MONTH:.0f} h: no GPU is worth owning at this rent")
                       if math.isfinite(own_if_busy_h) else
                       "never: the rent does not exceed the owned running cost"),
        "numbers": {"owned_gpus": owned_n, "peak_gpus": peak, "rented_gpu_hours": baseline["rented_gpu_hours"],
                    "cost_usd_per_month": baseline["cost_usd_per_month"],
                    "all_rent_usd_per_month": baseline["all_rent_usd_per_month"],
                    "all_own_usd_per_month": baseline["all_own_usd_per_month"],
                    "own_if_busy_hours_per_month": own_if_busy_h},
    })  # fmt: skip
    branches.append({
        "branch": "multi-gpu", "seed_rule": "Multi-GPU jobs: Rent or hybrid (capex is high)", "applies": gpus > 1,
        "because": (f"{gpus} GPUs cost {_usd(capex_usd)} up front to own; "
                    + ("owning still pays back at the stated use" if pays else "renting avoids that outlay")
                    if gpus > 1 else "one GPU: no multi-GPU outlay"),
        "flips_when": "the job fits fewer GPUs (a larger-memory GPU, quantisation)" if gpus > 1 else
                      "the job needs more than one GPU",
        "numbers": {"gpus": gpus, "capex_usd": capex_usd},
    })  # fmt: skip

    decision = kind
    branches.append({
        "branch": "on-prem", "seed_rule": "Data sensitive: On-prem", "applies": data_on_premises,
        "because": (f"the data must stay on premises (pricing.data_sensitivity); owning costs "
                    f"{_usd(owned_usd_per_gpu_hour)} per GPU-hour against {_usd(rent_usd_per_gpu_hour)} to rent"
                    if data_on_premises else "the data may leave the premises (pricing.data_sensitivity none)"),
        "flips_when": ("the data may leave the premises" if data_on_premises
                       else "the data must stay on premises (pricing.data_sensitivity: on-premises)"),
        "numbers": {"premium_usd_per_gpu_hour": owned_usd_per_gpu_hour - rent_usd_per_gpu_hour},
    })  # fmt: skip
    if data_on_premises:
        decision = "on-prem"

    mp: dict = {"branch": "multi-provider", "seed_rule": "Regional diversity & cost arbitrage: Multi-cloud",
                "applies": False, "because": "", "flips_when": "", "numbers": {}}  # every branch's key order
    if home_rent_usd_per_gpu_hour is None or away_rent_usd_per_gpu_hour is None:
        mp["because"] = "not weighed: give pricing.data_provider and data_gb (where the data lives and its size)"
        mp["flips_when"] = "the data lives at one provider and another rents the GPU for less than the egress"
    else:
        saving = (home_rent_usd_per_gpu_hour - away_rent_usd_per_gpu_hour) * rented_gpu_hours - egress_usd
        egress_break_even = ((home_rent_usd_per_gpu_hour - away_rent_usd_per_gpu_hour) * rented_gpu_hours / data_gb
                             if data_gb > 0 else math.inf)  # fmt: skip
        mp["applies"] = saving > 0 and kind != "buy" and not data_on_premises
        mp["because"] = (f"renting elsewhere at {_usd(away_rent_usd_per_gpu_hour)} instead of "
                         f"{_usd(home_rent_usd_per_gpu_hour)}/GPU-hour at the data's provider "
                         f"{'saves' if saving > 0 else 'loses'} {_usd(abs(saving))} after {_usd(egress_usd)} egress")
        verb = "exceeds" if saving > 0 else "falls below"
        mp["flips_when"] = (f"egress {verb} ${egress_break_even:.3g}/GB" if math.isfinite(egress_break_even)
                            else "never (no data to move)")  # fmt: skip
        mp["numbers"] = {"saving_usd": saving, "egress_usd": egress_usd,
                         "egress_break_even_usd_per_gb": egress_break_even}
        if mp["applies"]:
            decision = "multi-provider"
    branches.append(mp)

    lead = next(b for b in branches if b["branch"] == decision)
    text = f"{decision}: {lead['because']}; flips when {lead['flips_when']}."
    return {"decision": decision, "text": text, "branches": branches,
            "numbers": {"hours_per_day": h, "horizon_months": horizon_months, "break_even_hours_per_day": be_h,
                        "break_even_months": be_m, "owned_gpus": owned_n, "peak_gpus": peak}}  # fmt: skip
