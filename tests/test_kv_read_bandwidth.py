"""Decode attention's KV-cache reads: a streaming read at the STREAM-like rate of the measured HBM ceiling
(``estimate.iteration`` module docstring, "KV reads"), never faster than the datasheet bandwidth."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scaleright.catalog import get_gpu
from scaleright.estimate.calibration import DEFAULT_CALIBRATION
from scaleright.estimate.engines import ENGINES
from scaleright.estimate.iteration import IterationModel, iteration_time_s

# components/hbm_bandwidth.csv: NVIDIA H100 80GB HBM3 (Azure ND H100 v5), STREAM-style Triad 2.97 TB/s
H100_TRIAD_B_PER_S = 2.97e12


def _kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, bytes_per_value: float) -> float:
    """K and V of every layer for one token (GQA: kv_heads heads of head_dim values each)."""
    return 2.0 * layers * kv_heads * head_dim * bytes_per_value


@pytest.mark.parametrize("kv_precision, bytes_per_value", [("bf16", 2.0), ("fp8", 1.0)])
def test_a_context_token_costs_its_kv_bytes_at_the_measured_stream_rate(load_spec, kv_precision, bytes_per_value):
    """Llama 3.1 8B (32 layers, 8 KV heads of 128) on H100: one more token of context in a large decode batch costs
    its 2·32·8·128 values over the measured STREAM Triad bandwidth × the streaming kernels' share
    (``memory_efficiency``), not over the weight GEMVs' smaller ``decode_memory_efficiency`` share."""
    spec, gpu = load_spec("llama-3.1-8b"), get_gpu("h100-sxm")
    kw = dict(gpu=gpu, decode_batch=512, precision="fp8", kv_precision=kv_precision, engine=None)
    t0 = iteration_time_s(spec, decode_context_tokens=512 * 1000, **kw)
    t1 = iteration_time_s(spec, decode_context_tokens=512 * 3000, **kw)
    per_token_s = (t1 - t0) / (512 * 2000)
    expected = _kv_bytes_per_token(32, 8, 128, bytes_per_value) / (H100_TRIAD_B_PER_S
                                                                    * DEFAULT_CALIBRATION.memory_efficiency)
    assert per_token_s == pytest.approx(expected, rel=0.01)
    # and faster than the weight reads' share would give (the share is below the streaming one)
    assert DEFAULT_CALIBRATION.decode_memory_efficiency < DEFAULT_CALIBRATION.memory_efficiency


@given(gpu_id=st.sampled_from(("h100-sxm", "h200", "a100-sxm-80gb", "mi300x", "l40s", "rtx-4090", "b200")),
       name=st.sampled_from(("llama-3.1-8b", "llama-3.1-70b", "mistral-7b", "qwen2.5-7b")),
       kv=st.sampled_from(("bf16", "fp8")), engine=st.sampled_from((None, *sorted(ENGINES))),
       tp=st.sampled_from((1, 2, 4)))  # fmt: skip
def test_kv_reads_never_beat_the_datasheet_bandwidth(load_spec, gpu_id, name, kv, engine, tp):
    """Per context token, decode attention takes at least its KV bytes per GPU over the datasheet bandwidth."""
    spec, gpu = load_spec(name), get_gpu(gpu_id)
    m = IterationModel(spec, gpu=gpu, tp=tp, precision="bf16", kv_precision=kv, engine=engine, max_rows=0)
    bpv = 1.0 if kv == "fp8" else 2.0
    kv_heads_per_gpu = max(spec.kv_heads // tp, 1)
    floor = _kv_bytes_per_token(spec.layers, kv_heads_per_gpu, spec.head_dim, bpv) / (gpu.hbm_bandwidth_tb_per_s * 1e12)
    assert m.decode_slope_s >= floor * (1 - 1e-9)
