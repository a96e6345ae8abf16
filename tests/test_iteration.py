"""The iteration cost model: rooflines it may never beat, batch-1 decode bound by HBM bandwidth, the affine decode
run, engine profiles, and errors with their operands."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scaleright.catalog import get_gpu
from scaleright.errors import InputError, LayoutError, UnknownNameError
from scaleright.estimate.engines import ENGINES, get_engine
from scaleright.estimate.iteration import IterationModel, iteration_time_s
from scaleright.workload.flops import decode_flops_per_token
from scaleright.workload.params import count_params
from tests.test_gemm_accumulate import PP512_TOK_S  # llama.cpp PR #4766 pp512 rows (serving_engine.csv)

GPUS = ("h100-sxm", "h200", "a100-sxm-80gb", "mi300x", "l40s", "rtx-4090")
MODELS = ("llama-3.1-8b", "llama-2-7b", "mistral-7b", "qwen2.5-7b")


def _bandwidth_copy(gpu, factor):
    """A user-catalog copy of ``gpu`` with ``factor`` times its HBM bandwidth."""
    return gpu.model_copy(update={"id": f"{gpu.id}-bw", "hbm_bandwidth_tb_per_s": gpu.hbm_bandwidth_tb_per_s * factor})


@given(gpu_id=st.sampled_from(GPUS), name=st.sampled_from(MODELS), ctx=st.integers(1, 4096),
       engine=st.sampled_from(sorted(ENGINES)))  # fmt: skip
def test_batch_1_decode_time_scales_as_one_over_hbm_bandwidth(load_spec, gpu_id, name, ctx, engine):
    spec, gpu = load_spec(name), get_gpu(gpu_id)
    t1 = iteration_time_s(spec, gpu=gpu, decode_batch=1, decode_context_tokens=ctx, engine=engine)
    t2 = iteration_time_s(spec, gpu=_bandwidth_copy(gpu, 2.0), decode_batch=1, decode_context_tokens=ctx,
                          engine=engine)  # fmt: skip
    assert t2 / t1 >= 0.5 - 1e-12  # never more than halves
    overhead = get_engine(engine).iteration_overhead_s
    # the time above the engine's fixed per-iteration overhead halves (up to the few compute-bound bits)
    assert 0.5 - 1e-12 <= (t2 - overhead) / (t1 - overhead) <= 0.55


@given(gpu_id=st.sampled_from(GPUS), name=st.sampled_from(MODELS), batch=st.integers(0, 512),
       prefill=st.integers(0, 4096), ctx=st.integers(1, 4096))  # fmt: skip
def test_an_iteration_never_beats_the_weight_read_nor_the_flop_roofline(load_spec, gpu_id, name, batch, prefill, ctx):
    spec, gpu = load_spec(name), get_gpu(gpu_id)
    if batch + prefill == 0:
        return
    t = iteration_time_s(spec, gpu=gpu, decode_batch=batch, decode_context_tokens=batch * ctx, prefill_tokens=prefill)
    c = count_params(spec)
    dense = c.total - c.embedding - c.positions  # every block matrix and the head, read once
    assert t >= dense * 2.0 / (gpu.hbm_bandwidth_tb_per_s * 1e12)
    flops = (batch + prefill) * 2.0 * (c.total - c.embedding - c.positions)
    assert t >= flops / (gpu.dense_tflops["bf16"] * 1e12)


@given(batch=st.integers(1, 1024), ctx=st.integers(1, 8192))
def test_decode_throughput_never_exceeds_the_roofline(llama_8b, batch, ctx):
    gpu = get_gpu("h100-sxm")
    t = iteration_time_s(llama_8b, gpu=gpu, decode_batch=batch, decode_context_tokens=batch * ctx)
    tokens_per_s = batch / t
    assert tokens_per_s <= gpu.dense_tflops["bf16"] * 1e12 / decode_flops_per_token(llama_8b, ctx)


def test_a_decode_run_sums_its_iterations_exactly(llama_8b):
    model = IterationModel(llama_8b, gpu=get_gpu("h100-sxm"))
    run = model.decode_run(32, 32 * 700)
    one_by_one = sum(model.time_s(decode_batch=32, decode_context_tokens=32 * 700 + 32 * j) for j in range(50))
    assert run.total_s(50) == pytest.approx(one_by_one, rel=1e-12)
    n = run.iterations_until(run.total_s(20) - 1e-9, 50)
    assert n == 20 and run.iterations_until(run.total_s(20) + 1e-9, 50) == 21


def test_chunked_prefill_fused_with_decode_costs_less_than_both_apart(llama_8b):
    gpu = get_gpu("h100-sxm")
    fused = iteration_time_s(llama_8b, gpu=gpu, prefill_tokens=512, decode_batch=64, decode_context_tokens=64 * 600)
    apart = iteration_time_s(llama_8b, gpu=gpu, prefill_tokens=512) + iteration_time_s(
        llama_8b, gpu=gpu, decode_batch=64, decode_context_tokens=64 * 600)
    assert fused < apart


def test_long_prefill_is_compute_bound_and_grows_with_the_prefix(llama_8b):
    gpu = get_gpu("h100-sxm")
    t1 = iteration_time_s(llama_8b, gpu=gpu, prefill_tokens=4096)
    t2 = iteration_time_s(llama_8b, gpu=gpu, prefill_tokens=8192)
    assert 1.9 < t2 / t1 < 2.3  # linear GEMMs plus quadratic attention
    later = iteration_time_s(llama_8b, gpu=gpu, prefill_tokens=4096, prefill_prefix_tokens=4096)
    assert later > t1


def test_tensor_parallel_adds_all_reduces_and_splits_weights(llama_70b):
    gpu = get_gpu("h100-sxm")
    t4 = iteration_time_s(llama_70b, gpu=gpu, tp=4, decode_batch=1, decode_context_tokens=512)
    t8 = iteration_time_s(llama_70b, gpu=gpu, tp=8, decode_batch=1, decode_context_tokens=512)
    assert t8 < t4 and t8 > t4 / 2  # half the weights per GPU, but latency-bound all-reduces do not shrink


def test_moe_reads_only_the_experts_a_small_batch_touches(mixtral_8x7b):
    gpu = get_gpu("h100-sxm")
    kw = dict(gpu=gpu, tp=2, decode_context_tokens=0)
    t1 = iteration_time_s(mixtral_8x7b, decode_batch=1, **kw)
    t64 = iteration_time_s(mixtral_8x7b, decode_batch=64, **kw)
    assert t64 > 1.5 * t1  # batch 1 touches 2 of 8 experts, batch 64 all of them
    ep = iteration_time_s(mixtral_8x7b, decode_batch=64, ep=2, **kw)
    assert ep > 0


def test_engine_profiles_are_named_grounded_or_marked_uncalibrated():
    for p in ENGINES.values():
        assert p.status in ("fitted", "uncalibrated")
        assert (p.status == "fitted") == bool(p.grounded_in)
        assert p.note
    assert get_engine("trtllm").kv_precision_for("fp8") == "fp8"
    assert get_engine("vllm").kv_precision_for("fp8") == "bf16"
    with pytest.raises(UnknownNameError, match="unknown engine 'vlm'; closest: vllm"):
        get_engine("vlm")


def test_bad_inputs_name_their_operands(llama_8b, mixtral_8x7b):
    gpu = get_gpu("h100-sxm")
    with pytest.raises(LayoutError, match=r"tp\(3\) does not divide num_attention_heads\(32\)"):
        iteration_time_s(llama_8b, gpu=gpu, tp=3, decode_batch=1)
    with pytest.raises(LayoutError, match=r"ep\(2\) does not divide tp\(1\)"):
        iteration_time_s(mixtral_8x7b, gpu=gpu, ep=2, decode_batch=1)
    with pytest.raises(InputError, match="decode_context_tokens has 2 lengths for decode_batch=3"):
        iteration_time_s(llama_8b, gpu=gpu, decode_batch=3, decode_context_tokens=[1, 2])
    with pytest.raises(InputError, match="kv_precision='fp6' is not a known precision"):
        iteration_time_s(llama_8b, gpu=gpu, decode_batch=1, kv_precision="fp6")


def test_the_tp_all_reduce_costs_more_when_the_group_crosses_the_network(llama_70b):
    """Same GPUs, same work: a tp=8 group inside one NVSwitch node against one spread over eight 1-GPU nodes
    (its all-reduces cross the NICs): the measured-collective model puts the difference in the iteration."""
    from scaleright.estimate.comm import system_of

    gpu = get_gpu("h100-sxm")
    kw = dict(gpu=gpu, tp=8, decode_batch=8, decode_context_tokens=8 * 512)
    inside = iteration_time_s(llama_70b, system=system_of(gpu), **kw)
    across = iteration_time_s(llama_70b, system=system_of(gpu, gpus_per_node=1), **kw)
    assert across > inside
    # 80 layers x 2 all-reduces of 8 rows x 8192 x 2 B over InfiniBand: each pays at least a network latency
    # (> 2 us on any NIC), so the spread group loses at least 160 x 2 us
    assert across - inside > 160 * 2e-6


def test_fp32_weights_run_attention_at_the_fp32_rate_not_the_16_bit_one(llama_8b):
    """A prefill chunk after a long prefix is attention-bound: its extra time over the same chunk without the
    prefix is at least the extra attention FLOPs (4 · heads · head_dim per query-key pair and layer) at the
    GPU's TF32 peak, and the H100's TF32 datasheet rate is half its bf16 rate (494.5 against 989 TFLOP/s), so the
    fp32 model's attention takes twice the bf16 model's."""
    gpu = get_gpu("h100-sxm")
    chunk, prefix = 2048, 60_000

    def extra(precision):
        t0 = iteration_time_s(llama_8b, gpu=gpu, prefill_tokens=chunk, precision=precision)
        return iteration_time_s(llama_8b, gpu=gpu, prefill_tokens=chunk, prefill_prefix_tokens=prefix,
                                precision=precision) - t0  # fmt: skip

    flops = chunk * prefix * 4 * llama_8b.heads * llama_8b.head_dim * llama_8b.layers
    assert extra("fp32") >= flops / (494.5e12)
    assert extra("fp32") / extra("bf16") == pytest.approx(989.0 / 494.5, rel=0.02)


@given(gpu_id=st.sampled_from(GPUS), batch=st.integers(1, 64))
def test_decode_gemms_of_a_small_batch_are_bound_by_hbm_bandwidth_on_every_gpu(load_spec, gpu_id, batch):
    """Up to 64 rows, doubling HBM bandwidth (nothing else) takes at least 40 % off the time above the engine's
    fixed overhead: the weights' read dominates; the shape law of tensor-core tiles does not apply to GEMV."""
    spec, gpu = load_spec("llama-3.1-8b"), get_gpu(gpu_id)
    t1 = iteration_time_s(spec, gpu=gpu, decode_batch=batch, decode_context_tokens=batch * 64)
    t2 = iteration_time_s(spec, gpu=_bandwidth_copy(gpu, 2.0), decode_batch=batch, decode_context_tokens=batch * 64)
    overhead = get_engine("vllm").iteration_overhead_s
    assert (t2 - overhead) / (t1 - overhead) <= 0.6


