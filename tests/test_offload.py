"""Optimizer and activation offload (issue #9 item 5): memory from the ZeRO-Offload paper's accounting, host traffic
over the catalog's PCIe generation, searched only for layouts that need it, and the properties that it never makes
a layout that fits without it faster and that the vectorised search equals ``estimate_train`` on offload layouts.

References: Ren et al. 2021 (ZeRO-Offload, USENIX ATC '21): on one GPU, offload keeps 2 bytes of model states per
parameter (the fp16 parameters) of the 16 mixed-precision Adam needs; the CPU receives the fp16 gradients and sends
the fp16 parameters back, 2 + 2 bytes per parameter per step (1/N each on N data-parallel GPUs). PCI-SIG x16 rates
per direction (Gen4 31.5 GB/s, Gen5 63 GB/s).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from scaleright.catalog import get_gpu
from scaleright.catalog.systems import system_for
from scaleright.errors import InputError, LayoutError
from scaleright.estimate.layout import Layout, layout_text
from scaleright.estimate.memory import activation_bytes_per_layer, training_memory, training_memory_arrays
from scaleright.estimate.train import estimate_train
from scaleright.plan.search import evaluate_training, gpu_counts
from scaleright.workload import load_model
from scaleright.workload.params import count_params

GB = 1e9


@functools.cache
def _spec(name: str):
    return load_model(name)


def test_optimizer_offload_keeps_two_bytes_of_model_states_per_parameter_on_one_gpu():
    spec = _spec("llama-3.1-8b")
    n = count_params(spec).total
    plain = training_memory(spec, layout=Layout(zero=2, global_batch=8, micro_batch=1), seq_len=2048)
    off = training_memory(spec, layout=Layout(zero=2, global_batch=8, offload_optimizer=True), seq_len=2048)
    assert (plain.weights + plain.gradients + plain.optimizer) * GB == pytest.approx(16 * n, rel=1e-9)
    assert (off.weights + off.gradients + off.optimizer) * GB == pytest.approx(2 * n, rel=1e-9)
    # nothing else moves: activations and the gathered buffers are the same
    assert off.activations == plain.activations and off.gathered == plain.gathered


def test_activation_offload_keeps_two_layers_of_saved_activations():
    spec = _spec("llama-3.1-8b")
    kw = dict(seq_len=4096, tp=2, micro_batch=2, sequence_parallel=True, recompute="none")
    per_layer = float(activation_bytes_per_layer(spec, **{k: v for k, v in kw.items()}))
    plain = float(training_memory_arrays(spec, **kw)["activations"])
    off = float(training_memory_arrays(spec, offload_activations=True, **kw)["activations"])
    assert plain - off == pytest.approx((spec.layers - 2) * per_layer, rel=1e-9)


def test_optimizer_offload_needs_zero():
    with pytest.raises(LayoutError, match="offload_optimizer needs zero >= 1"):
        Layout(dp=8, offload_optimizer=True).validate()
    assert "optimizer offload" in layout_text(Layout(dp=8, zero=2, offload_optimizer=True))
    assert "activation offload" in layout_text(Layout(dp=8, offload_activations=True))


def test_a_part_without_a_host_link_in_the_catalog_is_not_offered_offload():
    spec = _spec("llama-3.1-70b")
    gpu = get_gpu("gb200")  # NVLink-C2C host link: no pcie_gen in the catalog
    assert gpu.pcie_gen is None
    with pytest.raises(InputError, match="no host link"):
        estimate_train(spec, gpu=gpu, layout=Layout(dp=8, zero=3, global_batch=8, offload_optimizer=True),
                       seq_len=4096)  # fmt: skip
    system = system_for(gpu.id)
    cand = evaluate_training(spec, gpu=gpu, system=system, counts=[8], seq_len=4096, global_batch=64,
                             precision="bf16", task="pretrain", optimizer="adamw", lora_rank=16, keep="all")
    lays = cand.layouts()
    assert not lays.offload_optimizer.any() and not lays.offload_activations.any()


def test_optimizer_offload_time_is_the_cpu_step_and_the_pcie_round_trip():
    """8 x H100 SXM (PCIe 5.0 host links), Llama 3.1 8B, ZeRO-2: each GPU's partition of P/8 parameters. The CPU step
    moves 28 B per parameter (fp32 master, m, v read and written, 16-bit gradient read and weight written) through a
    host of 614.4 GB/s shared by 8 GPUs; the partition's 16-bit parameters come back over 63 GB/s x 0.848; the 16-bit
    gradients go down during backward (at most all of them exposed)."""
    spec = _spec("llama-3.1-8b")
    gpu = get_gpu("h100-sxm")
    lay = Layout(dp=8, zero=2, micro_batch=1, global_batch=32, recompute="none", offload_optimizer=True)
    est = estimate_train(spec, gpu=gpu, layout=lay, seq_len=4096)
    p_shard = count_params(spec).total / 8
    link = 63e9 * 0.848
    floor = p_shard * 28 / (614.4e9 / 8) + 2 * p_shard / link
    n_micro = 32 // 8
    assert floor <= est.time_breakdown_s["offload"] <= floor + n_micro * 2 * p_shard / link
    assert est.time_breakdown_s["optimizer"] == 0.0  # the GPU runs no optimizer step
    plain = estimate_train(spec, gpu=gpu, layout=lay.replace(offload_optimizer=False), seq_len=4096)
    assert plain.time_breakdown_s["offload"] == 0.0


offload_layouts = st.fixed_dictionaries({
    "model": st.sampled_from(["llama-3.1-8b", "llama-3.2-1b", "mixtral-8x7b"]),
    "gpu": st.sampled_from(["h100-sxm", "a100-80gb", "rtx-4090", "l40s", "mi300x", "l4"]),
    "tp": st.sampled_from([1, 2, 4]),
    "pp": st.sampled_from([1, 2]),
    "dp": st.sampled_from([1, 2, 4, 8]),
    "zero": st.sampled_from([1, 2, 3]),
    "mb": st.sampled_from([1, 2, 4]),
    "recompute": st.sampled_from(["none", "selective", "full"]),
    "opt": st.booleans(),
    "act": st.booleans(),
})  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(f=offload_layouts)
def test_offload_never_makes_a_layout_that_fits_without_it_faster(f):
    assume(f["opt"] or f["act"])
    spec = _spec(f["model"])
    gpu = get_gpu(f["gpu"])
    lay = Layout(tp=f["tp"], pp=f["pp"], dp=f["dp"], zero=f["zero"], micro_batch=f["mb"],
                 global_batch=4 * f["dp"] * f["mb"], recompute=f["recompute"], sequence_parallel=f["tp"] > 1)
    try:
        lay.validate(spec)
    except LayoutError:
        assume(False)
    plain = estimate_train(spec, gpu=gpu, layout=lay, seq_len=2048)
    assume(plain.fits)
    off = estimate_train(spec, gpu=gpu, layout=lay.replace(offload_optimizer=f["opt"], offload_activations=f["act"]),
                         seq_len=2048)  # fmt: skip
    assert off.step_time_s >= plain.step_time_s * (1 - 1e-12)
    assert off.memory_gb_per_gpu <= plain.memory_gb_per_gpu * (1 + 1e-12)  # and it never needs more memory


@functools.cache
def _offload_candidates(model: str, gpu_id: str):
    spec = _spec(model)
    gpu = get_gpu(gpu_id)
    system = system_for(gpu.id)
    return spec, gpu, system, evaluate_training(
        spec, gpu=gpu, system=system, counts=gpu_counts(system.gpus_per_node, 16), seq_len=4096, global_batch=64,
        precision="bf16", task="pretrain", optimizer="adamw", lora_rank=16, keep="all",
        framework="megatron-core")  # fmt: skip


@settings(max_examples=25, deadline=None)
@given(case=st.sampled_from([("llama-3.1-70b", "a100-80gb"), ("llama-3.1-8b", "rtx-4090"), ("mixtral-8x7b", "l40s")]),
       seed=st.integers(0, 2**16))  # fmt: skip
def test_the_vectorised_search_equals_estimate_train_on_offload_layouts(case, seed):
    spec, gpu, system, cand = _offload_candidates(*case)
    lays = cand.layouts()
    off = np.flatnonzero(lays.offload_optimizer | lays.offload_activations)
    assert off.size > 0
    for i in np.random.default_rng(seed).choice(off, size=3):
        lay = lays.layout(int(i), global_batch=64)
        est = estimate_train(spec, gpu=gpu, layout=lay, seq_len=4096, system=system, framework="megatron-core")
        assert est.fits
        assert est.step_time_s == pytest.approx(float(cand.arrays["step_time_s"][i]), rel=1e-9)
        assert est.memory_gb_per_gpu == pytest.approx(float(cand.arrays["memory_gb"][i]), rel=1e-9)
        if lay.offload_optimizer:  # the CPU step is never free; activation copies may hide behind compute
            assert est.time_breakdown_s["offload"] > 0


@pytest.mark.parametrize("case", [("llama-3.1-70b", "a100-80gb"), ("llama-3.1-8b", "rtx-4090")])
def test_offload_is_searched_only_where_the_layout_does_not_fit_without_it(case):
    spec, gpu, system, cand = _offload_candidates(*case)
    lays = cand.layouts()
    off = np.flatnonzero(lays.offload_optimizer | lays.offload_activations)

    def fits(lay: Layout, **flags: bool) -> bool:
        return estimate_train(spec, gpu=gpu, layout=lay.replace(**flags), seq_len=4096, system=system,
                              framework="megatron-core").fits  # fmt: skip

    for i in np.random.default_rng(0).choice(off, size=min(off.size, 40), replace=False):
        lay = lays.layout(int(i), global_batch=64)
        assert not fits(lay, offload_optimizer=False, offload_activations=False)
        if lay.offload_optimizer and lay.offload_activations:  # both only where neither alone fits
            assert not fits(lay, offload_activations=False) and not fits(lay, offload_optimizer=False)
