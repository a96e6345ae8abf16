"""The accumulator of an engine's GEMMs sets their tensor rate on GeForce parts, never above the datasheet.

GeForce RTX 30 / 40 / 50 run FP16 MMA with an FP32 accumulator at half the FP16-accumulate rate (GA102, Ada and RTX
Blackwell whitepapers, Appendix A: RTX 4090 165.2 vs 330.3 dense TFLOP/s); data-center parts run both at one rate;
bf16 MMA has an FP32 accumulator only. llama.cpp's CUDA backend multiplies fp16 (and dequantised) matrices with
cuBLAS ``CUBLAS_COMPUTE_16F``; vLLM, SGLang and TensorRT-LLM accumulate in fp32. The datasheet rates below are
written out from those tables, not read from the model."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleright.catalog import get_gpu
from scaleright.estimate.engines import ENGINES, get_engine
from scaleright.estimate.iteration import IterationModel, iteration_time_s

# dense TFLOP/s (whitepapers, Appendix A): (fp16 with FP32 accumulate = bf16, fp16 with FP16 accumulate, int8 TOPS)
DATASHEET = {"rtx-3090": (71.0, 142.0, 284.0), "rtx-4090": (165.2, 330.3, 660.6), "h100-sxm": (989.0, 989.0, 1979.0),
             "l40s": (362.0, 362.0, 733.0), "a100-80gb": (312.0, 312.0, 624.0)}  # fmt: skip
ACCUMULATE = {"llama.cpp": "fp16", "vllm": "fp32", "sglang": "fp32", "trtllm": "fp32"}  # the engines' cuBLAS calls


def _block_params(spec) -> float:
    """Weights of the attention projections and the gated FFN of every layer (hand count of a dense llama)."""
    h, q, kv, f = spec.hidden, spec.q_dim, spec.kv_dim, spec.ffn_hidden
    return spec.layers * (h * (q + 2 * kv) + q * h + 3 * h * f)


def _rate_in_use(gpu_id: str, engine: str, precision: str, rows: int) -> float:
    """The datasheet rate the engine's GEMMs may reach (FLOP/s): the int8 rate for GGUF kernels on 32 rows or
    fewer, else the 16-bit rate of the accumulator in use (fp16 operands only take the fp16-accumulate rate)."""
    fp32_acc, fp16_acc, int8 = DATASHEET[gpu_id]
    if precision.startswith("q") and not (engine == "llama.cpp" and rows > 32):
        return int8 * 1e12
    fp16_operands = precision == "fp16" or precision.startswith("q")  # llama.cpp dequantises GGUF to fp16
    return (fp16_acc if fp16_operands and ACCUMULATE[engine] == "fp16" else fp32_acc) * 1e12


@settings(max_examples=60, deadline=None)
@given(gpu_id=st.sampled_from(sorted(DATASHEET)), engine=st.sampled_from(sorted(ENGINES)),
       precision=st.sampled_from(["fp16", "bf16", "q8_0", "q4_0"]), rows=st.integers(1, 8192))  # fmt: skip
def test_no_gemm_runs_faster_than_the_datasheet_rate_of_its_accumulator(load_spec, gpu_id, engine, precision, rows):
    if engine == "trtllm" and precision.startswith("q"):
        return  # TensorRT-LLM loads no GGUF file (refused)
    spec, gpu = load_spec("llama-2-7b"), get_gpu(gpu_id)
    model = IterationModel(spec, gpu=gpu, precision=precision, engine=engine, max_rows=0)
    flops = 2.0 * rows * _block_params(spec)
    # the layers' time (GEMMs plus non-negative terms) is never below their GEMM FLOPs over the datasheet rate
    assert float(model.fixed_s(rows)) >= flops / _rate_in_use(gpu_id, engine, precision, rows)
    # and the rate the model runs them at is that datasheet rate exactly, where it is 16-bit
    if not precision.startswith("q"):
        assert model.gemm_peak_flops == pytest.approx(_rate_in_use(gpu_id, engine, precision, rows))


@pytest.mark.parametrize("gpu_id", ["h100-sxm", "l40s", "a100-80gb", "rtx-6000-ada", "rtx-a6000", "mi300x"])
def test_the_accumulator_changes_nothing_where_the_datasheet_gives_one_rate(load_spec, gpu_id):
    """Data-center and professional parts (and AMD's, which accumulate in fp32) state no faster FP16-accumulate
    rate: llama.cpp's fp16 prefill costs the same with either accumulator."""
    spec, gpu = load_spec("llama-2-7b"), get_gpu(gpu_id)
    acc16 = get_engine("llama.cpp")
    acc32 = dataclasses.replace(acc16, gemm_accumulate="fp32")
    t = [iteration_time_s(spec, gpu=gpu, prefill_tokens=2048, precision="fp16", engine=e) for e in (acc16, acc32)]
    assert t[0] == t[1]


def test_bf16_weights_accumulate_in_fp32_whatever_the_engine(load_spec):
    spec, gpu = load_spec("llama-2-7b"), get_gpu("rtx-4090")
    acc16 = get_engine("llama.cpp")
    acc32 = dataclasses.replace(acc16, gemm_accumulate="fp32")
    t = [iteration_time_s(spec, gpu=gpu, prefill_tokens=2048, precision="bf16", engine=e) for e in (acc16, acc32)]
    assert t[0] == t[1]


def test_an_fp16_accumulator_at_most_halves_a_geforce_prefill(load_spec):
    """Twice the rate takes the compute-bound GEMMs' time down by half, and nothing else: the iteration gets
    faster, by less than half."""
    spec, gpu = load_spec("llama-2-7b"), get_gpu("rtx-4090")
    acc16 = get_engine("llama.cpp")
    acc32 = dataclasses.replace(acc16, gemm_accumulate="fp32")
    t16, t32 = (iteration_time_s(spec, gpu=gpu, prefill_tokens=4096, precision="fp16", engine=e)
                for e in (acc16, acc32))  # fmt: skip
    assert 0.5 * t32 < t16 < 0.75 * t32


# llama.cpp PR #4766 (components/serving_engine.csv lines 97-99): codellama-7b on an RTX 4090, pp512 tokens/s (also
# test_iteration's dequantisation test). Not fitted: the llama.cpp
# profile's factors come from its tg128 rows, the rate from the datasheet and the AD102 GEMM ceiling (L40S)
PP512_TOK_S = {"fp16": 11048.22, "q8_0": 7664.0, "q4_0": 7979.85}


@pytest.mark.parametrize("precision", sorted(PP512_TOK_S))
def test_llama_cpp_pp512_on_an_rtx_4090_is_predicted_within_15_percent(load_spec, precision):
    """At the FP32-accumulate rate these rows came out 44-50 % slow; at llama.cpp's FP16-accumulate rate 9-12 %."""
    spec, gpu = load_spec("llama-2-7b"), get_gpu("rtx-4090")
    t = iteration_time_s(spec, gpu=gpu, prefill_tokens=512, precision=precision, engine="llama.cpp")
    assert 512 / t == pytest.approx(PP512_TOK_S[precision], rel=0.15)
