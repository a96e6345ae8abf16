"""The steady state of ``estimate.infer`` obeys Little's law, and its TPOT is the inter-token latency a benchmark
measures, (e2e − TTFT) / (O − 1), not the mean iteration time (``estimate.infer`` module docstring)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scaleright.catalog import get_gpu
from scaleright.estimate.calibration import DEFAULT_CALIBRATION
from scaleright.estimate.engines import calibrated_engine
from scaleright.estimate.infer import infer_arrays
from scaleright.estimate.iteration import iteration_time_s


@given(name=st.sampled_from(("llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b")),
       gpu_id=st.sampled_from(("h100-sxm", "h200", "a100-sxm-80gb")), tp=st.sampled_from((1, 2, 4, 8)),
       batch=st.integers(1, 512), i_len=st.integers(1, 4096), o_len=st.integers(2, 2048))  # fmt: skip
def test_littles_law_holds_in_the_steady_state(load_spec, name, gpu_id, tp, batch, i_len, o_len):
    """Little's law: the concurrency is the request rate times the time a request spends in the engine, and a
    request spends its whole end-to-end latency there but for the frontend's share (not iteration time)."""
    spec, gpu = load_spec(name), get_gpu(gpu_id)
    ss = infer_arrays(spec, gpu=gpu, tp=tp, pp=1, batch=batch, input_len=i_len, output_len=o_len)
    in_engine_s = float(ss["e2e_latency_s"]) - calibrated_engine(DEFAULT_CALIBRATION).frontend_latency_s
    assert float(ss["requests_per_s"]) * in_engine_s == pytest.approx(batch, rel=1e-9)


@pytest.mark.parametrize("o_len", [2, 16, 256])
def test_a_lone_sequence_waits_one_decode_step_per_token_its_own_prefill_is_its_ttft(load_spec, o_len):
    """Concurrency 1: the iterations after the first run that sequence's decode step alone, so every inter-token
    gap is that step (at the mean context I + O/2: the KV read is affine in the context); the prefill iteration
    is the time to the first token and is no part of TPOT."""
    spec, gpu = load_spec("llama-3.1-8b"), get_gpu("h100-sxm")
    i_len = 467
    ss = infer_arrays(spec, gpu=gpu, tp=1, pp=1, batch=1, input_len=i_len, output_len=o_len)
    dec = iteration_time_s(spec, gpu=gpu, decode_batch=1, decode_context_tokens=i_len + o_len / 2, engine=None,
                           kv_precision="bf16")  # fmt: skip
    pre = iteration_time_s(spec, gpu=gpu, prefill_tokens=i_len, engine=None, kv_precision="bf16")
    assert float(ss["tpot_s"]) == pytest.approx(dec, rel=1e-9)
    assert float(ss["tpot_s"]) < pre  # a 467-token prefill is longer than one decode step
    assert float(ss["ttft_s"]) == pytest.approx(pre + calibrated_engine(DEFAULT_CALIBRATION).frontend_latency_s,
                                                rel=1e-9)  # fmt: skip
