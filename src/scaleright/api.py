"""The Python API's result functions: one call per question, a typed result back (``scaleright.results``).

Each function takes a model (a catalog name, a ``config.json`` path or a ``TransformerSpec``) and a GPU (an id,
an alias or an ``Accelerator``), checks its inputs, runs the same models as the CLI and returns the result whose
``to_dict()`` is what the matching command prints with ``--json``:

=====================  ==================================  =====================================
function               result                              command
=====================  ==================================  =====================================
``estimate_memory``    ``results.memory.MemoryResult``     ``scaleright estimate memory``
``estimate_train``     ``results.train.TrainResult``       ``scaleright estimate train``
``estimate_infer``     ``results.infer.InferResult``       ``scaleright estimate infer``
``simulate``           ``results.simulate.SimulateResult`` ``scaleright serve simulate``
``plan_scenario``      ``results.plan.PlanResult``         ``scaleright plan``
=====================  ==================================  =====================================

Bad input raises ``InputError`` with one line naming the argument and what is allowed: the CLI's message where
the check lives below the CLI (catalog names, model files, layouts, scenarios, calibration profiles, the models'
own checks), the argument's name where the CLI's message names its flag (``seq_len=0`` for ``--seq-len=0``).

The argument checks (``check_*`` below) are the CLI's too: a command passes ``FLAGS`` and its messages name the
flag, a function here passes ``ARGS`` and they name the argument; the rest of each line is the same, from one place.
"""

from __future__ import annotations

import inspect
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scaleright.errors import InputError

if TYPE_CHECKING:
    from scaleright.catalog import Accelerator, Catalog
    from scaleright.catalog.systems import System
    from scaleright.estimate.calibration import Calibration, Profile
    from scaleright.estimate.framework import Framework
    from scaleright.estimate.layout import Layout
    from scaleright.estimate.memory import LoraConfig
    from scaleright.plan.scenario import Scenario
    from scaleright.results.infer import InferResult
    from scaleright.results.memory import MemoryResult
    from scaleright.results.plan import PlanResult
    from scaleright.results.simulate import SimulateResult
    from scaleright.results.train import TrainResult
    from scaleright.workload import TransformerSpec

__all__ = ["estimate_memory", "estimate_train", "estimate_infer", "simulate", "simulation_price", "plan_scenario",
           "ARGS", "FLAGS", "Names", "check_choice", "check_count", "check_counts", "check_positive", "check_batch",
           "check_pp_fits", "check_sequence_parallel", "check_zero_recompute", "check_framework", "TRAIN_TASKS",
           "check_task_precision", "check_infer_args", "check_simulate_args", "check_memory_task_args",
           "check_lora_task", "check_offload_link", "TRAINING_ONLY", "INFERENCE_ONLY", "SIMULATE_POSITIVE",
           "MIN_RATE_PER_S", "check_pool_args", "visible", "json_safe", "catalog_from", "catalog_files",
           "profile_from", "calibration_from"]


# ---- argument checks: the API's and the CLI's, one home ------------------------------------------------------


class Names:
    """How a check's message names an argument: by its name (``seq_len``; a layout's field as ``layout.tp``), or,
    for the CLI, by its flag (``--seq-len``, ``--tp``). (A plain class: every command imports this module.)"""

    __slots__ = ("flags",)

    def __init__(self, *, flags: bool = False) -> None:
        self.flags = flags

    def __call__(self, arg: str, *, layout: bool = False) -> str:
        if self.flags:
            return "--" + arg.replace("_", "-")
        return f"layout.{arg}" if layout else arg

    def given(self, arg: str, value: object) -> str:
        """The argument with its value, as a message quotes it: ``tp=1``, ``task='inference'`` / ``--tp 1``."""
        return f"{self(arg)} {value}" if self.flags else f"{arg}={value!r}"

    def set(self, arg: str, value: object, *, layout: bool = False) -> str:
        """An argument someone set, as a message names it: ``--zero=3``, ``layout.zero=3``; a boolean (a flag, or
        "given") by its name alone."""
        name = self(arg, layout=layout)
        if isinstance(value, bool):
            return name
        return f"{name}={value}" if self.flags else f"{name}={value!r}"


ARGS = Names()
FLAGS = Names(flags=True)


