"""How numbers read, in one place: the terminal, the JSON texts of explanations and the HTML report print a value
the same way (a plan that reads "$5.36 … 4.56 kWh" in the report reads so in the terminal too).

- ``number``: three significant figures, thousands separated from 1,000 up (``12.3``, ``4.56``, ``1,234``).
- ``usd``: whole dollars from $1,000, cents from $1, three significant figures below (``$1,234``, ``$5.36``,
  ``$0.0123``).
- ``percent``: a fraction as a whole percentage (``0.413`` → ``41%``); MFU, utilisation and efficiency are fractions
  in the API and JSON, percentages wherever a person reads them.
- ``ms``: a duration given in seconds, printed in milliseconds (``number`` of s × 1000) — TTFT and TPOT are in
  seconds in the API and JSON (``*_s``), in milliseconds wherever a person reads them.
None, NaN and ±inf print as "—".
"""

from __future__ import annotations

import math
import numbers
from typing import TypeGuard

__all__ = ["DASH", "is_number", "number", "usd", "percent", "ms"]

DASH = "—"


def is_number(x: object) -> TypeGuard[float]:
    """A finite real number (booleans are not numbers)."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x)


def number(x: object) -> str:
    if not is_number(x):
        return DASH
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}" if abs(x) < 1e15 else f"{x:.3g}"
    return f"{x:.3g}"


def usd(x: object) -> str:
    if not is_number(x):
        return DASH
    return f"${x:,.0f}" if abs(x) >= 1000 else f"${x:,.2f}" if abs(x) >= 1 else f"${x:.3g}"


def percent(x: object) -> str:
    return f"{x:.0%}" if is_number(x) else DASH


def ms(seconds: object) -> str:
    return number(seconds * 1e3) if is_number(seconds) else DASH
