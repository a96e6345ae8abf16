"""Typed results: one pydantic model per result the CLI prints with ``--json`` and the API returns.

``RESULTS`` maps each name of ``scaleright schema NAME`` to its model; ``Model.to_dict()`` is the ``--json``
object, ``Model.json_schema()`` its JSON Schema. The models import lazily (PEP 562), so ``scaleright schema
memory`` does not load the planner.

The models' modules do not use ``from __future__ import annotations``: with it every field's annotation is a string
that pydantic compiles and evaluates when it builds the class (a fifth of importing ``results.plan``).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scaleright.results.common import Result

__all__ = ["RESULTS", "result_model", "result_json", "MemoryResult", "TrainResult", "InferResult", "PlanResult",
           "SimulateResult", "CapacityResult", "FleetResult"]

# schema name -> (module, class)
RESULTS: dict[str, tuple[str, str]] = {
    "memory": ("scaleright.results.memory", "MemoryResult"),
    "train": ("scaleright.results.train", "TrainResult"),
    "infer": ("scaleright.results.infer", "InferResult"),
    "plan": ("scaleright.results.plan", "PlanResult"),
    "simulate": ("scaleright.results.simulate", "SimulateResult"),
    "capacity": ("scaleright.results.capacity", "CapacityResult"),
    "fleet": ("scaleright.results.fleet", "FleetResult"),
}
_CLASSES = {cls: (module, cls) for module, cls in RESULTS.values()}


def result_model(name: str) -> type[Result]:
    """The model of result ``name`` (a key of ``RESULTS``)."""
    from scaleright.errors import InputError

    if name not in RESULTS:
        raise InputError(f"result {name!r} unknown; known: {', '.join(RESULTS)}")
    module, cls = RESULTS[name]
    return getattr(import_module(module), cls)


def __getattr__(name: str) -> Any:
    if name in _CLASSES:
        module, cls = _CLASSES[name]
        return getattr(import_module(module), cls)
    raise AttributeError(f"module 'scaleright.results' has no attribute {name!r}")


def result_json(name: str, d: dict[str, Any]) -> dict[str, Any]:
    """``d`` validated as result ``name`` and returned as its JSON object (what ``--json`` prints): a key the
    schema does not declare, a missing one or a wrong type raises ``pydantic.ValidationError``, a bug to fix."""
    return result_model(name).from_dict(d).to_dict()
