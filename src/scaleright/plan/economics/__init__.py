"""Economics of a GPU plan: what a job, a token, a kWh and an owned GPU-hour cost, and rent vs buy vs API.

Pure, numpy-friendly functions (scalars or arrays, broadcast), keyword-only, with units in every name. One concept
per module:

- ``job``               cost of a job, completion time, scaling efficiency (Single vs Multi-GPU Server Guide)
- ``tokens``            $ per 1M tokens for training and serving; API break-even and parity utilisation
- ``energy``            kWh from power x hours x PUE; electricity bill; CO2e from grid intensity
- ``ownership``         ``OwnershipCosts``, TCO breakdown, owned cost per GPU-hour
- ``rent_vs_buy``       break-even hours/day and months; the Capex vs Opex Decision Matrix as numbers
- ``utilisation_curve`` the Utilisation Efficiency Curve and the cheapest GPU count meeting a deadline
- ``hybrid``            own a baseline, rent the bursts of a demand profile; the cheapest baseline
- ``spot``              expected time of a preempted job with checkpoints (Daly 2006)
- ``fleet``             GPUs avoided by higher utilisation and longer service life
- ``decision``          the Deployment Decision Tree: rent / buy / hybrid / on-prem / multi-provider, with numbers
- ``batch``             an occasional job per run against an always-on service (idle cost) and serverless

User errors raise ``scaleright.errors.InputError`` naming the field and what is allowed. "Never" (no break-even,
no parity) is ``inf``, for the explanation layer to put into words.

Each module loads on the first use of one of its names (``economics.cost_per_job_usd``, ``from
scaleright.plan.economics import tco_usd``; ``scaleright._lazy``): a training plan, which prices jobs and tokens,
imports neither the ownership, hybrid and spot models nor the decision tree it does not reach.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scaleright._lazy import lazy_exports

# a name that is also its module's (``scaleright._lazy``): imported now, so no later import of the module shadows it
from scaleright.plan.economics.utilisation_curve import utilisation_curve

if TYPE_CHECKING:  # what ``__getattr__`` gives, for type checkers
    from scaleright.plan.economics.batch import (
        batch_costs_usd,
        batch_run_h,
        serverless_cost_usd,
        serverless_service_gpu_hours,
    )
    from scaleright.plan.economics.decision import deployment_decision
    from scaleright.plan.economics.energy import co2e_kg, electricity_cost_usd, energy_kwh
    from scaleright.plan.economics.fleet import fleet_reduction_fraction, gpus_needed
    from scaleright.plan.economics.hybrid import cheapest_baseline, hybrid_costs_usd, owned_and_rented_gpu_hours
    from scaleright.plan.economics.job import cost_per_job_usd, job_time_h, scaling_efficiency
    from scaleright.plan.economics.ownership import (
        OwnershipCosts,
        capital_charge_usd,
        capital_charge_usd_per_month,
        net_capex_usd,
        owned_cost_per_gpu_hour_usd,
        owned_running_cost_usd_per_gpu_hour,
        purchases,
        tco_usd,
        true_cost_per_gpu_hour_usd,
        utilisation_for_true_cost,
    )
    from scaleright.plan.economics.rent_vs_buy import (
        break_even_hours_per_day,
        break_even_months,
        capex_opex_matrix,
        rented_cost_usd,
    )
    from scaleright.plan.economics.spot import (
        optimal_checkpoint_interval_h,
        spot_expected_preemptions,
        spot_expected_time_h,
    )
    from scaleright.plan.economics.tokens import (
        api_break_even_usd_per_1m_tokens,
        api_usd_per_1m_output_tokens_blended,
        inference_cost_usd_per_1m_tokens,
        training_cost_usd_per_1m_tokens,
        utilisation_needed_for_api_parity,
    )

__all__ = [
    # job
    "cost_per_job_usd",
    "job_time_h",
    "scaling_efficiency",
    # tokens
    "training_cost_usd_per_1m_tokens",
    "inference_cost_usd_per_1m_tokens",
    "api_break_even_usd_per_1m_tokens",
    "utilisation_needed_for_api_parity",
    "api_usd_per_1m_output_tokens_blended",
    # energy
    "energy_kwh",
    "electricity_cost_usd",
    "co2e_kg",
    # ownership
    "OwnershipCosts",
    "purchases",
    "net_capex_usd",
    "owned_running_cost_usd_per_gpu_hour",
    "tco_usd",
    "owned_cost_per_gpu_hour_usd",
    "capital_charge_usd",
    "capital_charge_usd_per_month",
    "true_cost_per_gpu_hour_usd",
    "utilisation_for_true_cost",
    # rent vs buy
    "rented_cost_usd",
    "break_even_hours_per_day",
    "break_even_months",
    "capex_opex_matrix",
    # hybrid
    "owned_and_rented_gpu_hours",
    "hybrid_costs_usd",
    "cheapest_baseline",
    # spot
    "optimal_checkpoint_interval_h",
    "spot_expected_time_h",
    "spot_expected_preemptions",
    # batch jobs vs services
    "batch_run_h",
    "batch_costs_usd",
    "serverless_cost_usd",
    "serverless_service_gpu_hours",
    # the Deployment Decision Tree
    "deployment_decision",
    # curve and fleet
    "utilisation_curve",
    "fleet_reduction_fraction",
    "gpus_needed",
]

# the module of each name of ``__all__``: the comment above its group names it, "rent vs buy" is rent_vs_buy
_MODULE_OF, __getattr__, __dir__ = lazy_exports(__name__, {
    "job": ("cost_per_job_usd", "job_time_h", "scaling_efficiency"),
    "tokens": ("training_cost_usd_per_1m_tokens", "inference_cost_usd_per_1m_tokens",
               "api_break_even_usd_per_1m_tokens", "utilisation_needed_for_api_parity",
               "api_usd_per_1m_output_tokens_blended"),
    "energy": ("energy_kwh", "electricity_cost_usd", "co2e_kg"),
    "ownership": ("OwnershipCosts", "purchases", "net_capex_usd", "owned_running_cost_usd_per_gpu_hour", "tco_usd",
                  "owned_cost_per_gpu_hour_usd", "capital_charge_usd", "capital_charge_usd_per_month",
                  "true_cost_per_gpu_hour_usd", "utilisation_for_true_cost"),
    "rent_vs_buy": ("rented_cost_usd", "break_even_hours_per_day", "break_even_months", "capex_opex_matrix"),
    "hybrid": ("owned_and_rented_gpu_hours", "hybrid_costs_usd", "cheapest_baseline"),
    "spot": ("optimal_checkpoint_interval_h", "spot_expected_time_h", "spot_expected_preemptions"),
    "batch": ("batch_run_h", "batch_costs_usd", "serverless_cost_usd", "serverless_service_gpu_hours"),
    "decision": ("deployment_decision",),
    "fleet": ("fleet_reduction_fraction", "gpus_needed"),
})  # fmt: skip
