"""Diurnal (time-varying) traffic on every path that serves it: the arrival process, ``simulate`` and the
``serve simulate`` CLI, a fleet whose autoscaler follows the day, and the planner's hourly fleet.

The load is rate(t) = r · (1 + a · sin(2π t / P)) (``serve.arrivals``). Expected values are closed forms derived
here, never read from the code under test:

- arrivals in [t1, t2] of a non-homogeneous Poisson process are Poisson with mean Λ = ∫ rate = r · [(t2 − t1) −
  a · P / (2π) · (cos(2π t2 / P) − cos(2π t1 / P))]; a seeded count must lie within 5 standard deviations (√Λ) of
  it (a bound a correct sampler misses with probability below 1e-6 per window);
- an autoscaler with the HPA rule desired = ⌈replicas · busy share / target⌉ on replicas that serve one request at
  a time, each taking S seconds, settles at ⌈rate · S / target⌉ (the busy share of n replicas is rate · S / n); the
  count lags the load by at most interval + cold start on the way up and by the scale-down delay on the way down.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from scaleright.catalog import get_gpu
from scaleright.serve import simulate
from scaleright.serve.arrivals import diurnal
from scaleright.serve.fleet import Autoscale, PoolSpec, ServiceSpec, run_fleet
from scaleright.serve.kernel import Environment
from scaleright.serve.replica import SchedulerConfig
from tests.serve.serve_toy import ToyModel  # the serving tests' toy iteration model


def _expected(r: float, a: float, period: float, t1, t2):
    """Λ(t1, t2) = ∫ r (1 + a sin(2π t / P)) dt (module docstring)."""
    w = 2 * np.pi / period
    return r * ((np.asarray(t2) - t1) - a / w * (np.cos(w * np.asarray(t2)) - np.cos(w * np.asarray(t1))))


def _within_5_sigma(count, mean) -> bool:
    return bool(np.all(np.abs(np.asarray(count) - mean) <= 5 * np.sqrt(mean)))


# ---- the arrival process ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("seed", "amplitude"), [(1, 0.5), (7, 0.9), (11, 1.0)])
def test_arrivals_in_each_hour_of_the_day_are_poisson_about_the_hours_integral(seed, amplitude):
    """24 hourly windows over 3 days of P = 86,400 s at a mean of 0.05 requests/s: each hour's count lies within
    5 sd of its integral, and a day's total within 5 sd of r · P (the sine integrates to zero over a period)."""
    r, period, days = 0.05, 86_400.0, 3
    t = diurnal(np.random.default_rng(seed), rate=r, n=int(r * period * days * 1.5), period_s=period,
                amplitude=amplitude)  # fmt: skip
    assert t[-1] > days * period  # the windows below end before the last drawn arrival
    edges = np.arange(0, days * 24 + 1) * 3600.0
    counts = np.histogram(t, bins=edges)[0]
    lam = _expected(r, amplitude, period, edges[:-1], edges[1:])
    assert _within_5_sigma(counts, lam)
    per_day = counts.reshape(days, 24).sum(axis=1)
    assert _within_5_sigma(per_day, r * period)
    # the busiest hours are those around P/4 (06:00), the quietest around 3P/4 (18:00)
    by_hour = counts.reshape(days, 24).sum(axis=0)
    assert by_hour[4:8].sum() > by_hour[16:20].sum()


def test_the_first_half_day_carries_the_sines_positive_half():
    """Λ(0, P/2) = r (P/2 + a P / π): at r = 2/s, P = 600 s, a = 0.5 that is 790.99, against 600 without the swing."""
    r, period, a = 2.0, 600.0, 0.5
    lam = r * (period / 2 + a * period / math.pi)
    assert lam == pytest.approx(_expected(r, a, period, 0.0, period / 2))
    hits = [np.count_nonzero(diurnal(np.random.default_rng(s), rate=r, n=3000, period_s=period, amplitude=a)
                             <= period / 2) for s in range(20)]  # fmt: skip
    assert _within_5_sigma(hits, lam)
    # the mean of 20 independent counts: within 5 sd of Λ, sd √(Λ/20) = 6.3, so never near the 600 of a flat rate
    assert abs(np.mean(hits) - lam) <= 5 * math.sqrt(lam / 20)


# ---- simulate and the CLI ----------------------------------------------------------------------------------------