def test_engines_with_a_custom_all_reduce_pay_one_step_not_the_nccl_ring_at_decode_sizes(llama_70b):
    """vLLM's one-shot all-reduce: a tp=8 batch-1 decode on one NVSwitch node pays 160 one-step all-reduces. The
    same engine without it (llama.cpp's profile flag flipped) pays NCCL's 2 x 7 ring steps each: slower."""
    import dataclasses

    gpu = get_gpu("h100-sxm")
    kw = dict(gpu=gpu, tp=8, decode_batch=1, decode_context_tokens=512)
    custom = iteration_time_s(llama_70b, engine="vllm", **kw)
    nccl = iteration_time_s(llama_70b, engine=dataclasses.replace(get_engine("vllm"), custom_all_reduce=False), **kw)
    assert nccl > custom
    # 8192 x 2 B per all-reduce: NCCL's ring takes at least 14 hops of >= 0.5 us, the one-shot kernel one step
    assert nccl - custom >= 160 * 13 * 0.5e-6


@given(name=st.sampled_from(("llama-3.1-70b", "llama-3.1-8b", "mixtral-8x7b")), batch=st.sampled_from((1, 64, "max")),
       precision=st.sampled_from(("bf16", "fp8")))  # fmt: skip
def test_estimate_infer_throughput_never_falls_when_a_gpu_is_added(load_spec, name, batch, precision):
    """Issue #10: 70B fp8 on H100 gave 2,557 tok/s on 2 GPUs and 1,353 on 3 (only TP sizes dividing the count
    were tried). A GPU that no layout uses now idles: the best of n GPUs stays available on n + 1."""
    from scaleright.estimate.infer import estimate_infer

    spec, gpu = load_spec(name), get_gpu("h100-sxm")
    prev = 0.0
    for n in range(1, 9):
        e = estimate_infer(spec, gpu=gpu, gpus=n, input_len=1024, output_len=256, batch=batch, precision=precision)
        got = e.output_tokens_per_s if e.fits else 0.0
        assert got >= prev * (1 - 1e-12), (n, e.layout)
        assert e.layout["replicas"] * e.layout["tp"] + e.layout["idle_gpus"] == n
        prev = got


