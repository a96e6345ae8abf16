"""``scaleright export`` outputs read by the launchers' own loaders (the optional ``export`` extra): Accelerate's config
loader and launch environment down to its FSDP plugin, DeepSpeed's ``DeepSpeedConfig`` (which checks the batch
arithmetic), SkyPilot's ``Task.from_yaml`` (its task schema) and name list, torchtitan's ``ConfigManager`` and
``ParallelDims``. Each test skips, with the reason, where its library is not installed. The expected values come
from the plan (GPUs, nodes, batch) and the definitions of the ZeRO stages, not from the exporter."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from scaleright.export import export_plan

EXTRA = "the optional 'export' extra (pip install '.[export]')"


def _train(gpus: int, *, gpu: str = "h100-sxm", spot: bool = False, global_batch: int = 512, **layout) -> dict:
    lay = {"tp": 1, "pp": 1, "dp": gpus, "cp": 1, "ep": 1, "etp": 1, "zero": 3, "dp_shard": gpus, "micro_batch": 2,
           "virtual_stages": 1, "recompute": "none", "sequence_parallel": False} | layout  # fmt: skip
    return {"scenario": {"name": "lib check", "model": "llama-3.1-8b", "task": "pretrain",
                         "training": {"seq_len": 4096, "global_batch": global_batch, "precision": "bf16"},
                         "pricing": {"mode": "spot" if spot else "on-demand"}},
            "recommendation": {"gpu": gpu, "gpus": gpus, "layout": lay, "precision": "bf16",
                               "pricing_kind": "spot" if spot else "on-demand"}}  # fmt: skip


def _infer(gpu: str, tp: int, replicas: int) -> dict:
    return {"scenario": {"name": "lib serve", "model": "llama-3.1-8b", "task": "inference",
                         "inference": {"input_len": 1500, "output_len": 350, "precision": "bf16"},
                         "pricing": {"mode": "on-demand"}},
            "recommendation": {"gpu": gpu, "gpus": tp * replicas,
                               "layout": {"tp": tp, "pp": 1, "replicas": replicas, "batch_per_replica": 64}}}


# (plan, ZeRO stage) for the data-parallel formats; the layouts a plan produces: FSDP over 2 nodes, ZeRO-1 and -2
# on one node, plain DDP, one GPU
DP_PLANS = {
    "zero3-16": _train(16, recompute="full"),
    "zero2-8": _train(8, zero=2),
    "zero1-4": _train(4, zero=1, micro_batch=1, global_batch=64),
    "zero0-2": _train(2, zero=0, global_batch=32),
    "one-gpu": _train(1, zero=0, micro_batch=4, global_batch=16),
}
MODEL_PARALLEL_PLANS = {
    "tp2-pp4-dp8": _train(64, tp=2, pp=4, dp=8, dp_shard=8, zero=1, virtual_stages=2, sequence_parallel=True,
                          recompute="selective", micro_batch=1),
    "tp2-dp64-zero2": _train(128, gpu="b200", tp=2, dp=64, dp_shard=64, zero=2, micro_batch=1),
}


def _write(tmp_path: Path, plan: dict, fmt: str, tag: str) -> Path:
    [(name, text)] = export_plan(plan, fmt).items()
    path = tmp_path / f"{tag}-{name}"
    path.write_text(text, encoding="utf-8")
    return path


def _nodes(plan: dict) -> int:
    return -(-plan["recommendation"]["gpus"] // 8)


# ---- Accelerate -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tag", list(DP_PLANS))
def test_accelerate_loader_and_fsdp_plugin(tmp_path, monkeypatch, tag) -> None:
    pytest.importorskip("accelerate", reason=f"accelerate is {EXTRA}")
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils import FullyShardedDataParallelPlugin
    from accelerate.utils.launch import prepare_multi_gpu_env

    plan = DP_PLANS[tag]
    gpus, zero = plan["recommendation"]["gpus"], plan["recommendation"]["layout"]["zero"]
    path = _write(tmp_path, plan, "accelerate", tag)
    cfg = load_config_from_file(str(path))  # Accelerate refuses unknown top-level keys here
    assert (cfg.num_processes, cfg.num_machines) == (gpus, _nodes(plan))
    assert str(cfg.mixed_precision) in ("bf16", "MixedPrecision.BF16") or cfg.mixed_precision.value == "bf16"
    want = "FSDP" if zero else "MULTI_GPU" if gpus > 1 else "NO"
    assert cfg.distributed_type.value == want
    if not zero:
        return
    # what `accelerate launch --config_file` hands the workers, and the FSDP plugin the workers build from it
    args, _, _ = _validate_launch_command(launch_command_parser().parse_args(["--config_file", str(path), "t.py"]))
    env = prepare_multi_gpu_env(args)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    plugin = FullyShardedDataParallelPlugin()
    assert plugin.fsdp_version == 2
    # ZeRO-3 shards the parameters between forward and backward (reshard after forward); ZeRO-1/2 keep them
    assert plugin.reshard_after_forward is (zero == 3)
    assert plugin.activation_checkpointing is (plan["recommendation"]["layout"]["recompute"] != "none")


# ---- DeepSpeed ------------------------------------------------------------------------------------------------------


# DeepSpeedConfig reads a path with hjson.load(open(path)) and never closes the file: its ResourceWarning is DeepSpeed's
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning", "ignore::ResourceWarning")
@pytest.mark.parametrize("tag", [*DP_PLANS, "pp2-dp4"])
def test_deepspeed_config_class(tmp_path, monkeypatch, tag) -> None:
    """DeepSpeedConfig on rank 0 of the plan's data-parallel group (an mpu giving its size, as Megatron-DeepSpeed
    passes one): it checks train_batch_size = micro-batch x accumulation x data-parallel size itself."""
    pytest.importorskip("deepspeed", reason=f"deepspeed is {EXTRA} (install with DS_BUILD_OPS=0 on CPU)")
    import deepspeed.runtime.config as dsc

    plan = _train(8, pp=2, dp=4, dp_shard=4, zero=1) if tag == "pp2-dp4" else DP_PLANS[tag]
    lay = plan["recommendation"]["layout"]
    path = _write(tmp_path, plan, "deepspeed", tag)

    class DataParallelGroup:
        def get_data_parallel_world_size(self) -> int:
            return lay["dp"]

    monkeypatch.setattr(dsc.dist, "get_rank", lambda *a, **k: 0)
    cfg = dsc.DeepSpeedConfig(str(path), mpu=DataParallelGroup())
    assert cfg.world_size == lay["dp"]
    assert cfg.train_batch_size == plan["scenario"]["training"]["global_batch"]
    assert cfg.train_micro_batch_size_per_gpu == lay["micro_batch"]
    assert cfg.zero_optimization_stage == lay["zero"]
    assert cfg.bfloat16_config.enabled and not cfg.float16_config.enabled
    if lay["pp"] > 1:
        assert cfg.pipeline["stages"] == lay["pp"]


# ---- SkyPilot -------------------------------------------------------------------------------------------------------

_SKY_READER = textwrap.dedent("""
    import json, sys
    import sky
    from sky import catalog
    out = {"common_gpus": catalog.get_common_gpus(), "tasks": {}}
    for path in sys.argv[1:]:
        t = sky.Task.from_yaml(path)
        [r] = list(t.resources)
        svc = getattr(t, "service", None)
        out["tasks"][path] = {"num_nodes": t.num_nodes, "accelerators": r.accelerators, "use_spot": r.use_spot,
                              "replicas": getattr(svc, "min_replicas", None) if svc is not None else None,
                              "run": t.run}
    print(json.dumps(out))
