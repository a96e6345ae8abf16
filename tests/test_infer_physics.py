"""``estimate infer`` is the steady state of the iteration model: checked against hand-derived closed forms, the
rooflines no output may beat, the serving simulator, and GPU counts that may only add throughput."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleright.catalog import get_gpu
from scaleright.errors import InputError
from scaleright.estimate.calibration import DEFAULT_CALIBRATION
from scaleright.estimate.engines import calibrated_engine
from scaleright.estimate.infer import estimate_infer
from scaleright.estimate.iteration import iteration_time_s
from scaleright.workload.params import count_params

DENSE = ("llama-3.1-8b", "mistral-7b", "qwen2.5-7b", "llama-2-7b")
DATACENTER = ("h100-sxm", "h200", "a100-sxm-80gb", "mi300x", "l40s")
# STREAM Triad over the datasheet bandwidth (validation/reference/components/hbm_bandwidth.csv, Azure
# AI-benchmarking-guide): H100 80GB 2.97 / 3.35 TB/s, A100-SXM4-80GB 1.70 / 2.039, MI300X 4.10 / 5.3
TRIAD = {"h100-sxm": 2.97 / 3.35, "a100-sxm-80gb": 1.70 / 2.039, "mi300x": 4.10 / 5.3}


def _bandwidth_copy(gpu, factor):
    """A user-catalog copy of ``gpu`` with ``factor`` times its HBM bandwidth (nothing else changed)."""
    return gpu.model_copy(update={"id": f"{gpu.id}-bw{factor}",
                                  "hbm_bandwidth_tb_per_s": gpu.hbm_bandwidth_tb_per_s * factor})  # fmt: skip


def _weight_bytes(spec, bytes_per_el):
    """Bytes a decode step must read: every block matrix at the weight format, the output head in 16 bits (the
    embedding is a gather of one row per token)."""
    c = count_params(spec)
    head = c.embedding if spec.tied_embeddings else c.lm_head
    blocks = c.total - c.embedding - c.positions - c.lm_head
    return blocks * bytes_per_el + head * max(bytes_per_el, 2.0)


@pytest.mark.parametrize("gpu_id", sorted(TRIAD))
def test_batch_1_tpot_is_the_weight_and_kv_read_at_the_decode_bandwidth(llama_8b, gpu_id):
    """Pope et al. 2022, section 2: a batch-1 decode step reads every weight and the sequence's KV cache once,
    TPOT = overhead + W / (datasheet × STREAM fraction × decode share) + KV(ctx) / (datasheet × STREAM fraction ×
    streaming share): the weight GEMVs at ``decode_memory_efficiency``, the attention kernel's KV stream at the
    streaming kernels' ``memory_efficiency`` (``estimate.iteration``, "KV reads"). Llama 3.1 8B bf16: W =
    2 B × 7.50 G block parameters + 2 B × 0.525 G head; KV = 32 layers × 2 × 8 heads × 128 × 2 B per token.
    128 prompt tokens, 512 output: the prompt's prefill adds < 1 % once amortised over 512 tokens."""
    gpu = get_gpu(gpu_id)
    cal = DEFAULT_CALIBRATION
    i_len, o_len = 128, 512
    kv_per_token = 32 * 2 * 8 * 128 * 2.0
    stream = gpu.hbm_bandwidth_tb_per_s * 1e12 * TRIAD[gpu_id]
    by_hand = (cal.decode_overhead_s + _weight_bytes(llama_8b, 2.0) / (stream * cal.decode_memory_efficiency)
               + kv_per_token * (i_len + o_len / 2) / (stream * cal.memory_efficiency))  # fmt: skip
    est = estimate_infer(llama_8b, gpu=gpu, gpus=1, tp=1, input_len=i_len, output_len=o_len, batch=1)
    assert est.tpot_s == pytest.approx(by_hand, rel=0.02)
    # the rest (elementwise traffic, attention FLOPs) only adds; W counts the RMSNorm weights too (0.26 M values,
    # 3e-5 of W), which the model reads with the fused norm kernels' traffic, not as GEMM weights
    assert est.tpot_s >= by_hand * (1 - 1e-4)


