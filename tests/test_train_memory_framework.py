"""``estimate train`` and the planner compute memory with the framework the step time assumes (issue 9, items 4
and 9): the same figures as ``estimate memory --framework X``, each framework's state format and attention, and the
accounting recorded in every estimate and plan option."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_helpers import run_main
from scaleright.catalog import get_gpu
from scaleright.estimate.framework import FRAMEWORKS, framework_of
from scaleright.estimate.layout import Layout
from scaleright.estimate.memory import training_memory, training_memory_arrays
from scaleright.estimate.train import estimate_train
from scaleright.plan.search import evaluate_training
from scaleright.workload import load_model

LLAMA_8B_PARAMS = 8_030_261_248  # Llama 3.1 8B (Meta's model card: 8.03 B; the safetensors index's total)
GB = 1e9


@pytest.fixture(scope="module")
def llama8b():
    return load_model("llama-3.1-8b")


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
@pytest.mark.parametrize("layout", [Layout(dp=8, zero=1, global_batch=32), Layout(tp=2, pp=2, dp=2, zero=3,
                                                                                 global_batch=16)])
def test_estimate_train_memory_is_estimate_memory_with_the_same_framework(llama8b, framework, layout):
    gpu = get_gpu("h100-sxm")
    fw = framework_of(framework)
    est = estimate_train(llama8b, gpu=gpu, layout=layout, seq_len=2048, framework=fw)
    mem = training_memory(llama8b, layout=layout, seq_len=2048, framework=fw)
    assert est.memory_breakdown_gb == pytest.approx(mem.as_dict(), rel=1e-12)
    assert est.memory_gb_per_gpu == pytest.approx(mem.total_gb, rel=1e-12)
    assert est.as_dict()["memory_accounting"]["framework"] == fw.name


def test_default_estimate_train_memory_is_fsdp2s_as_its_step_time(llama8b):
    """Without a framework the step model is FSDP2's; so is the memory: fp32 sharded parameters and gradients
    (torchtitan's MixedPrecisionPolicy) and PyTorch's fp32 cross-entropy, not the ZeRO paper's 16-bit states."""
    est = estimate_train(llama8b, gpu=get_gpu("h100-sxm"), layout=Layout(dp=8, zero=3, global_batch=32),
                         seq_len=2048)  # fmt: skip
    acc = est.as_dict()["memory_accounting"]
    assert (acc["framework"], acc["states"], acc["cross_entropy"]) == ("fsdp2", "fsdp2", "eager")
    # ZeRO-3 over 8: fp32 parameters (4 B) and fp32 gradients (4 B), Adam's two fp32 moments (8 B), each / 8
    p = LLAMA_8B_PARAMS
    b = est.memory_breakdown_gb
    assert b["weights"] == pytest.approx(4 * p / 8 / GB, rel=1e-6)
    assert b["gradients"] == pytest.approx(4 * p / 8 / GB, rel=1e-6)
    assert b["optimizer"] == pytest.approx(8 * p / 8 / GB, rel=1e-6)


@pytest.mark.parametrize(("framework", "zero", "per_param"), [
    # DeepSpeed bf16 at ZeRO <= 1 runs BF16_Optimizer: 16-bit weights, 16-bit grads + a full fp32 accumulation
    # buffer, fp32 master + moments sharded (BLOOM's "BF16 optimizer, fp32 grad accumulation"): 2 + 6 + 12/d
    ("deepspeed", 1, (2.0, 6.0, 12.0 / 8)),
    # ZeRO-2 uses the ZeRO optimizer: 16-bit weights, 16-bit grads and an fp32 grad partition: 2 + 2/d + 16/d
    ("deepspeed", 2, (2.0, 2.0 / 8, 16.0 / 8)),
    # Megatron-Core's distributed optimizer: "bf16 param, fp32 grads: 6 + 12/d" (Megatron-LM dist_optimizer.md)
    ("megatron-core", 1, (2.0, 4.0, 12.0 / 8)),
    # FSDP2 at ZeRO-1 (no parameter sharding): fp32 parameters and gradients, moments sharded: 4 + 4 + 8/d
    ("fsdp2", 1, (4.0, 4.0, 8.0 / 8)),
])  # fmt: skip
def test_estimate_train_model_states_are_the_frameworks(llama8b, framework, zero, per_param):
    est = estimate_train(llama8b, gpu=get_gpu("h200"), layout=Layout(dp=8, zero=zero, global_batch=32),
                         seq_len=2048, framework=framework)  # fmt: skip
    b = est.memory_breakdown_gb
    got = (b["weights"], b["gradients"], b["optimizer"])
    assert got == pytest.approx(tuple(x * LLAMA_8B_PARAMS / GB for x in per_param), rel=1e-6)


def test_estimate_train_follows_the_frameworks_attention(llama8b):
    """Megatron 2021 materialises the s x s scores: each layer keeps the softmax output, 2as²b bytes (no dropout in
    Llama), where flash attention keeps its fp32 log-sum-exp, 4asb (Korthikanti et al. 2022, section 4.1)."""
    gpu, lay, s = get_gpu("h200"), Layout(dp=8, zero=0, global_batch=8), 2048
    mat = estimate_train(llama8b, gpu=gpu, layout=lay, seq_len=s, framework="megatron-2021")
    flash = estimate_train(llama8b, gpu=gpu, layout=lay, seq_len=s,
                           framework=framework_of("megatron-2021").with_overrides(attention="flash"))  # fmt: skip
    assert mat.as_dict()["memory_accounting"]["attention"] == "materialized"
    assert flash.as_dict()["memory_accounting"]["attention"] == "flash"
    a, b = llama8b.heads, 1
    per_layer = 2 * a * s * s * b - 4 * a * s * b
    got = mat.memory_breakdown_gb["activations"] - flash.memory_breakdown_gb["activations"]
    assert got == pytest.approx(llama8b.layers * per_layer / GB, rel=1e-9)


def test_arrays_of_mixed_zero_stages_equal_each_layout_alone(llama8b):
    """DeepSpeed's state format depends on the ZeRO stage: a batch of stages evaluates each with its own."""
    zero = np.array([0, 1, 2, 3, 1, 3, 0])
    pp = np.array([1, 2, 1, 2, 1, 1, 2])
    arr = training_memory_arrays(llama8b, seq_len=2048, dp=4, pp=pp, zero=zero, n_micro=4, framework="deepspeed")
    for i in range(zero.size):
        one = training_memory_arrays(llama8b, seq_len=2048, dp=4, pp=int(pp[i]), zero=int(zero[i]), n_micro=4,
                                     framework="deepspeed")  # fmt: skip
        for k, v in one.items():
            assert arr[k][i] == pytest.approx(float(v), rel=1e-12), (k, i)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from([0, 1, 2, 3]), st.sampled_from([1, 2, 4]), st.sampled_from([1, 2]),
                          st.sampled_from([1, 4]), st.sampled_from(["none", "selective", "full"])),
                min_size=1, max_size=6),
       st.sampled_from(["deepspeed", "megatron-2021", "fsdp2"]), st.sampled_from(["bf16", "fp16"]))  # fmt: skip