""")


def test_skypilot_task_schema(tmp_path) -> None:
    """sky.Task.from_yaml (SkyPilot's task schema) in a child process with its own HOME (SkyPilot writes ~/.sky on
    import); accelerator names must be SkyPilot's (its list of common GPUs) for the GPUs on that list."""
    pytest.importorskip("sky", reason=f"skypilot is {EXTRA}")
    plans = {
        "fsdp-2-nodes": (_train(16), 2, "H100", 8, False),
        "spot-4": (_train(4, zero=1, global_batch=64, spot=True), 1, "H100", 4, True),
        "b200-16-nodes": (MODEL_PARALLEL_PLANS["tp2-dp64-zero2"], 16, "B200", 8, False),
        "rtx-pro-6000": (_train(1, gpu="rtx-pro-6000", zero=0, global_batch=16), 1, "RTXPRO6000", 1, False),
        "a100-pcie": (_train(8, gpu="a100-80gb-pcie"), 1, "A100-80GB", 8, False),
        "serve-l4": (_infer("l4", 1, 3), 1, "L4", 1, False),
        "serve-rtx-pro-6000-tp2": (_infer("rtx-pro-6000", 2, 2), 1, "RTXPRO6000", 2, False),
    }
    paths = {tag: _write(tmp_path, p[0], "skypilot", tag) for tag, p in plans.items()}
    home = tmp_path / "home"
    home.mkdir()
    proc = subprocess.run([sys.executable, "-c", _SKY_READER, *map(str, paths.values())], capture_output=True,
                          text=True, timeout=300, env={"HOME": str(home), "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    for tag, (plan, nodes, name, per_node, spot) in plans.items():
        t = got["tasks"][str(paths[tag])]
        assert t["num_nodes"] == nodes, tag
        assert t["accelerators"] == {name: per_node}, tag
        assert t["use_spot"] is spot, tag
        assert name in got["common_gpus"], (tag, name)
        if plan["scenario"]["task"] == "inference":
            assert t["replicas"] == plan["recommendation"]["layout"]["replicas"]
            assert "vllm serve" in t["run"]


# ---- torchtitan -----------------------------------------------------------------------------------------------------


def _torchtitan(monkeypatch):
    """torchtitan's config and parallel-dims modules, without the package's ``__init__`` (it imports the MoE Triton
    kernels, and Triton is a GPU package). The TOML job files are torchtitan 0.2.x's: 0.3 replaced them."""
    import importlib
    import importlib.util
    import types
    from importlib.metadata import version

    if importlib.util.find_spec("torchtitan") is None:  # not importorskip: importing the package needs Triton
        pytest.skip(f"torchtitan is {EXTRA}")

    major_minor = tuple(int(x) for x in version("torchtitan").split(".")[:2])
    if major_minor >= (0, 3):
        pytest.skip(f"torchtitan {version('torchtitan')} reads Python config registries, not TOML job files; the "
                    "export's TOML is for torchtitan 0.2.x (the extra pins <0.3)")  # fmt: skip
    if "torchtitan" not in sys.modules:
        spec = importlib.util.find_spec("torchtitan")
        assert spec is not None and spec.submodule_search_locations
        pkg = types.ModuleType("torchtitan")
        pkg.__path__ = list(spec.submodule_search_locations)
        monkeypatch.setitem(sys.modules, "torchtitan", pkg)
    config = importlib.import_module("torchtitan.config")
    dims = importlib.import_module("torchtitan.distributed.parallel_dims")
    return config.ConfigManager, dims.ParallelDims


@pytest.mark.parametrize("tag", [*DP_PLANS, *MODEL_PARALLEL_PLANS])
def test_torchtitan_config_manager(tmp_path, monkeypatch, tag) -> None:
    config_manager, parallel_dims = _torchtitan(monkeypatch)
    from torch.distributed.pipelining.schedules import get_schedule_class

    plan = {**DP_PLANS, **MODEL_PARALLEL_PLANS}[tag]
    lay, gpus = plan["recommendation"]["layout"], plan["recommendation"]["gpus"]
    path = _write(tmp_path, plan, "torchtitan", tag)
    cfg = config_manager().parse_args(["--job.config_file", str(path)])  # unknown keys are refused here
    p = cfg.parallelism
    # torchtitan's own check: dp_replicate x dp_shard x cp x tp x pp = world size
    parallel_dims(dp_replicate=p.data_parallel_replicate_degree, dp_shard=p.data_parallel_shard_degree,
                  cp=p.context_parallel_degree, tp=p.tensor_parallel_degree, pp=p.pipeline_parallel_degree,
                  ep=p.expert_parallel_degree, etp=p.expert_tensor_parallel_degree, world_size=gpus)  # fmt: skip
    assert (p.tensor_parallel_degree, p.pipeline_parallel_degree) == (lay["tp"], lay["pp"])
    assert p.data_parallel_replicate_degree * p.data_parallel_shard_degree == lay["dp"]
    # FSDP2 shards over dp_shard for ZeRO-2/3; ZeRO-2 keeps the gathered parameters (never reshard after forward)
    assert p.data_parallel_shard_degree == (lay["dp"] if lay["zero"] >= 2 else 1)
    assert p.fsdp_reshard_after_forward == ("never" if lay["zero"] == 2 else "default")
    get_schedule_class(p.pipeline_parallel_schedule)  # a schedule torch knows (raises otherwise)
    assert cfg.training.seq_len == plan["scenario"]["training"]["seq_len"]
    # the global batch: local batch per data-parallel rank x data-parallel ranks
    assert cfg.training.local_batch_size * lay["dp"] == plan["scenario"]["training"]["global_batch"]
    assert cfg.activation_checkpoint.mode == lay["recompute"]  # none, full, selective: the same names
