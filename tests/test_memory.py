"""The memory model against published figures and hand formulas: model states (ZeRO), activations (Korthikanti et
al. 2022), pipeline in-flight micro-batches, KV cache, quantised weights, LoRA / QLoRA, and layout validation.

Every expected number is a published figure (source beside it) or a formula re-derived by hand from the paper and
the model's config.json; tolerances are stated with each check.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleright.errors import LayoutError
from scaleright.estimate.layout import Layout
from scaleright.estimate.memory import (
    LORA_TARGETS,
    LoraConfig,
    activation_bytes_per_layer,
    inference_memory,
    inference_memory_arrays,
    kv_cache_bytes,
    lora_param_count,
    model_state_bytes,
    training_memory,
    training_memory_arrays,
)
from scaleright.workload import count_params

GB = 1e9
FAST = settings(max_examples=40, deadline=None)


def total_model_states(spec, **kw) -> np.ndarray:
    w, g, o = model_state_bytes(spec, **kw)
    return np.asarray(w + g + o)


# ----------------------------------------------------------------------------------------------------------------
# Model states: ZeRO (Rajbhandari et al. 2020)
# ----------------------------------------------------------------------------------------------------------------

ZERO_FIGURE_1_GB = {0: 120.0, 1: 31.4, 2: 16.6, 3: 1.9}  # Figure 1: Ψ = 7.5 B, N_d = 64, K = 12


@pytest.fixture(scope="module")
def llama_7_5b(llama2_7b):
    """Llama-2-7B deepened to 36 layers (7.55 B parameters), near the ZeRO paper's Ψ = 7.5 B."""
    return llama2_7b.replace(layers=36)


def test_llama_7_5b_fixture_count_is_hand_derived(llama_7_5b):
    V, h, L, f = 32000, 4096, 36, 11008  # Llama-2-7b config.json, 36 layers
    assert count_params(llama_7_5b).total == V * h + L * (4 * h * h + 3 * h * f + 2 * h) + h + V * h


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_zero_stages_reproduce_zero_paper_figure_1(llama_7_5b, stage):
    """Rajbhandari et al. 2020, section 3.1 and Figure 1, mixed-precision Adam (K = 12) over N_d = 64 GPUs:
    baseline (2 + 2 + K)Ψ; P_os 2Ψ + 2Ψ + KΨ/N_d; P_os+g 2Ψ + (2 + K)Ψ/N_d; P_os+g+p (2 + 2 + K)Ψ/N_d.
    Checked exactly for this spec's Ψ, then scaled to Ψ = 7.5e9 against the printed 120 / 31.4 / 16.6 / 1.9 GB
    (to 0.05 GB, the figure's rounding)."""
    V, h, L, f = 32000, 4096, 36, 11008
    psi = V * h + L * (4 * h * h + 3 * h * f + 2 * h) + h + V * h
    n_d, k = 64, 12
    expected = {
        0: (2 * psi, 2 * psi, k * psi),
        1: (2 * psi, 2 * psi, k * psi / n_d),
        2: (2 * psi, 2 * psi / n_d, k * psi / n_d),
        3: (2 * psi / n_d, 2 * psi / n_d, k * psi / n_d),
    }[stage]
    got = model_state_bytes(llama_7_5b, dp=n_d, zero=stage, precision="bf16", optimizer="adamw")
    np.testing.assert_allclose([float(x) for x in got], expected, rtol=1e-12)
    per_gpu_at_7_5b = sum(float(x) for x in got) * 7.5e9 / psi / GB
    assert per_gpu_at_7_5b == pytest.approx(ZERO_FIGURE_1_GB[stage], abs=0.05)


def test_full_finetune_needs_about_16_bytes_per_parameter(load_spec):
    """Seed article (multi-gpu-vs-single-gpu-scaling-economics-2026-guide): "~16 GB VRAM per billion parameters ... a
    13 B model needs ~208 GB ... a 70-billion-parameter model demands over 1.1 TB" — i.e. ZeRO's 2 + 2 + 12 bytes.
    Llama-2-13b has 13.02 B parameters (model states within 2 % of 208 GB); Llama-2-70b 68.98 B (> 1.1 TB)."""
    assert float(total_model_states(load_spec("llama-2-13b"))) / GB == pytest.approx(208, rel=0.02)
    assert float(total_model_states(load_spec("llama-2-70b"))) > 1.1e12