@given(batch=st.integers(0, 300), prefill=st.integers(0, 3000), ctx=st.integers(1, 4096),
       seqs=st.integers(1, 4), engine=st.sampled_from((*sorted(ENGINES), None)))  # fmt: skip
def test_the_array_path_is_the_table_path(llama_8b, batch, prefill, ctx, seqs, engine):
    """``times_s`` (any row count, what ``estimate infer`` evaluates) and ``time_s`` (the simulator's tables) are
    the same cost."""
    model = IterationModel(llama_8b, gpu=get_gpu("h100-sxm"), engine=engine, max_rows=3300)
    kw = dict(prefill_tokens=prefill, decode_batch=batch, decode_context_tokens=batch * ctx,
              prefill_pairs=prefill * (prefill + 1) / 2, prefill_kv_tokens=prefill, prefill_seqs=seqs if prefill else 0)
    assert float(model.times_s(**kw)) == pytest.approx(model.time_s(**kw), rel=1e-12, abs=1e-15)


@given(batch=st.integers(1, 256), prefill=st.sampled_from([0, 128, 512]), ctx=st.integers(0, 2048),
       per_seq_us=st.floats(1.0, 500.0))  # fmt: skip
def test_a_serial_host_loop_adds_its_per_sequence_time_for_every_sequence_that_samples(llama_8b, batch, prefill, ctx,
                                                                                      per_seq_us):  # fmt: skip
    """vLLM V0's host work per sequence (input building, output processing, detokenisation) runs between GPU steps:
    an iteration that samples ``batch`` decode tokens plus one prefill's first token takes exactly that many times
    the per-sequence time longer, and the shipped profiles, whose loops overlap or have no such work, none."""
    import dataclasses

    gpu = get_gpu("h100-sxm")
    kw = dict(gpu=gpu, prefill_tokens=prefill, decode_batch=batch, decode_context_tokens=batch * ctx)
    base = iteration_time_s(llama_8b, engine="vllm", **kw)
    v0 = dataclasses.replace(get_engine("vllm"), sequence_overhead_s=per_seq_us * 1e-6)
    sampled = batch + (1 if prefill else 0)
    assert iteration_time_s(llama_8b, engine=v0, **kw) - base == pytest.approx(sampled * per_seq_us * 1e-6, rel=1e-9)
    assert all(p.sequence_overhead_s == 0.0 for p in ENGINES.values())


