"""Invariants of the replica scheduler over random small workloads (Hypothesis, toy iteration model): every request
finishes or is rejected, every KV block comes back, and no request is served faster than it could be alone."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from serve_toy import ToyModel, run_toy


@settings(max_examples=60)
@given(n=st.integers(1, 30), seed=st.integers(0, 2**16), kv_blocks=st.integers(4, 80), max_seqs=st.integers(1, 8),
       budget=st.integers(8, 128), replicas=st.integers(1, 3),
       router=st.sampled_from(["round-robin", "least-outstanding"]))  # fmt: skip
def test_random_workloads_finish_return_every_block_and_respect_lower_bounds(n, seed, kv_blocks, max_seqs, budget,
                                                                             replicas, router):  # fmt: skip
    rng = np.random.default_rng(seed)
    arrivals = np.sort(rng.uniform(0, 0.3, n))
    inputs, outputs = rng.integers(1, 120, n), rng.integers(1, 40, n)
    budget = max(budget, max_seqs)
    model = ToyModel(fixed_s=0.01, per_prefill_token_s=1e-4)
    _env, fleet = run_toy(arrivals, inputs, outputs, kv_blocks=kv_blocks, max_num_seqs=max_seqs,
                         max_num_batched_tokens=budget, model=model, replicas=replicas, router=router,
                         log=False)  # fmt: skip
    finished = [r for rep in fleet.replicas for r in rep.finished]
    rejected = [r for rep in fleet.replicas for r in rep.rejected]
    assert len(finished) + len(rejected) == n
    for rep in fleet.replicas:
        assert rep.free == rep.total_blocks and rep.B == 0 and not rep.prefilling and not rep.waiting
        assert rep.in_system == 0
    for r in finished:
        ttft = r.first_token_s - r.arrival_s
        alone = math.ceil(r.input_tokens / budget) * model.fixed_s + r.input_tokens * model.per_token
        assert ttft >= alone - 1e-12
        assert r.finish_s - r.first_token_s >= (r.output_tokens - 1) * model.fixed_s - 1e-12
    for r in rejected:
        assert -(-(r.input_tokens + r.output_tokens) // 16) > kv_blocks


@settings(max_examples=40)
@given(n=st.integers(1, 30), seed=st.integers(0, 2**16), kv_blocks=st.integers(4, 40), max_seqs=st.integers(1, 8))
def test_swap_preemption_keeps_the_same_invariants(n, seed, kv_blocks, max_seqs):
    rng = np.random.default_rng(seed)
    arrivals = np.sort(rng.uniform(0, 0.3, n))
    inputs, outputs = rng.integers(1, 120, n), rng.integers(1, 60, n)
    _env, fleet = run_toy(arrivals, inputs, outputs, kv_blocks=kv_blocks, max_num_seqs=max_seqs,
                          max_num_batched_tokens=64, preemption="swap", log=False)  # fmt: skip
    rep = fleet.replicas[0]
    assert len(rep.finished) + len(rep.rejected) == n
    assert rep.free == rep.total_blocks and rep.B == 0 and not rep.waiting and not rep._joining
    assert all(r.generated == r.output_tokens for r in rep.finished)


@settings(max_examples=6, deadline=None)
@given(input_len=st.integers(16, 2048), output_len=st.integers(2, 512), seqs=st.sampled_from([8, 64, 256]))
def test_the_saturated_rate_stays_under_the_flop_and_weight_streaming_bounds(input_len, output_len, seqs):
    """No replica completes requests faster than its dense bf16 peak allows for 2 · params FLOPs per prompt and
    output token, nor than weight streaming allows: every decode iteration reads all weights from HBM once and
    samples at most ``max_num_seqs`` tokens, so output tokens/s <= max_num_seqs · bandwidth / weight bytes.
    ``capacity`` searches no higher than this rate."""
    from scaleright.catalog import get_gpu
    from scaleright.serve.simulate import build_model, saturated_rate
    from scaleright.workload import load_model
    from scaleright.workload.params import count_params

    spec, gpu = load_model("llama-3.1-8b"), get_gpu("h100-sxm")
    params = count_params(spec).total
    model = build_model(spec, gpu=gpu, max_num_seqs=seqs)
    rate, res = saturated_rate(spec, model=model, clients=seqs, waves=4, gpu=gpu, input_len=input_len,
                               output_len=output_len, max_num_seqs=seqs)  # fmt: skip
    flops = gpu.dense_tflops["bf16"] * 1e12 / (2 * params * (input_len + output_len))
    stream = seqs * gpu.hbm_bandwidth_tb_per_s * 1e12 / (2 * params) / output_len  # bf16: 2 bytes a parameter
    assert res.rejected == 0 and 0 < rate < min(flops, stream)
