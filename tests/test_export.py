"""Launch configs out of a plan: every format parses with its own grammar (JSON, YAML, TOML, shell words) and carries
exactly the plan's layout; a layout a launcher cannot express is refused in one line."""

from __future__ import annotations

import json
import shlex
import tomllib

import pytest
import yaml

from scaleright.errors import InputError
from scaleright.export import INFER_FORMATS, TRAIN_FORMATS, export_plan
from tests.cli_helpers import assert_one_line, run_main


def _train_plan(**layout) -> dict:
    lay = {"tp": 2, "pp": 4, "dp": 8, "cp": 1, "ep": 1, "zero": 1, "micro_batch": 2, "recompute": "selective",
           "sequence_parallel": True, "virtual_stages": 2} | layout  # fmt: skip
    gpus = lay["tp"] * lay["pp"] * lay["dp"] * lay["cp"]
    return {"scenario": {"name": "70B run", "model": "llama-3.1-70b", "task": "pretrain",
                         "training": {"seq_len": 4096, "global_batch": 512, "precision": "bf16"},
                         "pricing": {"mode": "spot"}},
            "recommendation": {"gpu": "h100-sxm", "gpus": gpus, "layout": lay, "precision": "bf16",
                               "framework": "megatron-core", "pricing_kind": "spot"}}  # fmt: skip


def _infer_plan() -> dict:
    return {"scenario": {"name": "chat", "model": "llama-3.1-8b", "task": "inference",
                         "inference": {"input_len": 1500, "output_len": 350, "precision": "fp8", "kv_precision": "fp8"},
                         "pricing": {"mode": "on-demand"}},
            "recommendation": {"gpu": "h100-sxm", "gpus": 6, "layout": {"tp": 2, "pp": 1, "replicas": 3,
                                                                         "batch_per_replica": 128}}}  # fmt: skip


def _one(files: dict[str, str]) -> str:
    [text] = files.values()
    return text


def _flags(words: list[str]) -> dict[str, str | bool]:
    out: dict[str, str | bool] = {}
    for i, w in enumerate(words):
        if w.startswith("--"):
            if "=" in w:
                k, v = w.split("=", 1)
                out[k] = v
            else:
                out[w] = words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("--") else True
    return out


def test_megatron_arguments_are_the_layout():
    text = _one(export_plan(_train_plan(), "megatron"))
    words = shlex.split(text.split("MEGATRON_PARALLEL_ARGS=(", 1)[1].split(")", 1)[0], comments=True)
    f = _flags(words)
    assert (f["--tensor-model-parallel-size"], f["--pipeline-model-parallel-size"], f["--micro-batch-size"],
            f["--global-batch-size"], f["--seq-length"]) == ("2", "4", "2", "512", "4096")  # fmt: skip
    assert f["--num-virtual-stages-per-pipeline-rank"] == "2" and f["--recompute-granularity"] == "selective"
    assert f["--sequence-parallel"] is True and f["--use-distributed-optimizer"] is True and f["--bf16"] is True
    assert f["--tp-comm-overlap"] is True  # the plan assumed Megatron-Core's TP overlap
    launch = shlex.split(text.strip().splitlines()[-1])
    assert _flags(launch)["--nnodes"] == "8" and _flags(launch)["--nproc-per-node"] == "8"  # 64 GPUs, 8 a node


def test_torchtitan_toml_degrees_multiply_to_the_gpus():
    cfg = tomllib.loads(_one(export_plan(_train_plan(zero=3), "torchtitan")))
    p = cfg["parallelism"]
    assert (p["tensor_parallel_degree"] * p["pipeline_parallel_degree"] * p["data_parallel_shard_degree"]
            * p["data_parallel_replicate_degree"] * p["context_parallel_degree"]) == 64  # fmt: skip
    assert p["data_parallel_shard_degree"] == 8 and p["pipeline_parallel_schedule"] == "Interleaved1F1B"
    assert cfg["activation_checkpoint"]["mode"] == "selective" and cfg["training"]["seq_len"] == 4096
    # local batch: 512 sequences over 8 data-parallel ranks
    assert cfg["training"]["local_batch_size"] == 64


def test_deepspeed_json_batch_arithmetic_and_stage():
    plan = _train_plan(tp=1, pp=1, dp=16, zero=3, virtual_stages=1, sequence_parallel=False)
    cfg = json.loads(_one(export_plan(plan, "deepspeed")))
    assert cfg["zero_optimization"]["stage"] == 3 and cfg["bf16"]["enabled"] is True
    assert cfg["train_micro_batch_size_per_gpu"] == 2 and cfg["gradient_accumulation_steps"] == 16
    assert cfg["train_batch_size"] == cfg["train_micro_batch_size_per_gpu"] * 16 * cfg["gradient_accumulation_steps"]


