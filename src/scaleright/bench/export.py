"""Stored runs as export text: JSON without NaN, CSV with nested fields flattened and formulas neutralised.

JSON: NaN and ±Infinity are not JSON, so they become ``null``. CSV: ``model.*``, ``layout.*``, ``metrics.*``,
``hardware.*`` and ``software.*`` columns (lists and objects as JSON text); a cell that is text starting with ``=``,
``+``, ``-``, ``@``, a tab or a carriage return gets a leading ``'`` so a spreadsheet shows it instead of evaluating
a formula (OWASP, "CSV Injection"). Numbers are written as numbers: a negative value such as ``-0.5`` stays ``-0.5``
(a spreadsheet reads it as a number, not a formula); only text is prefixed, even text that looks numeric. NaN and
infinities are empty cells.
"""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

__all__ = ["runs_to_json", "runs_to_csv", "csv_cell", "finite"]

_PLAIN = ("id", "time_utc", "kind", "status", "error", "fingerprint", "sweep_id")


def finite(o: Any) -> Any:
    """``o`` with NaN and ±Infinity replaced by None (they are not JSON)."""
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, dict):
        return {k: finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [finite(v) for v in o]
    return o


def runs_to_json(runs: list[dict[str, Any]]) -> str:
    """The runs as an indented JSON list (NaN and infinities as null)."""
    return json.dumps(finite(runs), indent=2, allow_nan=False) + "\n"


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """One CSV cell: text starting like a formula gets a leading ``'``; numbers stay numbers; NaN/inf are empty."""
    if isinstance(value, float) and not math.isfinite(value):
        return ""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def _flat(run: dict[str, Any]) -> dict[str, Any]:
    row = {k: run[k] for k in _PLAIN}
    for part in ("model", "layout", "metrics", "hardware", "software"):
        for key, val in run[part].items():
            row[f"{part}.{key}"] = json.dumps(finite(val)) if isinstance(val, (list, dict)) else val
    return {k: csv_cell(v) for k, v in row.items()}


def runs_to_csv(runs: list[dict[str, Any]]) -> str:
    """The runs as CSV: the plain columns first, then the flattened fields in sorted order."""
    rows = [_flat(r) for r in runs]
    extra = sorted({k for r in rows for k in r} - set(_PLAIN))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=[*_PLAIN, *extra], lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()
