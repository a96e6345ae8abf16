"""Cited defaults for the parts of owning GPUs a scenario does not state, by the kind of site the GPU goes into.

Source: the seed article *Multi-GPU vs Single-GPU Scaling Economics: The 2026 Guide*, "Cost Economics - Capex vs
Opex & Unit Economics": "A single H100 costs US$25 K-US$40 K; eight of them in a server cost US$200 K-US$400 K.
Upgrading power distribution can run US$10 K-US$50 K, cooling upgrades US$15 K-US$100 K and operational overhead
adds US$2-US$7/hr per GPU. True cluster cost therefore lands around US$8-US$15/hr per GPU."

Data-centre parts (everything but consumer and workstation cards) take the low end of each range, so that owning is
no longer understated ($0 before) and not overstated either; the ranges are kept (``SEED_RANGES``) for the worked
example and for a user to pick another point:

- operations: $2 per GPU-hour of use (the low end of $2-7);
- facility upgrades: $10 K power distribution + $15 K cooling = $25 K per site, shared by the GPUs bought;
- server share (CPU, RAM, NICs, chassis): the 8-GPU server price less its 8 GPUs, per GPU: ($200-400 K - 8 x
  $25-40 K) / 8 = $0-10 K; the midpoint, $5 K (the low end, $0, is the understatement the issue reported).

Consumer and workstation cards (catalog ``form_factor`` "consumer ..." or "workstation ...") go into a home lab:
the seed's RTX 4090 example counts only the card, electricity (~US$64 a month) and resale ("selling a US$1,200 RTX
4090 for US$600 after two years"), so they take $0 for all three. Every default is overridable in ``pricing``.

Cost of capital (what the money tied up in owned hardware costs per year; the seed articles give no figure) is the
textbook risk-free rate plus a premium, both published and dated:

- risk-free rate: the US 10-year Treasury constant-maturity yield on 31 December 2024, 4.58 % (Board of Governors of
  the Federal Reserve System, H.15 Selected Interest Rates, series DGS10 on FRED);
- premium: the implied equity risk premium of the S&P 500 at the start of 2025, 4.33 % (A. Damodaran, NYU Stern,
  "Implied Equity Risk Premiums" dataset, histimpl, January 2025 update).

A data-centre buyer takes their sum, 8.91 %/year: the CAPM cost of equity of an average-risk (beta 1) firm, i.e. the
return its investors forgo by funding GPUs instead of the market. A home lab takes the risk-free rate alone, 4.58 %:
what the cash would have earned in Treasuries. Give your own (a loan's rate, your company's WACC) in
``pricing.cost_of_capital_per_year``; the seeds' worked examples count none (0).
"""

from __future__ import annotations

__all__ = ["CLUSTER", "HOME_LAB", "SEED_RANGES", "RISK_FREE_PER_YEAR", "EQUITY_RISK_PREMIUM_PER_YEAR",
           "COST_OF_CAPITAL_PER_YEAR", "COST_OF_CAPITAL_SOURCE", "site_of", "ownership_defaults"]

RISK_FREE_PER_YEAR = 0.0458  # US 10-year Treasury yield, 2024-12-31 (Federal Reserve H.15, FRED DGS10)
EQUITY_RISK_PREMIUM_PER_YEAR = 0.0433  # S&P 500 implied ERP, start of 2025 (Damodaran, histimpl, Jan 2025)
COST_OF_CAPITAL_PER_YEAR = round(RISK_FREE_PER_YEAR + EQUITY_RISK_PREMIUM_PER_YEAR, 6)  # beta-1 cost of equity
COST_OF_CAPITAL_SOURCE = {  # site -> how its default cost of capital is made, for the plan's text
    "data centre": "US 10-year Treasury 4.58% (FRED DGS10, 2024-12-31) + Damodaran's implied equity risk premium "
                   "4.33% (January 2025)",
    "home lab": "US 10-year Treasury 4.58% (FRED DGS10, 2024-12-31), what the cash would earn",
}

SEED_RANGES = {  # (low, high) as the seed article states them
    "ops_overhead_usd_per_gpu_hour": (2.0, 7.0),
    "power_distribution_usd": (10_000.0, 50_000.0),
    "cooling_usd": (15_000.0, 100_000.0),
    "h100_usd_per_gpu": (25_000.0, 40_000.0),
    "h100_8gpu_server_usd": (200_000.0, 400_000.0),
    "true_cost_usd_per_gpu_hour": (8.0, 15.0),
}
_SERVER_SHARE_RANGE = tuple(
    max(0.0, (SEED_RANGES["h100_8gpu_server_usd"][i] - 8 * SEED_RANGES["h100_usd_per_gpu"][i]) / 8) for i in (0, 1)
)
CLUSTER = {
    "ops_overhead_usd_per_gpu_hour": SEED_RANGES["ops_overhead_usd_per_gpu_hour"][0],
    "facility_upgrade_usd": SEED_RANGES["power_distribution_usd"][0] + SEED_RANGES["cooling_usd"][0],
    "server_share_usd_per_gpu": sum(_SERVER_SHARE_RANGE) / 2,
    "cost_of_capital_per_year": COST_OF_CAPITAL_PER_YEAR,
}
HOME_LAB = {"ops_overhead_usd_per_gpu_hour": 0.0, "facility_upgrade_usd": 0.0, "server_share_usd_per_gpu": 0.0,
            "cost_of_capital_per_year": RISK_FREE_PER_YEAR}


def site_of(form_factor: str) -> str:
    """``home lab`` for consumer and workstation cards, else ``data centre``."""
    return "home lab" if form_factor.lower().startswith(("consumer", "workstation")) else "data centre"


def ownership_defaults(form_factor: str) -> dict[str, float]:
    """The defaults above for a GPU of this catalog ``form_factor``."""
    return dict(HOME_LAB if site_of(form_factor) == "home lab" else CLUSTER)
