"""Offload from the command line and in scenarios: ``estimate train|memory --offload-optimizer/--offload-activations``
and ``constraints.allow_offload``.

The reference is ZeRO-Offload (Ren et al. 2021, USENIX ATC '21, section 4): with mixed-precision Adam a model of M
parameters needs 16M bytes of model states on one GPU (2M fp16 parameters, 2M fp16 gradients, 12M fp32 master
weights, momentum and variance: the ZeRO paper's accounting, the default here without --framework); ZeRO-Offload
keeps only the 2M bytes of fp16 parameters on the GPU.
"""

from __future__ import annotations

import json

import pytest

from cli_helpers import assert_one_line, run_main
from scaleright.errors import CatalogFileError
from scaleright.plan.planner import plan
from scaleright.plan.scenario import parse_scenario
from scaleright.workload import load_model
from scaleright.workload.params import count_params

GB = 1e9
MODEL = "llama-3.1-8b"


def _json(args: list[str], monkeypatch, capsys) -> dict:
    code, out, err = run_main([*args, "--json"], monkeypatch, capsys)
    assert code == 0, err
    return json.loads(out)


def _states_bytes(breakdown: dict[str, float]) -> float:
    return (breakdown["weights"] + breakdown["gradients"] + breakdown["optimizer"]) * GB


@pytest.mark.parametrize("command", ["memory", "train"])
def test_offload_optimizer_leaves_two_bytes_per_parameter_on_one_gpu(command, monkeypatch, capsys):
    n = count_params(load_model(MODEL)).total
    # two micro-batches: the first one's gradients are live through the second's forward, so FSDP2's peak (train's
    # default framework) holds gradients and activations at once (estimate.memory.states, grads_in_forward)
    base = ["estimate", command, "--model", MODEL, "--zero", "1", "--seq-len", "2048", "--global-batch", "2"]
    plain = _json(base, monkeypatch, capsys)["memory_breakdown_gb"]
    off = _json([*base, "--offload-optimizer"], monkeypatch, capsys)["memory_breakdown_gb"]
    assert _states_bytes(plain) == pytest.approx(16 * n, rel=1e-9)  # 2 + 2 + 12 bytes (ZeRO, Rajbhandari 2020)
    assert _states_bytes(off) == pytest.approx(2 * n, rel=1e-9)  # fp16 parameters only (Ren et al. 2021)
    assert off["activations"] == plain["activations"]  # the flag moves model states, nothing else


def test_offload_optimizer_in_train_costs_host_traffic(monkeypatch, capsys):
    base = ["estimate", "train", "--model", MODEL, "--gpus", "8", "--zero", "2"]
    plain = _json(base, monkeypatch, capsys)
    off = _json([*base, "--offload-optimizer"], monkeypatch, capsys)
    assert off["layout"]["offload_optimizer"] is True and plain["layout"]["offload_optimizer"] is False
    assert plain["time_breakdown_s"]["offload"] == 0 and off["time_breakdown_s"]["offload"] > 0
    assert off["step_time_s"] > plain["step_time_s"]  # the CPU step and the PCIe round trip are never free


def test_offload_activations_keeps_two_layer_inputs_under_full_recompute(monkeypatch, capsys):
    """Under full recomputation each layer saves only its input, 2·s·b·h bytes in 16-bit (Korthikanti et al. 2022,
    section 4.1); activation offload keeps two layers of it on the GPU (double buffering), so L - 2 layers' worth
    leaves the GPU."""
    spec = load_model(MODEL)
    s, b = 4096, 2
    base = ["estimate", "memory", "--model", MODEL, "--seq-len", str(s), "--micro-batch", str(b), "--recompute", "full"]
    plain = _json(base, monkeypatch, capsys)["memory_breakdown_gb"]
    off = _json([*base, "--offload-activations"], monkeypatch, capsys)["memory_breakdown_gb"]
    left = (plain["activations"] - off["activations"]) * GB
    assert left == pytest.approx((spec.layers - 2) * 2 * s * b * spec.hidden, rel=1e-9)
    assert _states_bytes(off) == _states_bytes(plain)


