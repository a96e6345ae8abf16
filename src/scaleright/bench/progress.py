"""Per-rank progress beacons, so the parent can name the rank that hung.

Each rank owns ``rank{r}.progress`` in the run directory and overwrites one fixed-size JSON record in place
(``os.pwrite``, a few microseconds) at every phase change: ``{"pid", "seq", "label"}``. All ranks pass the same
sequence of marks, so after a timeout the rank(s) with the smallest ``seq`` are the ones that stopped first: the
others are waiting for them inside a collective.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["Progress", "read_progress"]

_RECORD = 512  # bytes per record


class Progress:
    """Writer for one rank's beacon file."""

    def __init__(self, path: Path):
        self.path = path
        self.seq = 0
        self.label = "start"
        self._fd: int | None = None

    def mark(self, label: str) -> None:
        """Record that this rank reached ``label``."""
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.seq += 1
        self.label = label
        data = json.dumps({"pid": os.getpid(), "seq": self.seq, "label": label})[: _RECORD - 1].encode()
        os.pwrite(self._fd, data.ljust(_RECORD), 0)

    def close(self) -> None:
        """Close the file (the record stays)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def read_progress(run_dir: Path) -> dict[int, dict]:
    """``{rank: {"pid", "seq", "label"}}`` for every beacon in ``run_dir`` that can be read."""
    out = {}
    for path in run_dir.glob("rank*.progress"):
        try:
            out[int(path.stem.removeprefix("rank"))] = json.loads(path.read_bytes().strip())
        except (ValueError, OSError):
            continue
    return out
