"""Launch configs from a plan: the chosen layout in the form each launcher reads.

Input is what ``scaleright plan S --json`` prints (``PlanResult.as_dict()``); the recommendation (or, with
``option=``, another option of the plan) is written as:

- training: ``torchrun`` (a shell script with the launch line), ``accelerate`` (an FSDP2 config YAML, DDP for
  ZeRO-0, for Accelerate's ``--config_file``), ``deepspeed`` (a ZeRO config JSON), ``megatron`` (Megatron-LM /
  Megatron-Core arguments), ``torchtitan`` (a job TOML, torchtitan 0.2.x), ``skypilot`` (a task YAML), ``slurm``
  (a batch script), ``k8s`` (a Kubeflow ``PyTorchJob`` manifest);
- inference: ``vllm`` and ``sglang`` (the serve command of one replica, with the replica count), ``skypilot``,
  ``k8s`` (a ``Deployment`` of the replicas).

Each format maps only what the plan decided (GPUs, nodes, the parallel layout, micro-batch, recompute, precision,
ZeRO stage; TP, batch and KV-cache dtype for serving) and says in a comment what the user must still fill in (the
training script, the dataset, the image). A layout a launcher cannot express is refused with one line naming it
(Accelerate's FSDP config has no tensor or pipeline parallelism; DeepSpeed's JSON has no tensor parallelism).
"""

from __future__ import annotations

import functools
import json
import re
import shlex
from collections.abc import Callable
from typing import Any

from scaleright.errors import InputError
from scaleright.estimate.layout import layout_text, stage_slots
from scaleright.limits import LIMITS

__all__ = ["TRAIN_FORMATS", "INFER_FORMATS", "FORMATS", "export_plan", "formats_for"]

TRAIN_FORMATS = ("torchrun", "accelerate", "deepspeed", "megatron", "torchtitan", "skypilot", "slurm", "k8s")
INFER_FORMATS = ("vllm", "sglang", "skypilot", "k8s")
FORMATS = tuple(dict.fromkeys(TRAIN_FORMATS + INFER_FORMATS))
RDZV_PORT = 29500  # torchrun's default rendezvous port
# vLLM / SGLang KV-cache dtype names for the plan's KV precision (vLLM --kv-cache-dtype: auto, fp8, fp8_e4m3,
# fp8_e5m2; SGLang --kv-cache-dtype: auto, fp8_e5m2, fp8_e4m3)
_VLLM_KV = {"fp8": "fp8", "int8": "fp8", "bf16": "auto", "fp16": "auto", "fp32": "auto"}
_SGLANG_KV = {"fp8": "fp8_e4m3", "int8": "fp8_e4m3", "bf16": "auto", "fp16": "auto", "fp32": "auto"}
# the fraction of GPU memory the planner's serving simulator sizes the KV cache with (scaleright.serve.simulate),
# passed explicitly: vLLM 0.33.0's own --gpu-memory-utilization default is 0.92
GPU_MEMORY_UTILISATION = 0.9


def formats_for(plan: dict) -> tuple[str, ...]:
    """The formats that apply to the plan's task."""
    return INFER_FORMATS if _task(plan) == "inference" else TRAIN_FORMATS


def export_plan(plan: dict, fmt: str, *, option: dict | None = None) -> dict[str, str]:
    """``{file name: text}`` of ``fmt`` for the plan's recommendation (or ``option``); ``InputError`` for a format
    that does not apply or a layout it cannot express."""
    if fmt not in FORMATS:
        raise InputError(f"--to={fmt!r} not allowed; allowed: {', '.join(FORMATS)}")
    task = _task(plan)
    if fmt not in formats_for(plan):
        kind = "an inference" if task == "inference" else "a training"
        raise InputError(f"--to={fmt}: not for {kind} plan; formats for it: {', '.join(formats_for(plan))}")
    o = option if option is not None else plan.get("recommendation")
    if not o:
        raise InputError("the plan has no recommendation (no option met the constraints); nothing to export")
    ctx = _Ctx(plan, o)
    writer = _INFER if task == "inference" else _TRAIN
    return writer[fmt](ctx)