@FAST
@given(data=st.data(), zero=st.integers(0, 3), tp=st.sampled_from([1, 2, 4, 8]), pp=st.sampled_from([1, 2, 4]))
def test_more_data_parallel_gpus_never_raise_model_states_per_gpu(shipped_names, load_spec, data, zero, tp, pp):
    """STYLE habit 9 / ZeRO: sharding over more GPUs never adds memory. dp = 1..512 evaluated as one array."""
    spec = load_spec(data.draw(st.sampled_from(shipped_names)))
    dp = np.arange(1, 513)
    states = total_model_states(spec, dp=dp, tp=tp, pp=pp, zero=zero)
    assert np.all(np.diff(states) <= 0)
    if zero == 3:
        assert states[-1] < states[0]


@FAST
@given(data=st.data(), seq=st.sampled_from([512, 2048, 8192]), mb=st.integers(1, 4))
def test_more_zero3_gpus_never_raise_training_memory_per_gpu(shipped_names, load_spec, data, seq, mb):
    """The same over the whole training footprint (activations and ZeRO-3 gather buffers do not depend on dp)."""
    spec = load_spec(data.draw(st.sampled_from(shipped_names)))
    arrs = training_memory_arrays(spec, seq_len=seq, dp=np.arange(1, 513), zero=3, micro_batch=mb)
    total = sum(arrs.values())
    assert np.all(np.diff(total) <= 0)


# ----------------------------------------------------------------------------------------------------------------
# Activations: Korthikanti et al. 2022, Table 2
# ----------------------------------------------------------------------------------------------------------------


def _korthikanti(s, b, h, a, t, case):
    """Table 2 of Korthikanti et al. 2022 (bytes per layer, 16-bit activations, GPT layer with dropout)."""
    sbh = s * b * h
    return {
        "none": sbh * (34 + 5 * a * s / h),
        "tp": sbh * (10 + 24 / t + 5 * a * s / (h * t)),
        "tp+sp": sbh * (34 / t + 5 * a * s / (h * t)),
        "tp+selective": sbh * (10 + 24 / t),
        "tp+sp+selective": sbh * 34 / t,
        "full": 2 * sbh,
    }[case]


KORTHIKANTI_CASES = {
    # case: (tp applies, sequence_parallel, recompute)
    "none": (False, False, "none"),
    "tp": (True, False, "none"),
    "tp+sp": (True, True, "none"),
    "tp+selective": (True, False, "selective"),
    "tp+sp+selective": (True, True, "selective"),
    "full": (False, False, "full"),
}


@pytest.mark.parametrize("case", list(KORTHIKANTI_CASES))
@pytest.mark.parametrize(("model", "s", "b", "t"), [("gpt3-175b", 2048, 1, 8), ("gpt2", 1024, 4, 4)])
def test_gpt_activations_equal_korthikanti_table_2(load_spec, gpt3_175b, model, s, b, t, case):
    """GPT layers with dropout (both configs have p = 0.1), no flash attention: exact to 1e-9.
    Shapes from config.json: GPT-3 175B h = 12288, a = 96; GPT-2 h = 768, a = 12."""
    spec = gpt3_175b if model == "gpt3-175b" else load_spec(model)
    h, a = {"gpt3-175b": (12288, 96), "gpt2": (768, 12)}[model]
    assert spec.dropout and (spec.hidden, spec.heads) == (h, a)
    use_tp, sp, rc = KORTHIKANTI_CASES[case]
    tp = t if use_tp else 1
    got = activation_bytes_per_layer(
        spec, seq_len=s, micro_batch=b, tp=tp, sequence_parallel=sp, recompute=rc, flash_attention=False
    )
    assert float(got) == pytest.approx(_korthikanti(s, b, h, a, tp, case), rel=1e-9)


