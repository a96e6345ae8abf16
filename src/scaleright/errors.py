"""The exception tree of scaleright.

Every error a user can trigger (bad input, unknown names, impossible layouts, malformed files) is a
``ScalerightError``. The CLI turns it into one line on stderr and exit code 2; anything else is a bug and
keeps its traceback. Internal invariants use ``assert``.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "ScalerightError",
    "InputError",
    "UnknownNameError",
    "LayoutError",
    "CatalogFileError",
    "closest",
]


class ScalerightError(Exception):
    """Base of every error caused by the user's input or files."""


class InputError(ScalerightError, ValueError):
    """A field has a value outside what is allowed. The message names the field and what is allowed."""


class UnknownNameError(InputError):
    """A catalog name (GPU, model, price) is not known. The message lists the closest valid names."""

    def __init__(self, kind: str, name: str, valid: Iterable[str]):
        self.kind, self.name = kind, name
        near = closest(name, valid)
        hint = f"; closest: {', '.join(near)}" if near else ""
        super().__init__(f"unknown {kind} '{name}'{hint}")


class LayoutError(InputError):
    """A parallel layout that cannot exist (operands are named in the message)."""


class CatalogFileError(InputError):
    """A catalog or config file is malformed: the message names the file, the field and what is allowed."""


def closest(name: str, valid: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` valid names closest to ``name`` (case-insensitive), best first."""
    valid = list(valid)
    lowered = {v.lower(): v for v in valid}
    import difflib  # only when a name is unknown (every command imports this module)

    hits = difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.4)
    if not hits:
        hits = [v for v in lowered if name.lower() in v or v in name.lower()][:n]
    return [lowered[h] for h in hits]