def test_simulate_serves_the_requests_the_diurnal_curve_brings_in_its_window(llama_8b):
    """``simulate(arrival="diurnal", duration_s=T)`` over half a period: Λ(0, P/2) at r = 5/s, P = 600 s, a = 0.5 is
    1977.5 requests (a flat 5/s would bring 1500, 10 sd away)."""
    r, period, a = 5.0, 600.0, 0.5
    h100 = get_gpu("h100-sxm")
    lam = float(_expected(r, a, period, 0.0, period / 2))
    assert lam == pytest.approx(r * (period / 2 + a * period / math.pi))
    res = simulate(llama_8b, gpu=h100, input_len=64, output_len=8, rate=r, arrival="diurnal", duration_s=period / 2,
                   diurnal_period_s=period, diurnal_amplitude=a, seed=4)  # fmt: skip
    assert _within_5_sigma(res.requests, lam)
    flat = simulate(llama_8b, gpu=h100, input_len=64, output_len=8, rate=r, duration_s=period / 2, seed=4)
    assert _within_5_sigma(flat.requests, r * period / 2)


def test_the_cli_passes_the_period_and_amplitude_through():
    """``serve simulate --arrival diurnal`` with a 60 s period and amplitude 1 over its first half: Λ = r (30 + 60/π)
    = 98.2 at 2/s; the trough half (rate → 0 at 45 s) brings r (30 − 60/π) = 21.8."""
    from typer.testing import CliRunner

    from scaleright.cli.main import app

    base = ["serve", "simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--rate", "2", "--input-len", "64",
            "--output-len", "8", "--arrival", "diurnal", "--diurnal-period-s", "60", "--diurnal-amplitude", "1",
            "--json"]  # fmt: skip
    counts = []
    for seed in range(5):
        r = CliRunner().invoke(app, [*base, "--duration-s", "30", "--seed", str(seed)])
        assert r.exit_code == 0, r.output
        counts.append(json.loads(r.output)["requests"])
    lam = float(_expected(2.0, 1.0, 60.0, 0.0, 30.0))
    assert lam == pytest.approx(2 * (30 + 60 / math.pi))
    assert _within_5_sigma(counts, lam)
    assert abs(np.mean(counts) - lam) <= 5 * math.sqrt(lam / 5)  # 98.2 ± 22, far from the trough half's 21.8


# ---- a fleet that autoscales through the day -----------------------------------------------------------------------

P, R, A = 7200.0, 10.0, 0.8  # a "day" of two hours; mean 10/s, from 2/s at the trough to 18/s at the peak
S = 1.0  # seconds per request: 100 iterations of the toy's 10 ms (prefill + 99 decode steps, one sequence at a time)
TARGET, INTERVAL, COLD, DELAY = 0.5, 30.0, 20.0, 120.0


def _need(t):
    """The settled replica count before the ceiling: rate(t) · S / target."""
    return R * (1 + A * np.sin(2 * np.pi * np.asarray(t) / P)) * S / TARGET


@pytest.fixture(scope="module")
def day():
    arr = diurnal(np.random.default_rng(5), rate=R, n=int(R * P * 1.2), period_s=P, amplitude=A)
    arr = arr[arr <= P]
    n = len(arr)
    scale = Autoscale(max_replicas=64, min_replicas=1, metric="utilisation", target=TARGET, interval_s=INTERVAL,
                      cold_start_s=COLD, scale_down_delay_s=DELAY)  # fmt: skip
    # start at the settled count of t = 0 (rate r: 20 replicas), so the day is not spent climbing from one
    pool = PoolSpec("pool", ToyModel(fixed_s=0.01, per_prefill_token_s=0.0), SchedulerConfig(1, 256), 100_000, 1,
                    replicas=20, autoscale=scale, price_usd_per_gpu_hour=1.0)  # fmt: skip
    res = run_fleet(Environment(0), [pool], [ServiceSpec("s", arr, np.full(n, 16), np.full(n, 100), tiers=["pool"])])
    return n, res


def test_each_request_takes_the_toys_hundred_iterations(day):
    """At a busy share near the 0.5 target nobody queues: the median end-to-end time is S = 100 x 10 ms."""
    _, res = day
    assert res.services["s"]["e2e_ms"]["p50"] == pytest.approx(S * 1e3, rel=1e-9)


