"""The one fitter of model factors to measurements: ``Calibration`` parameters (``scaleright calibrate``,
``benchmarks/accuracy.py``) and serving-engine profiles (``bench.calibrate_serving``, an ``EngineProfile``).

``fit(predict, measured, base, bounds)`` minimises, over the named fields of ``base`` (a frozen dataclass of
factors) in ``bounds``,

    Σ_i ρ(r_i²),   r_i = w_i · log(predicted_i / measured_i),   ρ(z) = 2 f² (√(1 + z / f²) − 1)   (soft-L1)

within the bounds: a bounded, robust least squares on log errors with per-row weights ``w_i``. Log errors make a
2x too slow and a 2x too fast equally wrong and every row's unit irrelevant; soft-L1 (quadratic below ``f_scale``,
linear above) keeps a few rows the model cannot describe from dragging every parameter. A row whose prediction is
not finite (the model says the layout does not fit) or whose weight is 0 is not used: its residual is 0.

The solver is SciPy's trust-region reflective ``least_squares`` (Branch, Coleman and Li 1999) with a
forward-difference Jacobian: a bounded, robust solver used and tested far beyond this project, where a hand-written
one would be new, untested code on the path of every profile. SciPy (>= 1.11) is therefore a core dependency of
scaleright (``pip install .`` brings it). Each parameter is searched in a normalised coordinate u in [0, 1] over its
bounds — linear, or logarithmic when the bounds span a factor of ``LOG_SPAN`` or more (a latency scale from 0.02 to
2000) — so one step size suits every parameter; values within 1e-6 (in u) of a bound snap to it. A fitted value
within ``bound_tol`` (in u) of a bound is reported in ``FitResult.on_bound``: a parameter on its bound is a missing
physical term in the model, not a bound to widen.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import numpy.typing as npt

from scaleright.errors import InputError

__all__ = ["FitResult", "fit", "log_errors", "error_summary", "LOG_SPAN", "BOUND_TOL"]

LOG_SPAN = 100.0  # bounds spanning this factor or more are searched in log space
BOUND_TOL = 1e-3  # a fitted value this close (share of its normalised range) to a bound is "on the bound"
_SNAP = 1e-6  # normalised distance under which a value is set exactly on its bound
_STEP = 1e-3  # forward-difference step in the normalised coordinate

Predict = Callable[[Any], npt.NDArray[np.float64]]  # a Calibration (or EngineProfile) -> one value per row
PredictMany = Callable[[Sequence[Any]], Sequence[npt.NDArray[np.float64]]]


@dataclass(frozen=True)
class FitResult:
    """What a fit found, and on which rows."""

    calibration: Any  # ``base`` (a Calibration, or an EngineProfile) with the fitted values
    values: dict[str, float]  # fitted value per parameter, in ``bounds`` order
    bounds: dict[str, tuple[float, float]]  # (low, high) per parameter
    on_bound: dict[str, str]  # parameter -> "low" or "high", for those within ``bound_tol`` of a bound
    cost: float  # 0.5 Σ ρ(r²) at the solution (SciPy's ``cost``)
    residuals: npt.NDArray[np.float64]  # log(predicted / measured) per row, unweighted; NaN where not used
    rows_used: tuple[int, ...]  # indices of the rows that entered the fit
    nfev: int  # evaluations of all rows (the Jacobian's are not counted)
    status: int  # SciPy's termination status (> 0: converged)
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return {"values": self.values, "bounds": {k: list(v) for k, v in self.bounds.items()},
                "on_bound": self.on_bound, "cost": self.cost, "rows_used": list(self.rows_used), "nfev": self.nfev,
                "status": self.status, "seconds": self.seconds}  # fmt: skip


def log_errors(predicted: npt.ArrayLike, measured: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """log(predicted / measured) per row; NaN where either is not a positive finite number."""
    p = np.asarray(predicted, dtype=float)
    m = np.asarray(measured, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(p / m)
    ok = np.isfinite(p) & np.isfinite(m) & (p > 0) & (m > 0)
    return np.where(ok, out, np.nan)


def error_summary(log_err: npt.ArrayLike) -> dict[str, float | int | None]:
    """Median and 90th-percentile |predicted / measured − 1| in percent, and the RMS log error, over finite rows
    (None when there is none)."""
    e = np.asarray(log_err, dtype=float)
    e = e[np.isfinite(e)]
    if not len(e):
        return {"rows": 0, "median_abs_pct": None, "p90_abs_pct": None, "rms_log": None}
    pct = np.abs(np.expm1(e)) * 100
    return {"rows": len(e), "median_abs_pct": float(np.median(pct)), "p90_abs_pct": float(np.percentile(pct, 90)),
            "rms_log": float(np.sqrt(np.mean(e * e)))}  # fmt: skip


def _check_bounds(bounds: Mapping[str, tuple[float, float]], base: Any) -> None:
    allowed = {f.name for f in fields(base)}
    if not bounds:
        raise InputError("fit: no parameters to fit")
    for name, b in bounds.items():
        if name not in allowed:
            raise InputError(f"fit: {name!r} is not a {type(base).__name__} field; allowed: "
                             f"{', '.join(sorted(allowed))}")
        lo, hi = b
        if not (math.isfinite(lo) and math.isfinite(hi) and 0 <= lo < hi):
            raise InputError(f"fit: bounds of {name} must be finite with 0 <= low < high, got ({lo}, {hi})")


class _Space:
    """The normalised coordinate u in [0, 1] of each parameter (linear or log over its bounds)."""

    def __init__(self, bounds: Mapping[str, tuple[float, float]]) -> None:
        self.names = tuple(bounds)
        self.lo = np.array([bounds[n][0] for n in self.names], dtype=float)
        self.hi = np.array([bounds[n][1] for n in self.names], dtype=float)
        self.log = (self.lo > 0) & (self.hi >= LOG_SPAN * np.where(self.lo > 0, self.lo, 1.0))
        self.a = np.where(self.log, np.log(np.where(self.log, self.lo, 1.0)), self.lo)
        self.b = np.where(self.log, np.log(np.where(self.log, self.hi, 1.0)), self.hi)

    def to_u(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        y = np.where(self.log, np.log(np.where(self.log, np.clip(x, self.lo, self.hi), 1.0)), x)
        return np.asarray(np.clip((y - self.a) / (self.b - self.a), 0.0, 1.0), dtype=float)

    def to_x(self, u: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        u = np.clip(u, 0.0, 1.0)
        u = np.where(u < _SNAP, 0.0, np.where(u > 1 - _SNAP, 1.0, u))
        y = self.a + u * (self.b - self.a)
        x = np.where(self.log, np.exp(y), y)
        return np.asarray(np.where(u == 0, self.lo, np.where(u == 1, self.hi, x)), dtype=float)


def fit(predict: Predict, measured: npt.ArrayLike, base: Any, bounds: Mapping[str, tuple[float, float]], *,
        weights: npt.ArrayLike | None = None, predict_many: PredictMany | None = None, f_scale: float = 0.1,
        bound_tol: float = BOUND_TOL, max_nfev: int = 100, xtol: float = 1e-6,
        ftol: float = 1e-8, step: float = _STEP) -> FitResult:  # fmt: skip
    """Fit the ``bounds`` fields of ``base`` so that ``predict(cal)`` (one value per row) matches ``measured``.

    ``weights`` (default 1) multiply each row's log error; ``predict_many`` evaluates several calibrations at once
    (a process pool, for the Jacobian's columns; default: one after another). The fit starts from ``base``'s values
    (clipped into the bounds). ``step`` is the forward-difference step in the normalised coordinate: larger for a
    model whose output moves in small discrete jumps (a discrete-event simulation), where a tiny step sees noise
    instead of the slope. See the module docstring for the objective and the solver."""
    from scipy.optimize import least_squares

    _check_bounds(bounds, base)
    meas = np.asarray(measured, dtype=float)
    w = np.ones_like(meas) if weights is None else np.asarray(weights, dtype=float)
    if meas.ndim != 1 or w.shape != meas.shape:
        raise InputError(f"fit: {meas.shape} measured values and {w.shape} weights; one of each per row")
    if not np.any((w > 0) & np.isfinite(meas) & (meas > 0)):
        raise InputError("fit: no row with a positive measured value and a positive weight")
    space = _Space(bounds)
    many: PredictMany = predict_many or (lambda cals: [predict(c) for c in cals])

    def cal_of(u: npt.NDArray[np.float64]) -> Any:
        return dataclasses.replace(base, **{n: float(v) for n, v in zip(space.names, space.to_x(u), strict=True)})

    def residuals(pred: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        r = log_errors(pred, meas) * w
        return np.where(np.isfinite(r) & (w > 0), r, 0.0)

    cache: dict[bytes, npt.NDArray[np.float64]] = {}

    def fun(u: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        key = u.tobytes()
        if key not in cache:
            cache.clear()
            cache[key] = residuals(np.asarray(predict(cal_of(u)), dtype=float))
        return cache[key]

    def jac(u: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        f0 = fun(u)
        steps = [u + np.where(np.arange(len(u)) == i, step if u[i] + step <= 1 else -step, 0.0)
                 for i in range(len(u))]  # fmt: skip
        cols = many([cal_of(s) for s in steps])
        return np.stack([(residuals(np.asarray(c, dtype=float)) - f0) / (s[i] - u[i])
                         for i, (c, s) in enumerate(zip(cols, steps, strict=True))], axis=1)  # fmt: skip

    t0 = time.perf_counter()
    u0 = space.to_u(np.array([getattr(base, n) for n in space.names], dtype=float))
    res = least_squares(fun, u0, jac=jac, bounds=(0.0, 1.0), loss="soft_l1", f_scale=f_scale, x_scale=1.0,
                        max_nfev=max_nfev, xtol=xtol, ftol=ftol)  # fmt: skip
    seconds = time.perf_counter() - t0
    cal = cal_of(res.x)
    u = space.to_u(space.to_x(res.x))
    on_bound = {n: ("low" if u[i] <= bound_tol else "high") for i, n in enumerate(space.names)
                if u[i] <= bound_tol or u[i] >= 1 - bound_tol}  # fmt: skip
    raw = log_errors(np.asarray(predict(cal), dtype=float), meas)
    used = np.isfinite(raw) & (w > 0)
    return FitResult(
        calibration=cal, values={n: float(getattr(cal, n)) for n in space.names},
        bounds={n: (float(bounds[n][0]), float(bounds[n][1])) for n in space.names}, on_bound=on_bound,
        cost=float(res.cost), residuals=np.where(used, raw, np.nan),
        rows_used=tuple(int(i) for i in np.flatnonzero(used)), nfev=int(res.nfev), status=int(res.status),
        seconds=seconds,
    )  # fmt: skip
