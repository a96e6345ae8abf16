"""Data-parallel gradient and weight collectives as frameworks run them (issue #9 items 3 and 4).

Expected values are derived by hand from the ring algorithm (Thakur et al. 2005; nccl-tests doc/PERFORMANCE.md):
an all-gather or reduce-scatter of an ``S``-byte buffer over ``n`` ranks of one NVSwitch domain takes
``(n − 1)·α + (n − 1)/n · S / (b·η)`` with ``b`` the link's one-direction bandwidth and ``(η, α)`` the NVSwitch
fabric's fitted Simple-protocol pair (``data/collective_fits.yaml``, read here as input data). ZeRO-3 / FSDP gathers
every layer's 16-bit weights twice per micro-batch (forward, and again in backward after
``reshard_after_forward``) and reduce-scatters its gradients once per micro-batch, in fp32 where the framework
reduces in fp32 (torchtitan ``mixed_precision_reduce="float32"``, Composer ``mixed_precision: DEFAULT``).
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleright.catalog import get_gpu
from scaleright.estimate.collectives import CollectiveFits
from scaleright.estimate.comm import system_of
from scaleright.estimate.framework import FRAMEWORKS
from scaleright.estimate.memory import LoraConfig, lora_param_count
from scaleright.estimate.train import train_step_arrays
from scaleright.workload import load_model
from scaleright.workload.params import count_params

H100 = get_gpu("h100-sxm")
SPEC = load_model("llama-3.1-8b")
NO_PREFETCH = FRAMEWORKS["fsdp2"].with_overrides(fsdp_prefetch=False)


def _ring_one_node(nbytes: float, n: int) -> float:
    """All-gather / reduce-scatter of ``nbytes`` over ``n`` GPUs of one HGX H100 node, by hand (Simple protocol:
    the buffers here are hundreds of MB, where it beats LL by far)."""
    tier = system_of(H100).tiers[0]
    fit = CollectiveFits.builtin().fabric(tier.fabric)
    return (n - 1) * fit.alpha_us * 1e-6 + (n - 1) / n * nbytes / (tier.bandwidth_gb_per_s * 1e9 * fit.eta)


def _dp_comm(framework, *, global_batch=16, task="pretrain", zero=3, dp=8) -> float:
    out = train_step_arrays(SPEC, gpu=H100, seq_len=4096, global_batch=global_batch, dp=dp, zero=zero,
                            micro_batch=1, framework=framework, task=task,
                            lora=LoraConfig() if task == "lora" else None)  # fmt: skip
    return float(out["t_dp_comm"])


def test_fsdp_gathers_twice_and_reduce_scatters_once_per_layer_and_micro_batch():
    p, layers = count_params(SPEC).total, SPEC.layers
    n_micro = 16 // 8  # global batch 16 over dp 8 with micro-batch 1
    ag = _ring_one_node(2.0 * p / layers, 8)  # 16-bit weights of one layer
    rs = _ring_one_node(4.0 * p / layers, 8)  # fp32 gradients of one layer (torchtitan's reduce dtype)
    expected = n_micro * layers * (2 * ag + rs)
    assert math.isclose(_dp_comm(NO_PREFETCH), expected, rel_tol=1e-9)
    # one micro-batch fewer, one pass of gathers fewer: the gathers repeat every micro-batch
    assert math.isclose(_dp_comm(NO_PREFETCH, global_batch=8), expected / 2, rel_tol=1e-9)
    # reducing in 16 bits halves only the reduce-scatter bytes
    bf16 = NO_PREFETCH.with_overrides(grad_reduce_fp32=False)
    expected16 = n_micro * layers * (2 * ag + _ring_one_node(2.0 * p / layers, 8))
    assert math.isclose(_dp_comm(bf16), expected16, rel_tol=1e-9)


def test_lora_gathers_the_frozen_base_and_reduce_scatters_only_the_adapters():
    p, layers = count_params(SPEC).total, SPEC.layers
    adapters = lora_param_count(SPEC, LoraConfig())
    ag = _ring_one_node(2.0 * p / layers, 8)
    rs = _ring_one_node(4.0 * adapters / layers, 8)
    assert math.isclose(_dp_comm(NO_PREFETCH, task="lora"), 2 * layers * (2 * ag + rs), rel_tol=1e-9)


def test_zero12_reduces_gradients_in_fp32_and_gathers_weights_in_16_bits():
    p = count_params(SPEC).total
    # NeMo / Megatron-Bridge recipes' grad_reduce_in_fp32, whole collectives exposed
    fw = FRAMEWORKS["megatron-core"].with_overrides(dp_bucket_overlap=False, grad_reduce_fp32=True)
    expected = _ring_one_node(4.0 * p, 8) + _ring_one_node(2.0 * p, 8)
    assert math.isclose(_dp_comm(fw, zero=1), expected, rel_tol=1e-9)


def test_fp8_all_gather_halves_the_gathered_gemm_weights_only():
    c = count_params(SPEC)
    layers = SPEC.layers
    gemm_weights = c.blocks - layers * c.norms_per_layer  # every block parameter but the norms (dense model)
    gathered = 2.0 * c.total - 1.0 * gemm_weights  # 1 B per GEMM weight, 2 B for embeddings, head and norms
    fw = NO_PREFETCH.with_overrides(fp8_all_gather=True)
    out = train_step_arrays(SPEC, gpu=H100, seq_len=4096, global_batch=16, dp=8, zero=3, micro_batch=1,
                            framework=fw, precision="fp8")  # fmt: skip
    expected = 2 * layers * (2 * _ring_one_node(gathered / layers, 8) + _ring_one_node(4.0 * c.total / layers, 8))
    assert math.isclose(float(out["t_dp_comm"]), expected, rel_tol=1e-9)
    # in 16-bit training the switch changes nothing
    assert math.isclose(_dp_comm(fw), _dp_comm(NO_PREFETCH), rel_tol=1e-12)


def test_torchtitan_rows_that_name_the_float8_all_gather_run_it():
    from validation.train_cases import load_train_cases

    cases, _ = load_train_cases()
    on = {c.line for c in cases if c.framework.fp8_all_gather}
    assert on == {44, 45, 47}  # "FSDP2 with float8 all-gather" (H200) and "float8 tensorwise (f8 all-gather)"


def test_presets_say_where_gradients_are_reduced_in_fp32():
    fp32 = {name for name, f in FRAMEWORKS.items() if f.grad_reduce_fp32}
    assert fp32 == {"fsdp2", "llm-foundry"}
    assert "gradient reduce fp32" in FRAMEWORKS["fsdp2"].summary()
    assert "gradient reduce 16-bit" in FRAMEWORKS["deepspeed"].summary()


@settings(max_examples=40, deadline=None)
@given(dp=st.sampled_from([2, 4, 8, 16, 64]), zero=st.sampled_from([0, 1, 3]), mb=st.sampled_from([1, 2, 4]),
       accum=st.integers(1, 4), prefetch=st.booleans())  # fmt: skip
def test_reducing_in_fp32_never_makes_a_step_faster(dp, zero, mb, accum, prefetch):
    fw = FRAMEWORKS["fsdp2"].with_overrides(fsdp_prefetch=prefetch)
    kw = dict(gpu=H100, seq_len=2048, global_batch=dp * mb * accum, dp=dp, zero=zero, micro_batch=mb)
    t32 = train_step_arrays(SPEC, framework=fw, **kw)
    t16 = train_step_arrays(SPEC, framework=fw.with_overrides(grad_reduce_fp32=False), **kw)
    assert float(t32["step_time_s"]) >= float(t16["step_time_s"]) * (1 - 1e-12)
    assert float(t32["t_dp_comm"]) >= float(t16["t_dp_comm"]) * (1 - 1e-12)
    # prefetch hides at most what the exposed schedule shows, never less than the first gather / last reduce
    exposed = train_step_arrays(SPEC, framework=fw.with_overrides(fsdp_prefetch=False), **kw)
    assert float(t32["t_dp_comm"]) <= float(exposed["t_dp_comm"]) * (1 + 1e-12)
    assert np.isfinite(float(t32["step_time_s"]))


def test_automodel_70b_rows_run_with_activation_checkpointing_because_they_cannot_fit_without():
    """NeMo Automodel's table states no checkpointing. Korthikanti et al. 2022 (eq. 2, sequence parallel, flash
    attention: no 5as/h score term) put one layer's saved activations at 34·s·b·h/t bytes: for Llama 3 70B LoRA at
    tp2, micro-batch 2 x 4096, 80 layers, that is 34·4096·2·8192·80/2 = 91 GB, above an 80 GB H100 before any
    weight; the 8B LoRA row on one GPU (32 layers, h 4096, tp1) needs 34·4096·2·4096·32 = 36.5 GB and fits."""
    from validation.train_cases import load_train_cases

    by_line = {c.line: c for c in load_train_cases()[0] if c.group == "NeMo Automodel H100"}
    bound_70b = 34 * 4096 * 2 * 8192 * 80 / 2
    assert bound_70b > by_line[52].gpu.memory_gb * 1e9
    for line in (50, 52, 53):
        assert by_line[line].layout.recompute == "full"
        assert any(a.startswith("full activation checkpointing") for a in by_line[line].assumptions)
    assert 34 * 4096 * 2 * 4096 * 32 < by_line[51].gpu.memory_gb * 1e9 / 2
    assert by_line[51].layout.recompute == "none"


def test_torchtitan_selective_checkpointing_is_per_op_in_the_time_model_as_in_the_memory_model():
    """torchtitan's selective AC defaults to ``selective_ac_option = "op"`` (its llama3 configs; the asyncTP rows say
    "per-op SAC"): the step-time rows read it as ``op-selective``, as validation/memory_cases.py does."""
    from validation.train_cases import load_train_cases

    titan = [c for c in load_train_cases()[0] if c.group.startswith("torchtitan")]
    sac = [c for c in titan if c.layout.recompute not in ("none", "full")]
    assert sac and all(c.layout.recompute == "op-selective" for c in sac)
