"""Token-length distributions of requests: fixed, lognormal, or empirical (resampled from a file).

- ``fixed``: every request has ``mean`` tokens.
- ``lognormal``: mean ``mean`` and coefficient of variation ``cv``: σ² = ln(1 + cv²), μ = ln(mean) − σ²/2, rounded
  to whole tokens, at least 1 (chat prompt and answer lengths are close to lognormal; e.g. the ShareGPT and
  LMSYS-Chat-1M length histograms).
- ``empirical``: lengths drawn with replacement from a file of integers (one per line, or the first column of a
  CSV; a header line is skipped).
Each draw is capped at ``max_tokens``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from scaleright.errors import InputError
from scaleright.textfile import check_input_file, read_text

__all__ = ["LENGTHS", "draw_lengths", "read_lengths"]

LENGTHS = ("fixed", "lognormal", "empirical")


def read_lengths(path: Path | str, *, flag: str) -> np.ndarray:
    p = check_input_file(flag, path)
    vals = []
    for k, line in enumerate(read_text(p).splitlines(), start=1):
        cell = line.split(",")[0].strip()
        if not cell:
            continue
        try:
            v = int(float(cell))
        except ValueError:
            if k == 1:
                continue  # header
            raise InputError(f"{flag}={p} line {k}: {cell!r} is not a token count") from None
        if v < 1:
            raise InputError(f"{flag}={p} line {k}: token count {v} must be >= 1")
        vals.append(v)
    if not vals:
        raise InputError(f"{flag}={p}: no token counts")
    return np.asarray(vals, dtype=np.int64)


def draw_lengths(rng: np.random.Generator, kind: str, *, n: int, mean: int, cv: float = 0.5,
                 samples: np.ndarray | None = None, max_tokens: int = 1 << 24,
                 field: str = "length") -> np.ndarray:  # fmt: skip
    """``n`` token counts from distribution ``kind``."""
    if kind == "fixed":
        return np.full(n, min(int(mean), max_tokens), dtype=np.int64)
    if kind == "lognormal":
        if not (math.isfinite(cv) and cv > 0):
            raise InputError(f"{field} cv={cv} must be a finite positive number")
        s2 = math.log1p(cv * cv)
        x = rng.lognormal(math.log(mean) - s2 / 2, math.sqrt(s2), size=n)
        return np.clip(np.rint(x), 1, max_tokens).astype(np.int64)
    if kind == "empirical":
        if samples is None or not len(samples):
            raise InputError(f"{field}: the empirical distribution needs a file of lengths")
        return np.minimum(rng.choice(np.asarray(samples, dtype=np.int64), size=n, replace=True), max_tokens)
    raise InputError(f"{field} distribution {kind!r} not allowed; allowed: {', '.join(LENGTHS)}")