def test_accelerate_fsdp_yaml_and_its_refusal_of_tensor_parallelism():
    plan = _train_plan(tp=1, pp=1, dp=16, zero=3, virtual_stages=1, sequence_parallel=False)
    cfg = yaml.safe_load(_one(export_plan(plan, "accelerate")))
    assert cfg["distributed_type"] == "FSDP" and cfg["num_processes"] == 16 and cfg["num_machines"] == 2
    assert cfg["fsdp_config"]["fsdp_reshard_after_forward"] is True  # FSDP2's ZeRO-3 (it ignores sharding_strategy)
    assert cfg["fsdp_config"]["fsdp_activation_checkpointing"] is True
    with pytest.raises(InputError, match="no tensor, pipeline or context parallelism"):
        export_plan(_train_plan(), "accelerate")


def test_skypilot_slurm_and_k8s_ask_for_the_plans_nodes_and_gpus():
    plan = _train_plan()
    sky = yaml.safe_load(_one(export_plan(plan, "skypilot")))
    assert sky["num_nodes"] == 8 and sky["resources"] == {"accelerators": "H100:8", "use_spot": True}
    slurm = _one(export_plan(plan, "slurm"))
    assert "#SBATCH --nodes=8" in slurm and "#SBATCH --gpus-per-node=8" in slurm
    job = yaml.safe_load(_one(export_plan(plan, "k8s")))
    specs = job["spec"]["pytorchReplicaSpecs"]
    assert job["kind"] == "PyTorchJob" and specs["Master"]["replicas"] + specs["Worker"]["replicas"] == 8
    gpu = specs["Worker"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
    assert gpu == 8


def test_vllm_and_sglang_serve_one_replica_of_the_plan():
    plan = _infer_plan()
    v = _flags(shlex.split(_one(export_plan(plan, "vllm")).strip().splitlines()[-1]))
    assert (v["--tensor-parallel-size"], v["--max-num-seqs"], v["--kv-cache-dtype"]) == ("2", "128", "fp8")
    assert v["--max-model-len"] == "1850" and v["--gpu-memory-utilization"] == "0.9"
    s = _flags(shlex.split(_one(export_plan(plan, "sglang")).strip().splitlines()[-1]))
    assert (s["--tp"], s["--max-running-requests"], s["--kv-cache-dtype"]) == ("2", "128", "fp8_e4m3")
    # the engines load the Hugging Face repo (the model card's id), not scaleright's catalog name
    cmd = shlex.split(_one(export_plan(plan, "vllm")).strip().splitlines()[-1])
    assert cmd[:3] == ["vllm", "serve", "meta-llama/Meta-Llama-3.1-8B"]
    assert s["--model-path"] == "meta-llama/Meta-Llama-3.1-8B"
    dep = yaml.safe_load(_one(export_plan(plan, "k8s")))
    assert dep["spec"]["replicas"] == 3
    assert dep["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 2


@pytest.mark.parametrize("fmt", ["vllm", "sglang"])
def test_a_training_format_is_refused_for_an_inference_plan_and_back(fmt):
    with pytest.raises(InputError, match="not for a training plan"):
        export_plan(_train_plan(), fmt)
    with pytest.raises(InputError, match="not for an inference plan"):
        export_plan(_infer_plan(), "megatron")


def test_every_format_of_each_task_exports_or_names_why():
    for plan, formats in ((_train_plan(tp=1, pp=1, dp=64, virtual_stages=1, sequence_parallel=False), TRAIN_FORMATS),
                          (_infer_plan(), INFER_FORMATS)):  # fmt: skip
        for fmt in formats:
            files = export_plan(plan, fmt)
            assert files and all(t.strip() for t in files.values()), fmt


def test_cli_export_writes_into_a_directory_and_refuses_bad_input(tmp_path, monkeypatch, capsys):
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(_train_plan()))
    code, out, err = run_main(["export", str(plan_file), "--to", "torchtitan", "--out", str(tmp_path / "cfg")],
                              monkeypatch, capsys)  # fmt: skip
    assert code == 0, err
    cfg = tomllib.loads((tmp_path / "cfg" / "torchtitan.toml").read_text())
    assert cfg["parallelism"]["tensor_parallel_degree"] == 2
    code, out, err = run_main(["export", str(plan_file), "--to", "bogus"], monkeypatch, capsys)
    assert_one_line(code, out, err, r"--to='bogus' not allowed; allowed: torchrun, ")
    code, out, err = run_main(["export", str(plan_file), "--to", "accelerate"], monkeypatch, capsys)
    assert_one_line(code, out, err, r"--to=accelerate: Accelerate's FSDP config has no tensor")
    (tmp_path / "x.json").write_text("[1, 2]")
    code, out, err = run_main(["export", str(tmp_path / "x.json"), "--to", "slurm"], monkeypatch, capsys)
    assert_one_line(code, out, err, r"not a scaleright plan")


def test_plan_export_writes_every_format_that_applies(tmp_path, monkeypatch, capsys):
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: tiny LoRA\nmodel: llama-3.2-1b\ntask: lora\ntraining: {tokens: 1.0e+8}\n"
                        "constraints: {gpu_types: [h100-sxm], max_gpus: 8}\n")  # fmt: skip
    code, out, err = run_main(["plan", str(scenario), "--json", "--export", str(tmp_path / "launch")],
                              monkeypatch, capsys)  # fmt: skip
    assert code == 0, err
    rec = json.loads(out)["recommendation"]  # stdout is still one JSON object
    written = sorted(p.name for p in (tmp_path / "launch").iterdir())
    assert "launch.sh" in written and "job.sbatch" in written and "sky.yaml" in written
    sky = yaml.safe_load((tmp_path / "launch" / "sky.yaml").read_text())
    assert sky["num_nodes"] * int(sky["resources"]["accelerators"].split(":")[1]) == rec["gpus"]
    assert "wrote" in err


