"""The MoE dispatch / combine traffic each serving engine's kernels move (``estimate.moe.dispatch_bytes``,
``EngineProfile.moe_dispatch``), against byte counts derived by hand from the kernels' reads and writes.

The case: ``t = 10`` source tokens of width ``h = 4096`` routed to ``k = 2`` experts, ``R = 20`` routed rows.
- Megatron-Core permute / unpermute (bf16): permute reads 10 rows and writes 20, unpermute reads 20 and writes 10,
  2 B each: (10 + 20 + 20 + 10) · 4096 · 2 = 491 520 B.
- TensorRT-LLM, NVFP4 GEMM inputs (0.5 B per value plus one E4M3 scale per 16 values, 0.5625 B):
  ``expandInputRowsKernel`` reads 10 bf16 rows (81 920 B) and writes 20 NVFP4 rows (46 080 B);
  ``finalizeMoeRoutingKernel`` reads 20 bf16 rows (163 840 B) and writes 10 (81 920 B): 373 760 B.
- vLLM Triton ``fused_moe``, bf16: no permuted copy; ``moe_sum`` reads 20 rows and writes 10: 245 760 B; fp8: the
  source tokens are first quantised (read 10 bf16 rows, 81 920 B; write 10 fp8 rows, 40 960 B): 368 640 B.
- llama.cpp ``mul_mat_id`` (f32): gather 20 rows (read + write, 655 360 B), copy the 20 results back (655 360 B),
  sum them into 10 (read 327 680 B, write 163 840 B): 1 802 240 B.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleright.catalog import get_gpu
from scaleright.errors import InputError
from scaleright.estimate.calibration import DEFAULT_CALIBRATION
from scaleright.estimate.engines import ENGINES, EngineProfile, calibrated_engine
from scaleright.estimate.iteration import IterationModel, compute_precision
from scaleright.estimate.layer import roofline
from scaleright.estimate.moe import MOE_DISPATCH, dispatch_bytes
from scaleright.workload import load_model
from scaleright.workload.params import count_params

H, T, R = 4096, 10, 20


@pytest.mark.parametrize("kernels, act, gemm_in, expected", [
    ("permute", 2.0, 2.0, 491_520),
    ("permute", 2.0, 1.0, 491_520),  # Megatron-Core permutes bf16 tokens in FP8 training too
    ("expand-finalize", 2.0, 0.5625, 373_760),
    ("expand-finalize", 2.0, 1.0, 81_920 + 20 * H * 1 + 163_840 + 81_920),  # FP8: the expand writes 1 B per value
    ("expand-finalize", 2.0, 2.0, 491_520),  # 16-bit GEMMs: the same traffic as a bf16 permute
    ("gather", 2.0, 2.0, 245_760),
    ("gather", 2.0, 1.0, 368_640),
    ("copy-rows-f32", 2.0, 0.5625, 1_802_240),  # ggml activations are f32 whatever the weights
])  # fmt: skip
def test_dispatch_bytes_match_the_kernels_reads_and_writes(kernels, act, gemm_in, expected):
    got = float(dispatch_bytes(H, source_tokens=T, routed_rows=R, kernels=kernels, act_bytes=act,
                               gemm_in_bytes=gemm_in))  # fmt: skip
    assert got == pytest.approx(expected, rel=1e-12)


def test_each_engine_names_its_own_moe_kernels():
    assert ENGINES["trtllm"].moe_dispatch == "expand-finalize"
    assert ENGINES["vllm"].moe_dispatch == ENGINES["sglang"].moe_dispatch == "gather"
    assert ENGINES["llama.cpp"].moe_dispatch == "copy-rows-f32"
    # the calibrated engine stands for the TensorRT-LLM rows it is fitted to
    assert calibrated_engine(DEFAULT_CALIBRATION).moe_dispatch == "expand-finalize"


def test_an_unknown_moe_dispatch_is_refused_with_the_allowed_names():
    with pytest.raises(InputError, match=r"moe_dispatch='alltoall' not allowed; allowed: permute, expand-finalize"):
        dataclasses.replace(ENGINES["vllm"], moe_dispatch="alltoall")


def _ffn_fixed_s(spec, gpu, precision: str, prof: EngineProfile, rows: int) -> float:
    model = IterationModel(spec, gpu=gpu, precision=precision, engine=prof, max_rows=0)
    return float(model.fixed_s(rows))


@pytest.mark.parametrize("precision, gemm_in", [("fp4", 0.5625), ("fp8", 1.0), ("bf16", 2.0)])
def test_the_iteration_pays_the_engines_bytes_at_the_streaming_bandwidth(precision, gemm_in):
    """One replica (tp = ep = 1, so the rank runs exactly m·k routed rows): switching TensorRT-LLM's expand /
    finalize for a bf16 permute adds, per MoE layer, the difference of their byte counts, m·k·h·(4 − (g + 2)),
    over the streaming bandwidth, and nothing else changes."""
    spec = load_model("qwen3-30b-a3b")
    c = count_params(spec)
    gpu = get_gpu("b200")
    m = 512
    trt = ENGINES["trtllm"]
    base = _ffn_fixed_s(spec, gpu, precision, trt, m)
    perm = _ffn_fixed_s(spec, gpu, precision, dataclasses.replace(trt, moe_dispatch="permute"), m)
    stream = roofline(gpu, compute_precision(gpu, precision), DEFAULT_CALIBRATION).hbm
    routed = m * spec.moe.top_k
    want = c.moe_layers * routed * spec.hidden * (4.0 - (gemm_in + 2.0)) / stream
    assert perm - base == pytest.approx(want, rel=1e-9, abs=1e-15)


def test_vllm_gather_moves_half_of_a_permute_in_bf16():
    """vLLM's fused_moe has no dispatch copy: at 16 bits its moe_sum moves h·(t + R)·2 B, half the permute's."""
    spec = load_model("qwen3-30b-a3b")
    c = count_params(spec)
    gpu = get_gpu("h100-sxm")
    m = 256
    vllm = ENGINES["vllm"]
    gather = _ffn_fixed_s(spec, gpu, "bf16", vllm, m)
    perm = _ffn_fixed_s(spec, gpu, "bf16", dataclasses.replace(vllm, moe_dispatch="permute"), m)
    stream = roofline(gpu, "bf16", DEFAULT_CALIBRATION).hbm
    want = c.moe_layers * spec.hidden * (m + m * spec.moe.top_k) * 2.0 / stream  # the permute's extra half
    assert perm - gather == pytest.approx(want, rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(kernels=st.sampled_from(sorted(MOE_DISPATCH)), t=st.integers(1, 4096), k=st.integers(1, 8),
       extra=st.integers(0, 4096), gemm_in=st.sampled_from([0.5625, 1.0, 2.0]))  # fmt: skip
def test_every_scheme_moves_at_least_the_combines_compulsory_bytes_and_more_rows_never_cost_less(
        kernels, t, k, extra, gemm_in):
    """Whatever the kernels, the combine must read each routed row once and write each token once (at least
    h·(R·g + t·g) bytes, the narrowest format in play), and routing more rows never moves fewer bytes."""
    rows = t * k
    got = float(dispatch_bytes(H, source_tokens=t, routed_rows=rows, kernels=kernels, gemm_in_bytes=gemm_in))
    assert got >= H * (rows + t) * gemm_in
    more = float(dispatch_bytes(H, source_tokens=t, routed_rows=rows + extra, kernels=kernels, gemm_in_bytes=gemm_in))
    assert more >= got