def check_choice(field: str, value: str, allowed: tuple[str, ...] | list[str]) -> str:
    """``value`` if it is one of ``allowed``; otherwise InputError naming ``field`` and every allowed value."""
    if value not in allowed:
        raise InputError(f"{field}={value!r} not allowed; allowed: {', '.join(allowed)}")
    return value


def check_count(field: str, value: int | None, kind: str) -> None:
    """A positive integer at most ``LIMITS[kind]`` (the bound and its reason in the message); None: not given."""
    from scaleright.limits import check_limit

    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{field}={value!r} must be a positive integer")
    check_limit(field, value, kind)


def check_counts(kind: str, values: Mapping[str, int | None], names: Names = ARGS, *, layout: bool = False) -> None:
    """``check_count`` for each argument of ``values`` (by name, in order), named by ``names``."""
    for arg, v in values.items():
        check_count(names(arg, layout=layout), v, kind)


def check_positive(field: str, value: float | None, kind: str | None = None) -> None:
    """A finite positive number (at most ``LIMITS[kind]`` when ``kind`` is given); None: not given."""
    from scaleright.limits import check_limit

    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise InputError(f"{field}={value!r} must be a finite positive number")
    if kind is not None:
        check_limit(field, value, kind)


def check_batch(field: str, value: int | str) -> None:
    """Concurrent sequences: a positive integer (at most ``LIMITS["batch"]``) or ``"max"`` (the KV cache's room)."""
    if isinstance(value, str):
        if value != "max":
            raise InputError(f"{field}={value!r} must be a positive integer or 'max'")
        return
    check_count(field, value, "batch")


def check_pp_fits(gpus: int, pp: int, layers: int | None = None) -> None:
    """``pp`` divides the GPU count and is at most the layer count (each stage holds a layer)."""
    if gpus % pp:
        raise InputError(f"pp({pp}) does not divide gpus({gpus})")
    if layers is not None and pp > layers:
        raise InputError(f"pp({pp}) > num_hidden_layers({layers}): each stage needs at least one layer")


def check_sequence_parallel(sequence_parallel: bool, tp: int, names: Names = ARGS) -> None:
    """Sequence parallelism splits activations over tensor parallelism: it needs tp > 1."""
    if sequence_parallel and tp == 1:
        raise InputError(f"{names('sequence_parallel', layout=True)} splits activations over tensor parallelism; "
                         f"it needs {names('tp')} > 1 (got {names.given('tp', tp)})")  # fmt: skip


TRAIN_TASKS = ("pretrain", "full-finetune", "lora", "qlora")  # what a training estimate trains


def check_framework(framework: object, names: Names = ARGS) -> None:
    """A framework preset's name (``estimate.framework.FRAMEWORKS``); a ``Framework`` object is taken as it is."""
    from scaleright.estimate.framework import FRAMEWORKS

    if isinstance(framework, str):
        check_choice(names("framework"), framework, tuple(FRAMEWORKS))


def check_zero_recompute(zero: int, recompute: str, names: Names = ARGS) -> None:
    """A ZeRO stage 0-3 and a recomputation policy of ``estimate.layout.RECOMPUTE`` (a layout's fields)."""
    from scaleright.estimate.layout import RECOMPUTE

    if zero not in (0, 1, 2, 3) or isinstance(zero, bool):
        raise InputError(f"{names('zero', layout=True)}={zero!r} not allowed; allowed: 0, 1, 2, 3")
    check_choice(names("recompute", layout=True), recompute, RECOMPUTE)


def check_task_precision(task: str, precision: str, names: Names = ARGS) -> None:
    """A memory estimate's task (``estimate.memory.TASKS``) and the precisions it allows (storage formats for
    inference, training precisions otherwise)."""
    from scaleright.estimate.memory import TASKS
    from scaleright.workload.precision import STORAGE_PRECISIONS, TRAIN_PRECISIONS

    check_choice(names("task"), task, TASKS)
    check_choice(names("precision"), precision, STORAGE_PRECISIONS if task == "inference" else TRAIN_PRECISIONS)


