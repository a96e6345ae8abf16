"""How many fewer GPUs a fleet needs when each GPU is busier and kept in service longer.

Source: the seed article *Multi-GPU vs Single-GPU Scaling Economics: The 2026 Guide*, "Sustainability &
Environmental Considerations" ("Extending GPU life from one to three years and increasing utilisation from 20 %
to 60 % can reduce GPU needs by 93 %"). For a fixed amount of work, the GPUs in service scale as
1 / utilisation, and the GPUs bought per year as (GPUs in service) / service life, so

    reduction = 1 - (utilisation_before x life_before) / (utilisation_after x life_after).

The article's inputs give 1 - (0.2 x 1) / (0.6 x 3) = 8/9 = 88.9%, not the 93% it prints (utilisation alone:
66.7%); the tests pin 88.9% and say so.

In whole GPUs, the fleet that does ``busy_gpu_hours_per_day`` of work at a utilisation ``u`` is

    gpus_needed = ceil(busy_gpu_hours_per_day / (24 x u))
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.plan.economics._units import HOURS_PER_DAY
from scaleright.plan.economics._validate import checked, out

__all__ = ["fleet_reduction_fraction", "gpus_needed"]

_WHOLE = 1e-9  # 480 / (24 x 0.6) must not round up past 33.33 for a float hair, nor 480 / (24 x 0.2) past 100


def gpus_needed(*, busy_gpu_hours_per_day: ArrayLike, utilisation: ArrayLike) -> float | NDArray[np.float64]:
    """Whole GPUs that do ``busy_gpu_hours_per_day`` of work at ``utilisation`` (0 < u <= 1):
    ``ceil(busy / (24 x u))`` (module docstring)."""
    w = checked("busy_gpu_hours_per_day", busy_gpu_hours_per_day, ge=0)
    u = checked("utilisation", utilisation, gt=0, le=1)
    return out(np.ceil(w / (HOURS_PER_DAY * u) - _WHOLE))


def fleet_reduction_fraction(
    *,
    utilisation_before: ArrayLike,
    utilisation_after: ArrayLike,
    service_life_years_before: ArrayLike = 1.0,
    service_life_years_after: ArrayLike = 1.0,
) -> float | NDArray[np.float64]:
    """Fraction of GPU purchases avoided: ``1 - (u_before x life_before) / (u_after x life_after)``.

    Negative when the fleet must grow (utilisation or service life fell). Lives default to equal, giving the
    effect of utilisation alone.
    """
    u0 = checked("utilisation_before", utilisation_before, gt=0, le=1)
    u1 = checked("utilisation_after", utilisation_after, gt=0, le=1)
    l0 = checked("service_life_years_before", service_life_years_before, gt=0)
    l1 = checked("service_life_years_after", service_life_years_after, gt=0)
    return out(1.0 - (u0 * l0) / (u1 * l1))