@pytest.mark.parametrize("precision", ["q8_0", "q4_0"])
def test_llama_cpp_prefill_of_gguf_weights_pays_a_dequantisation_pass_as_measured(load_spec, precision):
    """A 512-token prompt on Q8_0 / Q4_0 weights takes longer than on F16 in llama.cpp's CUDA backend, though it
    reads fewer weight bytes: products of more than 32 tokens dequantise every matrix to an fp16 copy and run the
    same 16-bit GEMM. The extra time is that pass (read the packed weights, write 2 B each): measured 20.5 ms
    (Q8_0) and 17.9 ms (Q4_0) over F16's 46.3 ms; within 30 % of those differences (the GEMM itself cancels)."""
    spec, gpu = load_spec("llama-2-7b"), get_gpu("rtx-4090")

    def prefill_s(p):
        return iteration_time_s(spec, gpu=gpu, prefill_tokens=512, precision=p, engine="llama.cpp")

    measured_s = 512 / PP512_TOK_S[precision] - 512 / PP512_TOK_S["fp16"]
    assert prefill_s(precision) - prefill_s("fp16") == pytest.approx(measured_s, rel=0.30)


def test_llama_cpp_reads_packed_weights_up_to_32_rows_and_dequantises_above(load_spec):
    """At 32 rows or fewer the quantised kernels stream the packed Q4_0 blocks (about a quarter of F16's bytes: a
    batch-1 decode step takes under half as long, and 32 rows never longer than F16); from 33 rows the
    dequantise-then-fp16 path costs more than F16 itself."""
    spec, gpu = load_spec("llama-2-7b"), get_gpu("rtx-4090")
    model = {p: IterationModel(spec, gpu=gpu, precision=p, engine="llama.cpp", max_rows=64) for p in ("fp16", "q4_0")}
    assert model["q4_0"].time_s(decode_batch=1) < 0.5 * model["fp16"].time_s(decode_batch=1)
    assert model["q4_0"].time_s(decode_batch=32) <= model["fp16"].time_s(decode_batch=32)
    assert model["q4_0"].time_s(prefill_tokens=33, prefill_seqs=1) > model["fp16"].time_s(prefill_tokens=33,
                                                                                          prefill_seqs=1)  # fmt: skip
    # engines whose quantised kernels read the packed weights at every size (vLLM's Marlin / int8 GEMMs) never do
    vllm = {p: IterationModel(spec, gpu=gpu, precision=p, engine="vllm", max_rows=64) for p in ("fp16", "int4")}
    assert vllm["int4"].time_s(prefill_tokens=33, prefill_seqs=1) < vllm["fp16"].time_s(prefill_tokens=33,
                                                                                        prefill_seqs=1)  # fmt: skip
