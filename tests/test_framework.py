"""Framework profiles (issue #9 item 4): presets, overrides, and the physics each field switches on.

References are the papers' own closed forms: materialised attention moves at least its score bytes over HBM
(Korthikanti et al. 2022, 4.1: softmax 2+2 B and dropout 2+2+1 B per score, forward); the ZB-H1 bubble
(Qi et al. 2023) is (p − 1)(T_F + T_B − T_W), between a third of 1F1B's (T_F = T_B = T_W) and 1F1B's own.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from scaleright.catalog import get_gpu
from scaleright.cli.main import app
from scaleright.errors import InputError
from scaleright.estimate.framework import DEFAULT_FRAMEWORK, FRAMEWORKS, Framework, framework_of
from scaleright.estimate.layout import Layout
from scaleright.estimate.train import estimate_train, train_step_arrays
from scaleright.workload import load_model
from tests.cli_helpers import assert_one_line, run_main


def test_presets_state_what_each_framework_does():
    m21, mc = FRAMEWORKS["megatron-2021"], FRAMEWORKS["megatron-core"]
    assert (m21.tp_comm_overlap, m21.attention) == (False, "materialized")
    assert (mc.tp_comm_overlap, mc.attention, mc.pipeline_schedule, mc.flash_version) == (True, "flash",
                                                                                          "interleaved", 3)
    assert FRAMEWORKS["deepspeed"].tp_comm_overlap is False and FRAMEWORKS["deepspeed"].cp_variant == "ulysses"
    assert FRAMEWORKS["fsdp2"].pipeline_schedule == "1f1b"
    assert {"megatron-2021", "megatron-core", "deepspeed", "fsdp2", "accelerate"} <= set(FRAMEWORKS)
    assert DEFAULT_FRAMEWORK.tp_comm_overlap is False  # no overlap is credited unless a framework does it


def test_overrides_and_bad_values():
    fw = framework_of({"name": "megatron-core", "pipeline_schedule": "zero-bubble", "tp_comm_overlap": False})
    assert fw.pipeline_schedule == "zero-bubble" and not fw.tp_comm_overlap
    assert fw.name.startswith("megatron-core (") and "zero-bubble" in fw.name
    assert framework_of("megatron-core").with_overrides(tp_comm_overlap=True) is FRAMEWORKS["megatron-core"]
    for bad, match in ((
        "megatron-2019", r"framework='megatron-2019' not known"), ({"attention": "sparse"}, r"attention='sparse'"),
        ({"cp_variant": "tree"}, r"cp_variant"), ({"tp_comm_overlap": "yes"}, r"must be true or false"),
        ({"no_such": 1}, r"no_such not known"), (3, r"framework must be"),
    ):  # fmt: skip
        with pytest.raises(InputError, match=match):
            framework_of(bad)
    with pytest.raises(InputError, match="flash_version"):
        Framework("x", flash_version=4)


GPT22B = dict(layers=48, hidden=6144, heads=64)  # Korthikanti et al. 2022 Table 3's 22B model


def _gpt(layers: int):
    from validation.models import gpt_spec

    return gpt_spec("gpt-22b", layers, GPT22B["hidden"], GPT22B["heads"], 4 * GPT22B["hidden"], 51200, 2048)


def _per_layer(framework, recompute: str, **kw) -> dict[str, float]:
    """Per-layer times of one micro-batch (2-layer minus 1-layer model: the output head cancels)."""
    gpu = get_gpu("a100-80gb")
    rows = []
    for layers in (2, 1):
        r = train_step_arrays(_gpt(layers), gpu=gpu, seq_len=2048, global_batch=4, tp=8, micro_batch=4,
                              recompute=recompute, framework=framework, **kw)  # fmt: skip
        rows.append({k: float(v) for k, v in r.items()})
    return {k: rows[0][k] - rows[1][k] for k in rows[0]}


def test_materialized_attention_moves_its_score_bytes_through_hbm():
    """Selective recompute re-runs the attention core: with materialised scores it costs at least the softmax and
    dropout traffic, 9 B per score element (s·s·a/t per micro-batch sequence), over the datasheet HBM bandwidth."""
    gpu = get_gpu("a100-80gb")
    scores = 4 * 2048 * 2048 * GPT22B["heads"] / 8  # b·s·s·a/t
    floor_s = 9.0 * scores / (gpu.hbm_bandwidth_tb_per_s * 1e12)
    mat = _per_layer("megatron-2021", "selective")["t_recompute"]
    flash = _per_layer(FRAMEWORKS["megatron-2021"].with_overrides(attention="flash"), "selective")["t_recompute"]
    assert mat >= floor_s
    assert mat > 2 * flash  # flash never writes the scores


def test_zero_bubble_schedule_shrinks_the_bubble_as_zb_h1():
    spec = load_model("llama-3.1-8b")
    gpu = get_gpu("h100-sxm")
    kw = dict(gpu=gpu, seq_len=4096, global_batch=8, pp=4, dp=1, micro_batch=1)
    one = train_step_arrays(spec, framework="fsdp2", **kw)
    zb = train_step_arrays(spec, framework=FRAMEWORKS["fsdp2"].with_overrides(pipeline_schedule="zero-bubble"),
                           **kw)  # fmt: skip
    b1, bz = float(one["t_bubble"]), float(zb["t_bubble"])
    assert b1 / 3 <= bz < b1
    assert float(zb["t_compute"]) == pytest.approx(float(one["t_compute"]))


def test_1f1b_refuses_virtual_stages_and_interleaved_takes_them():
    spec = load_model("llama-3.1-8b")
    gpu = get_gpu("h100-sxm")
    lay = Layout(tp=1, pp=4, dp=1, micro_batch=1, global_batch=8, virtual_stages=2)
    with pytest.raises(InputError, match="interleaved"):
        estimate_train(spec, gpu=gpu, layout=lay, seq_len=4096, framework="fsdp2")
    inter = estimate_train(spec, gpu=gpu, layout=lay, seq_len=4096, framework="megatron-core")
    flat = estimate_train(spec, gpu=gpu, layout=lay.replace(virtual_stages=1), seq_len=4096,
                          framework="megatron-core")  # fmt: skip
    def slot(e) -> float:  # one micro-batch on the slowest stage (8 micro-batches: global batch 8 / dp 1 / mb 1)
        return sum(e.time_breakdown_s[k] for k in ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm",
                                                    "pp_comm")) / 8  # fmt: skip

    # (p − 1)/v slots (Narayanan et al. 2021); an interleaved slot also sends v times the activations
    assert flat.time_breakdown_s["bubble"] == pytest.approx(3 * slot(flat), rel=1e-6)
    assert inter.time_breakdown_s["bubble"] == pytest.approx(3 / 2 * slot(inter), rel=1e-6)
    assert inter.time_breakdown_s["bubble"] < flat.time_breakdown_s["bubble"]


def test_exposed_collectives_without_prefetch_or_bucket_overlap():
    spec = load_model("llama-3.1-8b")
    gpu = get_gpu("h100-sxm")
    for zero in (0, 1, 3):
        lay = Layout(tp=1, pp=1, dp=16, zero=zero, micro_batch=1, global_batch=16)
        on = estimate_train(spec, gpu=gpu, layout=lay, seq_len=4096)
        off = estimate_train(spec, gpu=gpu, layout=lay, seq_len=4096,
                             framework=DEFAULT_FRAMEWORK.with_overrides(fsdp_prefetch=False, dp_bucket_overlap=False))
        assert off.time_breakdown_s["dp_comm"] > on.time_breakdown_s["dp_comm"]


@pytest.mark.parametrize("variant", ["ring", "allgather", "ulysses"])
def test_context_parallel_variants_cost_communication(variant):
    spec = load_model("llama-3.1-8b")
    gpu = get_gpu("h100-sxm")
    r = train_step_arrays(spec, gpu=gpu, seq_len=65536, global_batch=1, cp=8, dp=1,
                          framework=DEFAULT_FRAMEWORK.with_overrides(cp_variant=variant))  # fmt: skip
    exposed = float(r["t_cp_comm"])
    assert exposed >= 0
    if variant != "ring":  # the all-gather / all-to-all runs before attention: never hidden
        assert exposed > 0


def _json(args: list[str]) -> dict:
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


TRAIN = ["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "8", "--tp", "8",
         "--sequence-parallel", "--global-batch", "8", "--json"]  # fmt: skip


def test_cli_prints_the_framework_and_takes_overrides():
    d = _json([*TRAIN, "--framework", "megatron-2021"])
    assert d["framework"]["name"] == "megatron-2021" and d["framework"]["attention"] == "materialized"
    d = _json([*TRAIN, "--framework", "megatron-2021", "--attention", "flash", "--pipeline-schedule", "zero-bubble"])
    assert (d["framework"]["attention"], d["framework"]["pipeline_schedule"]) == ("flash", "zero-bubble")
    assert _json(TRAIN)["framework"]["name"] == DEFAULT_FRAMEWORK.name
    r = CliRunner().invoke(app, [*TRAIN[:-1], "--framework", "megatron-core"])
    assert r.exit_code == 0 and "framework megatron-core: TP-comm overlap on" in r.output


@pytest.mark.parametrize("flag, value", [("--framework", "nemo"), ("--attention", "sparse"),
                                         ("--cp-variant", "tree"), ("--pipeline-schedule", "gpipe")])
def test_cli_refuses_unknown_framework_values(flag, value, monkeypatch, capsys):
    code, out, err = run_main([*TRAIN, flag, value], monkeypatch, capsys)
    assert_one_line(code, out, err, rf"{flag}.*{value}")


def test_backward_tp_all_reduce_hides_behind_weight_gradients_only_where_the_framework_does_it():
    """Megatron-LM's async input-gradient all-reduce: the forward all-reduces stay exposed, the backward ones shrink;
    LoRA has no weight gradients to hide behind."""
    spec = load_model("llama-3.1-70b")
    gpu = get_gpu("h100-sxm")
    kw = dict(gpu=gpu, seq_len=4096, global_batch=1, tp=8, micro_batch=1)
    m21 = FRAMEWORKS["megatron-2021"]
    on = float(train_step_arrays(spec, framework=m21, **kw)["t_tp_comm"])
    off = float(train_step_arrays(spec, framework=m21.with_overrides(tp_bwd_overlap=False), **kw)["t_tp_comm"])
    assert off / 2 <= on < off  # forward half exposed in both
    lora_on = float(train_step_arrays(spec, framework=m21, task="lora", **kw)["t_tp_comm"])
    lora_off = float(train_step_arrays(spec, framework=m21.with_overrides(tp_bwd_overlap=False), task="lora",
                                       **kw)["t_tp_comm"])  # fmt: skip
    assert lora_on == pytest.approx(lora_off)
