"""Reading the reference data: where it is, its csv rows and cells, and the record of a row left out.

The data is ``validation/reference/`` (a copy of the project's shared reference data, see its README), beside this
file; ``$SCALERIGHT_REFERENCE_DIR`` or a ``directory`` argument points elsewhere. Nothing here looks outside the
checkout. Rows that cannot be mapped to model inputs are returned as ``Skipped`` with a reason, never dropped
silently: the mapping modules raise ``SkipRow`` while mapping a row and turn it into a ``Skipped``.
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass
from pathlib import Path

from scaleright.errors import InputError
from scaleright.textfile import path_problem, read_text

__all__ = ["REFERENCE_ENV_VAR", "Skipped", "SkipRow", "cell_float", "cell_int", "read_rows", "reference_dir"]

REFERENCE_ENV_VAR = "SCALERIGHT_REFERENCE_DIR"
DEFAULT_REFERENCE_DIR = Path(__file__).resolve().parent / "reference"


@dataclass(frozen=True)
class Skipped:
    """A row left out of the comparison, with the reason."""

    source: str
    line: int
    group: str
    reason: str


def reference_dir(directory: Path | str | None = None) -> Path:
    """The reference data directory: the argument, else ``$SCALERIGHT_REFERENCE_DIR``, else ``validation/reference``
    beside this file. ``InputError`` naming the directory (and where it came from) when it is not one."""
    if directory is not None:
        p, origin = Path(directory), "directory="
    elif os.environ.get(REFERENCE_ENV_VAR):
        p, origin = Path(os.environ[REFERENCE_ENV_VAR]), f"${REFERENCE_ENV_VAR}"
    else:
        p, origin = DEFAULT_REFERENCE_DIR, "the validation package"
    why = path_problem(p, want="dir")
    if why is not None:
        raise InputError(f"reference directory {p} (from {origin}): {why}")
    return p


def read_rows(name: str, directory: Path | str | None = None) -> list[tuple[int, dict[str, str]]]:
    """The rows of the reference csv ``name`` as (line in the file, the header being line 1; row as a dict)."""
    text = read_text(reference_dir(directory) / name)
    return [(i + 2, row) for i, row in enumerate(csv.DictReader(io.StringIO(text, newline="")))]


def cell_float(s: str) -> float | None:
    """A cell as a number; None when blank or not a number (``OOM``, ``not stated``)."""
    s = (s or "").strip()
    try:
        return float(s)
    except ValueError:
        return None


def cell_int(s: str) -> int | None:
    """A cell as an integer; None when blank, not a number or not whole."""
    v = cell_float(s)
    return int(v) if v is not None and v == int(v) else None


class SkipRow(Exception):
    """Raised while mapping a row; becomes a ``Skipped``."""
