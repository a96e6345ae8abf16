"""GGUF file types: ggml's block sizes, llama.cpp's per-tensor type choice checked against the file sizes its
quantize tool lists, and the weight bytes memory and the iteration model read.

References: the block structs of ggml's ``ggml-common.h`` (hand-counted below); llama.cpp's
``tools/quantize/quantize.cpp`` ``QUANT_OPTIONS`` listing, which gives each file type's size for Llama-3-8B (8.03 B
parameters): Q4_0 4.34G, Q4_K_M 4.58G, Q5_K_M 5.33G, Q6_K 6.14G, Q8_0 7.96G (GiB: Q8_0's 8.5 bits per weight of
8.03 B parameters is 7.95 GiB, 8.53 GB). Llama-3.1-8B has Llama-3-8B's shapes (32 layers, hidden 4096, FFN 14336,
8 KV heads, vocabulary 128256, untied head).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scaleright.catalog import Catalog, get_gpu
from scaleright.errors import InputError
from scaleright.estimate.engines import get_engine
from scaleright.estimate.iteration import IterationModel, compute_precision, iteration_time_s
from scaleright.estimate.memory import GB, inference_memory
from scaleright.workload.params import _more_bits, count_params, gguf_weight_bytes
from scaleright.workload.precision import GGML_BLOCKS, GGUF_PRECISIONS, STORAGE_PRECISIONS, bytes_per_element

GIB = 2**30
LLAMA_3_8B_GIB = {"q4_0": 4.34, "q4_k_m": 4.58, "q5_k_m": 5.33, "q6_k": 6.14, "q8_0": 7.96}  # QUANT_OPTIONS


def test_block_sizes_are_the_ggml_structs():
    # block_q8_0: ggml_half d + int8_t qs[32]; block_q4_0: d + uint8_t qs[16]; block_q5_0: d + qh[4] + qs[16];
    # block_q5_1: d, m + qh[4] + qs[16]; block_q4_K: d, dmin + scales[12] + qs[128];
    # block_q5_K: d, dmin + scales[12] + qh[32] + qs[128]; block_q6_K: ql[128] + qh[64] + int8 scales[16] + d
    hand = {"q8_0": (34, 32), "q4_0": (18, 32), "q5_0": (22, 32), "q5_1": (24, 32), "q4_k": (144, 256),
            "q5_k": (176, 256), "q6_k": (210, 256)}  # fmt: skip
    for t, blk in hand.items():
        assert GGML_BLOCKS[t] == blk
    bits = {t: 8 * b / n for t, (b, n) in hand.items()}
    assert bits == {"q8_0": 8.5, "q4_0": 4.5, "q5_0": 5.5, "q5_1": 6.0, "q4_k": 4.5, "q5_k": 5.5, "q6_k": 6.5625}
    # the scalar figure of a file type is its base type's (the mix is gguf_weight_bytes)
    assert bytes_per_element("q8_0") == 34 / 32 and bytes_per_element("q4_k_m") == 144 / 256
    assert set(GGUF_PRECISIONS) <= set(STORAGE_PRECISIONS)


@pytest.mark.parametrize("ftype", sorted(LLAMA_3_8B_GIB))
def test_llama_3_8b_file_sizes_match_llama_quantize_listing_within_one_percent(load_spec, ftype):
    spec = load_spec("llama-3.1-8b")
    assert count_params(spec).total / 1e9 == pytest.approx(8.03, abs=0.005)
    assert gguf_weight_bytes(spec, ftype).total / GIB == pytest.approx(LLAMA_3_8B_GIB[ftype], rel=0.01)


def test_use_more_bits_picks_the_layers_llama_cpp_lists():
    # i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2, n = 32: layers 0-3, 28-31 and 6, 9, ..., 27 (hand enumerated)
    assert [i for i in range(32) if _more_bits(i, 32)] == [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]


def test_q4_k_m_mix_by_hand_for_llama_3_8b(load_spec):
    """16 of 32 layers keep attn_v and ffn_down at Q6_K, the head is Q6_K, everything else Q4_K, norms f32."""
    spec = load_spec("llama-3.1-8b")
    h, f, kv, v = 4096, 14336, 1024, 128256
    q4, q6 = 4.5 / 8, 6.5625 / 8
    attn = 32 * (2 * h * h + h * kv) * q4 + (16 * q4 + 16 * q6) * h * kv
    ffn = 32 * 2 * h * f * q4 + (16 * q4 + 16 * q6) * f * h
    w = gguf_weight_bytes(spec, "q4_k_m")
    assert w.attention == pytest.approx(attn, rel=1e-12) and w.ffn == pytest.approx(ffn, rel=1e-12)
    assert w.embedding == pytest.approx(v * h * q4) and w.lm_head == pytest.approx(v * h * q6)
    assert w.vectors == 4.0 * 32 * 2 * h and w.final_norm == 4.0 * h


def test_rows_not_a_whole_number_of_k_blocks_fall_back_as_llama_cpp_does(load_spec):
    """Qwen2.5-72B's FFN width 29568 is not a multiple of 256: ffn_down falls back from Q4_K to Q5_0 (5.5 bits)
    and from Q6_K to Q8_0 (8.5 bits) in the 40 use_more_bits layers of 80; attn_v of an 80-layer GQA model is Q5_K
    outside them (llama.cpp's 70B rule)."""
    spec = load_spec("qwen2.5-72b")
    h, f = spec.hidden, spec.ffn_hidden
    assert f % 256 and not f % 32
    more = sum(_more_bits(i, 80) for i in range(80))
    assert more == 40
    w = gguf_weight_bytes(spec, "q4_k_m")
    ffn = 80 * 2 * h * f * 4.5 / 8 + (80 - more) * f * h * 5.5 / 8 + more * f * h * 8.5 / 8
    assert w.ffn == pytest.approx(ffn, rel=1e-12)
    kv, q = spec.kv_dim, spec.q_dim
    attn = 80 * (2 * h * q + h * kv) * 4.5 / 8 + ((80 - more) * 5.5 + more * 6.5625) / 8 * h * kv
    assert w.attention == pytest.approx(attn, rel=1e-12)


def test_an_8_expert_model_keeps_attn_k_and_attn_v_at_q8_0_and_attn_output_at_q5_k(load_spec):
    """llama.cpp's n_expert == 8 rule (Mixtral): attn_k / attn_v Q8_0 in every file type, attn_output Q5_K in Q4_K_M;
    the experts' ffn_down Q6_K where use_more_bits, gate / up Q4_K; the router f32."""
    spec = load_spec("mixtral-8x7b")
    h, q, kv, f, n, e = spec.hidden, spec.q_dim, spec.kv_dim, spec.moe.expert_ffn_hidden, spec.layers, 8
    more = sum(_more_bits(i, n) for i in range(n))
    w = gguf_weight_bytes(spec, "q4_k_m")
    assert w.attention == pytest.approx(n * (h * q * 4.5 + 2 * h * kv * 8.5 + q * h * 5.5) / 8, rel=1e-12)
    down = (more * 6.5625 + (n - more) * 4.5) / 8 * e * f * h
    assert w.routed_experts == pytest.approx(n * e * 2 * h * f * 4.5 / 8 + down, rel=1e-12)
    assert w.ffn == pytest.approx(w.routed_experts + 4.0 * n * h * e, rel=1e-12)


def test_every_catalog_model_has_its_own_bits_per_weight(load_spec):
    """The mix is per tensor from the model's shapes: a larger model spends a smaller share on the Q6_K head, so
    70B comes out under 8B; every model lands between its base type and Q8_0, and the blocks' vectors are a
    tiny f32 share."""
    bpw = {}
    for name in Catalog.load().models:
        spec = load_spec(name)
        c = count_params(spec)
        w = gguf_weight_bytes(spec, "q4_k_m")
        bpw[name] = 8 * w.total / c.total
        assert 4.5 < bpw[name] < 8.5, name
        assert 0 <= w.vectors / 4 < 0.01 * c.blocks, name
        assert w.attention_params + w.ffn_params <= c.blocks
    assert bpw["llama-3.1-70b"] < bpw["llama-3.1-8b"] - 0.05


def test_inference_memory_holds_the_file_bytes_split_over_tp(load_spec):
    spec = load_spec("llama-3.1-8b")
    w = gguf_weight_bytes(spec, "q4_k_m")
    one = inference_memory(spec, batch=1, context=16, precision="q4_k_m").weights * GB
    assert one == pytest.approx(w.total, rel=1e-9)
    two = inference_memory(spec, batch=1, context=16, tp=2, precision="q4_k_m").weights * GB
    assert two == pytest.approx(w.total / 2, rel=1e-9)


BW_GPUS = ("rtx-4090", "h100-sxm", "l40s", "a100-sxm-80gb")


@given(gpu_id=st.sampled_from(BW_GPUS), ftype=st.sampled_from(GGUF_PRECISIONS),
       engine=st.sampled_from(["llama.cpp", "vllm", "sglang"]))  # fmt: skip
def test_batch_1_gguf_decode_streams_the_file_bytes(load_spec, gpu_id, ftype, engine):
    """Batch-1 decode is the weight read: above the engine's fixed overhead it halves when HBM bandwidth doubles,
    and the time over that of bf16 weights is the ratio of the bytes the two read (the matrices and the head)."""
    spec, gpu = load_spec("llama-3.1-8b"), get_gpu(gpu_id)
    faster = gpu.model_copy(update={"id": f"{gpu_id}-bw", "hbm_bandwidth_tb_per_s": 2 * gpu.hbm_bandwidth_tb_per_s})
    kw = dict(decode_batch=1, decode_context_tokens=1, engine=engine)
    over = get_engine(engine).iteration_overhead_s
    t = iteration_time_s(spec, gpu=gpu, precision=ftype, **kw) - over
    assert 0.5 - 1e-12 <= (iteration_time_s(spec, gpu=faster, precision=ftype, **kw) - over) / t <= 0.52
    t16 = iteration_time_s(spec, gpu=gpu, precision="bf16", **kw) - over
    c, w = count_params(spec), gguf_weight_bytes(spec, ftype)
    read = w.attention + w.ffn + w.lm_head
    read16 = 2.0 * (c.blocks + c.lm_head)
    assert t / t16 == pytest.approx(read / read16, rel=0.04)


def test_gguf_runs_the_int8_path_and_dequantises_above_32_rows_in_llama_cpp(load_spec):
    spec, gpu = load_spec("llama-3.1-8b"), get_gpu("rtx-4090")
    assert all(compute_precision(gpu, f) == "int8" for f in GGUF_PRECISIONS)
    m = {(p, e): IterationModel(spec, gpu=gpu, precision=p, engine=e, max_rows=64)
         for p in ("fp16", "q4_k_m") for e in ("llama.cpp", "vllm")}  # fmt: skip

    def t(p, e, rows):
        return m[(p, e)].time_s(prefill_tokens=rows, prefill_seqs=1)

    # up to 32 rows llama.cpp streams the packed blocks (a third of F16's bytes); from 33 it dequantises to fp16
    # and runs F16's GEMMs after that pass, so it costs more than F16; vLLM's GGUF kernels read packed at any size
    assert t("q4_k_m", "llama.cpp", 32) < 0.6 * t("fp16", "llama.cpp", 32)
    assert t("q4_k_m", "llama.cpp", 33) > t("fp16", "llama.cpp", 33)
    assert t("q4_k_m", "vllm", 33) < 0.6 * t("fp16", "vllm", 33)


def test_an_engine_that_loads_no_gguf_file_refuses_it_in_one_line(load_spec):
    spec, gpu = load_spec("llama-3.1-8b"), get_gpu("h100-sxm")
    with pytest.raises(InputError, match=r"precision='q4_k_m' is a GGUF file type and engine 'trtllm' loads no GGUF"):
        IterationModel(spec, gpu=gpu, precision="q4_k_m", engine="trtllm", max_rows=1)
    for engine in ("llama.cpp", "vllm", "sglang"):
        IterationModel(spec, gpu=gpu, precision="q4_k_m", engine=engine, max_rows=1)


def test_a_tensor_llama_cpp_cannot_block_is_refused(load_spec):
    spec = load_spec("llama-3.1-8b")
    odd = type(spec)(**{**spec.__dict__, "name": "odd", "hidden": 4100, "heads": 41, "kv_heads": 41})
    with pytest.raises(InputError, match="not a whole number of 32-weight"):
        gguf_weight_bytes(odd, "q8_0")
    with pytest.raises(InputError, match="not a GGUF file type"):
        gguf_weight_bytes(spec, "int4")


def test_scenarios_and_fleet_files_accept_gguf_and_refuse_it_on_trtllm():
    from scaleright.plan.scenario import parse_scenario
    from scaleright.serve.fleet_config import build_fleet, parse_fleet

    def scenario(engine):
        return {"name": "t", "model": "llama-3.1-8b", "task": "inference",
                "inference": {"requests_per_s": 1.0, "precision": "q4_k_m", "engine": engine},
                "constraints": {"max_gpus": 1, "gpu_types": ["rtx-4090"]},
                "pricing": {"mode": "on-demand", "price_usd_per_gpu_hour": {"rtx-4090": 0.5}}}  # fmt: skip

    assert parse_scenario(scenario("llama.cpp")).inference.precision == "q4_k_m"
    with pytest.raises(InputError, match=r"inference\.precision='q4_k_m' is a GGUF file type and engine 'trtllm'"):
        parse_scenario(scenario("trtllm"))

    def fleet(engine):
        return {"pools": [{"name": "p", "model": "llama-3.1-8b", "gpu": "rtx-4090", "engine": engine, "replicas": 1,
                           "precision": "q4_k_m"}],
                "services": [{"name": "s", "pools": ["p"], "rate": 1, "requests": 10}]}  # fmt: skip

    build_fleet(parse_fleet(fleet("llama.cpp")))
    with pytest.raises(InputError, match=r"fleet: pools\.0 \(p\): precision='q4_k_m' is a GGUF file type"):
        build_fleet(parse_fleet(fleet("trtllm")))


def test_the_cli_refuses_gguf_on_trtllm_in_one_line_exit_2(monkeypatch, capsys):
    from tests.cli_helpers import assert_one_line, run_main

    args = ["serve", "simulate", "--model", "llama-3.1-8b", "--gpu", "rtx-4090", "--rate", "1", "--requests", "5",
            "--input-len", "64", "--output-len", "8", "--precision", "q4_k_m"]  # fmt: skip
    code, out, err = run_main([*args, "--engine", "llama.cpp", "--json"], monkeypatch, capsys)
    assert code == 0 and '"tpot_ms"' in out, err
    assert_one_line(*run_main([*args, "--engine", "trtllm"], monkeypatch, capsys),
                    r"GGUF file type and engine 'trtllm' loads no GGUF file; llama\.cpp runs GGUF")  # fmt: skip


def test_a_plan_prints_no_precision_fallback_note_for_weight_only_gguf():
    from scaleright.plan.planner import _infer_precision_note

    for gid in ("rtx-4090", "h100-sxm", "mi300x"):
        assert all(_infer_precision_note(get_gpu(gid), f) is None for f in GGUF_PRECISIONS)