def test_the_memory_table_says_what_is_offloaded(monkeypatch, capsys):
    code, out, err = run_main(["estimate", "memory", "--model", MODEL, "--zero", "1", "--offload-optimizer",
                               "--offload-activations"], monkeypatch, capsys)  # fmt: skip
    assert code == 0, err
    assert "optimizer offload" in out and "activation offload" in out


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (["estimate", "train", "--model", MODEL, "--offload-optimizer"], r"offload_optimizer needs zero >= 1"),
        (["estimate", "memory", "--model", MODEL, "--offload-optimizer"], r"offload_optimizer needs zero >= 1"),
        (["estimate", "train", "--model", MODEL, "--gpu", "gb200", "--zero", "1", "--offload-optimizer"],
         r"^error: --offload-optimizer on gb200: .*no PCIe host link"),
        (["estimate", "memory", "--model", MODEL, "--gpu", "tpu-v5p", "--offload-activations"],
         r"^error: --offload-activations on tpu-v5p: .*no PCIe host link"),
        (["estimate", "memory", "--model", MODEL, "--task", "inference", "--offload-activations"],
         r"--offload-activations applies to training"),
    ],
)
def test_offload_flags_that_cannot_apply_are_one_line_exit_2(args, pattern, monkeypatch, capsys):
    assert_one_line(*run_main(args, monkeypatch, capsys), pattern)


def _scenario(**constraints) -> dict:
    return {"model": MODEL, "task": "pretrain", "training": {"tokens": 1e9, "seq_len": 4096, "global_batch": 64},
            "constraints": {"gpu_types": ["rtx-4090"], "max_gpus": 8, **constraints}}  # fmt: skip


def test_allow_offload_false_keeps_every_option_on_the_gpu():
    """Llama 3.1 8B pretraining on 24 GB RTX 4090s: 16 B/param of states is 128 GB, so small counts fit only with
    offload; with ``allow_offload: false`` the search offers none of those."""
    on = plan(parse_scenario(_scenario()))
    off = plan(parse_scenario(_scenario(allow_offload=False)))
    assert on.search["layouts_fit_offload"] > 0
    assert off.search["layouts_fit_offload"] == 0
    assert off.all_options and not any(o["layout"]["offload_optimizer"] or o["layout"]["offload_activations"]
                                       for o in off.all_options)  # fmt: skip
    assert min(o["gpus"] for o in off.all_options) > min(o["gpus"] for o in on.all_options)


@pytest.mark.parametrize("value", ["no", 0, None])
def test_allow_offload_is_true_or_false(value):
    with pytest.raises(CatalogFileError, match=r"^s\.yaml: constraints\.allow_offload: .*boolean"):
        parse_scenario(_scenario(allow_offload=value), source="s.yaml")


def test_allow_offload_is_refused_for_a_serving_scenario():
    data = {"model": MODEL, "task": "inference", "inference": {"requests_per_s": 2.0},
            "constraints": {"allow_offload": False}}  # fmt: skip
    with pytest.raises(CatalogFileError, match=r"constraints\.allow_offload applies to training"):
        parse_scenario(data, source="s.yaml")


def test_a_scaling_efficiency_above_one_under_offload_says_why():
    """ZeRO-Offload moves each rank's gradient shard every micro-batch over the rank's own PCIe link: from 1 to 8
    GPUs at a fixed global batch both the shard (1/8) and the micro-batches per rank (1/8) shrink, so that traffic
    falls 64-fold while compute falls 8-fold. An efficiency above 1 is then physical, and the output must say why
    (the standard: scaling efficiency never exceeds 1 unless the output says why); without offload it stays <= 1."""
    from scaleright.catalog import get_gpu
    from scaleright.estimate.layout import Layout
    from scaleright.estimate.train import estimate_train
    from scaleright.workload import load_model

    spec, gpu = load_model("llama-3.1-8b"), get_gpu("h100-sxm")
    off = estimate_train(spec, gpu=gpu, seq_len=4096, layout=Layout(dp=8, zero=2, micro_batch=1, global_batch=64,
                                                                    offload_optimizer=True))  # fmt: skip
    assert off.base_gpus == 1
    one = estimate_train(spec, gpu=gpu, seq_len=4096, layout=Layout(dp=1, zero=2, micro_batch=1, global_batch=64,
                                                                    offload_optimizer=True))  # fmt: skip
    assert off.time_breakdown_s["offload"] > 0
    # exposed offload time falls more than the 8-fold GPU ratio (the traffic itself 64-fold)
    assert one.time_breakdown_s["offload"] > 8 * off.time_breakdown_s["offload"]
    if off.scaling_efficiency > 1 + 1e-9:
        assert off.scaling_note is not None and "offload" in off.scaling_note
    else:
        assert off.scaling_note is None
    plain = estimate_train(spec, gpu=get_gpu("b200"), seq_len=4096,
                           layout=Layout(dp=8, zero=3, micro_batch=1, global_batch=64))  # fmt: skip
    assert plain.scaling_efficiency is None or plain.scaling_efficiency <= 1 + 1e-9
    assert plain.scaling_note is None
