"""MoE training as Megatron-Core runs it (issue #9 item 6) and the pipeline schedules the search now tries.

MoE parallel folding (Megatron-Core docs, "MoE Parallel Folding"; Liu et al. 2025, arXiv:2504.14960): a stage's
``tp·cp·dp`` GPUs are regrouped for the experts as ``etp · ep · edp`` (expert rank order etp, ep, edp), so
``ep · etp`` must divide ``tp · cp · dp``. The all-to-all dispatcher sends each GPU's sequence-parallel tokens,
``top_k`` copies each, over the EP group (ranks ``etp`` apart) and back; its cost is the measured all-to-all of the
tiers that group spans (``collectives.collective_time_s``, the independent reference here). Pipelines: 1F1B runs
``m + p − 1`` micro-batch slots for any ``m``, the interleaved schedule ``m + (p − 1)/v`` with ``v`` times the
activation sends (Narayanan et al. 2021, sec. 2.2).
"""

from __future__ import annotations

import functools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleright.catalog import get_gpu
from scaleright.catalog.systems import system_for
from scaleright.errors import LayoutError
from scaleright.estimate.collectives import collective_time_s
from scaleright.estimate.layout import Layout
from scaleright.estimate.memory import training_memory
from scaleright.estimate.train import estimate_train, train_step_arrays
from scaleright.workload import count_params, load_model


@functools.cache
def _spec(name: str):
    return load_model(name)


def test_tp2_ep32_on_256_gpus_is_valid_with_folding_and_refused_without():
    spec = _spec("deepseek-v3")  # 256 routed experts
    folded = Layout(tp=2, pp=8, dp=16, ep=32, etp=1)  # the layout: today "ep(32) does not divide dp(16)"
    assert folded.validate(spec, gpus=256) is folded
    assert folded.edp == 1  # tp·cp·dp = 32 GPUs a stage, all in the EP group
    with pytest.raises(LayoutError, match=r"ep\(32\) \* etp\(= tp, 2\) = 64 does not divide"):
        Layout(tp=2, pp=8, dp=16, ep=32).validate(spec)  # etp defaults to tp (Megatron-Core)


def test_etp_must_divide_the_expert_ffn_and_is_for_moe_models_only():
    with pytest.raises(LayoutError, match=r"etp\(3\) does not divide moe_intermediate_size\(14336\)"):
        Layout(tp=1, dp=3, ep=1, etp=3).validate(_spec("mixtral-8x7b"))
    with pytest.raises(LayoutError, match=r"etp\(1\) != tp\(2\) but the model has no experts"):
        Layout(tp=2, dp=2, etp=1).validate(_spec("llama-3.1-8b"))
    assert Layout(tp=2, dp=2, etp=2).validate(_spec("llama-3.1-8b"))  # etp = tp is the default, spelled out


def _ep_only(spec, gpu, system, lay: Layout, seq_len: int, **kw) -> dict[str, float]:
    r = train_step_arrays(spec, gpu=gpu, system=system, seq_len=seq_len, global_batch=lay.global_batch,
                          **lay.kwargs(), **kw)
    return {k: float(v) for k, v in r.items()}


@pytest.mark.parametrize(("tp", "dp", "ep"), [(1, 8, 8), (2, 16, 8), (2, 16, 32), (8, 8, 64)])
def test_the_all_to_all_is_the_measured_collective_of_the_ep_group(tp, dp, ep):
    """etp = 1: per MoE layer and micro-batch, dispatch + combine forward and again backward, each one all-to-all of
    (s·b/cp)/tp tokens × top_k × hidden × 2 bytes over ep ranks 1 apart (expert order etp, ep, edp)."""
    spec = _spec("deepseek-v3")
    gpu = get_gpu("h100-sxm")
    system = system_for(gpu.id)
    seq, mb, gb = 4096, 1, 4 * dp
    lay = Layout(tp=tp, pp=1, dp=dp, ep=ep, etp=1, micro_batch=mb, global_batch=gb, sequence_parallel=tp > 1)
    lay.validate(spec)
    c = count_params(spec)
    got = _ep_only(spec, gpu, system, lay, seq)["t_ep_comm"]
    nbytes = seq * mb / tp * spec.moe.top_k * spec.hidden * 2.0
    a2a = float(collective_time_s("all_to_all", nbytes, system=system, size=ep, stride=1))
    n_micro = gb // (dp * mb)
    want = n_micro * c.moe_layers * 2 * 2 * a2a  # moe layers × (fwd + bwd) × (dispatch + combine)
    assert got == pytest.approx(want, rel=1e-9)


