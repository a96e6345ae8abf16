"""The engine profiles against the measured rows they are fitted to (regression pins, not out-of-sample tests).

Rows of ``validation/reference`` named by file and line; tolerance 25 % as in ``tests/test_accuracy.py`` (the
fitted profiles' median |error| per source is ~2-12 %, ``benchmarks/serve_accuracy.py``), enough to catch a unit
slip, a lost overhead or a bandwidth fraction applied twice. Each case is one short simulation.
"""

from __future__ import annotations

import pytest

from scaleright.catalog import get_gpu
from scaleright.serve import simulate

TOLERANCE = 0.25


@pytest.mark.parametrize(("line", "model", "gpus", "i", "o", "ttft_ms", "itl_ms"), [
    (703, "llama-3.1-70b", 4, 467, 256, 62, 21),
    (709, "llama-3.1-70b", 4, 467, 16, 53, 18),
    (721, "llama-3.1-8b", 1, 467, 256, 23, 8),
    (727, "llama-3.1-8b", 1, 467, 16, 19, 7),
])  # fmt: skip
def test_trtllm_online_serving_at_two_requests_per_second(load_spec, line, model, gpus, i, o, ttft_ms, itl_ms):
    # infer_measured.csv line <line>: TensorRT-LLM 0.14 + Triton, H100 80GB, QPS=2, mean TTFT and mean ITL
    res = simulate(load_spec(model), gpu=get_gpu("h100-sxm"), gpus=gpus, tp=gpus, input_len=i, output_len=o, rate=2,
                   requests=200, engine="trtllm")  # fmt: skip
    assert res.ttft_ms["mean"] == pytest.approx(ttft_ms, rel=TOLERANCE)
    assert res.itl_ms["mean"] == pytest.approx(itl_ms, rel=TOLERANCE)


def test_vllm_rocm_batch_1_latency_of_405b_on_eight_mi300x(load_spec):
    # components/serving_engine.csv line 49: vLLM benchmark_latency, Llama 3.1 405B FP8, tp8, 128 in / 128 out: 3.53 s
    res = simulate(load_spec("llama-3.1-405b"), gpu=get_gpu("mi300x"), gpus=8, tp=8, input_len=128, output_len=128,
                   concurrency=1, requests=1, engine="vllm", precision="fp8")  # fmt: skip
    assert res.e2e_ms["mean"] / 1e3 == pytest.approx(3.53, rel=TOLERANCE)


def test_llama_cpp_single_stream_decode_on_rtx_4090(load_spec):
    # components/serving_engine.csv line 95: llama.cpp codellama-7b F16, tg128 at 61.03 tokens/s = 16.39 ms/token
    res = simulate(load_spec("llama-2-7b"), gpu=get_gpu("rtx-4090"), input_len=1, output_len=128, concurrency=1,
                   requests=1, engine="llama.cpp", precision="fp16")  # fmt: skip
    assert res.tpot_ms["mean"] == pytest.approx(1000 / 61.03, rel=TOLERANCE)
