"""``scaleright export`` outputs read by the launchers' own loaders (the optional ``export`` extra): Accelerate's config
loader and launch environment down to its FSDP plugin, DeepSpeed's ``DeepSpeedConfig`` (which checks the batch
arithmetic), SkyPilot's ``Task.from_yaml`` (its task schema) and name list, torchtitan's ``ConfigManager`` and
``ParallelDims``; the serve commands by ``vllm serve``'s own argument parser and config classes and by
``sglang.launch_server``'s ``prepare_server_args`` (not in the extra: see ``SERVE_PARSERS``). Each test skips, with
the reason, where its library is not installed. The expected values come from the plan (GPUs, nodes, batch, lengths,
precisions) and the definitions of the ZeRO stages, not from the exporter."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
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


def _infer(gpu: str, tp: int, replicas: int, *, pp: int = 1, model: str = "llama-3.1-8b", precision: str = "bf16",
           kv_precision: str | None = None, batch: int = 64) -> dict:
    inf = {"input_len": 1500, "output_len": 350, "precision": precision} | ({"kv_precision": kv_precision}
                                                                             if kv_precision else {})  # fmt: skip
    return {"scenario": {"name": "lib serve", "model": model, "task": "inference", "inference": inf,
                         "pricing": {"mode": "on-demand"}},
            "recommendation": {"gpu": gpu, "gpus": tp * pp * replicas,
                               "layout": {"tp": tp, "pp": pp, "replicas": replicas, "batch_per_replica": batch}}}


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


# ---- vLLM and SGLang: the serve commands through the engines' own parsers -------------------------------------------

# Not in the `export` extra: vllm 0.33.0's wheel (336 MB) pins torch==2.14.0 and CUDA kernel packages (flashinfer,
# cutlass-dsl, tilelang, ...), sglang 0.5.23's (39 MB) pins torch==2.14.1 and sglang-kernel, so installing either
# with its dependencies replaces this CPU torch with a CUDA build and its CUDA libraries. Their argument parsers run
# on this CPU torch (2.13) from the wheels installed without their dependencies plus what the parsers import:
# .ci/run installs exactly that, best effort, in a venv of its own, and runs these tests there.
SERVE_PARSERS = {
    "vllm": "vLLM is not installed (not in the export extra: vllm 0.33.0 pins torch==2.14.0 and CUDA kernel packages); "
            "its parser runs on CPU from the wheel installed with --no-deps plus what it imports, as .ci/run does",
    "sglang": "SGLang is not installed (not in the export extra: sglang 0.5.23 pins torch==2.14.1 and sglang-kernel); "
              "its parser runs on CPU from the wheel installed with --no-deps plus triton and what it imports, as "
              ".ci/run does",
}  # fmt: skip


def _serve_plans() -> dict[str, dict]:
    from scaleright import plan_scenario

    chat = plan_scenario(Path(__file__).parents[1] / "examples" / "chat-service-8b.yaml").to_dict()
    assert chat["recommendation"], "examples/chat-service-8b.yaml has a recommendation"
    return {
        "chat-service-8b": chat,  # what `scaleright plan examples/chat-service-8b.yaml --json` recommends (fp8, fp8 KV)
        "tp2-fp8-kv": _infer("h100-sxm", 2, 3, kv_precision="fp8", batch=200),
        "tp4-pp2-bf16": _infer("h100-sxm", 4, 1, pp=2, model="llama-3.1-70b", batch=32),
    }


def _serve_argv(tmp_path: Path, plan: dict, fmt: str, tag: str, head: list[str]) -> list[str]:
    """The exported script's command, as the shell would split it, without its leading ``head`` and the trailing
    ``"$@"`` (the user's extra arguments)."""
    text = _write(tmp_path, plan, fmt, tag).read_text(encoding="utf-8")
    [line] = [ln for ln in text.splitlines() if ln.startswith(head[0])]
    argv = shlex.split(line)
    assert argv[: len(head)] == head and argv[-1] == "$@", line
    return argv[len(head) : -1]


def _run_reader(script: str, argvs: dict[str, list[str]], tmp_path: Path, **env: str) -> dict:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH", "LANG", "LC_ALL")}
    proc = subprocess.run([sys.executable, "-c", script, json.dumps(argvs)], capture_output=True, text=True,
                          timeout=300, env=keep | {"HOME": str(home), "DO_NOT_TRACK": "1"} | env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# the Hugging Face repo an engine loads for each catalog model the tests plan (the model cards' repo ids)
_HUB = {"llama-3.1-8b": "meta-llama/Meta-Llama-3.1-8B", "llama-3.1-70b": "meta-llama/Meta-Llama-3.1-70B"}


def _kv_ok(plan: dict, got: str) -> bool:
    """An fp8 KV cache is one of the engine's fp8 cache dtypes; a 16-bit one is the model's own dtype ('auto')."""
    kv = plan["scenario"]["inference"].get("kv_precision") or plan["scenario"]["inference"]["precision"]
    return got.startswith("fp8") if kv == "fp8" else got == "auto"


def _kv_fraction_planned() -> float:
    """The fraction of GPU memory the planner's serving simulator gives weights + KV cache (its default)."""
    import inspect

    from scaleright.serve.simulate import simulate

    return float(inspect.signature(simulate).parameters["gpu_memory_utilization"].default)


# what `vllm serve` does with its arguments before it starts the server: its parser (vllm.entrypoints.cli.main builds
# the same subcommand), its checks, the engine arguments; then the config classes that check dtype and parallel
# degrees without the model (vLLM's parser itself accepts any --kv-cache-dtype string; CacheConfig refuses an unknown
# one). VLLM_TARGET_DEVICE=cpu: the CUDA wheel on a machine without a GPU cannot tell its platform otherwise.
_VLLM_READER = textwrap.dedent("""
    import json, sys
    from vllm.config import CacheConfig, ParallelConfig
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    out = {}
    for tag, argv in json.loads(sys.argv[1]).items():
        parser = FlexibleArgumentParser(prog="vllm")
        serve = ServeSubcommand()
        serve.subparser_init(parser.add_subparsers(dest="subparser"))
        args = parser.parse_args(argv)
        serve.validate(args)
        if args.model_tag is not None:  # ServeSubcommand.cmd: the positional model wins
            args.model = args.model_tag
        e = AsyncEngineArgs.from_cli_args(args)
        cache = CacheConfig(gpu_memory_utilization=e.gpu_memory_utilization, cache_dtype=e.kv_cache_dtype)
        par = ParallelConfig(tensor_parallel_size=e.tensor_parallel_size,
                             pipeline_parallel_size=e.pipeline_parallel_size)
        out[tag] = {"subcommand": args.subparser, "model": e.model, "tp": e.tensor_parallel_size,
                    "pp": e.pipeline_parallel_size, "world_size": par.world_size, "max_num_seqs": e.max_num_seqs,
                    "kv_cache_dtype": cache.cache_dtype, "gpu_memory_utilization": cache.gpu_memory_utilization,
                    "max_model_len": e.max_model_len, "quantization": e.quantization,
                    "quantization_known": e.quantization is None or e.quantization in QUANTIZATION_METHODS}
    print(json.dumps(out))
""")


def test_vllm_serve_parser_reads_the_plan(tmp_path) -> None:
    if importlib.util.find_spec("vllm") is None:
        pytest.skip(SERVE_PARSERS["vllm"])
    plans = _serve_plans()
    argvs = {tag: _serve_argv(tmp_path, p, "vllm", tag, ["vllm"]) for tag, p in plans.items()}
    got = _run_reader(_VLLM_READER, argvs, tmp_path, VLLM_TARGET_DEVICE="cpu", VLLM_NO_USAGE_STATS="1")
    for tag, plan in plans.items():
        g, lay, inf = got[tag], plan["recommendation"]["layout"], plan["scenario"]["inference"]
        assert g["subcommand"] == "serve", tag
        assert g["model"] == _HUB[plan["scenario"]["model"]], tag
        assert (g["tp"], g["pp"]) == (lay["tp"], lay["pp"]), tag
        # one replica's GPUs: the plan's GPUs shared by its replicas
        assert g["world_size"] * lay["replicas"] == plan["recommendation"]["gpus"], tag
        assert g["max_num_seqs"] == lay["batch_per_replica"], tag
        assert _kv_ok(plan, g["kv_cache_dtype"]), (tag, g["kv_cache_dtype"])
        assert g["gpu_memory_utilization"] == _kv_fraction_planned(), tag
        assert g["max_model_len"] == inf["input_len"] + inf["output_len"], tag
        precision = plan["recommendation"].get("precision") or inf["precision"]
        assert g["quantization"] == ("fp8" if precision == "fp8" else None), tag
        assert g["quantization_known"], tag


# what `python3 -m sglang.launch_server` does with its arguments first (sglang/launch_server.py): prepare_server_args,
# SGLang's parser (choices for --kv-cache-dtype and --quantization) and ServerArgs
_SGLANG_READER = textwrap.dedent("""
    import json, sys
    from sglang.srt.server_args import prepare_server_args
    out = {}
    for tag, argv in json.loads(sys.argv[1]).items():
        s = prepare_server_args(argv)
        out[tag] = {"model": s.model_path, "tp": s.tp_size, "pp": s.pp_size, "max_running": s.max_running_requests,
                    "kv_cache_dtype": s.kv_cache_dtype, "mem_fraction_static": s.mem_fraction_static,
                    "quantization": s.quantization}
    print(json.dumps(out))
""")


def test_sglang_server_args_read_the_plan(tmp_path) -> None:
    if importlib.util.find_spec("sglang") is None:
        pytest.skip(SERVE_PARSERS["sglang"])
    plans = _serve_plans()
    head = ["python3", "-m", "sglang.launch_server"]
    argvs = {tag: _serve_argv(tmp_path, p, "sglang", tag, head) for tag, p in plans.items()}
    got = _run_reader(_SGLANG_READER, argvs, tmp_path)
    for tag, plan in plans.items():
        g, lay, inf = got[tag], plan["recommendation"]["layout"], plan["scenario"]["inference"]
        assert g["model"] == _HUB[plan["scenario"]["model"]], tag
        assert (g["tp"], g["pp"]) == (lay["tp"], lay["pp"]), tag
        assert g["tp"] * g["pp"] * lay["replicas"] == plan["recommendation"]["gpus"], tag
        assert g["max_running"] == lay["batch_per_replica"], tag
        assert _kv_ok(plan, g["kv_cache_dtype"]), (tag, g["kv_cache_dtype"])
        assert g["mem_fraction_static"] == _kv_fraction_planned(), tag
        precision = plan["recommendation"].get("precision") or inf["precision"]
        assert g["quantization"] == ("fp8" if precision == "fp8" else None), tag
