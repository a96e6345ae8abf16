"""Scaling efficiency and cost per job, against the seed guide's worked example and as properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scaleright.bench import job_cost_usd, job_time_h, scaling_curve, scaling_efficiency, speedup
from scaleright.errors import InputError


def test_seed_example_four_gpus_at_3_2x_are_80_percent_efficient():
    assert scaling_efficiency(speedup=3.2, world_size=4) == pytest.approx(0.8)


def test_seed_cost_example_four_gpus_cost_125_against_100_for_one():
    one = job_cost_usd(world_size=1, price_usd_per_gpu_hour=1.0, job_time_h=100)
    four = job_cost_usd(world_size=4, price_usd_per_gpu_hour=1.0, job_time_h=100 / 3.2)
    assert (one, four) == (pytest.approx(100.0), pytest.approx(125.0))


def test_efficiency_against_a_base_larger_than_one():
    assert scaling_efficiency(speedup=1.5, world_size=4, base_world_size=2) == pytest.approx(0.75)


def test_curve_uses_the_smallest_world_size_as_base():
    curve = scaling_curve({2: 100.0, 4: 180.0, 8: 300.0})
    assert curve[2] == {"speedup": 1.0, "scaling_efficiency": 1.0}
    assert curve[4]["scaling_efficiency"] == pytest.approx(0.9)
    assert curve[8]["speedup"] == pytest.approx(3.0)


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_non_positive_throughput_is_an_input_error(bad):
    with pytest.raises(InputError, match="throughput must be > 0"):
        speedup(throughput=bad, base_throughput=1.0)


@given(st.floats(1e-3, 1e9), st.integers(1, 4096))
def test_linear_throughput_means_efficiency_one(per_rank, n):
    curve = scaling_curve({1: per_rank, n: per_rank * n})
    assert curve[n]["scaling_efficiency"] == pytest.approx(1.0)


@given(st.integers(1, 1024), st.floats(0, 100), st.floats(1e-3, 1e6))
def test_cost_is_gpus_times_price_times_time(n, price, hours):
    cost = job_cost_usd(world_size=n, price_usd_per_gpu_hour=price, job_time_h=hours)
    assert cost == pytest.approx(n * price * hours)


@given(st.floats(1.0, 1e12), st.floats(1e-3, 1e9))
def test_job_time_is_tokens_over_throughput(tokens, tps):
    assert job_time_h(job_tokens=tokens, tokens_per_s=tps) * 3600 * tps == pytest.approx(tokens)