def test_the_scalar_estimate_is_the_iteration_models_steady_state(llama_8b):
    """One physics: at concurrency 1 a sequence spends one iteration in prefill and O − 1 decoding alone, so TTFT
    is the prefill iteration, TPOT (the mean inter-token latency, (e2e − TTFT) / (O − 1)) the decode step at the
    mean context I + O/2, and the end-to-end latency the prefill plus O − 1 decode steps, each time from
    ``iteration_time_s`` with the calibration's engine; throughput is one sequence's O tokens per O iterations."""
    gpu, cal = get_gpu("h100-sxm"), DEFAULT_CALIBRATION
    i_len, o_len = 700, 300
    eng = calibrated_engine(cal)
    dec = iteration_time_s(llama_8b, gpu=gpu, decode_batch=1, decode_context_tokens=i_len + o_len / 2, engine=eng,
                           kv_precision="bf16")  # fmt: skip
    pre = iteration_time_s(llama_8b, gpu=gpu, prefill_tokens=i_len, engine=eng, kv_precision="bf16")
    est = estimate_infer(llama_8b, gpu=gpu, gpus=1, tp=1, input_len=i_len, output_len=o_len, batch=1)
    assert est.tpot_s == pytest.approx(dec, rel=1e-9)
    assert est.ttft_s == pytest.approx(pre, rel=1e-9)
    assert est.e2e_latency_s == pytest.approx(pre + (o_len - 1) * dec, rel=1e-9)
    assert est.output_tokens_per_s == pytest.approx(o_len / (pre + (o_len - 1) * dec), rel=1e-9)


@pytest.mark.parametrize("batch,i_len,o_len", [(1, 512, 128), (8, 512, 128), (64, 1024, 256), (200, 128, 128)])
def test_steady_state_matches_the_serving_simulator_in_closed_loop(llama_8b, batch, i_len, o_len):
    """The discrete-event simulator (``serve.simulate``, vLLM's scheduler: continuous batching, chunked prefill)
    with ``batch`` closed-loop clients and lognormal output lengths (so the clients do not move in lock-step)
    reaches the steady state's TPOT and output throughput within 6 %."""
    from scaleright.serve.simulate import simulate

    gpu = get_gpu("h100-sxm")
    sim = simulate(llama_8b, gpu=gpu, concurrency=batch, input_len=i_len, output_len=o_len,
                   requests=max(60 * batch, 200), engine="vllm", output_dist="lognormal", length_cv=0.3).as_dict()
    from scaleright.estimate.infer import infer_arrays

    ss = infer_arrays(llama_8b, gpu=gpu, tp=1, pp=1, batch=batch, input_len=i_len, output_len=o_len, engine="vllm")
    assert float(ss["tpot_s"]) * 1e3 == pytest.approx(sim["tpot_ms"]["mean"], rel=0.06)
    assert float(ss["output_tokens_per_s"]) == pytest.approx(sim["output_tokens_per_s"], rel=0.06)


@settings(max_examples=40)
@given(gpu_id=st.sampled_from(DATACENTER), name=st.sampled_from(DENSE), i_len=st.integers(1, 256),
       o_len=st.integers(256, 2048), precision=st.sampled_from(("bf16", "fp8")))  # fmt: skip
