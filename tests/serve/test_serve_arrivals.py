"""Arrival processes and length distributions: their means and spreads, trace replay, and errors that name the field."""

from __future__ import annotations

import numpy as np
import pytest

from scaleright.errors import InputError
from scaleright.serve.arrivals import arrival_times, diurnal, gamma, poisson, read_trace
from scaleright.serve.lengths import draw_lengths, read_lengths


def _gaps(t):
    return np.diff(np.concatenate([[0.0], t]))


def test_poisson_gaps_have_mean_one_over_rate_and_cv_one():
    g = _gaps(poisson(np.random.default_rng(1), rate=5.0, n=200_000))
    assert g.mean() == pytest.approx(0.2, rel=0.01)
    assert g.std() / g.mean() == pytest.approx(1.0, rel=0.02)


@pytest.mark.parametrize("b", [0.25, 1.0, 4.0])
def test_gamma_burstiness_keeps_the_mean_and_sets_cv_to_one_over_sqrt_b(b):
    g = _gaps(gamma(np.random.default_rng(2), rate=10.0, burstiness=b, n=200_000))
    assert g.mean() == pytest.approx(0.1, rel=0.02)
    assert g.std() / g.mean() == pytest.approx(1 / np.sqrt(b), rel=0.03)


def test_diurnal_rate_peaks_a_quarter_period_in_and_troughs_at_three_quarters():
    t = diurnal(np.random.default_rng(3), rate=100.0, n=200_000, period_s=100.0, amplitude=0.5)
    phase = (t % 100.0)
    peak = np.count_nonzero((phase > 20) & (phase < 30))
    trough = np.count_nonzero((phase > 70) & (phase < 80))
    assert peak / trough == pytest.approx(1.5 / 0.5, rel=0.1)
    assert np.all(np.diff(t) >= 0)


def test_unknown_arrival_process_and_bad_rates_are_named():
    rng = np.random.default_rng(0)
    with pytest.raises(InputError, match="arrival='bursty' not allowed; allowed: poisson, gamma, diurnal"):
        arrival_times(rng, "bursty", rate=1.0, n=3)
    with pytest.raises(InputError, match=r"rate=0.0 must be a finite positive"):
        poisson(rng, rate=0.0, n=3)
    with pytest.raises(InputError, match="burstiness=-1"):
        gamma(rng, rate=1.0, burstiness=-1, n=3)


def test_trace_rows_are_sorted_by_arrival(tmp_path):
    p = tmp_path / "trace.csv"
    p.write_text("arrival_time_s,input_tokens,output_tokens\n0.5,10,2\n0.1,20,3\n")
    t, i, o = read_trace(p)
    assert t.tolist() == [0.1, 0.5] and i.tolist() == [20, 10] and o.tolist() == [3, 2]


def test_trace_errors_name_the_flag_the_line_and_the_columns(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("time,input_tokens,output_tokens\n0,1,1\n")
    with pytest.raises(InputError, match=r"--trace=.*missing column\(s\) arrival_time_s"):
        read_trace(p)
    p.write_text("arrival_time_s,input_tokens,output_tokens\n0,1,x\n")
    with pytest.raises(InputError, match="line 2"):
        read_trace(p)
    with pytest.raises(InputError, match="--trace="):
        read_trace(tmp_path / "missing.csv")


def test_lognormal_lengths_have_the_requested_mean_and_cv():
    x = draw_lengths(np.random.default_rng(4), "lognormal", n=200_000, mean=500, cv=0.8)
    assert x.mean() == pytest.approx(500, rel=0.02)
    assert x.std() / x.mean() == pytest.approx(0.8, rel=0.05)
    assert x.min() >= 1


def test_empirical_lengths_are_resampled_from_the_file(tmp_path):
    p = tmp_path / "lens.txt"
    p.write_text("tokens\n10\n20\n30\n")
    samples = read_lengths(p, flag="--input-lengths")
    x = draw_lengths(np.random.default_rng(5), "empirical", n=1000, mean=0, samples=samples)
    assert set(x.tolist()) == {10, 20, 30}