def _task(plan: dict) -> str:
    try:
        return str(plan["scenario"]["task"])
    except (KeyError, TypeError):
        raise InputError("not a scaleright plan: no scenario.task (give what `scaleright plan S --json` "
                         "prints)") from None


def _hub_repo(model: str) -> str:
    """What a serving engine loads for the plan's ``model``: the Hugging Face repo id among the catalog entry's
    aliases (``vllm serve`` and SGLang's ``--model-path`` resolve a repo id, not scaleright's catalog name), else
    ``model`` as given (a path to a config.json's directory, or a name the catalog does not know)."""
    from scaleright.catalog.models import get_model_entry
    from scaleright.errors import ScalerightError

    try:
        entry = get_model_entry(model)
    except ScalerightError:
        return model
    return next((a for a in entry.aliases if "/" in a), model)


class _Ctx:
    """The numbers every format needs, read from the plan."""

    def __init__(self, plan: dict, o: dict) -> None:
        s = plan["scenario"]
        self.name = str(s.get("name") or "scaleright-plan")
        self.slug = "".join(c if c.isalnum() else "-" for c in self.name.lower()).strip("-")[:50] or "plan"
        self.model = str(s.get("model"))
        if not isinstance(o, dict) or not isinstance(o.get("layout"), dict):
            raise InputError("not a scaleright plan: recommendation.gpu must be a GPU id and recommendation.layout a "
                             "mapping (give what `scaleright plan S --json` prints)")
        if not isinstance(o.get("gpu"), str) or not re.fullmatch(GPU_ID, o["gpu"]):
            raise InputError(f"recommendation.gpu={str(o.get('gpu'))[:40]!r} must be a catalog GPU id (letters, "
                             "digits, '.', '_', '+', '-'; at most 64)")
        self.gpu = o["gpu"]
        self.gpus = _count(o.get("gpus"), "recommendation.gpus", LIMITS["gpus"].high)
        self.lay = dict(o["layout"])
        # the counts that say how the GPUs are used are never defaulted (plan --json always writes them)
        needed = ("tp", "replicas") if _task(plan) == "inference" else ("tp", "pp", "dp")
        missing = [k for k in needed if self.lay.get(k) is None]
        if missing:
            raise InputError(f"recommendation.layout.{missing[0]}: missing; a plan's layout gives "
                             f"{', '.join(needed)} (give what `scaleright plan S --json` prints)")  # fmt: skip
        self.per_node = int(s.get("gpus_per_node") or o.get("gpus_per_node") or min(self.gpus, 8))
        self.nodes = max(1, -(-self.gpus // self.per_node))
        self.per_node = min(self.per_node, self.gpus)
        tr = s.get("training") or {}
        inf = s.get("inference") or {}
        given = o.get("precision")
        if "precision" in o and given is None:  # absent: the scenario's precision; null is no precision at all
            raise InputError(f"recommendation.precision: null; allowed: {', '.join(_PRECISIONS)}")
        self.precision = str(given if given is not None else tr.get("precision") or inf.get("precision") or "bf16")
        if self.precision not in _PRECISIONS:
            raise InputError(f"recommendation.precision={self.precision[:40]!r} not allowed; allowed: "
                             f"{', '.join(_PRECISIONS)}")
        self.kv_precision = str(inf.get("kv_precision") or self.precision)
        self.seq_len = int(tr.get("seq_len") or 0)
        self.global_batch = int(tr.get("global_batch") or 0)
        self.input_len, self.output_len = int(inf.get("input_len") or 0), int(inf.get("output_len") or 0)
        self.spot = str(o.get("pricing_kind") or (s.get("pricing") or {}).get("mode")) == "spot"
        self.framework = str(o.get("framework") or "")
        self.header = (f"generated by scaleright from the plan {self.name!r}: {self.gpus} x {self.gpu}, "
                       f"layout {layout_text(self.lay)}")

    @functools.cached_property
    def serve_model(self) -> str:
        """What the serving formats pass the engine (``_hub_repo``; looked up when one asks: a catalog load)."""
        return _hub_repo(self.model)

    def get(self, key: str, default: int = 1) -> int:
        v = self.lay.get(key, default)
        return _count(v, f"recommendation.layout.{key}", LIMITS["gpus"].high, low=0) if v is not None else default


GPU_ID = r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}"  # a catalog GPU id: written into shell scripts and YAML unquoted
_PRECISIONS = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4")


def _count(v: object, field: str, high: float, *, low: int = 1) -> int:
    """``v`` as a whole number in [low, high], or an ``InputError`` naming ``field``."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or not low <= v <= high or v != int(v):
        raise InputError(f"{field}={str(v)[:40]!r} must be a whole number from {low} to {high:g}")
    return int(v)


def _accelerator_name(gpu: str) -> str:
    """SkyPilot's accelerator name for a catalog id (H100, A100-80GB, L40S, ...)."""
    # SkyPilot's names (sky.catalog.get_common_gpus(); the catalog fetchers in sky/catalog/data_fetchers/: Azure's
    # A100 80GB PCIe and Lambda's A100 40GB PCIe are 'A100-80GB' / 'A100', RunPod's cards 'RTX3090', 'H100-NVL')
    known = {"h100-sxm": "H100", "h100-pcie": "H100", "h200-sxm": "H200", "a100-80gb": "A100-80GB",
             "a100-80gb-pcie": "A100-80GB", "a100-40gb": "A100", "a100-40gb-pcie": "A100", "l40s": "L40S", "l4": "L4",
             "a10": "A10", "a10g": "A10G", "b200": "B200", "gb200": "GB200", "mi300x": "MI300X", "rtx-4090": "RTX4090",
             "rtx-5090": "RTX5090", "rtx-3090": "RTX3090", "rtx-pro-6000": "RTXPRO6000", "h100-nvl": "H100-NVL",
             "v100-32gb": "V100-32GB", "t4": "T4"}  # fmt: skip
    return known.get(gpu, gpu.upper())


# ---- training -------------------------------------------------------------------------------------------------------
def _torchrun_line(c: _Ctx) -> list[str]:
    return ["torchrun", f"--nnodes={c.nodes}", f"--nproc-per-node={c.per_node}", "--rdzv-backend=c10d",
            f"--rdzv-endpoint=${{MASTER_ADDR:-localhost}}:{RDZV_PORT}", "train.py"]  # fmt: skip


def _torchrun(c: _Ctx) -> dict[str, str]:
    line = " ".join(_torchrun_line(c))
    env = (f"# layout the script should build: {layout_text(c.lay)}; precision {c.precision}; "
           f"sequence length {c.seq_len}, global batch {c.global_batch} sequences\n")
    return {"launch.sh": f"#!/usr/bin/env bash\n# {c.header}\n{env}# run on every node (node rank from the "
                         f"launcher); train.py is yours\nset -euo pipefail\n{line} \"$@\"\n"}


def _zero(c: _Ctx) -> int:
    return c.get("zero", 0)


def _layers_per_stage(c: _Ctx) -> int | None:
    """The transformer layers of one pipeline stage, where the plan's model is a catalog model or a readable
    config.json (None otherwise: the export then leaves a placeholder to fill in)."""
    from scaleright.errors import ScalerightError
    from scaleright.workload import load_model

    try:
        layers = load_model(c.model).layers
    except (ScalerightError, OSError, ValueError):
        return None
    return int(stage_slots(layers, max(1, c.get("pp"))))


def _activation_offload_note(c: _Ctx, why: str) -> str:
    """A comment line where the plan offloads activations and the format cannot say so."""
    if not c.lay.get("offload_activations"):
        return ""
    return (f"# the plan offloads saved activations to host memory ({why}): wrap the model's blocks in "
            "torch.autograd.graph.save_on_cpu(pin_memory=True) in the training script\n")


def _accelerate(c: _Ctx) -> dict[str, str]:
    if c.get("tp") > 1 or c.get("pp") > 1 or c.get("cp") > 1:
        raise InputError(f"--to=accelerate: Accelerate's FSDP config has no tensor, pipeline or context parallelism; "
                         f"this layout has {layout_text(c.lay)} (use megatron or torchtitan)")
    zero = min(_zero(c), 3)
    cfg: dict[str, Any] = {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": "FSDP" if zero else "MULTI_GPU" if c.gpus > 1 else "NO",
        "num_machines": c.nodes, "num_processes": c.gpus, "machine_rank": 0, "main_training_function": "main",
        "mixed_precision": "bf16" if c.precision == "bf16" else "fp16" if c.precision == "fp16" else "no",
    }  # fmt: skip
    if zero:
        # FSDP2 reads fsdp_reshard_after_forward, not fsdp_sharding_strategy (Accelerate ignores that key for
        # fsdp_version 2 and reshards, i.e. ZeRO-3): true = ZeRO-3; false keeps the gathered parameters from forward
        # to backward with gradients and optimizer state sharded = ZeRO-2 (FSDP has no ZeRO-1: it shards gradients
        # too). ZeRO-0 is plain data parallelism (DDP, MULTI_GPU), which has no fsdp_config.
        cfg["fsdp_config"] = {
            "fsdp_version": 2, "fsdp_reshard_after_forward": zero == 3,
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
            "fsdp_activation_checkpointing": c.lay.get("recompute", "none") != "none",
            # FSDP's CPU offload keeps parameters, gradients and the optimizer step in host memory: the plan's
            # optimizer offload (ZeRO-Offload) moves less (parameters stay on the GPU), so this frees at least as much
            "fsdp_state_dict_type": "SHARDED_STATE_DICT", "fsdp_offload_params": bool(c.lay.get("offload_optimizer")),
        }  # fmt: skip
    import yaml

    note = ""
    if not zero and c.lay.get("recompute", "none") != "none":
        note = f"# recompute {c.lay['recompute']}: the training script's (Accelerate's DDP config has no key for it)\n"
    if c.lay.get("offload_optimizer") and not zero:
        raise InputError("--to=accelerate: the plan offloads the optimizer, which Accelerate does only under FSDP "
                         "(ZeRO >= 1); use deepspeed or megatron")
    note += _activation_offload_note(c, "Accelerate's config has no key for it")
    return {"accelerate_config.yaml": f"# {c.header}\n{note}" + yaml.safe_dump(cfg, sort_keys=False)}


def _deepspeed(c: _Ctx) -> dict[str, str]:
    if c.get("tp") > 1:
        raise InputError(f"--to=deepspeed: a DeepSpeed config JSON has no tensor parallelism; this layout has "
                         f"tp={c.get('tp')} (use megatron: Megatron-DeepSpeed takes its arguments)")
    dp = c.get("dp")
    mb = c.get("micro_batch")
    accum = max(1, c.global_batch // max(mb * dp, 1)) if c.global_batch else 1
    cfg: dict[str, Any] = {
        "train_batch_size": mb * dp * accum, "train_micro_batch_size_per_gpu": mb,
        "gradient_accumulation_steps": accum, "zero_optimization": {"stage": min(_zero(c), 3),
                                                                    "overlap_comm": True, "contiguous_gradients": True},
        "bf16": {"enabled": c.precision == "bf16"}, "fp16": {"enabled": c.precision == "fp16"},
        "gradient_clipping": 1.0, "_comment": c.header,
    }  # fmt: skip
    if c.get("pp") > 1:
        cfg["pipeline"] = {"stages": c.get("pp")}
    if c.lay.get("offload_optimizer"):  # ZeRO-Offload (Ren et al. 2021): optimizer states and step on the CPU
        cfg["zero_optimization"]["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if c.lay.get("recompute", "none") != "none" or c.lay.get("offload_activations"):
        # cpu_checkpointing moves the checkpointed activations to host memory; DeepSpeed requires it to go with
        # partition_activations (deepspeed.runtime.activation_checkpointing)
        off = bool(c.lay.get("offload_activations"))
        cfg["activation_checkpointing"] = {"partition_activations": off, "cpu_checkpointing": off,
                                           "contiguous_memory_optimization": False}  # fmt: skip
    return {"ds_config.json": json.dumps(cfg, indent=2) + "\n"}


def _megatron_args(c: _Ctx) -> list[str]:
    args = ["--tensor-model-parallel-size", str(c.get("tp")), "--pipeline-model-parallel-size", str(c.get("pp")),
            "--context-parallel-size", str(c.get("cp")), "--micro-batch-size", str(c.get("micro_batch")),
            "--global-batch-size", str(c.global_batch), "--seq-length", str(c.seq_len)]  # fmt: skip
    if c.get("ep") > 1:
        args += ["--expert-model-parallel-size", str(c.get("ep"))]
    if c.get("etp", 0) > 0:
        args += ["--expert-tensor-parallel-size", str(c.get("etp"))]
    if c.get("virtual_stages") > 1:
        args += ["--num-virtual-stages-per-pipeline-rank", str(c.get("virtual_stages"))]
    if c.lay.get("sequence_parallel"):
        args.append("--sequence-parallel")
    rc = c.lay.get("recompute", "none")
    if rc == "full":
        args += ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
    elif rc in ("selective", "op-selective"):
        args += ["--recompute-granularity", "selective"]
    if _zero(c) >= 1:
        args.append("--use-distributed-optimizer")
    if c.lay.get("offload_optimizer"):  # Megatron-Core's hybrid-device optimizer: the step on the CPU
        args += ["--optimizer-cpu-offload", "--optimizer-offload-fraction", "1.0"]
    if c.lay.get("offload_activations"):  # Transformer Engine's activation offloading, all but the last layer
        layers = _layers_per_stage(c)
        args += ["--cpu-offloading", "--cpu-offloading-num-layers", str(max(1, layers - 1)) if layers else "LAYERS-1"]
    if c.precision in ("bf16", "fp16"):
        args.append(f"--{c.precision}")
    if c.framework == "megatron-core" and c.get("tp") > 1:
        args.append("--tp-comm-overlap")
    return args


def _megatron(c: _Ctx) -> dict[str, str]:
    args = _megatron_args(c)
    pairs: list[str] = []
    for a in args:  # one flag per line, with its value when it takes one
        if a.startswith("--") or not pairs:
            pairs.append(shlex.quote(a))
        else:
            pairs[-1] += " " + shlex.quote(a)
    lines = "\n    ".join(pairs)
    note = "" if _zero(c) <= 1 else (f"\n# the plan shards with ZeRO-{_zero(c)}; Megatron's distributed optimizer "
                                     "shards the optimizer state (ZeRO-1) only")
    launch = " ".join(_torchrun_line(c)[:-1])
    return {"megatron_args.sh": f"#!/usr/bin/env bash\n# {c.header}{note}\n# model, data and tokenizer arguments are "
                                f"yours\nMEGATRON_PARALLEL_ARGS=(\n    {lines}\n)\n"
                                f"{launch} pretrain_gpt.py \"${{MEGATRON_PARALLEL_ARGS[@]}}\" \"$@\"\n"}


def _torchtitan(c: _Ctx) -> dict[str, str]:
    dp = c.get("dp")
    # FSDP2 shards over data_parallel_shard_degree (ZeRO-3; ZeRO-2 when it keeps the gathered parameters between
    # forward and backward, reshard_after_forward "never"); ZeRO-0/1 are plain replicas (DDP)
    shard, rep = (dp, 1) if _zero(c) >= 2 else (1, dp)
    reshard = "never" if _zero(c) == 2 else "default"
    if _zero(c) == 3 and c.lay.get("dp_shard"):  # HSDP: shard over dp_shard, replicate the rest (the plan's
        shard = c.get("dp_shard")                  # dp_shard is the ZeRO shard group, dp·cp unless HSDP)
        rep = max(1, dp // shard)
    mode = {"none": "none", "full": "full", "selective": "selective", "op-selective": "selective"}.get(
        str(c.lay.get("recompute", "none")), "none")
    local_batch = c.get("micro_batch") * max(1, c.global_batch // max(c.get("micro_batch") * dp, 1))
    toml = f"""# {c.header}
[job]
description = {json.dumps(c.name)}

[parallelism]
data_parallel_replicate_degree = {rep}
data_parallel_shard_degree = {shard}
tensor_parallel_degree = {c.get("tp")}
pipeline_parallel_degree = {c.get("pp")}
context_parallel_degree = {c.get("cp")}
expert_parallel_degree = {c.get("ep")}
pipeline_parallel_schedule = {json.dumps("Interleaved1F1B" if c.get("virtual_stages") > 1 else "1F1B")}
pipeline_parallel_microbatch_size = {c.get("micro_batch")}
fsdp_reshard_after_forward = {json.dumps(reshard)}

[training]
local_batch_size = {local_batch}
seq_len = {c.seq_len}
mixed_precision_param = {json.dumps("bfloat16" if c.precision == "bf16" else "float32")}

[activation_checkpoint]
mode = {json.dumps(mode)}
"""
    if c.lay.get("offload_optimizer"):
        if shard == 1:
            raise InputError("--to=torchtitan: the plan offloads the optimizer, which torchtitan does only under FSDP "
                             "(ZeRO >= 2 here); use deepspeed or megatron")
        # FSDP2's CPUOffloadPolicy: parameters, gradients and the optimizer step in host memory (frees at least
        # what the plan's optimizer offload frees)
        toml = toml.replace("seq_len = ", "enable_cpu_offload = true\nseq_len = ", 1)
    head, rest = toml.split("\n", 1)
    return {"torchtitan.toml": f"{head}\n{_activation_offload_note(c, 'torchtitan has no key for it')}{rest}"}


def _skypilot(c: _Ctx) -> dict[str, str]:
    import yaml

    task: dict[str, Any] = {
        "name": c.slug,
        "resources": {"accelerators": f"{_accelerator_name(c.gpu)}:{c.per_node}", "use_spot": c.spot},
        "num_nodes": c.nodes,
    }
    if _task_kind(c) == "inference":
        cmd = " ".join(_vllm_command(c))
        task["num_nodes"] = 1
        task["resources"]["accelerators"] = f"{_accelerator_name(c.gpu)}:{c.get('tp') * c.get('pp')}"
        task["resources"]["ports"] = 8000
        task["service"] = {"readiness_probe": "/v1/models", "replicas": c.get("replicas")}
        task["run"] = cmd + "\n"
    else:
        task["run"] = ("torchrun --nnodes=$SKYPILOT_NUM_NODES --nproc-per-node=$SKYPILOT_NUM_GPUS_PER_NODE "
                       "--node-rank=$SKYPILOT_NODE_RANK --master-addr=$(echo \"$SKYPILOT_NODE_IPS\" | head -n1) "
                       f"--master-port={RDZV_PORT} train.py\n")
    return {"sky.yaml": f"# {c.header}\n" + yaml.safe_dump(task, sort_keys=False)}


def _task_kind(c: _Ctx) -> str:
    return "inference" if "replicas" in c.lay else "training"


def _slurm(c: _Ctx) -> dict[str, str]:
    return {"job.sbatch": f"""#!/usr/bin/env bash
# {c.header}
#SBATCH --job-name={c.slug}
#SBATCH --nodes={c.nodes}
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node={c.per_node}
#SBATCH --exclusive
set -euo pipefail
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
srun torchrun --nnodes={c.nodes} --nproc-per-node={c.per_node} --rdzv-id=$SLURM_JOB_ID --rdzv-backend=c10d \\
    --rdzv-endpoint=$MASTER_ADDR:{RDZV_PORT} train.py "$@"
"""}


def _k8s_train(c: _Ctx) -> dict[str, str]:
    import yaml

    def replica(n: int) -> dict[str, Any]:
        return {"replicas": n, "restartPolicy": "OnFailure", "template": {"spec": {"containers": [{
            "name": "pytorch", "image": "YOUR_TRAINING_IMAGE", "command": ["torchrun", f"--nproc-per-node={c.per_node}",
                                                                            "train.py"],
            "resources": {"limits": {"nvidia.com/gpu": c.per_node}}}]}}}  # fmt: skip

    specs = {"Master": replica(1)}
    if c.nodes > 1:
        specs["Worker"] = replica(c.nodes - 1)
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": c.slug},
           "spec": {"pytorchReplicaSpecs": specs}}  # fmt: skip
    return {"pytorchjob.yaml": f"# {c.header}\n" + yaml.safe_dump(job, sort_keys=False)}


# ---- inference ------------------------------------------------------------------------------------------------------
def _vllm_command(c: _Ctx) -> list[str]:
    args = ["vllm", "serve", c.serve_model, "--tensor-parallel-size", str(c.get("tp")), "--pipeline-parallel-size",
            str(c.get("pp")), "--max-num-seqs", str(c.get("batch_per_replica", 256)),
            "--kv-cache-dtype", _VLLM_KV.get(c.kv_precision, "auto"),
            "--gpu-memory-utilization", str(GPU_MEMORY_UTILISATION)]  # fmt: skip
    if c.input_len and c.output_len:
        args += ["--max-model-len", str(c.input_len + c.output_len)]
    if c.precision == "fp8":
        args += ["--quantization", "fp8"]
    return args


def _vllm(c: _Ctx) -> dict[str, str]:
    cmd = " ".join(shlex.quote(a) for a in _vllm_command(c))
    return {"vllm_serve.sh": f"#!/usr/bin/env bash\n# {c.header}\n# one replica of {c.get('replicas')}: run this on "
                             f"each, behind a load balancer\nset -euo pipefail\n{cmd} \"$@\"\n"}


def _sglang(c: _Ctx) -> dict[str, str]:
    args = ["python3", "-m", "sglang.launch_server", "--model-path", c.serve_model, "--tp", str(c.get("tp")),
            "--pp-size", str(c.get("pp")), "--max-running-requests", str(c.get("batch_per_replica", 256)),
            "--kv-cache-dtype", _SGLANG_KV.get(c.kv_precision, "auto"),
            "--mem-fraction-static", str(GPU_MEMORY_UTILISATION)]  # fmt: skip
    if c.precision == "fp8":
        args += ["--quantization", "fp8"]
    cmd = " ".join(shlex.quote(a) for a in args)
    return {"sglang_serve.sh": f"#!/usr/bin/env bash\n# {c.header}\n# one replica of {c.get('replicas')}\n"
                               f"set -euo pipefail\n{cmd} \"$@\"\n"}


def _k8s_infer(c: _Ctx) -> dict[str, str]:
    import yaml

    gpus = c.get("tp") * c.get("pp")
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": c.slug},
           "spec": {"replicas": c.get("replicas"), "selector": {"matchLabels": {"app": c.slug}},
                    "template": {"metadata": {"labels": {"app": c.slug}}, "spec": {"containers": [{
                        "name": "vllm", "image": "vllm/vllm-openai", "args": _vllm_command(c)[2:],
                        "ports": [{"containerPort": 8000}],
                        "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}}}  # fmt: skip
    return {"deployment.yaml": f"# {c.header}\n" + yaml.safe_dump(dep, sort_keys=False)}


_TRAIN: dict[str, Callable[[_Ctx], dict[str, str]]] = {
    "torchrun": _torchrun, "accelerate": _accelerate, "deepspeed": _deepspeed, "megatron": _megatron,
    "torchtitan": _torchtitan, "skypilot": _skypilot, "slurm": _slurm, "k8s": _k8s_train,
}
_INFER: dict[str, Callable[[_Ctx], dict[str, str]]] = {
    "vllm": _vllm, "sglang": _sglang, "skypilot": _skypilot, "k8s": _k8s_infer,
}