def test_batch_1_tpot_is_inversely_proportional_to_hbm_bandwidth(load_spec, gpu_id, name, i_len, o_len, precision):
    """Issue #10: doubling HBM bandwidth (a user-catalog copy, nothing else changed) halves the batch-1 TPOT
    above the engine's fixed per-iteration overhead; only the prompt's compute-bound prefill, amortised over the
    output tokens, and the attention FLOPs stay (< 3 % here)."""
    spec, gpu = load_spec(name), get_gpu(gpu_id)
    if precision == "fp8" and not gpu.dense_tflops.get("fp8"):
        precision = "bf16"
    kw = dict(gpus=1, tp=1, input_len=i_len, output_len=o_len, batch=1, precision=precision)
    t1 = estimate_infer(spec, gpu=gpu, **kw).tpot_s
    t2 = estimate_infer(spec, gpu=_bandwidth_copy(gpu, 2.0), **kw).tpot_s
    ovh = DEFAULT_CALIBRATION.decode_overhead_s
    assert 0.5 - 1e-9 <= (t2 - ovh) / (t1 - ovh) <= 0.515


@settings(max_examples=60)
@given(gpu_id=st.sampled_from(DATACENTER), name=st.sampled_from((*DENSE, "llama-3.1-70b", "mixtral-8x7b")),
       gpus=st.integers(1, 8), batch=st.one_of(st.integers(1, 512), st.just("max")), i_len=st.integers(1, 4096),
       o_len=st.integers(1, 2048), precision=st.sampled_from(("bf16", "fp8")))  # fmt: skip
def test_no_output_beats_the_flop_or_the_bandwidth_roofline(load_spec, gpu_id, name, gpus, batch, i_len, o_len,
                                                            precision):  # fmt: skip
    """Each request costs at least 2 FLOPs per active block parameter per token it runs through the model (its I
    prompt tokens and the O − 1 generated ones fed back; the last is only sampled), at the datasheet dense peak of
    every GPU in use; each iteration reads at least the local dense block weights at the
    datasheet bandwidth, so TPOT cannot be shorter; TTFT is at least the prompt's FLOPs over the replica's peak."""
    spec, gpu = load_spec(name), get_gpu(gpu_id)
    if precision == "fp8" and not gpu.dense_tflops.get("fp8"):
        precision = "bf16"
    est = estimate_infer(spec, gpu=gpu, gpus=gpus, input_len=i_len, output_len=o_len, batch=batch,
                         precision=precision)  # fmt: skip
    if not est.fits:
        return
    c = count_params(spec)
    lay = est.layout
    per_replica = lay["tp"] * lay["pp"]
    used = lay["replicas"] * per_replica
    peak = gpu.dense_tflops[precision] * 1e12
    active_blocks = c.active - c.embedding - c.positions - c.lm_head
    flops_per_request = 2.0 * active_blocks * (i_len + o_len - 1)
    assert est.requests_per_s <= used * peak / flops_per_request * (1 + 1e-9)
    assert est.ttft_s >= 2.0 * active_blocks * i_len / (per_replica * peak) * (1 - 1e-9)
    bpe = 1.0 if precision == "fp8" else 2.0
    dense_blocks = active_blocks - (c.routed_experts_total and c.moe_layers * spec.moe.top_k * c.expert_ffn)
    assert est.tpot_s >= dense_blocks * bpe / per_replica / (gpu.hbm_bandwidth_tb_per_s * 1e12) * (1 - 1e-9)


@settings(max_examples=25)
@given(gpu_id=st.sampled_from(("h100-sxm", "a100-sxm-80gb", "l40s", "mi300x")),
       name=st.sampled_from(("llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b")),
       batch=st.one_of(st.integers(1, 256), st.just("max")), i_len=st.integers(1, 4096), o_len=st.integers(1, 1024),
       precision=st.sampled_from(("bf16", "fp8")))  # fmt: skip
