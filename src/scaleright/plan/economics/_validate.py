"""Boundary checks shared by the economics functions (STYLE habit 4: validate at the boundary, name the operand).

Every public economics function accepts scalars or numpy arrays. ``checked`` turns one argument into a float
array and raises ``InputError`` naming the field and what is allowed; ``out`` turns 0-d results back into a
plain ``float`` so scalar callers get scalars and array callers get arrays.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.errors import InputError

__all__ = ["checked", "out"]


def _show(bad: NDArray[np.float64]) -> str:
    vals = bad.ravel()
    shown = ", ".join(f"{v:g}" for v in vals[:3])
    return shown + (f", ... ({vals.size} values)" if vals.size > 3 else "")


def _allowed(ge: float | None, gt: float | None, le: float | None) -> str:
    lo = f"[{ge:g}" if ge is not None else (f"({gt:g}" if gt is not None else None)
    if lo is not None and le is not None:
        return f"in {lo}, {le:g}]"
    if ge is not None:
        return f">= {ge:g}"
    if gt is not None:
        return f"> {gt:g}"
    if le is not None:
        return f"<= {le:g}"
    return "finite"


def checked(
    name: str,
    value: ArrayLike,
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
) -> NDArray[np.float64]:
    """``value`` as a float array, or ``InputError`` naming ``name`` when it is not a finite number within bounds."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a number or an array of numbers (got {value!r})") from None
    allowed = _allowed(ge, gt, le)
    bad = ~np.isfinite(arr)
    if ge is not None:
        bad |= arr < ge
    if gt is not None:
        bad |= arr <= gt
    if le is not None:
        bad |= arr > le
    if np.any(bad):
        raise InputError(f"{name} must be {allowed} (got {_show(arr[bad])})")
    return arr


def out(x: ArrayLike) -> float | NDArray[np.float64]:
    """A 0-d result as ``float``; anything else as a float array."""
    arr = np.asarray(x, dtype=float)
    return float(arr) if arr.ndim == 0 else arr