def test_any_batch_of_layouts_equals_each_layout_alone(llama8b, rows, framework, precision):
    zero, tp, pp, mb, rc = (np.array(c) for c in zip(*rows, strict=True))
    codes = np.array([["none", "selective", "full"].index(r) for r in rc])
    kw = dict(seq_len=2048, dp=4, n_micro=8, framework=framework, precision=precision)
    arr = training_memory_arrays(llama8b, zero=zero, tp=tp, pp=pp, micro_batch=mb, recompute=codes, **kw)
    for i in range(zero.size):
        one = training_memory_arrays(llama8b, zero=int(zero[i]), tp=int(tp[i]), pp=int(pp[i]),
                                     micro_batch=int(mb[i]), recompute=str(rc[i]), **kw)  # fmt: skip
        for k, v in one.items():
            assert arr[k][i] == pytest.approx(float(v), rel=1e-12), (k, i)


@pytest.mark.parametrize("framework", ["deepspeed", "fsdp2", "megatron-2021"])
def test_the_planners_memory_is_estimate_trains_for_the_same_framework(llama8b, framework):
    gpu = get_gpu("h100-sxm")
    cand = evaluate_training(llama8b, gpu=gpu, counts=[8, 16], seq_len=2048, global_batch=64, precision="bf16",
                             task="pretrain", optimizer="adamw", lora_rank=0, framework=framework,
                             keep="all")  # fmt: skip
    a = cand.arrays
    assert a["memory_gb"].size > 0
    rng = np.random.default_rng(1)
    # several layouts of every ZeRO stage present
    picks = np.concatenate([rng.choice(np.flatnonzero(a["zero"] == z), size=min(3, int((a["zero"] == z).sum())),
                                       replace=False) for z in np.unique(a["zero"])])  # fmt: skip
    from scaleright.plan.search import layout_dict

    for j in picks.tolist():
        lay = Layout(**layout_dict(a, j), global_batch=64)
        est = estimate_train(llama8b, gpu=gpu, layout=lay, seq_len=2048, framework=framework)
        assert a["memory_gb"][j] == pytest.approx(est.memory_gb_per_gpu, rel=1e-9), lay.text()
        assert est.fits