def test_the_replica_count_follows_the_daily_curve_within_its_lags(day):
    """Sampled every 10 s and averaged over 10-minute windows, the billed count lies between the settled count of
    the load it can have seen (up: at most interval + cold start ago) and the highest settled count over the
    scale-down hold (delay + 2 intervals + cold start back). The margin is 3 sd of one interval's estimate of the
    count at the peak rate: √(rate · interval) arrivals of S each, over interval · target: √(18 / 30) · 1 / 0.5."""
    _, res = day
    tl = np.asarray(res.pools["pool"]["replicas_over_time"], dtype=float)
    ts = np.arange(300.0, P - 300.0, 10.0)
    billed = tl[np.searchsorted(tl[:, 0], ts, side="right") - 1, 2]
    hold = DELAY + 2 * INTERVAL + COLD
    lo = np.asarray([math.ceil(_need(np.linspace(t - COLD - INTERVAL, t - COLD, 31)).min()) for t in ts])
    hi = np.asarray([math.ceil(_need(np.linspace(t - hold, t, 101)).max()) for t in ts])
    margin = 3 * math.sqrt(R * (1 + A) / INTERVAL) * S / TARGET
    for w in range(0, int(P), 600):
        m = (ts >= w) & (ts < w + 600)
        if m.any():
            assert lo[m].mean() - margin <= billed[m].mean() <= hi[m].mean() + margin, w
    # the day's extremes: ⌈18 · 1 / 0.5⌉ = 36 replicas at the peak, ⌈2 · 1 / 0.5⌉ = 4 at the trough
    near_peak = billed[np.abs(ts - P / 4) < 300].mean()
    near_trough = billed[np.abs(ts - 3 * P / 4) < 300].mean()
    assert 36 - margin <= near_peak <= 36 + margin
    assert 4 - margin <= near_trough <= 4 + margin


def test_the_count_lags_above_the_load_on_the_way_down(day):
    """The scale-down hold keeps replicas the falling load no longer needs; a rising load is followed within one
    interval and a cold start. So the count's excess over rate(t) · S / target is larger on the falling quarter
    (P/4 to P/2) than on the rising one (0 to P/4), whose loads are the same values in reverse."""
    _, res = day
    tl = np.asarray(res.pools["pool"]["replicas_over_time"], dtype=float)
    ts = np.arange(0.0, P / 2, 10.0)
    excess = tl[np.searchsorted(tl[:, 0], ts, side="right") - 1, 2] - _need(ts)
    assert excess[ts >= P / 4].mean() > excess[ts < P / 4].mean()


def test_per_second_billing_follows_the_curve_and_always_on_pays_the_peak(day):
    """Billed replica-seconds are at least the settled need's integral over the day, ∫ rate · S / target dt =
    r · P · S / target = 144,000 (the ceiling and the lags only add). Always-on pays the peak count (about
    ⌈18 / 0.5⌉ = 36) all day against a mean near 20 + ½ (the ceiling) + the hold on the way down: per-second
    billing is well under three quarters of it."""
    n, res = day
    p = res.pools["pool"]
    assert p["replica_seconds_billed"] >= R * P * S / TARGET
    assert 36 <= p["peak_replicas"] <= 64
    assert p["usd_per_second_billing"] < 0.75 * p["usd_always_on"]
    assert res.services["s"]["requests"] == n


def test_a_pool_started_at_one_replica_at_most_doubles_each_interval():
    """At target 0.5 a busy share can at most ask for 1 / 0.5 = 2 times the replicas it has, so a pool that starts
    with one replica under 10/s of 1 s requests (20 needed) holds at most 2^k after k intervals."""
    arr = diurnal(np.random.default_rng(9), rate=R, n=4000, period_s=P, amplitude=0.0)
    n = len(arr)
    scale = Autoscale(max_replicas=64, metric="utilisation", target=TARGET, interval_s=INTERVAL, cold_start_s=COLD,
                      scale_down_delay_s=DELAY)  # fmt: skip
    pool = PoolSpec("pool", ToyModel(fixed_s=0.01, per_prefill_token_s=0.0), SchedulerConfig(1, 256), 100_000, 1,
                    replicas=1, autoscale=scale)  # fmt: skip
    res = run_fleet(Environment(0), [pool], [ServiceSpec("s", arr, np.full(n, 16), np.full(n, 100), tiers=["pool"])])
    tl = np.asarray(res.pools["pool"]["replicas_over_time"], dtype=float)
    for k in range(1, 7):
        before_next = tl[tl[:, 0] < (k + 1) * INTERVAL]
        assert before_next[:, 2].max() <= 2**k, k
    assert tl[:, 2].max() >= 20  # and it does reach the need