@FAST
@given(
    data=st.data(),
    seq=st.integers(1, 32768),
    mb=st.integers(1, 8),
    tp=st.sampled_from([1, 2, 4, 8]),
    cp=st.sampled_from([1, 2]),
    sp=st.booleans(),
    flash=st.booleans(),
)
def test_recomputation_never_increases_activations(shipped_names, load_spec, data, seq, mb, tp, cp, sp, flash):
    """full ≤ selective ≤ none, per layer and for the whole (pp = 1) stage including the full-recompute
    working layer."""
    spec = load_spec(data.draw(st.sampled_from(shipped_names)))
    kw = dict(seq_len=seq, micro_batch=mb, tp=tp, cp=cp, sequence_parallel=sp, flash_attention=flash)
    per = {rc: float(activation_bytes_per_layer(spec, recompute=rc, **kw)) for rc in ("none", "selective", "full")}
    assert per["full"] <= per["selective"] <= per["none"]
    stage = {
        rc: float(training_memory_arrays(spec, recompute=rc, **kw)["activations"])
        for rc in ("none", "selective", "full")
    }
    assert stage["full"] <= stage["selective"] <= stage["none"]


# ----------------------------------------------------------------------------------------------------------------
# Pipeline: micro-batches in flight (Korthikanti et al. 2022, section 4.2.3)
# ----------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def llama_8b_layer_bytes(llama_8b):
    """One Llama-3.1-8B layer's activations at s = 4096, b = 1 (the unit of the pipeline tests)."""
    return float(activation_bytes_per_layer(llama_8b, seq_len=4096, micro_batch=1))


def test_first_1f1b_stage_holds_pp_micro_batches(llama_8b, llama_8b_layer_bytes):
    """With 1F1B the first stage keeps p micro-batches of its L/p layers: the activations of L layers whatever p is
    (section 4.2.3). L = 32, pp = 4, 8 micro-batches; the first stage outweighs the last (8 layers + logits)."""
    acts = training_memory_arrays(llama_8b, seq_len=4096, pp=4, n_micro=8)["activations"]
    assert float(acts) == pytest.approx(32 * llama_8b_layer_bytes, rel=1e-12)
    # fewer micro-batches than stages: only those are ever in flight
    acts_2 = training_memory_arrays(llama_8b, seq_len=4096, pp=4, n_micro=2)["activations"]
    assert float(acts_2) == pytest.approx(2 * 8 * llama_8b_layer_bytes, rel=1e-12)


@pytest.mark.parametrize(("pp", "v"), [(4, 2), (4, 4), (2, 8)])
def test_interleaved_schedule_multiplies_in_flight_activations(llama_8b, llama_8b_layer_bytes, pp, v):
    """Interleaved 1F1B with v model chunks per stage stores L·(1 + (p − 1)/(p·v)) layers' activations on the first
    stage (Korthikanti et al. 2022, section 4.2.3, after Narayanan et al. 2021)."""
    acts = training_memory_arrays(llama_8b, seq_len=4096, pp=pp, virtual_stages=v, n_micro=16)["activations"]
    assert float(acts) == pytest.approx(32 * llama_8b_layer_bytes * (1 + (pp - 1) / (pp * v)), rel=1e-12)


# ----------------------------------------------------------------------------------------------------------------
# KV cache
# ----------------------------------------------------------------------------------------------------------------


def test_llama_70b_kv_cache_is_320_kib_per_token(llama_70b):
    """K and V for 80 layers × 8 KV heads × head_dim 128 in bf16 (config.json): 2·80·8·128·2 B = 327,680 B per token,
    times batch × context."""
    per_token = 2 * 80 * 8 * 128 * 2
    assert per_token == 327_680
    assert float(kv_cache_bytes(llama_70b, batch=1, context=1)) == per_token
    assert float(kv_cache_bytes(llama_70b, batch=4, context=8192)) == 4 * 8192 * per_token


