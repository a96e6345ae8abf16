"""The training search's enumeration (issue #9 item 5): the grid holds exactly the layouts its documented rules
allow, every one of them a valid ``Layout``; the kept winners are the fastest of each count and family; the
vectorised evaluation equals ``estimate_train`` layout by layout, interleaved, HSDP and folded-MoE layouts
included.

The reference for the enumeration is a plain ``itertools.product`` over every axis with the rules written out
again from ``SEARCH_LIMITS`` (not the search's code), filtered one layout at a time.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleright.catalog import get_gpu
from scaleright.catalog.systems import system_for
from scaleright.errors import LayoutError
from scaleright.estimate.layout import RECOMPUTE, Layout, LayoutArrays, layout_text
from scaleright.estimate.train import estimate_train
from scaleright.plan.search import SEARCH_LIMITS, evaluate_training, family, gpu_counts, train_layout_grid
from scaleright.workload import load_model


@functools.cache
def _spec(name: str):
    return load_model(name)


def _divs(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _brute_force(spec, counts, tp_domain, seq_len, gb, task) -> set[tuple]:
    """Every layout the documented rules allow, by brute force over the product of all axes."""
    out = set()
    moe = spec.moe
    experts = [e for e in _divs(moe.num_experts) if e <= 256] if moe else [1]
    for n, tp, cp, pp in itertools.product(counts, range(1, tp_domain + 1), (1, 2, 4, 8), range(1, spec.layers + 1)):
        if spec.heads % tp or tp_domain % tp or (spec.kv_heads % tp and tp % spec.kv_heads):
            continue
        if cp > 1 and seq_len < 32768:
            continue
        if n % (tp * cp * pp):
            continue
        dp = n // (tp * cp * pp)
        if gb % dp:
            continue
        for ep, etp in itertools.product(experts, sorted({1, tp}) if moe else [tp]):
            if (tp * cp * dp) % (ep * etp) or (moe and moe.expert_ffn_hidden % etp):
                continue
            for mb, v, zero, rc, sp in itertools.product(_divs(gb // dp), _divs(spec.layers),
                                                         (0, 3) if task in ("lora", "qlora") else (0, 1, 2, 3),
                                                         (0, 1, 2), (False, True)):  # fmt: skip
                m = gb // (dp * mb)
                if v > 1 and (pp == 1 or spec.layers % (pp * v) or m % pp):
                    continue
                if zero and dp * cp == 1:
                    continue
                if sp and tp == 1:
                    continue
                if rc == 1 and tp > 1 and not sp:
                    continue
                shards = {dp * cp}
                inside = math.gcd(dp * cp, max(tp_domain // tp, 1))  # HSDP: the dp·cp ranks of one domain
                if zero == 3 and not moe and 1 < inside < dp * cp:
                    shards.add(inside)
                for shard in shards:
                    out.add((n, tp, pp, dp, cp, ep, etp, zero, shard, mb, rc, sp, v))
    return out


def _as_set(g: LayoutArrays) -> set[tuple]:
    cols = (g.gpus, g.tp, g.pp, g.dp, g.cp, g.ep, g.etp, g.zero, g.dp_shard, g.micro_batch, g.recompute,
            g.sequence_parallel, g.virtual_stages)  # fmt: skip
    return {tuple(bool(x) if j == 11 else int(x) for j, x in enumerate(row)) for row in zip(*cols, strict=True)}


@pytest.mark.parametrize(("model", "task", "max_gpus", "gb", "seq_len"), [
    ("llama-3.2-1b", "pretrain", 24, 48, 4096),  # 3 hosts: counts 1, 2, 4, 8, 16, 24
    ("llama-3.2-1b", "lora", 16, 32, 32768),  # context parallel from 32k tokens, LoRA's ZeRO 0 or 3
    ("mixtral-8x7b", "pretrain", 32, 32, 4096),  # experts and expert tensor parallelism
])  # fmt: skip
def test_the_grid_is_exactly_the_layouts_the_rules_allow(model, task, max_gpus, gb, seq_len):
    spec = _spec(model)
    counts = gpu_counts(8, max_gpus)
    grid = train_layout_grid(spec, counts=counts, gpus_per_node=8, seq_len=seq_len, global_batch=gb, task=task)
    got = _as_set(grid)
    assert len(got) == len(grid)  # no layout twice
    assert got == _brute_force(spec, counts, 8, seq_len, gb, task)


def test_every_enumerated_layout_is_a_valid_layout():
    spec = _spec("mixtral-8x7b")
    counts = gpu_counts(8, 64)
    grid = train_layout_grid(spec, counts=counts, gpus_per_node=8, seq_len=4096, global_batch=64, task="pretrain")
    for i in np.random.default_rng(0).choice(len(grid), size=400, replace=False):
        lay = grid.layout(int(i), global_batch=64)
        lay.validate(spec, gpus=int(grid.gpus[i]))
        assert lay.gpus in counts


def test_gpu_counts_are_powers_of_two_below_a_host_then_every_whole_number_of_hosts():
    assert gpu_counts(8, 40) == [1, 2, 4, 8, 16, 24, 32, 40]
    assert gpu_counts(8, 39) == [1, 2, 4, 8, 16, 24, 32]
    assert gpu_counts(72, 216) == [1, 2, 4, 8, 16, 32, 64, 72, 144, 216]
    assert gpu_counts(8, 6) == [1, 2, 4]
    # beyond 64 hosts, 16 counts per doubling (a limit of 2^20 GPUs stays a search of a few hundred counts)
    big = gpu_counts(8, 2**20)
    assert big[big.index(512):big.index(512) + 3] == [512, 544, 576]
    assert len(big) < 300 and big[-1] == 2**20
    assert all(b / a <= 1 + 1 / 16 for a, b in itertools.pairwise(big[big.index(512):]))


def test_interleaving_needs_layers_divisible_by_pp_times_v_and_micro_batches_a_multiple_of_pp():
    spec = _spec("llama-3.1-70b")  # 80 layers
    grid = train_layout_grid(spec, counts=[16], gpus_per_node=8, seq_len=4096, global_batch=64, task="pretrain")
    inter = grid.take(grid.virtual_stages > 1)
    assert len(inter) > 0
    m = 64 // (inter.dp * inter.micro_batch)
    assert np.all(80 % (inter.pp * inter.virtual_stages) == 0)
    assert np.all(m % inter.pp == 0)
    # pp = 2 with v = 5 chunks of 8 layers (80 = 2 x 5 x 8) is searched when the micro-batches allow it
    assert np.any((inter.pp == 2) & (inter.virtual_stages == 5))
    # micro-batches fewer than stages run plain 1F1B
    few = (64 // (grid.dp * grid.micro_batch)) < grid.pp
    assert few.any() and np.all(grid.virtual_stages[few] == 1)


def test_the_search_limits_name_the_new_axes():
    # printed with every plan (search.limits, the CLI's "search limits:" line)
    for key in ("gpus", "tp", "pp", "virtual_stages", "ep", "etp", "micro_batch", "offload"):
        assert key in SEARCH_LIMITS
    assert "HSDP" in SEARCH_LIMITS["zero"] and "ZeRO-Offload" in SEARCH_LIMITS["offload"]


@functools.cache
def _candidates(model: str, gpu_id: str, keep: str, framework: str = "megatron-core"):
    """Megatron-Core by default: its interleaved schedule is the one under which the grid holds v > 1."""
    spec = _spec(model)
    gpu = get_gpu(gpu_id)
    system = system_for(gpu.id)
    return spec, gpu, system, evaluate_training(
        spec, gpu=gpu, system=system, counts=gpu_counts(system.gpus_per_node, 64), seq_len=4096, global_batch=64,
        precision="bf16", task="pretrain", optimizer="adamw", lora_rank=16, keep=keep,
        framework=framework)  # fmt: skip


@pytest.mark.parametrize("model", ["llama-3.1-8b", "mixtral-8x7b"])
def test_the_kept_winners_are_the_fastest_of_each_count_and_family(model):
    *_, every = _candidates(model, "h100-sxm", "all")
    *_, kept = _candidates(model, "h100-sxm", "winners")
    assert kept.n_fit == every.n_fit and kept.n_evaluated == every.n_evaluated
    a, k = every.arrays, kept.arrays
    fam_a = [family(*(int(a[x][i]) for x in ("tp", "pp", "dp", "zero"))) for i in range(a["tp"].size)]
    fam_k = [family(*(int(k[x][i]) for x in ("tp", "pp", "dp", "zero"))) for i in range(k["tp"].size)]
    for n in np.unique(a["gpus"]):
        assert k["tokens_per_s"][k["gpus"] == n].max() == a["tokens_per_s"][a["gpus"] == n].max()
        for f in set(fam_a):
            sel_a = [i for i in range(len(fam_a)) if fam_a[i] == f and a["gpus"][i] == n]
            sel_k = [i for i in range(len(fam_k)) if fam_k[i] == f and k["gpus"][i] == n]
            assert bool(sel_a) == bool(sel_k)
            if sel_a:
                assert len(sel_k) == 1
                assert k["tokens_per_s"][sel_k[0]] == a["tokens_per_s"][sel_a].max()


@settings(max_examples=25, deadline=None)
@given(model=st.sampled_from(["llama-3.1-8b", "mixtral-8x7b"]), gpu_id=st.sampled_from(["h100-sxm", "a100-80gb"]),
       seed=st.integers(0, 2**16))  # fmt: skip
def test_the_vectorised_search_equals_estimate_train_on_random_layouts(model, gpu_id, seed):
    spec, gpu, system, cand = _candidates(model, gpu_id, "all")
    lays = cand.layouts()
    rng = np.random.default_rng(seed)
    # half the draws from the interleaved or folded layouts, which the old grid never held
    special = np.flatnonzero((lays.virtual_stages > 1) | (lays.etp != lays.tp) | (lays.dp_shard < lays.dp * lays.cp))
    picks = list(rng.choice(len(lays), size=2)) + (list(rng.choice(special, size=2)) if special.size else [])
    for i in picks:
        lay = lays.layout(int(i), global_batch=64)
        est = estimate_train(spec, gpu=gpu, layout=lay, seq_len=4096, system=system, framework="megatron-core")
        assert est.step_time_s == pytest.approx(float(cand.arrays["step_time_s"][i]), rel=1e-9)
        assert est.memory_gb_per_gpu == pytest.approx(float(cand.arrays["memory_gb"][i]), rel=1e-9)


def test_a_framework_without_an_interleaved_schedule_gets_no_virtual_stages():
    *_, fsdp2 = _candidates("llama-3.1-8b", "h100-sxm", "all", framework="fsdp2")
    *_, mcore = _candidates("llama-3.1-8b", "h100-sxm", "all", framework="megatron-core")
    assert (fsdp2.layouts().virtual_stages == 1).all() and (mcore.layouts().virtual_stages > 1).any()


def test_layout_arrays_round_trip_layouts():
    lays = [Layout(tp=2, pp=4, dp=16, ep=32, etp=1, zero=1, micro_batch=2, recompute="selective",
                   sequence_parallel=True, virtual_stages=2), Layout(dp=8, zero=3), Layout(tp=8, ep=4),
            Layout(tp=2, dp=16, zero=3, dp_shard=4)]  # fmt: skip
    arr = LayoutArrays.of(lays)
    assert [arr.layout(i) for i in range(len(arr))] == lays
    assert arr.gpus.tolist() == [128, 8, 8, 32]
    assert arr.dp_shard.tolist() == [16, 8, 1, 4]
    assert RECOMPUTE[int(arr.recompute[0])] == "selective"


def test_layout_text_names_the_axes_that_are_split():
    assert layout_text(Layout(tp=2, pp=4, dp=16, ep=32, etp=1, zero=1, micro_batch=2, recompute="selective",
                              sequence_parallel=True, virtual_stages=2)) == (
        "tp=2, pp=4 (interleaved x2), dp=16, ep=32, etp=1, ZeRO-1, selective recompute, SP, micro-batch 2")  # fmt: skip
    assert layout_text({"tp": 1, "pp": 1, "dp": 8, "zero": 3}) == "dp=8, ZeRO-3/FSDP"
    assert layout_text(Layout(dp=32, zero=3, dp_shard=8)) == "dp=32, HSDP (shard 8, replicate 4), micro-batch 1"
    assert layout_text({"tp": 1}) == "single GPU"
    # etp equal to tp is Megatron's default and not repeated
    assert layout_text(Layout(tp=2, dp=4, ep=8)) == "tp=2, dp=4, ep=8, micro-batch 1"
    assert layout_text({"tp": 2, "pp": 1, "replicas": 3, "batch_per_replica": 64}) == (
        "tp=2, 3 replicas, batch 64 per replica")


def test_a_folded_layout_is_refused_when_ep_times_etp_does_not_divide_the_stage():
    with pytest.raises(LayoutError, match=r"ep\(8\) \* etp\(4\) = 32 does not divide tp\(2\) \* cp\(1\) \* dp\(8\)"):
        Layout(tp=2, dp=8, ep=8, etp=4).validate(_spec("mixtral-8x7b"))
