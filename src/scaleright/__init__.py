"""scaleright: one GPU or many, which GPU, which layout, rent or buy — answered with numbers.

Data flows one way: catalog -> workload -> estimate -> plan -> report; measurements (bench) feed calibration.

The Python API the CLI is built on, importable from the top level (loaded on first use, so ``import scaleright``
stays cheap)::

    import scaleright as sr
    est = sr.estimate_train("llama-3.1-8b", gpu="h100-sxm", layout=sr.Layout(dp=8, zero=3, global_batch=64))
    est.mfu, est.tokens_per_s, est.to_dict()  # a typed TrainResult; to_dict() is `estimate train --json`

``estimate_memory``, ``estimate_train``, ``estimate_infer``, ``simulate`` and ``plan_scenario`` return the typed
results of ``scaleright.results`` (pydantic models; ``scaleright schema NAME`` prints their JSON Schema).
``docs/api.md`` has a worked example (a test runs it). Bad input raises ``InputError`` (a ``ScalerightError``)
with one line naming the argument and what is allowed.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from scaleright.errors import InputError, ScalerightError

__version__ = "0.1.0"

# name -> (module, attribute): the public API, loaded on first access (PEP 562)
_API: dict[str, tuple[str, str]] = {
    # catalog and workload
    "Catalog": ("scaleright.catalog", "Catalog"),
    "get_gpu": ("scaleright.catalog", "get_gpu"),
    "load_model": ("scaleright.workload", "load_model"),
    # inputs of one estimate
    "Layout": ("scaleright.estimate.layout", "Layout"),
    "LoraConfig": ("scaleright.estimate.memory", "LoraConfig"),
    "Framework": ("scaleright.estimate.framework", "Framework"),
    "framework_of": ("scaleright.estimate.framework", "framework_of"),
    "load_calibration": ("scaleright.estimate.calibration", "load_calibration"),
    # one question, one typed result (scaleright.api; ``result.to_dict()`` is the command's --json)
    "estimate_memory": ("scaleright.api", "estimate_memory"),
    "estimate_train": ("scaleright.api", "estimate_train"),
    "estimate_infer": ("scaleright.api", "estimate_infer"),
    "simulate": ("scaleright.api", "simulate"),
    # (``scaleright.plan`` is the package; the planner is ``plan_scenario``)
    "plan_scenario": ("scaleright.api", "plan_scenario"),
    "parse_scenario": ("scaleright.plan.scenario", "parse_scenario"),
    "load_scenario": ("scaleright.plan.scenario", "load_scenario"),
    "export_plan": ("scaleright.export", "export_plan"),
    # the result models (``scaleright schema NAME`` prints their JSON Schema)
    "MemoryResult": ("scaleright.results.memory", "MemoryResult"),
    "TrainResult": ("scaleright.results.train", "TrainResult"),
    "InferResult": ("scaleright.results.infer", "InferResult"),
    "SimulateResult": ("scaleright.results.simulate", "SimulateResult"),
    "PlanResult": ("scaleright.results.plan", "PlanResult"),
}

__all__ = ["ScalerightError", "InputError", "__version__", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        module, attr = _API[name]
        value = getattr(import_module(module), attr)
        globals()[name] = value  # later lookups skip this hook
        return value
    raise AttributeError(f"module 'scaleright' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