def test_falcon_multi_query_caches_one_kv_head(load_spec):
    """Falcon-7B is multi-query (one K/V head of 4544/71 = 64, 32 layers; config.json): 2·32·1·64·2 B = 8 KiB per
    token, and tensor parallelism cannot split the single head (each rank keeps a copy)."""
    falcon = load_spec("falcon-7b")
    assert float(kv_cache_bytes(falcon, batch=1, context=1)) == 2 * 32 * 1 * 64 * 2
    assert float(kv_cache_bytes(falcon, batch=1, context=1, tp=2)) == 2 * 32 * 1 * 64 * 2


def test_deepseek_mla_caches_the_latent_and_rope_key(deepseek_v3):
    """DeepSeek-V2 paper (arXiv:2405.04434, section 2.1 and Table 1: (d_c + d_h^R)·l values per token) with the V3
    config: MLA caches kv_lora_rank + qk_rope_head_dim = 512 + 64 values per token and layer, 61 layers, replicated
    on every tensor-parallel rank."""
    per_token = (512 + 64) * 61 * 2
    assert float(kv_cache_bytes(deepseek_v3, batch=1, context=1)) == per_token
    assert float(kv_cache_bytes(deepseek_v3, batch=3, context=1000, tp=8)) == 3 * 1000 * per_token


@pytest.mark.parametrize(("tp", "heads_per_rank"), [(1, 8), (4, 2), (8, 1), (16, 1)])
def test_gqa_kv_heads_split_over_tp_then_replicate(llama_70b, tp, heads_per_rank):
    """8 KV heads: tp ≤ 8 splits them; tp = 16 gives each rank one (replicated) head, not half a head."""
    assert float(kv_cache_bytes(llama_70b, batch=1, context=1, tp=tp)) == 2 * 80 * heads_per_rank * 128 * 2


def test_gemma_2_local_layers_cap_the_cache_at_the_window(load_spec):
    """Gemma 2 (Gemma Team 2024) alternates local (window 4096) and global layers: 21 of 42 layers in
    gemma-2-9b, 8 KV heads of 256 (config.json), 2·8·256·2 = 8192 B per token and layer. At 8192 tokens the local
    layers hold 4096."""
    gemma = load_spec("gemma-2-9b")
    per = 2 * 8 * 256 * 2
    assert float(kv_cache_bytes(gemma, batch=1, context=8192)) == (21 * 8192 + 21 * 4096) * per