def test_a_falling_load_is_followed_with_the_stabilisation_window_not_in_steps_below_it():
    """The Kubernetes HPA scales down to the highest recommendation of its stabilisation window (the scale-down
    delay W), so on a falling load the count at t is at least the settled need of t − W: rate(t − W) · S / target
    (the oldest tick of the window measured that load; the ceiling and the window's maximum only add). With
    W = 600 s the falling day's need drops by up to 2π · 0.8 · 20 / 7200 · 600 = 8.4 replicas over one window:
    a rule that, once the window has passed, drops straight to the latest count would sit several replicas below.
    Averaged over 10-minute windows from P/4 + W to 3P/4; the margin of 1 replica covers the drift of one
    interval (2π · 0.8 · 20 / 7200 · 30 / 2 = 0.2) and the noise of a window's mean."""
    window = 600.0
    for seed in (5, 6):
        arr = diurnal(np.random.default_rng(seed), rate=R, n=int(R * P * 1.2), period_s=P, amplitude=A)
        arr = arr[arr <= P]
        n = len(arr)
        scale = Autoscale(max_replicas=64, metric="utilisation", target=TARGET, interval_s=INTERVAL,
                          cold_start_s=COLD, scale_down_delay_s=window)  # fmt: skip
        pool = PoolSpec("pool", ToyModel(fixed_s=0.01, per_prefill_token_s=0.0), SchedulerConfig(1, 256), 100_000,
                        1, replicas=20, autoscale=scale)  # fmt: skip
        res = run_fleet(Environment(0), [pool], [ServiceSpec("s", arr, np.full(n, 16), np.full(n, 100),
                                                             tiers=["pool"])])  # fmt: skip
        tl = np.asarray(res.pools["pool"]["replicas_over_time"], dtype=float)
        ts = np.arange(P / 4 + window, 3 * P / 4, 10.0)
        lag = tl[np.searchsorted(tl[:, 0], ts, side="right") - 1, 2] - _need(ts - window)
        for w in np.arange(ts[0], ts[-1], 600.0):
            m = (ts >= w) & (ts < w + 600.0)
            assert lag[m].mean() >= -1.0, (seed, w)


# ---- the planner's hourly fleet ------------------------------------------------------------------------------------


def test_the_planners_hourly_fleet_is_the_peak_fleet_scaled_by_each_hours_rate():
    """A diurnal scenario is sized at its peak, r (1 + a) (1 + headroom), on n replicas; the autoscaling lever gives
    each hour the replicas for its midpoint rate r (1 + a sin(2π (h + ½) / 24)) (1 + headroom), each replica carrying
    what one carried at the peak. Rate and headroom cancel: hour h needs ⌈n (1 + a sin(2π (h + ½) / 24)) / (1 + a)⌉.
    The midpoints 5.5 h and 6.5 h straddle the 6 h peak (equal sines), 17.5 h and 18.5 h the trough, so the day is
    symmetric about them, and the mean over the day's 24 midpoints is r exactly (their sines sum to zero)."""
    from scaleright.plan.planner import plan
    from scaleright.plan.scenario import parse_scenario
    from scaleright.plan.serving import hourly_rates

    a, rate = 0.9, 40.0
    scn = parse_scenario({"model": "llama-3.1-8b", "task": "inference",
                          "inference": {"requests_per_s": rate, "input_len": 1024, "output_len": 256,
                                        "ttft_slo_s": 0.5, "tpot_slo_s": 0.05, "arrival": "diurnal",
                                        "diurnal_amplitude": a},
                          "constraints": {"gpu_types": ["h100-sxm"], "max_gpus": 32}})  # fmt: skip
    rates = hourly_rates(scn.inference, rate)
    assert np.mean(rates) == pytest.approx(rate, rel=1e-12)
    assert rates[5] == pytest.approx(rates[6]) and rates[17] == pytest.approx(rates[18])
    assert rates[5] == pytest.approx(rate * (1 + a * math.cos(math.pi / 24)))  # sin(2π·5.5/24) = cos(π/24)
    res = plan(scn)
    rec = res.recommendation
    n = rec["layout"]["replicas"]
    assert rec["sized_at_requests_per_s"] == pytest.approx(rate * (1 + a) * (1 + scn.inference.headroom))
    lev = next(x for x in res.explanations if x["topic"] == "serving_levers")["data"]["levers"]
    auto = next(r for r in lev if r["lever"] == "autoscaling")
    want = [math.ceil(n * (1 + a * math.sin(2 * math.pi * (h + 0.5) / 24)) / (1 + a) - 1e-9) for h in range(24)]
    assert auto["replicas_by_hour"] == want
    assert auto["gpus_with"] == pytest.approx(sum(max(k, 1) for k in want) / 24 * rec["layout"]["tp"])
    assert auto["gpus_without"] == rec["gpus"] > auto["gpus_with"]
