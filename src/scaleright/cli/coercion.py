"""Option values without a pydantic ``TypeAdapter`` per option.

typer 0.2x converts each option's value through a pydantic ``TypeAdapter`` that it builds on first use, one for every
option of the command, given or not: 35 for ``scaleright estimate train``, about 2 % of its instructions. Every
option of this CLI is a plain ``str``, ``int``, ``float``, ``bool``, ``Path`` or ``Enum`` choice, with no bounds, no
parser callback and one value; for those, this module converts the value as typer's adapter would, through typer's
own helpers (``coerce_cli_choice``, ``coerce_cli_path``) where it has them. A value it is not sure of (``"1_000"``,
``" 8"``, ``"0x10"``, an empty path) and any other annotation go to typer's adapter, built then, so every error
message is typer's own. ``tests/test_cli_coercion.py`` checks, value by value, that the two agree. On a typer
without this hook (older typer converts through click types, without pydantic), nothing changes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

_INT = re.compile(r"[+-]?[0-9]+\Z")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")
_MISS = object()


def _convert(kind: str, value: Any, param: Any, ctx: Any) -> Any:
    """``value`` converted as typer's adapter for ``kind`` would, or ``_MISS`` where this is not sure to match."""
    if kind == "str":
        return value if type(value) is str else _MISS
    if kind == "bool":  # a flag's value is a bool already; a text one is typer's to read
        return value if type(value) is bool else _MISS
    if kind == "int":
        if type(value) is int:
            return value
        return int(value) if type(value) is str and _INT.match(value) else _MISS
    if kind == "float":
        if type(value) is float:
            return value
        return float(value) if type(value) is str and _FLOAT.match(value) else _MISS
    desc = param.type_descriptor
    if kind == "path":
        if type(value) is str and value:
            value = Path(value)
        if not isinstance(value, Path):
            return _MISS
        from typer._param_types import coerce_cli_path

        return coerce_cli_path(value, desc.parameter_info, path_type=Path, param=param, ctx=ctx)
    # an Enum choice: typer's own matching (case sensitivity, the member itself as a default)
    from typer._param_types import coerce_cli_choice

    return coerce_cli_choice(value, choices=desc.choices, case_sensitive=desc.case_sensitive, ctx=ctx)


def _direct_class(base: type) -> type:
    """A subclass of typer's ``RuntimeParam`` (which handles a missing value) that converts the value itself where
    it is sure to match typer and hands it to typer's adapter-backed runtime parameter, built then, otherwise."""

    @dataclass(frozen=True)
    class Direct(base):  # type: ignore[misc,valid-type]
        kind: str
        slow: Callable[[], Any]  # () -> typer's own runtime parameter for this option
        built: dict[str, Any] = field(default_factory=dict)

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            try:
                out = _convert(self.kind, value, param, ctx)
            except Exception:  # typer's adapter raises its own error for this value
                out = _MISS
            if out is not _MISS:
                return out
            if "typer" not in self.built:
                self.built["typer"] = self.slow()
            return self.built["typer"]._coerce_value(value, param=param, ctx=ctx)

    return Direct


def _kind(param: Any) -> str | None:
    """Which plain conversion ``param`` needs, or None where typer's adapter must do it."""
    desc = getattr(param, "type_descriptor", None)
    info = getattr(desc, "parameter_info", None)
    if desc is None or info is None or param.multiple or param.nargs != 1 or desc.file_annotation is not None:
        return None
    if info.parser is not None or getattr(info, "click_type", None) is not None:
        return None
    if info.min is not None or info.max is not None:
        return None
    ann = desc.annotation
    if ann is str or ann is int or ann is float or ann is bool:
        return ann.__name__
    if ann is Path:
        plain = not (info.resolve_path or info.allow_dash or info.path_type is not None)
        return "path" if plain else None
    if isinstance(ann, type) and issubclass(ann, Enum) and desc.choices is not None:
        return "choice"
    return None


def install() -> None:
    """Give typer's parameters the direct conversion (once; a no-op on a typer without ``get_runtime_param``)."""
    import typer

    cls = getattr(getattr(typer, "core", None), "_TyperParameter", None)
    original = getattr(cls, "get_runtime_param", None)
    if cls is None or original is None or getattr(original, "_scaleright", False):
        return
    from typer._coercion import RuntimeParam, build_runtime_param  # what ``original`` builds, and its base

    direct = _direct_class(RuntimeParam)

    def get_runtime_param(self: Any) -> Any:
        if self._runtime_param is None:
            kind = _kind(self)
            desc = self.type_descriptor
            self._runtime_param = (build_runtime_param(desc) if kind is None else
                                   direct(parameter_info=desc.parameter_info, annotation=desc.annotation, kind=kind,
                                          slow=lambda: build_runtime_param(desc)))  # fmt: skip
        return self._runtime_param

    get_runtime_param._scaleright = True  # type: ignore[attr-defined]
    cls.get_runtime_param = get_runtime_param