@FAST
@given(
    data=st.data(),
    b1=st.integers(1, 512),
    b2=st.integers(1, 512),
    c1=st.integers(1, 2**19),
    c2=st.integers(1, 2**19),
    tp=st.sampled_from([1, 2, 4, 8, 16]),
)
def test_kv_cache_is_exactly_linear_in_batch_and_context(shipped_names, load_spec, data, b1, b2, c1, c2, tp):
    """For full-attention models the cache is additive in batch and in context, exactly (integer bytes). Models
    with sliding-window layers (Gemma 2, Phi-3-mini) are linear only up to the window: checked above."""
    spec = load_spec(data.draw(st.sampled_from(shipped_names)))
    if spec.local_layer_count():
        c1, c2 = min(c1, spec.sliding_window // 2), min(c2, spec.sliding_window // 2)

    def kv(b, c):
        return float(kv_cache_bytes(spec, batch=b, context=c, tp=tp))

    assert kv(b1 + b2, c1) == kv(b1, c1) + kv(b2, c1)
    assert kv(b1, c1 + c2) == kv(b1, c1) + kv(b1, c2)


def test_kv_cache_with_uneven_pipeline_is_that_of_the_fullest_stage(load_spec):
    """Llama-3.1-405B has 126 layers: over 4 stages the fullest holds ceil(126/4) = 32, i.e.
    32·2·8·128·2 B = 131,072 B per token (the same stage the weights are counted for)."""
    spec = load_spec("llama-3.1-405b")
    assert float(kv_cache_bytes(spec, batch=1, context=1, pp=4)) == 32 * 2 * 8 * 128 * 2


# ----------------------------------------------------------------------------------------------------------------
# Inference weights by precision
# ----------------------------------------------------------------------------------------------------------------


def _inference_weights(spec, precision, tp=1, pp=1):
    return float(inference_memory_arrays(spec, batch=1, context=1, tp=tp, pp=pp, precision=precision)["weights"])


@FAST
@given(data=st.data(), tp=st.sampled_from([1, 2, 4]), pp=st.sampled_from([1, 2, 4]))
def test_lower_precision_weights_take_less_memory(shipped_names, load_spec, data, tp, pp):
    """int4 (0.5 B + group scales) < fp8 (1 B) < bf16 (2 B) per block weight; fp32 is exactly twice bf16."""
    spec = load_spec(data.draw(st.sampled_from(shipped_names)))
    w = {p: _inference_weights(spec, p, tp, pp) for p in ("int4", "fp8", "bf16", "fp32")}
    assert w["int4"] < w["fp8"] < w["bf16"]
    assert w["fp32"] == pytest.approx(2 * w["bf16"], rel=1e-12)


def test_bf16_inference_weights_are_two_bytes_per_parameter(llama_8b):
    """8,030,261,248 parameters (hand count in test_workload) × 2 B on one GPU."""
    assert _inference_weights(llama_8b, "bf16") == 2 * 8_030_261_248


def test_quantised_weights_on_a_pipeline_stage_quantise_every_block_weight(llama_8b):
    """Llama-3.1-8B, int4, pp = 2: the fullest stage holds 16 layers (218,112,000 parameters each by hand: 2h² + 2h·1024
    + 3h·14336 + 2h, h = 4096) at 0.5 + 4/128 B (group-128 fp16 scale and zero point, GPTQ/AWQ) plus the 16-bit head
    and final norm, V·h + h with V = 128256; 0.1 % tolerance for the norm weights."""
    h, V = 4096, 128256
    per_layer = 2 * h * h + 2 * h * 1024 + 3 * h * 14336 + 2 * h
    expected = 16 * per_layer * (0.5 + 4 / 128) + (V * h + h) * 2
    assert _inference_weights(llama_8b, "int4", pp=2) == pytest.approx(expected, rel=1e-3)


# ----------------------------------------------------------------------------------------------------------------
# LoRA / QLoRA
# ----------------------------------------------------------------------------------------------------------------


def test_lora_rank_8_on_q_and_v_of_llama_2_7b_trains_4_2_million_parameters(llama2_7b):
    """Hu et al. 2021: each adapted W (d_out × d_in) gains A (r × d_in) and B (d_out × r). Llama-2-7b: q and v are
    4096 × 4096 (MHA), 32 layers, r = 8: 32 · 2 · 8 · (4096 + 4096) = 4,194,304 — PEFT's well-known
    "trainable params: 4,194,304 || all params: 6,742,609,920" for this model."""
    expected = 32 * 2 * 8 * (4096 + 4096)
    assert expected == 4_194_304
    assert lora_param_count(llama2_7b, LoraConfig(rank=8, targets=("q", "v"))) == expected
    assert count_params(llama2_7b).total + expected == 6_742_609_920


def test_qlora_weights_of_a_7b_model_are_about_4_gb(llama2_7b):
    """Dettmers et al. 2023, section 3: NF4 with double quantisation costs 4.127 bits per parameter; embeddings and
    the head stay 16-bit. Llama-2-7b: 32 layers of 4h² + 3h·f + 2h (h = 4096, f = 11008) at 4.127/8 B, plus
    2·V·h + h (V = 32000) at 2 B, plus 16-bit r = 8 q/v adapters: 3.87 GB, inside the 3.5-4.5 GB usually quoted."""
    h, f, V, L = 4096, 11008, 32000, 32
    blocks = L * (4 * h * h + 3 * h * f + 2 * h)
    expected = blocks * 4.127 / 8 + (2 * V * h + h) * 2 + 4_194_304 * 2
    mem = training_memory(
        llama2_7b, layout=Layout(), seq_len=512, task="qlora", lora=LoraConfig(rank=8, targets=("q", "v"))
    )
    assert mem.weights == pytest.approx(expected / GB, rel=1e-4)
    assert 3.5 <= mem.weights <= 4.5


def test_qlora_finetunes_a_65b_model_on_one_48gb_gpu(llama_65b):
    """QLoRA abstract (Dettmers et al. 2023): "finetune a 65B parameter model on a single 48GB GPU".
    Assumptions, as in the paper's Guanaco runs: LLaMA-65B (shape from Touvron et al. 2023, see the fixture),
    LoRA r = 64 on all linear layers, gradient checkpointing (full recompute), paged 32-bit AdamW; and a modest
    batch: one sequence of 512 tokens, flash attention, the default 1 GB runtime overhead."""
    assert count_params(llama_65b).total == pytest.approx(65.2e9, rel=0.005)  # Touvron et al. 2023 Table 2: 65.2B
    mem = training_memory(
        llama_65b, layout=Layout(micro_batch=1, recompute="full"), seq_len=512, task="qlora",
        lora=LoraConfig(rank=64, targets=LORA_TARGETS), gpu_memory_gb=48,
    )  # fmt: skip
    assert mem.fits, mem.as_dict()
    # ... which a 16-bit LoRA of the same model cannot (130 GB of weights alone)
    lora16 = training_memory(
        llama_65b, layout=Layout(micro_batch=1, recompute="full"), seq_len=512, task="lora",
        lora=LoraConfig(rank=64), gpu_memory_gb=48,
    )  # fmt: skip
    assert not lora16.fits


def test_qlora_16_bit_embedding_stays_whole_on_its_pipeline_stage(load_spec):
    """Llama-2-70b, pp = 4: the fullest stage has 20 layers (4.127-bit NF4, Dettmers et al. 2023) plus one whole
    16-bit V·h table (V = 32000, h = 8192), never a quarter of both; 16-bit rank-8 q adapters over 80/4 layers."""
    spec = load_spec("llama-2-70b")
    h, V, f, kv = 8192, 32000, 28672, 1024
    per_layer = 2 * h * h + 2 * h * kv + 3 * h * f + 2 * h
    adapters = 20 * 8 * (h + h)
    expected = 20 * per_layer * 4.127 / 8 + V * h * 2 + adapters * 2
    got = training_memory_arrays(
        spec, seq_len=512, pp=4, task="qlora", lora=LoraConfig(rank=8, targets=("q",))
    )["weights"]
    assert float(got) == pytest.approx(expected, rel=1e-4)


# ----------------------------------------------------------------------------------------------------------------
# Layout validation (operands in every message)
# ----------------------------------------------------------------------------------------------------------------


def test_tp_must_divide_attention_heads(llama_8b):
    with pytest.raises(LayoutError, match=r"tp\(3\) does not divide num_attention_heads\(32\)"):
        Layout(tp=3).validate(llama_8b)


def test_layout_product_must_equal_gpu_count():
    with pytest.raises(LayoutError, match=r"tp\(2\) \* pp\(2\) \* dp\(2\) \* cp\(1\) = 8 != gpus\(10\)"):
        Layout(tp=2, pp=2, dp=2).validate(gpus=10)


def test_ep_must_divide_the_expert_count(mixtral_8x7b):
    with pytest.raises(LayoutError, match=r"ep\(3\) does not divide num_experts\(8\)"):
        Layout(dp=3, ep=3).validate(mixtral_8x7b)


def test_ep_times_etp_must_divide_the_stage_group(mixtral_8x7b):  # MoE parallel folding: ep·etp | tp·cp·dp
    with pytest.raises(LayoutError, match=r"ep\(4\) \* etp\(= tp, 1\) = 4 does not divide tp\(1\) \* cp\(1\)"):
        Layout(dp=2, ep=4).validate(mixtral_8x7b)


def test_inference_memory_validates_its_layout(llama_8b):
    with pytest.raises(LayoutError, match=r"tp\(3\) does not divide num_attention_heads\(32\)"):
        inference_memory(llama_8b, batch=1, context=1, tp=3)
