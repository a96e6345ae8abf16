"""Physical invariants of the training model on measured collectives (issue #9 items 1-3 and 11).

Properties (Hypothesis), under every framework profile: per-GPU throughput never rises with more GPUs of one layout
family; a faster network or more HBM bandwidth never makes a step slower; MFU and HFU stay under the architecture's
measured GEMM ceiling (``calibration.arch_factors``: the best large bf16 GEMM a microbenchmark reaches, e.g. 86.9 %
of peak on A100 SXM, 80.3 % on H100 SXM — no training step runs faster than its fastest GEMM); scaling efficiency is
at most 1 against a baseline of the same layout family; the vectorised planner equals ``estimate_train``.
Reproducers of the issue: ZeRO-3/FSDP across many A100 nodes pays for its all-gathers (the efficiency curve bends
and the step is never shorter than the weight traffic through the nodes' NICs); tensor parallelism over RTX 4090
cards without P2P costs at least its bytes through host memory, and hides none of it even when the framework
overlaps TP communication.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from scaleright.catalog import get_gpu
from scaleright.catalog.systems import system_for
from scaleright.estimate.calibration import arch_factors
from scaleright.estimate.framework import FRAMEWORKS
from scaleright.estimate.layout import Layout
from scaleright.estimate.train import estimate_train, train_step_arrays
from scaleright.plan.search import evaluate_training, gpu_counts
from scaleright.workload import load_model

GB = 1e9


@functools.cache
def _spec(name: str):
    return load_model(name)


def _step(spec, gpu, system, lay: Layout, seq_len: int, **kw) -> dict[str, float]:
    r = train_step_arrays(spec, gpu=gpu, system=system, seq_len=seq_len, global_batch=lay.global_batch,
                          **lay.kwargs(), **kw)
    return {k: float(v) for k, v in r.items()}


families = st.fixed_dictionaries({
    "model": st.sampled_from(["llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b"]),
    "gpu": st.sampled_from(["h100-sxm", "a100-80gb", "mi300x", "rtx-4090", "l40s"]),
    "tp": st.sampled_from([1, 2, 4, 8]),
    "pp": st.sampled_from([1, 2, 4]),
    "zero": st.sampled_from([0, 1, 2, 3]),
    "mb": st.sampled_from([1, 2, 4]),
    "recompute": st.sampled_from(["none", "selective", "full"]),
    "seq_len": st.sampled_from([2048, 4096]),
    "ep": st.sampled_from([1, 2, 8]),
    "framework": st.sampled_from(sorted(FRAMEWORKS)),
})  # fmt: skip


@given(f=families, dp=st.sampled_from([1, 2, 4, 8, 16, 32, 64]))
def test_per_gpu_throughput_never_rises_with_more_gpus_of_one_layout_family(f, dp):
    spec = _spec(f["model"])
    ep = f["ep"] if spec.moe else 1
    assume(dp % ep == 0)
    gpu = get_gpu(f["gpu"])
    system = system_for(gpu.id)
    # a fully connected mesh (xGMI on MI300X: 64 GB/s to each peer) gives a larger group more links: inside one such
    # node a bigger data-parallel group really does all-reduce faster, so the property holds from a node up
    assume(system.tiers[0].peer_link_gb_per_s is None or dp * f["tp"] * f["pp"] >= system.tiers[0].domain_gpus)
    gb = 2 * 64 * f["mb"] * 2  # the same global batch for dp and 2·dp, with accumulation at both
    lay = Layout(tp=f["tp"], pp=f["pp"], dp=dp, ep=ep, zero=f["zero"], micro_batch=f["mb"], global_batch=gb,
                 recompute=f["recompute"], sequence_parallel=f["tp"] > 1)  # fmt: skip
    small = _step(spec, gpu, system, lay, f["seq_len"], framework=f["framework"])
    big = _step(spec, gpu, system, lay.replace(dp=2 * dp), f["seq_len"], framework=f["framework"])
    assert big["tokens_per_s_per_gpu"] <= small["tokens_per_s_per_gpu"] * (1 + 1e-9)


@given(f=families, dp=st.sampled_from([1, 2, 8, 32]), factor=st.sampled_from([1.5, 2.0, 10.0]),
       what=st.sampled_from(["nic", "intra", "hbm"]))  # fmt: skip
def test_a_faster_interconnect_or_more_hbm_bandwidth_never_makes_a_step_slower(f, dp, factor, what):
    spec = _spec(f["model"])
    ep = f["ep"] if spec.moe else 1
    assume(dp % ep == 0)
    gpu = get_gpu(f["gpu"])
    base_nic = gpu.nic_gbps_per_gpu
    base_intra = system_for(gpu.id).tiers[0].bandwidth_gb_per_s
    slow = system_for(gpu.id, nic_gbps_per_gpu=base_nic, intra_node_gb_per_s=base_intra)
    fast, fast_gpu = slow, gpu
    if what == "nic":
        fast = system_for(gpu.id, nic_gbps_per_gpu=base_nic * factor, intra_node_gb_per_s=base_intra)
    elif what == "intra":
        fast = system_for(gpu.id, nic_gbps_per_gpu=base_nic, intra_node_gb_per_s=base_intra * factor)
    else:
        fast_gpu = gpu.model_copy(update={"hbm_bandwidth_tb_per_s": gpu.hbm_bandwidth_tb_per_s * factor})
    lay = Layout(tp=f["tp"], pp=f["pp"], dp=dp, ep=ep, zero=f["zero"], micro_batch=f["mb"],
                 global_batch=64 * f["mb"], recompute=f["recompute"], sequence_parallel=f["tp"] > 1)  # fmt: skip
    t_slow = _step(spec, gpu, slow, lay, f["seq_len"], framework=f["framework"])["step_time_s"]
    t_fast = _step(spec, fast_gpu, fast, lay, f["seq_len"], framework=f["framework"])["step_time_s"]
    assert t_fast <= t_slow * (1 + 1e-9)


@given(f=families, dp=st.sampled_from([1, 4, 16]), gpu_id=st.sampled_from(["h100-sxm", "a100-80gb", "b200", "mi300x",
       "tpu-v5p", "gaudi3", "l40s"]), precision=st.sampled_from(["bf16", "fp8"]))  # fmt: skip
def test_mfu_stays_under_the_architectures_measured_gemm_ceiling(f, dp, gpu_id, precision):
    spec = _spec(f["model"])
    ep = f["ep"] if spec.moe else 1
    assume(dp % ep == 0)
    gpu = get_gpu(gpu_id)
    assume(gpu.dense_tflops.get(precision))
    lay = Layout(tp=f["tp"], pp=f["pp"], dp=dp, ep=ep, zero=f["zero"], micro_batch=f["mb"],
                 global_batch=16 * f["mb"] * dp, recompute=f["recompute"], sequence_parallel=f["tp"] > 1)  # fmt: skip
    r = _step(spec, gpu, system_for(gpu.id), lay, f["seq_len"], framework=f["framework"], precision=precision)
    ceiling = arch_factors(gpu).gemm_efficiency
    assert 0 < r["mfu"] <= r["hfu"] <= ceiling
    assert all(r[f"t_{k}"] >= 0 for k in ("compute", "bubble", "tp_comm", "dp_comm", "cp_comm", "overhead"))


@given(f=families, dp=st.sampled_from([2, 4, 8, 16]))
def test_scaling_efficiency_is_at_most_one_against_the_same_layout_family(f, dp):
    """``estimate_train`` compares with fewer data-parallel replicas of the same layout, recompute and global batch:
    nothing in it can make the smaller run pay for something the larger one does not."""
    spec = _spec(f["model"])
    ep = f["ep"] if spec.moe else 1
    assume(dp % ep == 0)
    gpu = get_gpu(f["gpu"])
    lay = Layout(tp=f["tp"], pp=f["pp"], dp=dp, ep=ep, zero=f["zero"], micro_batch=f["mb"],
                 global_batch=2 * f["mb"] * dp, recompute=f["recompute"], sequence_parallel=f["tp"] > 1)  # fmt: skip
    try:
        lay.validate(spec)
    except Exception:
        assume(False)
    fw = FRAMEWORKS[f["framework"]].with_overrides(pipeline_schedule="interleaved")
    est = estimate_train(spec, gpu=gpu, layout=lay, seq_len=f["seq_len"], framework=fw)
    assert est.scaling_efficiency is None or est.scaling_efficiency <= 1 + 1e-9


@given(model=st.sampled_from(["llama-3.1-8b", "mixtral-8x7b"]), gpu_id=st.sampled_from(["h100-sxm", "rtx-4090",
       "gb200", "mi300x"]), seed=st.integers(0, 2**16))  # fmt: skip
def test_the_vectorised_planner_equals_estimate_train_on_random_layouts(model, gpu_id, seed):
    spec = _spec(model)
    gpu = get_gpu(gpu_id)
    system = system_for(gpu.id)
    cand = evaluate_training(spec, gpu=gpu, system=system, counts=gpu_counts(system.gpus_per_node, 64),
                             seq_len=4096, global_batch=64, precision="bf16", task="pretrain", optimizer="adamw",
                             lora_rank=16)  # fmt: skip
    a = cand.arrays
    assume(cand.n_fit > 0)
    rng = np.random.default_rng(seed)
    for i in rng.choice(a["step_time_s"].size, size=3):
        lay = cand.layouts().layout(int(i), global_batch=64)
        est = estimate_train(spec, gpu=gpu, layout=lay, seq_len=4096, system=system)
        assert est.step_time_s == pytest.approx(float(a["step_time_s"][i]), rel=1e-9)
        assert est.memory_gb_per_gpu == pytest.approx(float(a["memory_gb"][i]), rel=1e-9)


# ---- issue #9 reproducers ---------------------------------------------------------------------------------------


def _fsdp_70b_a100(nodes: int, seq_len: int, global_batch: int) -> dict[str, float]:
    spec = _spec("llama-3.1-70b")
    gpu = get_gpu("a100-80gb")
    lay = Layout(tp=1, pp=1, dp=8 * nodes, zero=3, micro_batch=1, global_batch=global_batch, recompute="full")
    return _step(spec, gpu, system_for(gpu.id), lay, seq_len)


@pytest.mark.parametrize("seq_len", [2048, 4096])
def test_fsdp_70b_across_a100_nodes_bends_the_efficiency_curve(seq_len):
    """ZeRO-3 tp1 pp1 on 64 -> 128 -> 256 -> 512 DGX A100 nodes (global batch 4096 sequences): every doubling buys
    less than the one before it, per-GPU throughput falls at each step, and the exposed share of the step grows."""
    runs = [_fsdp_70b_a100(n, seq_len, 4096) for n in (64, 128, 256, 512)]
    per_gpu = [r["tokens_per_s_per_gpu"] for r in runs]
    assert all(b < a for a, b in itertools.pairwise(per_gpu)), per_gpu
    share = [r["t_dp_comm"] / r["step_time_s"] for r in runs]
    assert all(b > a for a, b in itertools.pairwise(share)), share
    speedups = [a["step_time_s"] / b["step_time_s"] for a, b in itertools.pairwise(runs)]
    assert speedups[-1] < speedups[0] < 2.0, speedups


def test_fsdp_step_is_never_shorter_than_its_weight_traffic_through_the_nics():
    """Each micro-batch all-gathers the 70B bf16 weights twice (forward, backward) and reduce-scatters the gradients
    once; a node receives (n-1)/n of each through its eight 200 Gb/s NICs at best (spec rate, no efficiency)."""
    spec = _spec("llama-3.1-70b")
    from scaleright.workload.params import count_params

    w_bytes = count_params(spec).total * 2.0
    for nodes in (64, 512):
        n = 8 * nodes
        r = _fsdp_70b_a100(nodes, 2048, 4096)
        node_nic = 8 * 25e9  # DGX A100: 8 x HDR 200 Gb/s
        bound = r["n_micro"] * 3 * w_bytes * (n - 1) / n / node_nic
        assert r["step_time_s"] >= bound
        # the per-layer overlap leaves the first gather and the last reduce-scatter of every micro-batch exposed
        assert r["t_dp_comm"] > 0


def _tp_bytes_per_gpu(spec, seq_len: int, mb: int, tp: int, layers_stage: int, n_micro: int, recompute_fwd: bool):
    """Bytes one GPU sends over its link for TP: 2 all-reduces per layer forward and 2 backward (plus the forward's
    again under full recompute) of s·b·h·2 bytes, ring factor 2(n−1)/n."""
    per_ar = seq_len * mb * spec.hidden * 2.0 * 2 * (tp - 1) / tp
    per_layer = (2 + 2 + (2 if recompute_fwd else 0)) * per_ar
    return per_layer * layers_stage * n_micro


@pytest.mark.parametrize("tp_comm_overlap", [False, True])
def test_tp_over_pcie_without_p2p_costs_at_least_its_bytes_through_host_memory(tp_comm_overlap):
    """70B at tp8 on 8x RTX 4090 boxes (stock driver: no P2P): every TP byte is copied device -> host -> device, so
    at most half the PCIe 4.0 x16 rate (31.5 GB/s one direction) carries it; none of it can be overlapped."""
    spec = _spec("llama-3.1-70b")
    gpu = get_gpu("rtx-4090")
    system = system_for(gpu.id)
    assert system.tiers[0].kind == "pcie-host"
    lay = Layout(tp=8, pp=8, dp=2, zero=1, micro_batch=1, global_batch=64, recompute="full", sequence_parallel=True)
    r = _step(spec, gpu, system, lay, 4096, tp_comm_overlap=tp_comm_overlap)
    host_staged = 31.5 * GB / 2
    fwd_bwd = _tp_bytes_per_gpu(spec, 4096, 1, 8, 10, 32, recompute_fwd=False)
    assert r["t_tp_comm"] >= fwd_bwd / host_staged
    # under full recompute the forward's two all-reduces run again inside the recompute time
    assert r["t_tp_comm"] + r["t_recompute"] >= _tp_bytes_per_gpu(spec, 4096, 1, 8, 10, 32, True) / host_staged


def test_tp_overlap_is_an_input_and_off_by_default():
    spec = _spec("llama-3.1-70b")
    gpu = get_gpu("h100-sxm")
    lay = Layout(tp=8, pp=1, dp=4, zero=1, micro_batch=1, global_batch=32, recompute="selective",
                 sequence_parallel=True)  # fmt: skip
    default = estimate_train(spec, gpu=gpu, layout=lay, seq_len=4096)
    off = estimate_train(spec, gpu=gpu, layout=lay, seq_len=4096, tp_comm_overlap=False)
    on = estimate_train(spec, gpu=gpu, layout=lay, seq_len=4096, tp_comm_overlap=True)
    assert default.time_breakdown_s["tp_comm"] == off.time_breakdown_s["tp_comm"] > 0
    assert on.time_breakdown_s["tp_comm"] < off.time_breakdown_s["tp_comm"]


# ---- the CLI's flags ------------------------------------------------------------------------------------------


def _cli_json(args: list[str]) -> dict:
    import json

    from typer.testing import CliRunner

    from scaleright.cli.main import app

    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


TRAIN_70B_TP8 = ["estimate", "train", "--model", "llama-3.1-70b", "--gpus", "64", "--tp", "8", "--pp", "4",
                 "--zero", "1", "--global-batch", "64", "--recompute", "selective", "--sequence-parallel",
                 "--json"]  # fmt: skip


def test_cli_tp_comm_overlap_is_off_unless_asked_for():
    args = [*TRAIN_70B_TP8, "--gpu", "h100-sxm"]
    default = _cli_json(args)["time_breakdown_s"]["tp_comm"]
    assert default == _cli_json([*args, "--no-tp-comm-overlap"])["time_breakdown_s"]["tp_comm"]
    assert _cli_json([*args, "--tp-comm-overlap"])["time_breakdown_s"]["tp_comm"] < default


def test_cli_system_flag_picks_the_network():
    """The same 4090s with the tinygrad P2P driver (tinybox, 6 per host) against the stock 8-card box (no P2P)."""
    base = ["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "rtx-4090", "--gpus", "2", "--tp", "2",
            "--global-batch", "8", "--recompute", "full", "--json"]  # fmt: skip
    stock = _cli_json([*base, "--system", "rtx-4090-box"])["time_breakdown_s"]["tp_comm"]
    p2p = _cli_json([*base, "--system", "tinybox-4090-p2p"])["time_breakdown_s"]["tp_comm"]
    assert p2p < stock
    with pytest.raises(AssertionError, match="unknown system"):
        _cli_json([*base, "--system", "no-such-box"])
