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
"""

from __future__ import annotations

import inspect
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scaleright.errors import InputError

if TYPE_CHECKING:
    from scaleright.catalog import Accelerator, Catalog
    from scaleright.catalog.systems import System
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

__all__ = ["estimate_memory", "estimate_train", "estimate_infer", "simulate", "simulation_price", "plan_scenario"]


def _catalog(catalog: Catalog | str | Path | None) -> Catalog:
    """``catalog``, or the built-in catalog overlaid with the directory ``catalog`` (default: $SCALERIGHT_CATALOG)."""
    from scaleright.catalog import Catalog

    return catalog if isinstance(catalog, Catalog) else Catalog.load(catalog)


def _resolve(model: str | TransformerSpec, gpu: str | Accelerator,
             catalog: Catalog | str | Path | None) -> tuple[TransformerSpec, Accelerator, Catalog]:  # fmt: skip
    """(spec, accelerator, catalog): names looked up as the CLI's ``--model`` and ``--gpu`` are."""
    from scaleright.workload import load_model

    cat = _catalog(catalog)
    spec = load_model(model, catalog=cat) if isinstance(model, str) else model
    g = cat.gpu(gpu) if isinstance(gpu, str) else gpu
    return spec, g, cat


def _choice(field: str, value: str, allowed: tuple[str, ...]) -> None:
    from scaleright.cli.common import check_choice

    check_choice(field, value, allowed)


def _count(field: str, value: int | None, kind: str) -> None:
    """A positive integer at most ``LIMITS[kind]`` (None: not given)."""
    from scaleright.limits import check_limit

    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{field}={value!r} must be a positive integer")
    check_limit(field, value, kind)


def _layout(layout: Layout | None, spec: TransformerSpec) -> Layout:
    """``layout`` (default: one GPU) checked against ``spec`` and the bounds of ``scaleright.limits``."""
    from scaleright.estimate.layout import Layout
    from scaleright.limits import check_limit

    lay = layout if layout is not None else Layout()
    lay.validate(spec)
    for name in ("tp", "pp", "dp", "cp", "ep", "etp", "dp_shard", "virtual_stages"):
        v = getattr(lay, name)
        if v is not None:
            check_limit(f"layout.{name}", v, "parallel_degree")
    check_limit("layout.micro_batch", lay.micro_batch, "micro_batch")
    if lay.global_batch is not None:
        check_limit("layout.global_batch", lay.global_batch, "global_batch")
    check_limit("layout.gpus", lay.gpus, "gpus")  # tp x pp x dp x cp
    if lay.sequence_parallel and lay.tp == 1:
        raise InputError("layout.sequence_parallel splits activations over tensor parallelism; it needs tp > 1 "
                         "(got tp=1)")
    return lay


def _profile(calibration: str | None):
    """The calibration profile: None or ``default`` (built-in), a profile name, or a JSON file path."""
    from scaleright.cli.common import profile_from

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
    from scaleright.estimate.memory import TASKS, inference_memory, training_memory
    from scaleright.results.memory import MemoryResult
    from scaleright.workload.precision import KV_PRECISIONS, STORAGE_PRECISIONS, TRAIN_PRECISIONS

    _choice("task", task, TASKS)
    _choice("precision", precision, STORAGE_PRECISIONS if task == "inference" else TRAIN_PRECISIONS)
    _count("seq_len", seq_len, "seq_len")
    _count("batch", batch, "batch")
    spec, g, cat = _resolve(model, gpu, catalog)
    lay = _layout(layout, spec)
    if task == "inference":
        given = [k for k in ("dp", "cp", "ep", "zero", "micro_batch", "global_batch", "recompute",
                             "sequence_parallel", "virtual_stages") if getattr(lay, k) != getattr(Layout(), k)]
        if given or lora is not None:
            what = f"layout.{given[0]}" if given else "lora"
            raise InputError(f"{what} applies to training; task 'inference' uses the layout's tp and pp only")
        kvp = kv_precision or ("fp32" if precision == "fp32" else "bf16")
        _choice("kv_precision", kvp, KV_PRECISIONS)
        mem = inference_memory(spec, batch=batch, context=seq_len, tp=lay.tp, pp=lay.pp, precision=precision,
                               kv_precision=kvp, gpu_memory_gb=g.memory_gb)  # fmt: skip
        return MemoryResult.of(mem, model=spec.name, gpu=g, task=task)
    for name, v, default in (("batch", batch, 1), ("kv_precision", kv_precision, None)):
        if v != default:
            raise InputError(f"{name}={v} applies to task 'inference'; task {task!r} does not use it")
    if lora is not None and task not in ("lora", "qlora"):
        raise InputError(f"lora applies to task lora or qlora; task {task!r} does not use it")
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
    from scaleright.limits import check_limit
    from scaleright.results.train import TrainResult
    from scaleright.workload.precision import TRAIN_PRECISIONS

    _choice("precision", precision, TRAIN_PRECISIONS)
    _count("seq_len", seq_len, "seq_len")
    if tokens is not None:
        if isinstance(tokens, bool) or not isinstance(tokens, (int, float)) or not (math.isfinite(tokens)
                                                                                  and tokens > 0):
            raise InputError(f"tokens={tokens!r} must be a finite positive number")
        check_limit("tokens", tokens, "tokens")
    prof = _profile(calibration)
    spec, g, _ = _resolve(model, gpu, catalog)
    lay = _layout(layout, spec)
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
    from scaleright.workload.precision import KV_PRECISIONS, STORAGE_PRECISIONS

    _choice("precision", precision, STORAGE_PRECISIONS)
    if kv_precision is not None:
        _choice("kv_precision", kv_precision, KV_PRECISIONS)
    _count("gpus", gpus, "gpus")
    for name, v in (("tp", tp), ("pp", pp)):
        _count(name, v, "parallel_degree")
    for name, v in (("input_len", input_len), ("output_len", output_len)):
        _count(name, v, "tokens_per_request")
    if not isinstance(batch, str):
        _count("batch", batch, "batch")
    elif batch != "max":
        raise InputError(f"batch={batch!r} must be a positive integer or 'max'")
    if gpus % pp:  # (the CLI's estimate_cmd._pp_fits, which belongs with estimate.infer)
        raise InputError(f"pp({pp}) does not divide gpus({gpus})")
    prof = _profile(calibration)
    spec, g, _ = _resolve(model, gpu, catalog)
    if pp > spec.layers:
        raise InputError(f"pp({pp}) > num_hidden_layers({spec.layers}): each stage needs at least one layer")
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
    from scaleright.estimate.engine_store import check_engine
    from scaleright.serve.router import ROUTERS

    defaults = inspect.signature(_simulate).parameters
    engine = options.get("engine", defaults["engine"].default)
    check_engine("engine", engine)  # a built-in or a stored (calibrate --serving --name) profile, as the CLI
    _choice("router", options.get("router", defaults["router"].default), tuple(ROUTERS))
    given = {"price_usd_per_gpu_hour": price_usd_per_gpu_hour} | options
    for name in ("burstiness", "duration_s", "slo_ttft_ms", "slo_tpot_ms", "price_usd_per_gpu_hour",
                 "diurnal_period_s"):  # what the simulator leaves to its callers (the CLI checks its flags)
        v = given.get(name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v)
                                                                                           and v > 0)):
            raise InputError(f"{name}={v!r} must be a finite positive number")
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