def test_plan_options_record_the_memory_accounting_of_their_zero_stage(monkeypatch, capsys, tmp_path):
    scn = tmp_path / "s.yaml"
    scn.write_text("model: llama-3.1-8b\ntask: pretrain\ntraining: {tokens: 1.0e9, seq_len: 2048, global_batch: 64, "
                   "framework: deepspeed}\nconstraints: {max_gpus: 16, gpu_types: [h100-sxm]}\n"
                   "pricing: {mode: on-demand, price_usd_per_gpu_hour: {h100-sxm: 2.0}}\n")  # fmt: skip
    code, out, err = run_main(["plan", str(scn), "--json"], monkeypatch, capsys)
    assert code == 0, err
    opts = json.loads(out)["options"]
    assert opts
    for o in opts:
        acc = o["memory_accounting"]
        assert acc["framework"] == o["framework"] == "deepspeed"
        # DeepSpeed's engine: BF16_Optimizer for bf16 at ZeRO <= 1, the ZeRO optimizer otherwise
        assert acc["states"] == ("deepspeed-bf16" if o["layout"]["zero"] <= 1 else "deepspeed-fp16")
    code, text, err = run_main(["plan", str(scn)], monkeypatch, capsys)
    assert code == 0, err
    assert "framework deepspeed; memory accounting deepspeed: states deepspeed-" in " ".join(text.split())


def test_estimate_train_prints_and_emits_its_memory_accounting(monkeypatch, capsys):
    args = ["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "8", "--zero", "1",
            "--global-batch", "32", "--framework", "deepspeed"]  # fmt: skip
    code, out, err = run_main([*args, "--json"], monkeypatch, capsys)
    assert code == 0, err
    d = json.loads(out)
    assert d["memory_accounting"]["states"] == "deepspeed-bf16"
    code, mem_out, err = run_main(["estimate", "memory", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus",
                                   "8", "--zero", "1", "--global-batch", "32", "--framework", "deepspeed", "--json"],
                                  monkeypatch, capsys)  # fmt: skip
    assert code == 0, err
    m = json.loads(mem_out)
    assert d["memory_breakdown_gb"] == pytest.approx(m["memory_breakdown_gb"], rel=1e-9)
    assert d["memory_accounting"] == m["memory_accounting"]
    code, text, err = run_main(args, monkeypatch, capsys)
    assert code == 0, err
    assert "memory accounting deepspeed: states deepspeed-bf16" in " ".join(text.split())