def test_an_offload_plan_exports_the_offload_each_launcher_names():
    """A plan that fits only with offload must export it (an export without it runs out of memory): DeepSpeed's
    ``zero_optimization.offload_optimizer`` (ZeRO-Offload's config, deepspeed.ai/docs/config-json), Megatron-Core's
    ``--optimizer-cpu-offload`` and Transformer Engine's ``--cpu-offloading``, FSDP's CPU offload in Accelerate and
    torchtitan; a format with no key for activation offload says so in a comment."""
    plan = _train_plan(tp=1, pp=2, dp=4, virtual_stages=1, sequence_parallel=False, recompute="none",
                       offload_optimizer=True, offload_activations=True)  # fmt: skip
    ds = json.loads(_one(export_plan(plan, "deepspeed")))
    assert ds["zero_optimization"]["offload_optimizer"]["device"] == "cpu"
    assert ds["activation_checkpointing"]["cpu_checkpointing"] is True
    assert ds["activation_checkpointing"]["partition_activations"] is True  # DeepSpeed requires the pair
    text = _one(export_plan(plan, "megatron"))
    f = _flags(shlex.split(text.split("MEGATRON_PARALLEL_ARGS=(", 1)[1].split(")", 1)[0], comments=True))
    assert f["--optimizer-cpu-offload"] is True and f["--optimizer-offload-fraction"] == "1.0"
    assert f["--cpu-offloading-num-layers"] == "39"  # llama-3.1-70b: 80 layers over pp=2, all but the last
    flat = _train_plan(tp=1, pp=1, dp=8, zero=3, virtual_stages=1, sequence_parallel=False,
                       offload_optimizer=True, offload_activations=True)  # fmt: skip
    acc_text = _one(export_plan(flat, "accelerate"))
    assert yaml.safe_load(acc_text)["fsdp_config"]["fsdp_offload_params"] is True and "save_on_cpu" in acc_text
    tt_text = _one(export_plan(flat, "torchtitan"))
    assert tomllib.loads(tt_text)["training"]["enable_cpu_offload"] is True and "save_on_cpu" in tt_text
    # without offload nothing of it is written
    plain = _train_plan(tp=1, pp=1, dp=8, zero=3, virtual_stages=1, sequence_parallel=False)
    assert "offload_optimizer" not in json.loads(_one(export_plan(plain, "deepspeed")))["zero_optimization"]
    assert yaml.safe_load(_one(export_plan(plain, "accelerate")))["fsdp_config"]["fsdp_offload_params"] is False
    assert "enable_cpu_offload" not in tomllib.loads(_one(export_plan(plain, "torchtitan")))["training"]
    with pytest.raises(InputError, match="offloads the optimizer"):  # no FSDP, no optimizer offload
        export_plan(_train_plan(tp=1, pp=1, dp=8, zero=1, virtual_stages=1, sequence_parallel=False,
                                offload_optimizer=True), "torchtitan")  # fmt: skip