def test_output_throughput_never_falls_when_a_gpu_is_added(load_spec, gpu_id, name, batch, i_len, o_len, precision):
    """A GPU no faster layout uses idles (and says so): the best layout of n GPUs stays a candidate on n + 1."""
    spec, gpu = load_spec(name), get_gpu(gpu_id)
    if precision == "fp8" and not gpu.dense_tflops.get("fp8"):
        precision = "bf16"
    prev = 0.0
    for n in range(1, 7):
        e = estimate_infer(spec, gpu=gpu, gpus=n, input_len=i_len, output_len=o_len, batch=batch, precision=precision)
        got = e.output_tokens_per_s if e.fits else 0.0
        assert got >= prev * (1 - 1e-12), (n, e.layout)
        lay = e.layout
        assert lay["replicas"] * lay["tp"] * lay["pp"] + lay["idle_gpus"] == n
        prev = got


def test_ttft_is_never_shorter_than_the_iteration_that_runs_the_prompt(llama_8b):
    """Issue #10: at batch 384 (1024 in, 256 out) TTFT came out at 70 ms against an 84 ms TPOT, shorter than
    one iteration. The prompt runs in an iteration with the other sequences' decode steps: TTFT >= TPOT."""
    est = estimate_infer(llama_8b, gpu=get_gpu("h100-sxm"), gpus=1, input_len=1024, output_len=256, batch=384)
    assert est.ttft_s >= est.tpot_s


def test_scheduler_cap_by_hand():
    """The token budget of an iteration: B/O prompts of I tokens plus B − B/O decode steps, B·(I + O − 1)/O tokens
    <= max_num_tokens. TensorRT-LLM's defaults (max_num_tokens 8192, max_batch_size 2048) at 2048 in / 128 out:
    8192 · 128 / 2175 = 482.1 -> 482 sequences; at 128 / 2048 the budget admits 8192 · 2048 / 2175 = 7713, so
    max_batch_size (2048) binds."""
    from scaleright.estimate.infer import scheduler_batch_cap

    assert scheduler_batch_cap(input_len=2048, output_len=128, max_batch_size=2048, max_num_tokens=8192) == 482
    assert scheduler_batch_cap(input_len=128, output_len=2048, max_batch_size=2048, max_num_tokens=8192) == 2048
    assert scheduler_batch_cap(input_len=128, output_len=2048) is None
    with pytest.raises(InputError, match="max_num_tokens=0 must be a positive integer"):
        scheduler_batch_cap(input_len=1, output_len=1, max_num_tokens=0)


@settings(max_examples=60)
@given(i_len=st.integers(1, 30_000), o_len=st.integers(1, 5000), tokens=st.integers(1, 1 << 16))
def test_the_capped_batch_fills_but_never_exceeds_the_token_budget(i_len, o_len, tokens):
    from scaleright.estimate.infer import scheduler_batch_cap

    b = scheduler_batch_cap(input_len=i_len, output_len=o_len, max_num_tokens=tokens)
    per_iteration = lambda batch: batch * (i_len + o_len - 1) / o_len  # noqa: E731
    assert b >= 1
    assert b == 1 or per_iteration(b) <= tokens * (1 + 1e-12)
    assert per_iteration(b + 1) > tokens * (1 - 1e-12)


def test_a_max_batch_runs_at_the_engine_cap_where_it_is_below_the_kv_capacity(llama_8b):
    """Llama 3.1 8B on one H200 at 128 / 128 holds thousands of sequences; an engine capped at 256 runs 256, and
    its throughput is that of batch 256 (not of the KV capacity)."""
    gpu = get_gpu("h200-sxm")
    kw = dict(gpu=gpu, gpus=2, tp=1, input_len=128, output_len=128)
    free = estimate_infer(llama_8b, batch="max", **kw)
    capped = estimate_infer(llama_8b, batch="max", max_batch_size=256, **kw)
    assert free.max_batch > 256 and free.batch == 2 * free.max_batch
    assert capped.batch == 2 * 256 and capped.max_batch == free.max_batch
    assert capped.output_tokens_per_s == pytest.approx(estimate_infer(llama_8b, batch=512, **kw).output_tokens_per_s,
                                                       rel=1e-12)
