"""ZeRO-1 (Megatron-Core distributed optimizer) data-parallel overlap: hand-derived queue exposures and physics.

Expected values are worked out by hand from the schedule (one communication stream, buckets in order), not from
the code: see each test's comment.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleright.catalog import get_gpu
from scaleright.estimate.framework import FRAMEWORKS, Framework
from scaleright.estimate.train import streamed_exposed_s, train_step_arrays, zero1_exposed_s
from scaleright.workload import load_model


def test_two_buckets_during_one_backward():
    # backward 1.0 s produces bucket 1 at 0.5 s and bucket 2 at 1.0 s; each takes 0.8 s on the one stream.
    # bucket 1 runs 0.5 -> 1.3, bucket 2 1.3 -> 2.1: 1.1 s after the backward ends
    assert math.isclose(float(streamed_exposed_s(1.6, 0.8, 1.0, 2)), 1.1)
    # buckets of 0.3 s: bucket 1 0.5 -> 0.8, bucket 2 1.0 -> 1.3: only the last bucket, 0.3 s
    assert math.isclose(float(streamed_exposed_s(0.6, 0.3, 1.0, 2)), 0.3)
    # one bucket overlaps nothing
    assert math.isclose(float(streamed_exposed_s(0.7, 0.7, 5.0, 1)), 0.7)


def test_two_bucket_gather_before_forward():
    # forward 1.0 s needs bucket 1 at 0 and bucket 2 at 0.5 s of its compute; gathers of 0.8 s each from t=0:
    # bucket 1 at 0.8 (forward starts 0.8 late), bucket 2 at 1.6, needed at 0.8 + 0.5 = 1.3: 0.3 more, 1.1 s in all
    assert math.isclose(float(streamed_exposed_s(1.6, 0.8, 1.0, 2)), 1.1)


def test_interleaved_chunks_reduce_after_their_last_backward():
    # v = 2 chunks, pp = 4 rounds, chunk backward b_c = 0.25 s (bwd of all layers 0.5 s), R = 2.0 s (1.0 per chunk).
    # chunk 1 starts at -4 * 0.25 = -1.0 s and ends at 0.0; chunk 0 starts at 0.0 (its last backward just ended),
    # ends at 1.0: 1.0 s exposed. Gathers of 0 s add nothing.
    got = zero1_exposed_s(2.0, 0.0, 0.1, 0.0, n_buckets=4, chunks=2, rounds=4, bwd_s=0.5, fwd_s=0.25)
    assert math.isclose(float(got), 1.0)
    # R = 4.0 (2.0 per chunk): chunk 1 -1.0 -> 1.0, chunk 0 queued 1.0 -> 3.0: 3.0 s exposed
    got = zero1_exposed_s(4.0, 0.0, 0.1, 0.0, n_buckets=4, chunks=2, rounds=4, bwd_s=0.5, fwd_s=0.25)
    assert math.isclose(float(got), 3.0)


def test_interleaved_gathers_one_chunk_ahead():
    # v = 2, rounds 2, chunk forward f_c = 0.5 s (fwd 1.0 s); A = 3.0 s (1.5 per chunk), 1 bucket per chunk:
    # chunk 0's gather 1.5 s all before its forward, chunk 1's 1.5 s under chunk 0's 2 × 0.5 s forwards: 0.5 more
    got = zero1_exposed_s(0.0, 3.0, 0.0, 1.5, n_buckets=1, chunks=2, rounds=2, bwd_s=1.0, fwd_s=1.0)
    assert math.isclose(float(got), 2.0)


finite = st.floats(min_value=0.0, max_value=10.0, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(comm=finite, frac=st.floats(min_value=0.0, max_value=1.0), window=finite,
       n=st.integers(min_value=1, max_value=64), v=st.integers(min_value=1, max_value=8),
       rounds=st.integers(min_value=1, max_value=16), speedup=st.floats(min_value=1.0, max_value=10.0))
def test_exposure_is_bounded_and_falls_with_bandwidth(comm, frac, window, n, v, rounds, speedup):  # fmt: skip
    bucket = comm * frac / n * v if v > 1 else comm * frac
    kw = dict(n_buckets=n, chunks=v, rounds=rounds, bwd_s=2 * window, fwd_s=window)
    e = float(zero1_exposed_s(comm, comm / 2, min(bucket, comm), min(bucket, comm) / 2, **kw))
    assert -1e-12 <= e <= comm + comm / 2 + 1e-9  # never negative, never above the unoverlapped collectives
    faster = float(zero1_exposed_s(comm / speedup, comm / 2 / speedup, min(bucket, comm) / speedup,
                                   min(bucket, comm) / 2 / speedup, **kw))  # fmt: skip
    assert faster <= e + 1e-12  # more DP bandwidth never exposes more


H100 = get_gpu("h100-sxm")
SPEC = load_model("llama-3.1-8b")


def _step(fw: Framework, **layout: object) -> dict[str, np.ndarray]:
    kw: dict = dict(gpu=H100, seq_len=4096, global_batch=256, tp=1, pp=1, dp=16, zero=1, micro_batch=1)
    kw.update(layout)
    return train_step_arrays(SPEC, framework=fw, **kw)


def test_zero1_overlap_never_exposes_more_than_no_overlap():
    for fw in (FRAMEWORKS["megatron-core"], FRAMEWORKS["megatron-core"].with_overrides(grad_reduce_fp32=True)):
        for lay in ({}, {"tp": 2, "pp": 4, "dp": 2, "virtual_stages": 2}, {"tp": 2, "pp": 4, "dp": 2}):
            on = _step(fw, **lay)
            off = _step(fw.with_overrides(dp_bucket_overlap=False), **lay)
            assert 0.0 < float(on["t_dp_comm"]) <= float(off["t_dp_comm"])
            assert float(on["step_time_s"]) <= float(off["step_time_s"])


def test_fp32_reduction_exposes_at_least_the_16_bit_one():
    fw = FRAMEWORKS["megatron-core"]
    bf16 = _step(fw.with_overrides(grad_reduce_fp32=False), dp=32, global_batch=64)
    fp32 = _step(fw.with_overrides(grad_reduce_fp32=True), dp=32, global_batch=64)
    assert float(fp32["t_dp_comm"]) >= float(bf16["t_dp_comm"])
