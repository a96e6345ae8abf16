"""A package facade whose modules load on the first use of one of their names (PEP 562).

A package that re-exports the names of its modules (``scaleright.plan.economics``, ``scaleright.estimate.memory``)
imports all of them on import; a command that uses two pays for the class creation and bytecode of the rest. With
``lazy_exports`` the package lists which module defines each name, and ``package.name`` or ``from package import
name`` imports that module then (once: the value is stored in the package). The package keeps its names visible to
type checkers with imports under ``if TYPE_CHECKING:``. A name that is also a module's name (``utilisation_curve``
in ``utilisation_curve.py``) cannot be lazy: importing that module, from anywhere, sets the package's attribute to
the module, and ``__getattr__`` is asked only for what is missing. Such names are imported by the package itself.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, names_of: Mapping[str, tuple[str, ...]]
                 ) -> tuple[dict[str, str], Callable[[str], Any], Callable[[], list[str]]]:  # fmt: skip
    """(the module of each name, the package's ``__getattr__``, its ``__dir__``) for ``package`` (its
    ``__name__``), whose modules (names relative to it) define ``names_of[module]``."""
    module_of = {name: module for module, names in names_of.items() for name in names}
    clash = sorted(set(module_of) & set(names_of))
    if clash:  # importing the module binds its name in the package: it would shadow the name for good
        raise ValueError(f"{package}: {clash} name both a module and a lazy name; import those names eagerly")

    def __getattr__(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)  # later lookups find it without this function
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *module_of})

    return module_of, __getattr__, __dir__