# A memory estimate's training-only arguments and the values that change nothing (the default, or what no framework
# means): with task inference any other value is an error, never silently ignored. First Layout's fields, then the
# estimate's own arguments.
_LAYOUT_TRAINING_ONLY: dict[str, tuple[object, ...]] = {
    "dp": (1,), "cp": (1,), "ep": (1,), "etp": (None,), "zero": (0,), "dp_shard": (None,), "micro_batch": (1,),
    "global_batch": (None,), "recompute": ("none",), "sequence_parallel": (False,), "virtual_stages": (1,),
    "offload_optimizer": (False,), "offload_activations": (False,), "pipeline_split_embedding_loss": (False,),
}  # fmt: skip
_LAYOUT_ONLY = tuple(_LAYOUT_TRAINING_ONLY)
TRAINING_ONLY: dict[str, tuple[object, ...]] = {
    **_LAYOUT_TRAINING_ONLY, "optimizer": ("adamw",), "states": (None, "zero"), "cross_entropy": (None, "fused"),
    "framework": (None,), "attention": (None,), "fsdp": (False,),
}  # fmt: skip
# ... and its inference-only arguments with their defaults
INFERENCE_ONLY: dict[str, object] = {"batch": 1, "kv_precision": None}


def check_memory_task_args(task: str, given: Mapping[str, object], names: Names = ARGS) -> None:
    """Every argument of ``given`` (name -> value, checked in order) applies to ``task``: with inference each
    training-only one (``TRAINING_ONLY``) keeps a value that changes nothing, otherwise each inference-only one
    (``INFERENCE_ONLY``) its default. A layout's arguments are named as its fields (``layout.zero``)."""
    inference = names.given("task", "inference")
    if task == "inference":
        for arg, v in given.items():
            if arg in TRAINING_ONLY and v not in TRAINING_ONLY[arg]:
                shown = names.set(arg, v, layout=arg in _LAYOUT_ONLY)
                raise InputError(f"{shown} applies to training; {inference} does not use it (drop it)")
        return
    for arg, v in given.items():
        if arg in INFERENCE_ONLY and v != INFERENCE_ONLY[arg]:
            raise InputError(f"{names.set(arg, v)} applies to {inference}; {names.given('task', task)} does not use "
                             "it (drop it)")  # fmt: skip


def check_lora_task(task: str, given: Mapping[str, object], names: Names = ARGS) -> None:
    """Adapter arguments someone set (``given``: name -> value; True for "given") apply to task lora or qlora."""
    if task in ("lora", "qlora") or not given:
        return
    arg, v = next(iter(given.items()))  # the first one named
    raise InputError(f"{names.set(arg, v)} applies to {names('task')} lora or qlora; {names.given('task', task)} does "
                     "not use it (drop it)")  # fmt: skip


def check_offload_link(gpu: Accelerator, offload_optimizer: bool, offload_activations: bool,
                       names: Names = ARGS) -> None:  # fmt: skip
    """Offload needs a host link the catalog gives (``estimate.memory.offload``): refused, naming what asked for it,
    on a part without one (NVLink-C2C superchips, TPUs, Trainium: the planner does not offer offload there either)."""
    from scaleright.estimate.memory.offload import host_link_bytes_per_s

    if (offload_optimizer or offload_activations) and host_link_bytes_per_s(gpu) is None:
        given = [names.set(a, True, layout=True) for a, on in (("offload_optimizer", offload_optimizer),
                                                                ("offload_activations", offload_activations)) if on]
        drop = "them" if len(given) > 1 else "it"
        raise InputError(f"{' and '.join(given)} on {gpu.id}: the catalog gives it no PCIe host link (pcie_gen), so "
                         f"host offload is not modelled there; drop {drop} or pick a GPU with one")


def check_infer_args(*, gpus: int, tp: int | None, pp: int, input_len: int, output_len: int, precision: str,
                     kv_precision: str | None, names: Names = ARGS) -> None:  # fmt: skip
    """The arguments of an inference estimate that need no model: precisions, counts and their bounds, pp | gpus."""
    from scaleright.workload.precision import KV_PRECISIONS, STORAGE_PRECISIONS

    check_choice(names("precision"), precision, STORAGE_PRECISIONS)
    if kv_precision is not None:
        check_choice(names("kv_precision"), kv_precision, KV_PRECISIONS)
    check_counts("gpus", {"gpus": gpus}, names)
    check_counts("parallel_degree", {"tp": tp, "pp": pp}, names)
    check_counts("tokens_per_request", {"input_len": input_len, "output_len": output_len}, names)
    check_pp_fits(gpus, pp)


# A simulation's finite positive numbers (None or absent: not given).
SIMULATE_POSITIVE = ("burstiness", "duration_s", "slo_ttft_ms", "slo_tpot_ms", "price_usd_per_gpu_hour",
                     "diurnal_period_s")  # fmt: skip