def test_an_ep_group_that_leaves_the_nvlink_domain_pays_the_network():
    """EP8 with etp = 1 sits in one HGX node (ranks 1 apart); with etp = 2 its ranks are 2 apart and span two nodes,
    so the same bytes cross the NICs: never cheaper, and here much dearer."""
    spec = _spec("mixtral-8x7b")
    gpu = get_gpu("h100-sxm")
    system = system_for(gpu.id)
    inside = Layout(tp=2, dp=8, ep=8, etp=1, global_batch=32, sequence_parallel=True)
    across = Layout(tp=2, dp=8, ep=8, etp=2, global_batch=32, sequence_parallel=True)
    t_in = _ep_only(spec, gpu, system, inside, 4096)
    t_out = _ep_only(spec, gpu, system, across, 4096)
    nbytes = 4096 / 2 * spec.moe.top_k * spec.hidden * 2.0
    a_in = float(collective_time_s("all_to_all", nbytes, system=system, size=8, stride=1))
    a_out = float(collective_time_s("all_to_all", nbytes, system=system, size=8, stride=2))
    assert a_out > a_in
    assert t_out["t_ep_comm"] > t_in["t_ep_comm"]


@settings(max_examples=30, deadline=None)
@given(tp=st.sampled_from([1, 2, 4]), ep=st.sampled_from([2, 4, 8]), dp=st.sampled_from([8, 16, 32]),
       mb=st.sampled_from([1, 2]))  # fmt: skip
def test_dispatch_overlap_never_slows_a_step_and_hides_at_most_the_all_to_all(tp, ep, dp, mb):
    spec = _spec("mixtral-8x7b")
    gpu = get_gpu("h100-sxm")
    system = system_for(gpu.id)
    lay = Layout(tp=tp, dp=dp, ep=ep, etp=1, micro_batch=mb, global_batch=dp * mb * 2, sequence_parallel=tp > 1)
    lay.validate(spec)
    off = _ep_only(spec, gpu, system, lay, 4096)
    on = _ep_only(spec, gpu, system, lay, 4096, ep_comm_overlap=True)
    assert on["step_time_s"] <= off["step_time_s"] * (1 + 1e-12)
    assert on["t_ep_comm"] >= 0.0
    # only the all-to-all can hide: everything else in the step is unchanged
    for k in ("t_compute", "t_tp_comm", "t_dp_comm", "t_optimizer"):
        assert on[k] == pytest.approx(off[k], rel=1e-12)


def test_expert_memory_is_split_over_ep_times_etp():
    """Routed-expert weights per GPU: all of them / (ep · etp) (replicated over edp); dense weights / tp."""
    spec = _spec("mixtral-8x7b")
    c = count_params(spec)
    kw = dict(seq_len=4096, precision="bf16", task="pretrain")
    a = training_memory(spec, layout=Layout(tp=2, dp=8, ep=8, etp=1), **kw)
    b = training_memory(spec, layout=Layout(tp=2, dp=8, ep=8, etp=2), **kw)
    # etp 1 -> 2 halves the expert share: the difference is the experts' 16-bit weights / (ep·2)
    assert a.weights - b.weights == pytest.approx(c.routed_experts_total * 2.0 / (8 * 2) / 1e9, rel=1e-6)


def test_interleaving_sends_v_times_the_activations_and_cuts_the_bubble_by_v():
    spec = _spec("llama-3.1-70b")
    gpu = get_gpu("h100-sxm")
    system = system_for(gpu.id)
    base = Layout(tp=8, pp=4, dp=2, micro_batch=1, global_batch=16, sequence_parallel=True)
    one = _ep_only(spec, gpu, system, base, 4096, framework="megatron-core")  # an interleaved schedule
    two = _ep_only(spec, gpu, system, base.replace(virtual_stages=2), 4096, framework="megatron-core")
    assert two["t_pp_comm"] == pytest.approx(2 * one["t_pp_comm"], rel=1e-12)
    slot = lambda r: sum(r[f"t_{k}"] for k in ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "pp_comm")) \
        / r["n_micro"]  # noqa: E731
    assert one["t_bubble"] == pytest.approx(3 * slot(one), rel=1e-12)  # (p − 1) slots
    assert two["t_bubble"] == pytest.approx(3 / 2 * slot(two), rel=1e-12)  # (p − 1)/v slots


