"""Progress: per-rank beacons, so the parent can name the rank that hung; and a reporter that tells the user what a
long benchmark is doing.

Each rank owns ``rank{r}.progress`` in the run directory and overwrites one fixed-size JSON record in place
(``os.pwrite``, a few microseconds) at every phase change: ``{"pid", "seq", "label"}``. All ranks pass the same
sequence of marks, so after a timeout the rank(s) with the smallest ``seq`` are the ones that stopped first: the
others are waiting for them inside a collective.

``Reporter`` writes to stderr (stdout stays the table or the JSON): a line when a phase starts (a world size, a
batch size), and within a phase the latest detail (the least-advanced rank's beacon label, a repetition) every
``every_s`` seconds, each with the seconds elapsed since the benchmark started. It writes when stderr is a terminal
(a script reading stderr still gets one line per error), or when ``$SCALERIGHT_PROGRESS`` is ``1``; ``0`` silences it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

__all__ = ["PROGRESS_ENV", "Progress", "Reporter", "least_advanced", "read_progress"]

PROGRESS_ENV = "SCALERIGHT_PROGRESS"

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


def least_advanced(beacons: dict[int, dict]) -> str | None:
    """``rank R: <label>`` of the rank with the smallest ``seq`` (the others wait for it), or None."""
    ok = {r: b for r, b in beacons.items() if isinstance(b.get("seq"), int)}
    if not ok:
        return None
    r = min(ok, key=lambda k: (ok[k]["seq"], k))
    return f"rank {r}: {ok[r].get('label', '?')}"


class Reporter:
    """What a long benchmark is doing, on stderr (module doc)."""

    def __init__(self, what: str, *, every_s: float = 10.0, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.what, self.every_s, self.clock = what, every_s, clock
        self.stream = stream
        env = os.environ.get(PROGRESS_ENV, "")
        self.enabled = stream is not None or env == "1" or (env != "0" and sys.stderr.isatty())
        self.t0 = self.last = clock()
        self.current = ""
        self.detail: str | None = None

    def _write(self, text: str) -> None:
        if not self.enabled:
            return
        out = self.stream if self.stream is not None else sys.stderr
        print(f"[{self.clock() - self.t0:6.1f} s] {self.what}: {text}", file=out, flush=True)
        self.last = self.clock()

    def phase(self, label: str) -> None:
        """A new phase starts: always one line."""
        self.current, self.detail = label, None
        self._write(label)

    def tick(self, detail: str | None) -> None:
        """The latest detail of the phase: a line once ``every_s`` passed since the last line (so a long run shows
        it is alive even when the detail did not change)."""
        if detail is not None:
            self.detail = detail
        if self.clock() - self.last < self.every_s:
            return
        shown = self.detail or "running"
        self._write(f"{self.current}: {shown}" if self.current else shown)