# The smallest request rate simulated: one request per ~11.6 days. Arrival times are float64 seconds; at a lower rate
# a run of 2**20 requests spans over 10**12 s, where float64 no longer resolves a millisecond (2**-52 x 10**12 s is
# 0.2 ms), and 5e-324 makes every arrival time infinite.
MIN_RATE_PER_S = 1e-6


def check_simulate_args(values: Mapping[str, Any], names: Names = ARGS) -> None:
    """A simulation's load arguments in ``values`` (absent or None: not given; checked in this order): the arrival
    process, the rate (finite, positive, at least ``MIN_RATE_PER_S``), ``SIMULATE_POSITIVE``, the closed-loop
    concurrency and request count, the preemption policy, the result-cache hit rate in [0, 1) and the diurnal
    amplitude in [0, 1]."""
    from scaleright.limits import check_limit
    from scaleright.serve.arrivals import ARRIVALS

    if values.get("arrival") is not None:
        check_choice(names("arrival"), values["arrival"], ARRIVALS)
    rate = values.get("rate")
    if rate is not None:
        check_positive(names("rate"), rate)
        check_limit(names("rate"), rate, "requests_per_s", low=MIN_RATE_PER_S)
    for arg in SIMULATE_POSITIVE:
        check_positive(names(arg), values.get(arg))
    for arg in ("concurrency", "requests"):
        if values.get(arg) is not None:
            check_limit(names(arg), values[arg], "batch", low=1)
    if values.get("preemption") is not None:
        check_choice(names("preemption"), values["preemption"], ("recompute", "swap"))
    hit, amplitude = values.get("result_cache_hit_rate"), values.get("diurnal_amplitude")
    if hit is not None and not 0 <= hit < 1:
        raise InputError(f"{names('result_cache_hit_rate')}={hit} must lie in [0, 1)")
    if amplitude is not None and not 0 <= amplitude <= 1:
        raise InputError(f"{names('diurnal_amplitude')}={amplitude} must lie in [0, 1]")


def check_pool_args(values: Mapping[str, Any], names: Names = ARGS) -> None:
    """A serving pool's arguments that need no model (``values`` holds each): GPU, parallel and token counts within
    their bounds, the iteration's token budget at least ``max_num_seqs``, the prefix-cache hit rate in [0, 1), the
    GPU memory share in (0, 1], tp x pp dividing the GPUs, a known engine, precisions and router."""
    from scaleright.estimate.engine_store import check_engine
    from scaleright.limits import check_limit
    from scaleright.serve.router import ROUTERS
    from scaleright.workload.precision import KV_PRECISIONS, STORAGE_PRECISIONS

    v = values
    if v["max_num_seqs"] is None:  # the engine's cap on sequences in flight (EngineProfile.max_num_seqs)
        from scaleright.estimate.engines import get_engine

        v = {**v, "max_num_seqs": get_engine(check_engine(names("engine"), v["engine"])).max_num_seqs}
    for arg, kind in (("gpus", "gpus"), ("tp", "parallel_degree"), ("pp", "parallel_degree"),
                      ("ep", "parallel_degree"), ("input_len", "tokens_per_request"),
                      ("output_len", "tokens_per_request"), ("max_num_seqs", "batch"),
                      ("max_num_batched_tokens", "tokens_per_request")):  # fmt: skip
        check_limit(names(arg), v[arg], kind, low=1)
    if v["max_num_batched_tokens"] < v["max_num_seqs"]:
        raise InputError(f"{names('max_num_batched_tokens')}={v['max_num_batched_tokens']} must be >= "
                         f"{names('max_num_seqs')}={v['max_num_seqs']}")  # fmt: skip
    if not 0 <= v["prefix_cache_hit_rate"] < 1:
        raise InputError(f"{names('prefix_cache_hit_rate')}={v['prefix_cache_hit_rate']} must lie in [0, 1)")
    if not 0 < v["gpu_memory_utilization"] <= 1:
        raise InputError(f"{names('gpu_memory_utilization')}={v['gpu_memory_utilization']} must lie in (0, 1]")
    gpus, tp, pp = v["gpus"], v["tp"], v["pp"]
    if gpus % (tp * pp):
        raise InputError(f"{names('tp')}({tp}) * {names('pp')}({pp}) = {tp * pp} does not divide "
                         f"{names('gpus')}({gpus})")  # fmt: skip
    if isinstance(v["engine"], str):  # a built-in or a stored (calibrate --serving --name) profile's name
        check_engine(names("engine"), v["engine"])
    check_choice(names("precision"), v["precision"], STORAGE_PRECISIONS)
    if v.get("kv_precision") is not None:
        check_choice(names("kv_precision"), v["kv_precision"], KV_PRECISIONS)
    check_choice(names("router"), v["router"], tuple(ROUTERS))


