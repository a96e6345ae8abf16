"""Bus bandwidth against the nccl-tests definition (doc/PERFORMANCE.md) on fixed inputs."""

from __future__ import annotations

import pytest

from scaleright.bench import algbw_gb_per_s, bus_factor, busbw_gb_per_s
from scaleright.bench.comm_worker import elements_for
from scaleright.bench.config import parse_ops, parse_sizes
from scaleright.errors import InputError


def nccl_tests_busbw(op: str, size: float, t: float, n: int) -> float:
    """PERFORMANCE.md, written out: algbw = S/t; all-reduce x 2(n-1)/n; all-gather, reduce-scatter x (n-1)/n."""
    algbw = size / t / 1e9
    return algbw * (2 * (n - 1) / n if op == "all-reduce" else (n - 1) / n)


@pytest.mark.parametrize("op", ["all-reduce", "all-gather", "reduce-scatter"])
@pytest.mark.parametrize("n", [1, 2, 8, 16])
def test_busbw_matches_nccl_tests(op, n):
    got = busbw_gb_per_s(op=op, size_bytes=2**30, time_s=0.0125, world_size=n)
    assert got == pytest.approx(nccl_tests_busbw(op, 2**30, 0.0125, n))


def test_fixed_example_eight_ranks_one_gb_in_ten_ms():
    assert algbw_gb_per_s(size_bytes=1e9, time_s=0.01) == pytest.approx(100.0)
    assert busbw_gb_per_s(op="all-reduce", size_bytes=1e9, time_s=0.01, world_size=8) == pytest.approx(175.0)
    assert busbw_gb_per_s(op="all-gather", size_bytes=1e9, time_s=0.01, world_size=8) == pytest.approx(87.5)


def test_one_rank_moves_nothing_over_the_bus():
    assert bus_factor("all-reduce", 1) == 0.0


def test_buffer_is_rounded_down_to_whole_chunks_per_rank():
    assert elements_for(1000, world_size=3, element_bytes=4) == 249  # 250 elements -> 83 per rank
    assert elements_for(1, world_size=4, element_bytes=4) == 4  # at least one element per rank


def test_sizes_are_decimal_or_binary_bytes():
    assert parse_sizes("1KB,1MB,64MB") == (1000, 10**6, 64 * 10**6)
    assert parse_sizes("1KiB, 2MiB,512") == (1024, 2 * 2**20, 512)


def test_bad_size_and_op_name_the_item():
    with pytest.raises(InputError, match="bad size '1XB'"):
        parse_sizes("1KB,1XB")
    with pytest.raises(InputError, match="unknown op 'all-to-all'"):
        parse_ops("all-reduce,all-to-all")
