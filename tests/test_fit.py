"""The one fitter (``scaleright.estimate.fit``): parameter recovery on synthetic data made from known parameters with
noise, a closed-form reference, robustness to an outlier, bounds, weights and unusable rows.

The synthetic "measurements" come from a small roofline written here (time = FLOPs / (peak · gemm_efficiency) +
bytes / (bandwidth · memory_efficiency) + step_overhead_s), not from scaleright's model: the fitter is tested
against a truth it did not produce.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from scaleright.errors import InputError
from scaleright.estimate.calibration import DEFAULT_CALIBRATION, Calibration
from scaleright.estimate.fit import error_summary, fit, log_errors

PEAK_FLOPS = 1e15
BANDWIDTH_B_PER_S = 3e12
RNG = np.random.default_rng(20261201)
N = 40
FLOPS = 10 ** RNG.uniform(11, 14, N)  # compute-bound to overhead-bound rows
BYTES = 10 ** RNG.uniform(8, 11, N)
BOUNDS = {"gemm_efficiency": (0.2, 0.95), "memory_efficiency": (0.2, 0.95), "step_overhead_s": (1e-5, 1.0)}
TRUTH = {"gemm_efficiency": 0.41, "memory_efficiency": 0.63, "step_overhead_s": 0.004}


def roofline(cal: Calibration) -> np.ndarray:
    return (FLOPS / (PEAK_FLOPS * cal.gemm_efficiency) + BYTES / (BANDWIDTH_B_PER_S * cal.memory_efficiency)
            + cal.step_overhead_s)  # fmt: skip


def compute_only(cal: Calibration) -> np.ndarray:
    return FLOPS / (PEAK_FLOPS * cal.gemm_efficiency)


def measured(noise: float, seed: int = 1, model=roofline) -> np.ndarray:
    clean = model(DEFAULT_CALIBRATION.replace(**TRUTH))
    return clean * np.exp(np.random.default_rng(seed).normal(0.0, noise, N))


def test_recovers_known_parameters_from_noisy_measurements():
    meas = measured(noise=0.02)
    for name, v in TRUTH.items():  # the truth is far from where the fit starts
        assert abs(getattr(DEFAULT_CALIBRATION, name) / v - 1) > 0.25, name
    res = fit(roofline, meas, DEFAULT_CALIBRATION, BOUNDS)
    for name, v in TRUTH.items():
        assert res.values[name] == pytest.approx(v, rel=0.05), name
        assert getattr(res.calibration, name) == res.values[name]
    assert res.on_bound == {}
    assert res.rows_used == tuple(range(N))
    # the residual spread is the noise put in (2 % log-normal), not more
    assert 0.01 < error_summary(res.residuals)["rms_log"] < 0.03
    assert res.status > 0
    # fields outside the bounds are left as they were
    assert res.calibration.attention_efficiency == DEFAULT_CALIBRATION.attention_efficiency


def test_one_parameter_matches_the_closed_form_geometric_mean():
    """pred_i = a_i / θ: least squares on log errors gives θ = geomean(a_i / m_i) (hand-derived; the noise, 1 %, is
    far under the soft-L1 scale, so the loss is quadratic there)."""
    meas = measured(noise=0.01, seed=7, model=compute_only)
    res = fit(compute_only, meas, DEFAULT_CALIBRATION, {"gemm_efficiency": (0.05, 0.95)})
    closed = math.exp(np.mean(np.log(FLOPS / PEAK_FLOPS / meas)))
    assert res.values["gemm_efficiency"] == pytest.approx(closed, rel=1e-3)


def test_soft_l1_resists_an_outlier_that_moves_the_least_squares_answer():
    meas = measured(noise=0.01, seed=3, model=compute_only)
    meas[0] *= 4.0  # one row 4x slower than the model can be (a stalled run)
    a = FLOPS / PEAK_FLOPS
    truth = TRUTH["gemm_efficiency"]
    plain = math.exp(np.mean(np.log(a / meas)))  # squared-loss answer with the outlier: pulled down
    res = fit(compute_only, meas, DEFAULT_CALIBRATION, {"gemm_efficiency": (0.05, 0.95)})
    assert abs(plain / truth - 1) > 0.03
    assert abs(res.values["gemm_efficiency"] / truth - 1) < abs(plain / truth - 1) / 2


def test_a_truth_outside_the_bounds_ends_on_the_bound_and_is_flagged():
    truth = {**TRUTH, "gemm_efficiency": 0.99}  # above the 0.95 bound: the model lacks something
    meas = roofline(DEFAULT_CALIBRATION.replace(**truth))
    res = fit(roofline, meas, DEFAULT_CALIBRATION, BOUNDS)
    assert res.values["gemm_efficiency"] == 0.95
    assert res.on_bound == {"gemm_efficiency": "high"}
    low = fit(roofline, roofline(DEFAULT_CALIBRATION.replace(**{**TRUTH, "memory_efficiency": 0.1})),
              DEFAULT_CALIBRATION, BOUNDS)  # fmt: skip
    assert low.values["memory_efficiency"] == 0.2
    assert low.on_bound == {"memory_efficiency": "low"}


def test_a_wide_positive_range_is_searched_in_log_space():
    """A latency-like scale from 0.02 to 2000: a linear step of 1e-3 of the range (2 units) could not resolve 0.5."""
    base = DEFAULT_CALIBRATION

    def latency(cal: Calibration) -> np.ndarray:
        return 1e-5 * cal.collective_latency_scale * np.arange(1, 9) + 1e-3

    meas = latency(base.replace(collective_latency_scale=0.5))
    res = fit(latency, meas, base, {"collective_latency_scale": (0.02, 2000.0)})
    assert res.values["collective_latency_scale"] == pytest.approx(0.5, rel=0.01)


def test_weights_and_rows_that_cannot_be_predicted():
    meas = measured(noise=0.0)
    meas[1] *= 10  # a wrong row, weighted out
    w = np.ones(N)
    w[1] = 0.0

    def with_gaps(cal: Calibration) -> np.ndarray:
        p = roofline(cal)
        p[2] = np.nan  # the model says this layout does not fit
        return p

    res = fit(with_gaps, meas, DEFAULT_CALIBRATION, BOUNDS, weights=w)
    assert 1 not in res.rows_used and 2 not in res.rows_used and len(res.rows_used) == N - 2
    assert np.isnan(res.residuals[[1, 2]]).all()
    for name, v in TRUTH.items():
        assert res.values[name] == pytest.approx(v, rel=0.01), name


def test_parallel_evaluation_gives_the_same_fit():
    meas = measured(noise=0.02)
    calls: list[int] = []

    def many(cals):
        calls.append(len(cals))
        return [roofline(c) for c in cals]

    a = fit(roofline, meas, DEFAULT_CALIBRATION, BOUNDS)
    b = fit(roofline, meas, DEFAULT_CALIBRATION, BOUNDS, predict_many=many)
    assert a.values == b.values
    assert calls and set(calls) == {len(BOUNDS)}  # one batch per Jacobian, one column per parameter


@pytest.mark.parametrize("bounds, message", [
    ({}, "no parameters to fit"),
    ({"gemm_eff": (0.1, 0.9)}, "'gemm_eff' is not a Calibration field"),
    ({"gemm_efficiency": (0.9, 0.1)}, r"bounds of gemm_efficiency must be finite with 0 <= low < high"),
])
def test_bad_bounds_are_refused(bounds, message):
    with pytest.raises(InputError, match=message):
        fit(roofline, measured(0.0), DEFAULT_CALIBRATION, bounds)


def test_no_usable_row_is_refused():
    with pytest.raises(InputError, match="no row with a positive measured value"):
        fit(roofline, np.zeros(N), DEFAULT_CALIBRATION, BOUNDS)


def test_log_errors_and_summary():
    e = log_errors([2.0, 1.0, np.nan, 1.0], [1.0, 2.0, 1.0, 0.0])
    assert e[0] == pytest.approx(math.log(2)) and e[1] == pytest.approx(-math.log(2))
    assert np.isnan(e[2:]).all()
    s = error_summary(e)
    assert s["rows"] == 2 and s["median_abs_pct"] == pytest.approx(75.0)  # |2 - 1| = 100 %, |0.5 - 1| = 50 %
    assert s["rms_log"] == pytest.approx(math.log(2))
    assert error_summary([np.nan])["median_abs_pct"] is None
