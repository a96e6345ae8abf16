"""Turn pydantic validation failures into one-line ``InputError`` messages naming the field and the value."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from scaleright.errors import InputError

__all__ = ["validated"]

M = TypeVar("M", bound=BaseModel)


def validated(cls: type[M], data: Any, *, what: str) -> M:
    """``cls.model_validate(data)``, raising ``InputError`` with every failing field and its value."""
    if isinstance(data, cls):
        return data
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        parts = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"])
            msg = err["msg"].removeprefix("Value error, ")
            value = err.get("input")
            shown = "" if isinstance(value, (dict, BaseModel)) or err["type"] == "missing" else f" (got {value!r})"
            parts.append(f"{loc}: {msg}{shown}" if loc else msg)
        raise InputError(f"invalid {what}: " + "; ".join(parts)) from None