# ---- user values in messages, catalogs and calibration profiles: the API's and the CLI's, one home -------------

# C0 controls (newline and tab included: one field stays on one line), DEL, C1 controls, and the Unicode
# line/paragraph separators and bidirectional overrides, which reorder or break what a terminal shows.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def visible(s: object) -> str:
    """``s`` as text safe for a terminal: each control character replaced by its escape (``\\x1b``, ``\\n``)."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(s))


def json_safe(o: Any) -> Any:
    """``o`` with plain JSON types only: non-finite floats as None, numpy scalars and arrays as Python values (what
    ``--json`` and the dashboard's JSON API write)."""
    if isinstance(o, float):  # numpy float64 too
        return float(o) if math.isfinite(o) else None
    if isinstance(o, dict):
        return {str(k): json_safe(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [json_safe(v) for v in o]
    if hasattr(o, "tolist") and callable(o.tolist):  # numpy arrays and scalars (float32, int64, bool_)
        return json_safe(o.tolist())
    return o


def _shown(value: object) -> str:
    """A user's value for a message: control characters visible, at most 120 characters."""
    s = visible(value)
    return s if len(s) <= 120 else f"{s[:60]}…{s[-60:]}"


def catalog_from(path: Path | str | None, *, flag: str = "--catalog") -> Catalog:
    """The built-in catalog overridden by the directory ``path`` (``flag``; None: $SCALERIGHT_CATALOG), checked
    here with the true reason (the API's ``catalog`` argument too, named ``catalog``)."""
    from scaleright.catalog import Catalog
    from scaleright.catalog.store import ENV_VAR
    from scaleright.textfile import path_problem

    if path is not None and str(path) == "":  # (the command line refuses it before parsing, with the same line)
        raise InputError(f"{flag}: empty value; give a path")
    flag, where = (flag, path) if path is not None else (f"${ENV_VAR}", os.environ.get(ENV_VAR) or None)
    if where is not None:
        why = path_problem(where, want="dir")
        if why is not None:
            raise InputError(f"{flag}={_shown(where)}: {why}")
    return Catalog.load(path)


def catalog_files(path: Path | None) -> list[Path]:
    """The user's catalog files that ``catalog_from(path)`` reads (none for the built-in catalog alone)."""
    from scaleright.catalog.store import ENV_VAR
    from scaleright.textfile import is_regular_file

    where = path if path is not None else os.environ.get(ENV_VAR) or None
    if where is None:
        return []
    d = Path(where).expanduser()
    try:
        files = [*d.glob("*"), *d.glob("models/*")]
    except OSError:
        return []
    return [f for f in files if is_regular_file(f)]


def calibration_from(flag: str, value: str | None) -> Calibration:
    """The calibration ``flag`` names: the default, a profile name, or a JSON file (a value with a suffix, as in
    ``load_calibration``). The file is checked here so a directory, FIFO, symlink loop or over-long name says so."""
    return profile_from(flag, value).calibration


def profile_from(flag: str, value: str | None) -> Profile:
    """``calibration_from`` with the profile's name, hash and provenance (``estimate.calibration.Profile``)."""
    from scaleright.estimate.calibration import load_profile
    from scaleright.textfile import check_input_file

    if value == "":
        raise InputError(f"{flag}: empty value; give a profile name or a JSON file path (omit it for the defaults)")
    if value in (None, "default"):
        return load_profile(value)
    if Path(value).suffix:
        check_input_file(flag, value)
    elif len(value.encode()) > 250:
        raise InputError(f"{flag}: profile name too long ({len(value.encode())} bytes; at most 250)")
    return load_profile(value)


def _catalog(catalog: Catalog | str | Path | None) -> Catalog:
    """``catalog``, or the built-in catalog overlaid with the directory ``catalog`` (default: $SCALERIGHT_CATALOG),
    the directory checked as the CLI checks ``--catalog``."""
    from scaleright.catalog import Catalog

    return catalog if isinstance(catalog, Catalog) else catalog_from(catalog, flag="catalog")


def _resolve(model: str | TransformerSpec, gpu: str | Accelerator,
             catalog: Catalog | str | Path | None) -> tuple[TransformerSpec, Accelerator, Catalog]:  # fmt: skip
    """(spec, accelerator, catalog): names looked up as the CLI's ``--model`` and ``--gpu`` are."""
    from scaleright.workload import load_model

    cat = _catalog(catalog)
    spec = load_model(model, catalog=cat) if isinstance(model, str) else model
    g = cat.gpu(gpu) if isinstance(gpu, str) else gpu
    return spec, g, cat


def _layout(layout: Layout | None, spec: TransformerSpec) -> Layout:
    """``layout`` (default: one GPU) checked against ``spec`` and the bounds of ``scaleright.limits``."""
    from scaleright.estimate.layout import Layout
    from scaleright.limits import check_limit

    lay = layout if layout is not None else Layout()
    check_zero_recompute(lay.zero, lay.recompute)
    lay.validate(spec)
    for name in ("tp", "pp", "dp", "cp", "ep", "etp", "dp_shard", "virtual_stages"):
        v = getattr(lay, name)
        if v is not None:
            check_limit(f"layout.{name}", v, "parallel_degree")
    check_limit("layout.micro_batch", lay.micro_batch, "micro_batch")
    if lay.global_batch is not None:
        check_limit("layout.global_batch", lay.global_batch, "global_batch")
    check_limit("layout.gpus", lay.gpus, "gpus")  # tp x pp x dp x cp
    check_sequence_parallel(lay.sequence_parallel, lay.tp, ARGS)
    return lay


def _profile(calibration: str | None):
    """The calibration profile: None or ``default`` (built-in), a profile name, or a JSON file path."""
    return profile_from("calibration", calibration)


def estimate_memory(
    model: str | TransformerSpec, *, gpu: str | Accelerator = "h100-sxm", layout: Layout | None = None,
    seq_len: int = 4096, task: str = "pretrain", precision: str = "bf16", optimizer: str = "adamw",
    lora: LoraConfig | None = None, framework: Framework | str | None = None, states: str | None = None,
    cross_entropy: str | None = None, batch: int = 1, kv_precision: str | None = None, hints: bool = True,
    catalog: Catalog | str | Path | None = None,
) -> MemoryResult:  # fmt: skip
    """Memory per GPU by component for ``layout`` (default: one GPU) at ``seq_len`` tokens per sequence.

    ``task`` pretrain, full-finetune, lora or qlora (``lora``: the adapter, default rank 16 on every projection) or
    inference (``batch`` sequences of ``seq_len`` tokens; ``layout`` gives tp and pp only; ``kv_precision``
    default fp32 with fp32 weights, else bf16). With ``hints`` a training layout that does not fit lists the
    single changes that make it fit (``fit_hints``). ``framework`` (training): a preset name or ``Framework`` whose
    state format, loss, attention and CUDA context the memory assumes (``estimate.memory.profiles``; None: the ZeRO
    paper's accounting); ``states`` and ``cross_entropy`` override it.
    """
    from scaleright.estimate.layout import Layout
    from scaleright.estimate.memory import inference_memory, training_memory
    from scaleright.results.memory import MemoryResult
    from scaleright.workload.precision import KV_PRECISIONS

    check_task_precision(task, precision)
    check_framework(framework)
    check_count("seq_len", seq_len, "seq_len")
    check_count("batch", batch, "batch")
    lay0 = layout if layout is not None else Layout()
    fw_name = framework if framework is None or isinstance(framework, str) else framework.name
    check_memory_task_args(task, {**{k: getattr(lay0, k) for k in _LAYOUT_ONLY}, "optimizer": optimizer,
                                  "states": states, "cross_entropy": cross_entropy, "framework": fw_name,
                                  "batch": batch, "kv_precision": kv_precision})  # fmt: skip
    check_lora_task(task, {"lora": True} if lora is not None else {})
    spec, g, cat = _resolve(model, gpu, catalog)
    lay = _layout(layout, spec)
    check_offload_link(g, lay.offload_optimizer, lay.offload_activations)
    if task == "inference":
        kvp = kv_precision or ("fp32" if precision == "fp32" else "bf16")
        check_choice("kv_precision", kvp, KV_PRECISIONS)
        mem = inference_memory(spec, batch=batch, context=seq_len, tp=lay.tp, pp=lay.pp, precision=precision,
                               kv_precision=kvp, gpu_memory_gb=g.memory_gb)  # fmt: skip
        return MemoryResult.of(mem, model=spec.name, gpu=g, task=task)
    from scaleright.estimate.framework import framework_of
    from scaleright.estimate.memory import resolve_profile

    fw = framework_of(framework, field="framework") if framework is not None else None
    kw: dict[str, Any] = dict(seq_len=seq_len, precision=precision, optimizer=optimizer, task=task, lora=lora,
                              states=states, cross_entropy=cross_entropy, framework=fw)  # fmt: skip
    mem = training_memory(spec, layout=lay, gpu_memory_gb=g.memory_gb, **kw)
    prof = resolve_profile(fw, zero=lay.zero, precision=precision, states=states, cross_entropy=cross_entropy)
    found = []
    if hints and mem.fits is False:
        from scaleright.estimate.memory.hints import fit_hints

        found = fit_hints(spec, layout=lay, gpu=g, gpus_catalog=list(cat.gpus.values()), **kw)
    return MemoryResult.of(mem, model=spec.name, gpu=g, task=task, hints=found, accounting=prof)


def estimate_train(
    model: str | TransformerSpec, *, gpu: str | Accelerator = "h100-sxm", layout: Layout | None = None,
    seq_len: int = 4096, precision: str = "bf16", task: str = "pretrain", lora: LoraConfig | None = None,
    optimizer: str = "adamw", tokens: float | None = None, framework: Framework | str | None = None,
    system: System | str | None = None, calibration: str | None = None, catalog: Catalog | str | Path | None = None,
) -> TrainResult:  # fmt: skip
    """Step time, tokens/s, MFU / HFU, memory and scaling efficiency of one training ``layout`` (default: one GPU).

    ``tokens``: the training budget, for ``train_time_h`` and ``gpu_hours``. ``framework``: the framework whose
    behaviour the step time and the memory assume (``scaleright.estimate.framework``; default fsdp2; the memory
    inputs it implies are ``memory_accounting``). ``system``: the network (a
    built-in system id or a ``System``; default the GPU's). ``calibration``: a profile name or JSON path (None:
    the built-in defaults).
    """
    from scaleright.estimate.train import estimate_train as _estimate
    from scaleright.results.train import TrainResult
    from scaleright.workload.precision import TRAIN_PRECISIONS

    check_choice("precision", precision, TRAIN_PRECISIONS)
    check_framework(framework)
    check_choice("task", task, TRAIN_TASKS)
    check_count("seq_len", seq_len, "seq_len")
    check_positive("tokens", tokens, "tokens")
    prof = _profile(calibration)
    spec, g, _ = _resolve(model, gpu, catalog)
    lay = _layout(layout, spec)
    check_offload_link(g, lay.offload_optimizer, lay.offload_activations)
    est = _estimate(spec, gpu=g, layout=lay, seq_len=seq_len, system=system, precision=precision, task=task,
                    lora=lora, optimizer=optimizer, tokens=tokens, cal=prof.calibration, framework=framework)
    return TrainResult.of(est, model=spec.name, calibration=prof.record())


def estimate_infer(
    model: str | TransformerSpec, *, gpu: str | Accelerator = "h100-sxm", gpus: int = 1, tp: int | None = None,
    pp: int = 1, input_len: int, output_len: int, batch: int | str = 1, precision: str = "bf16",
    kv_precision: str | None = None, system: System | str | None = None, calibration: str | None = None,
    catalog: Catalog | str | Path | None = None,
) -> InferResult:  # fmt: skip
    """TTFT, TPOT, end-to-end latency and throughput of serving on ``gpus`` GPUs: ``batch`` concurrent sequences
    in total (or ``"max"``, the KV cache's capacity), as replicas of ``tp`` x ``pp`` GPUs (``tp`` None: the best
    of every valid size, the others in ``alternatives``)."""
    from scaleright.estimate.infer import estimate_infer as _estimate
    from scaleright.results.infer import InferResult

    check_infer_args(gpus=gpus, tp=tp, pp=pp, input_len=input_len, output_len=output_len, precision=precision,
                     kv_precision=kv_precision)  # fmt: skip
    check_batch("batch", batch)
    prof = _profile(calibration)
    spec, g, _ = _resolve(model, gpu, catalog)
    check_pp_fits(gpus, pp, spec.layers)
    est = _estimate(spec, gpu=g, gpus=gpus, tp=tp, pp=pp, input_len=input_len, output_len=output_len, batch=batch,
                    system=system, precision=precision, kv_precision=kv_precision, cal=prof.calibration)
    return InferResult.of(est, model=spec.name, gpu=g, calibration=prof.record())


def simulate(
    model: str | TransformerSpec, *, gpu: str | Accelerator = "h100-sxm", price_usd_per_gpu_hour: float | None = None,
    calibration: str | None = None, catalog: Catalog | str | Path | None = None, **options: Any,
) -> SimulateResult:  # fmt: skip
    """Serve ``model`` on one pool under a request stream in the discrete-event simulator (``scaleright.serve``).

    ``options`` are ``scaleright.serve.simulate.simulate``'s keyword arguments (``gpus``, ``tp``, ``rate`` or
    ``concurrency`` or ``trace``, ``requests``, ``input_len``, ``output_len``, ``engine``, ``seed``, SLOs, ...).
    Costs use ``price_usd_per_gpu_hour``, else the catalog's cheapest fresh on-demand offer for the GPU (none:
    no costs)."""
    from scaleright.estimate.engines import get_engine
    from scaleright.results.simulate import SimulateResult
    from scaleright.serve.simulate import simulate as _simulate

    known = set(inspect.signature(_simulate).parameters) - {"spec", "gpu", "cal", "price_usd_per_gpu_hour", "log",
                                                            "chrome_trace", "model"}  # fmt: skip
    unknown = sorted(set(options) - known)
    if unknown:
        raise InputError(f"simulate: unknown option {unknown[0]!r}; known: {', '.join(sorted(known))}")
    defaults = inspect.signature(_simulate).parameters
    given = {k: p.default for k, p in defaults.items() if p.default is not inspect.Parameter.empty} | options
    engine = given["engine"]
    check_pool_args(given)
    check_simulate_args(given | {"price_usd_per_gpu_hour": price_usd_per_gpu_hour})
    prof = _profile(calibration)
    spec, g, cat = _resolve(model, gpu, catalog)
    price, source = simulation_price(price_usd_per_gpu_hour, g, cat)
    res = _simulate(spec, gpu=g, price_usd_per_gpu_hour=price, cal=prof.calibration, **options)
    return SimulateResult.of(res, model=spec.name, gpu=g.id, price_usd_per_gpu_hour=price, price_source=source,
                             engine_status=get_engine(engine).status)  # fmt: skip


def simulation_price(given: float | None, gpu: Accelerator, catalog: Catalog, *,
                     field: str = "price_usd_per_gpu_hour") -> tuple[float | None, str | None]:  # fmt: skip
    """(USD per GPU-hour, where it came from) for a simulation's costs: ``given`` (named ``field``), else the
    catalog's cheapest fresh on-demand offer for ``gpu``; (None, None) when the catalog has none."""
    from scaleright.catalog import find_price

    if given is not None:
        return given, field
    try:
        row = find_price(gpu.id, "on-demand", catalog=catalog)
    except InputError:
        return None, None
    return row.usd, f"catalog on-demand: {row.provider or 'unnamed provider'} {row.date or ''}".strip()


def plan_scenario(scenario: Scenario | dict[str, Any] | str | Path, *, calibration: str | None = None,
                  catalog: Catalog | str | Path | None = None) -> PlanResult:  # fmt: skip
    """Search every allowed GPU type, count and layout for ``scenario`` (a ``Scenario``, the mapping a YAML file
    holds, or the path of one) and recommend one option, with the explanations ``scaleright plan`` prints."""
    from scaleright.plan.planner import plan
    from scaleright.plan.scenario import Scenario, load_scenario, parse_scenario
    from scaleright.results.plan import PlanResult

    if isinstance(scenario, (str, Path)):
        scn = load_scenario(scenario)
    elif isinstance(scenario, Scenario):
        scn = scenario
    else:
        scn = parse_scenario(scenario)
    prof = _profile(calibration)
    return PlanResult.of(plan(scn, catalog=_catalog(catalog), cal=prof.calibration), calibration=prof.record())
