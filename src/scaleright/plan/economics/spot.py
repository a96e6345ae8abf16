"""Spot (preemptible) training honestly: expected completion time with preemptions, checkpoints and restarts.

Model: J. T. Daly, "A higher order estimate of the optimum checkpoint interval for restart dumps", *Future
Generation Computer Systems* 22(3):303-312, 2006. Preemptions arrive as a Poisson process with mean time between
them ``M`` (h); the job needs ``T_s`` hours of work, writes a checkpoint of ``delta`` hours after every ``tau``
hours of work, and after a preemption spends ``R`` hours restarting (re-acquiring an instance and reading the last
checkpoint; a preemption may also strike during a restart). Daly's complete expected wall-clock time (exact for
exponential preemptions and a whole number of segments) is

    T_w = M x exp(R / M) x (exp((tau + delta) / M) - 1) x T_s / tau

and his higher-order estimate of the optimum interval

    tau_opt = sqrt(2 delta M) x (1 + sqrt(delta / (2 M)) / 3 + (delta / (2 M)) / 9) - delta   (delta < 2 M)
    tau_opt = M                                                                                (delta >= 2 M)

whose first term is Young's (1974) ``sqrt(2 delta M)``. The expected number of preemptions is ``T_w / M`` (each
hour of wall-clock time is exposed). An interval longer than the job is capped at ``T_s``: one segment, one final
write. With no preemptions (``M`` infinite) the optimum is that single segment, ``T_w = T_s + delta``; a given
interval gives ``T_s (1 + delta / tau)``. A spot job is paid for every wall-clock hour (work, checkpoints, lost work and
restarts): cost = GPUs x spot price x ``T_w``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.plan.economics._validate import checked, out

__all__ = ["optimal_checkpoint_interval_h", "spot_expected_time_h", "spot_expected_preemptions"]


def optimal_checkpoint_interval_h(*, checkpoint_write_h: ArrayLike, mtbf_h: ArrayLike) -> float | NDArray[np.float64]:
    """Daly's (2006) higher-order optimum hours of work between checkpoints (module docstring); ``inf`` when
    ``mtbf_h`` is infinite (no preemptions: never checkpoint)."""
    d = checked("checkpoint_write_h", checkpoint_write_h, ge=0)
    m = np.asarray(mtbf_h, dtype=float)
    if np.any(np.isnan(m)) or np.any(m <= 0):
        checked("mtbf_h", np.where(np.isinf(m), 1.0, m), gt=0)  # raises, naming the field
    with np.errstate(invalid="ignore", divide="ignore"):
        x = d / (2.0 * m)
        tau = np.sqrt(2.0 * d * m) * (1.0 + np.sqrt(x) / 3.0 + x / 9.0) - d
        tau = np.where(d >= 2.0 * m, m, tau)
    tau = np.where(np.isinf(m), np.inf, tau)
    # delta = 0 (free checkpoints) gives tau 0: checkpoint continuously, which loses no work
    return out(tau)


def spot_expected_time_h(
    *,
    solve_time_h: ArrayLike,
    mtbf_h: ArrayLike,
    checkpoint_write_h: ArrayLike,
    restart_h: ArrayLike,
    interval_h: ArrayLike | None = None,
) -> float | NDArray[np.float64]:
    """Daly's expected wall-clock hours ``T_w`` for ``solve_time_h`` hours of work (module docstring).

    ``interval_h`` defaults to ``optimal_checkpoint_interval_h``; it is capped at ``solve_time_h``. ``mtbf_h`` may
    be ``inf`` (no preemptions).
    """
    ts = checked("solve_time_h", solve_time_h, gt=0)
    d = checked("checkpoint_write_h", checkpoint_write_h, ge=0)
    r = checked("restart_h", restart_h, ge=0)
    m = np.asarray(mtbf_h, dtype=float)
    tau = (np.asarray(optimal_checkpoint_interval_h(checkpoint_write_h=d, mtbf_h=m)) if interval_h is None
           else checked("interval_h", interval_h, gt=0))  # fmt: skip
    tau = np.minimum(tau, ts)
    finite = np.isfinite(m)
    ms = np.where(finite, m, 1.0)
    with np.errstate(over="ignore", invalid="ignore"):
        tw = ms * np.exp(r / ms) * np.expm1((tau + d) / ms) * ts / np.where(tau > 0, tau, 1.0)
        # tau -> 0 with delta = 0: continuous free checkpoints lose nothing; only restarts cost: T_s exp(R/M)
        tw = np.where((tau == 0) & (d == 0), ts * np.exp(r / ms), tw)
    no_failure = ts * (1.0 + d / np.where(tau > 0, tau, np.inf))
    return out(np.where(finite, tw, no_failure))


def spot_expected_preemptions(*, expected_time_h: ArrayLike, mtbf_h: ArrayLike) -> float | NDArray[np.float64]:
    """Expected preemptions over the run, ``T_w / M`` (0 when ``mtbf_h`` is infinite)."""
    tw = checked("expected_time_h", expected_time_h, ge=0)
    m = np.asarray(mtbf_h, dtype=float)
    return out(np.where(np.isfinite(m), tw / np.where(np.isfinite(m), m, 1.0), 0.0))
