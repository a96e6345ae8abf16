"""scaleright: one GPU or many, which GPU, which layout, rent or buy — answered with numbers.

Data flows one way: catalog -> workload -> estimate -> plan -> report; measurements (bench) feed calibration.

The Python API the CLI is built on, importable from the top level (loaded on first use, so ``import scaleright``
stays cheap)::

    import scaleright as sr
    spec, gpu = sr.load_model("llama-3.1-8b"), sr.get_gpu("h100-sxm")
    est = sr.estimate_train(spec, gpu=gpu, layout=sr.Layout(dp=8, zero=3, global_batch=64), seq_len=4096)

``docs/api.md`` has a worked example (a test runs it). Bad input raises ``InputError`` (a ``ScalerightError``)
with the same one-line message the CLI prints.
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
    # estimates (one layout)
    "Layout": ("scaleright.estimate.layout", "Layout"),
    "Framework": ("scaleright.estimate.framework", "Framework"),
    "framework_of": ("scaleright.estimate.framework", "framework_of"),
    "estimate_memory": ("scaleright.estimate.memory", "training_memory"),
    "estimate_inference_memory": ("scaleright.estimate.memory", "inference_memory"),
    "estimate_train": ("scaleright.estimate.train", "estimate_train"),
    "estimate_infer": ("scaleright.estimate.infer", "estimate_infer"),
    "load_calibration": ("scaleright.estimate.calibration", "load_calibration"),
    # plans, serving, launch configs
    "parse_scenario": ("scaleright.plan.scenario", "parse_scenario"),
    "load_scenario": ("scaleright.plan.scenario", "load_scenario"),
    # (``scaleright.plan`` is the package; the planner function is ``plan_scenario``)
    "plan_scenario": ("scaleright.plan.planner", "plan"),
    "simulate": ("scaleright.serve.simulate", "simulate"),
    "export_plan": ("scaleright.export", "export_plan"),
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