@pytest.mark.parametrize("m", [1, 2, 3])
def test_fewer_micro_batches_than_stages_run_m_plus_p_minus_one_slots(m):
    """1F1B (and GPipe) with m < p micro-batches: the pipeline fills and drains once, m + p − 1 slots."""
    spec = _spec("llama-3.1-8b")
    gpu = get_gpu("h100-sxm")
    system = system_for(gpu.id)
    lay = Layout(pp=4, dp=1, micro_batch=1, global_batch=m)
    r = _ep_only(spec, gpu, system, lay, 4096)
    slot = sum(r[f"t_{k}"] for k in ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "pp_comm")) / m
    pipeline = sum(r[f"t_{k}"] for k in ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "pp_comm",
                                          "bubble"))  # fmt: skip
    assert pipeline == pytest.approx((m + 4 - 1) * slot, rel=1e-12)


def test_estimate_train_takes_etp_and_reports_it():
    spec = _spec("deepseek-v3")
    gpu = get_gpu("h100-sxm")
    est = estimate_train(spec, gpu=gpu, layout=Layout(tp=2, pp=8, dp=16, ep=32, etp=1, global_batch=256,
                                                      sequence_parallel=True, recompute="full"), seq_len=4096)
    assert est.as_dict()["layout"]["etp"] == 1
    assert est.time_breakdown_s["ep_comm"] > 0


def test_hsdp_shards_model_states_over_its_shard_group_only():
    """Mixed-precision AdamW keeps 2 + 2 + 12 = 16 B per parameter; ZeRO-3 divides them by the shard group: all 32
    data-parallel ranks for FSDP, the 8 of a host for HSDP (replicated 4 times)."""
    spec = _spec("llama-3.1-8b")
    n = count_params(spec).total
    kw = dict(seq_len=4096, precision="bf16", task="pretrain")
    fsdp = training_memory(spec, layout=Layout(dp=32, zero=3), **kw)
    hsdp = training_memory(spec, layout=Layout(dp=32, zero=3, dp_shard=8), **kw)
    assert hsdp.optimizer == pytest.approx(n * 12 / 8 / 1e9, rel=1e-3)
    assert fsdp.optimizer == pytest.approx(n * 12 / 32 / 1e9, rel=1e-3)
    assert hsdp.optimizer == pytest.approx(4 * fsdp.optimizer, rel=1e-12)


def test_hsdp_gathers_inside_the_host_and_all_reduces_across():
    """Per layer and micro-batch, HSDP's communication is a gather and a reduce-scatter over the host's 8 ranks plus
    an all-reduce of the 1/8 shard across the 4 hosts; FSDP's is a gather and a reduce-scatter over all 32. Measured
    collectives: the all-gather inside NVLink is cheaper than across the NICs."""
    spec = _spec("llama-3.1-8b")
    gpu = get_gpu("h100-sxm")
    system = system_for(gpu.id)
    layer_w = count_params(spec).blocks / spec.layers * 2.0
    inside = float(collective_time_s("all_gather", layer_w, system=system, size=8, stride=1))
    across = float(collective_time_s("all_gather", layer_w, system=system, size=32, stride=1))
    assert inside < across
    with pytest.raises(LayoutError, match=r"HSDP is modelled for dense models only"):
        Layout(dp=32, zero=3, dp_shard=8).validate(_spec("mixtral-8x7b"))
    with pytest.raises(LayoutError, match=r"dp_shard\(3\) does not divide dp\(32\)"):
        Layout(dp=32, zero=3, dp_shard=3).validate(spec)
    est = estimate_train(spec, gpu=gpu, layout=Layout(dp=32, zero=3, dp_shard=8, global_batch=64), seq_len=4096)
    assert est.as_dict()["layout"]["dp_shard"] == 8
    assert est.time_breakdown_s["dp_comm"] > 0
