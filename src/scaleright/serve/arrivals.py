"""Request arrival processes: Poisson, gamma with a burstiness factor, a diurnal curve, and trace replay.

- Poisson at ``rate`` requests/s: exponential inter-arrival times of mean 1/rate.
- Gamma with burstiness ``b`` as ``vllm bench serve`` defines it (``--burstiness``): inter-arrival times drawn from
  Gamma(shape = b, scale = 1 / (rate · b)); the mean stays 1/rate, the coefficient of variation is 1/√b
  (b = 1 is Poisson, b < 1 burstier, b > 1 more regular).
- Diurnal: a non-homogeneous Poisson process with rate(t) = rate · (1 + amplitude · sin(2π t / period)), drawn by
  thinning (Lewis and Shedler 1979) at the peak rate rate · (1 + amplitude).
- Trace: a CSV with columns ``arrival_time_s, input_tokens, output_tokens`` (one request a row, any order).
All draws come from the generator passed in (the environment's), so a seed fixes the sequence.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import numpy as np

from scaleright.errors import InputError
from scaleright.textfile import check_input_file, read_text

__all__ = ["ARRIVALS", "arrival_times", "diurnal", "gamma", "poisson", "read_trace"]

ARRIVALS = ("poisson", "gamma", "diurnal")


def _check_rate(rate: float) -> None:
    if not (math.isfinite(rate) and rate > 0):
        raise InputError(f"rate={rate} must be a finite positive number of requests per second")


def poisson(rng: np.random.Generator, *, rate: float, n: int) -> np.ndarray:
    """``n`` arrival times (s) of a Poisson process at ``rate`` per second, starting from 0."""
    _check_rate(rate)
    return np.cumsum(rng.exponential(1.0 / rate, size=n))


def gamma(rng: np.random.Generator, *, rate: float, burstiness: float, n: int) -> np.ndarray:
    """``n`` arrival times with Gamma(shape=burstiness, scale=1/(rate·burstiness)) gaps (vllm bench serve)."""
    _check_rate(rate)
    if not (math.isfinite(burstiness) and burstiness > 0):
        raise InputError(f"burstiness={burstiness} must be a finite positive number")
    return np.cumsum(rng.gamma(burstiness, 1.0 / (rate * burstiness), size=n))


def diurnal(rng: np.random.Generator, *, rate: float, n: int, period_s: float = 86_400.0,
            amplitude: float = 0.5) -> np.ndarray:  # fmt: skip
    """``n`` arrival times of a Poisson process whose rate swings sinusoidally around ``rate``."""
    _check_rate(rate)
    if not 0 <= amplitude <= 1:
        raise InputError(f"amplitude={amplitude} must lie in [0, 1]")
    if not (math.isfinite(period_s) and period_s > 0):
        raise InputError(f"period_s={period_s} must be a finite positive number")
    peak = rate * (1 + amplitude)
    out: list[np.ndarray] = []
    t0, have = 0.0, 0
    while have < n:
        k = max(int((n - have) * 1.2 * (1 + amplitude)) + 16, 64)
        cand = t0 + np.cumsum(rng.exponential(1.0 / peak, size=k))
        keep = rng.random(k) * peak <= rate * (1 + amplitude * np.sin(2 * np.pi * cand / period_s))
        out.append(cand[keep])
        have += int(keep.sum())
        t0 = float(cand[-1])
    return np.concatenate(out)[:n]


def arrival_times(rng: np.random.Generator, kind: str, *, rate: float, n: int, burstiness: float = 1.0,
                  period_s: float = 86_400.0, amplitude: float = 0.5) -> np.ndarray:  # fmt: skip
    """Arrival times of process ``kind`` (one of ``ARRIVALS``)."""
    if kind == "poisson":
        return poisson(rng, rate=rate, n=n)
    if kind == "gamma":
        return gamma(rng, rate=rate, burstiness=burstiness, n=n)
    if kind == "diurnal":
        return diurnal(rng, rate=rate, n=n, period_s=period_s, amplitude=amplitude)
    raise InputError(f"arrival={kind!r} not allowed; allowed: {', '.join(ARRIVALS)}")


TRACE_COLUMNS = ("arrival_time_s", "input_tokens", "output_tokens")


def read_trace(path: Path | str, *, flag: str = "--trace") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(arrival times s, input tokens, output tokens) of a trace CSV, sorted by arrival time (stable)."""
    p = check_input_file(flag, path)
    reader = csv.DictReader(io.StringIO(read_text(p)))
    missing = [c for c in TRACE_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError(f"{flag}={p}: missing column(s) {', '.join(missing)}; need {', '.join(TRACE_COLUMNS)}")
    t, i, o = [], [], []
    for line, row in enumerate(reader, start=2):
        try:
            a, x, y = float(row["arrival_time_s"]), int(row["input_tokens"]), int(row["output_tokens"])
        except (TypeError, ValueError):
            raise InputError(f"{flag}={p} line {line}: arrival_time_s must be a number and input_tokens, "
                             f"output_tokens integers (got {dict(row)})") from None  # fmt: skip
        if not (math.isfinite(a) and a >= 0) or x < 1 or y < 1:
            raise InputError(f"{flag}={p} line {line}: need arrival_time_s >= 0 and token counts >= 1 "
                             f"(got {dict(row)})")  # fmt: skip
        t.append(a)
        i.append(x)
        o.append(y)
    if not t:
        raise InputError(f"{flag}={p}: no requests")
    order = np.argsort(np.asarray(t), kind="stable")
    return np.asarray(t)[order], np.asarray(i, dtype=np.int64)[order], np.asarray(o, dtype=np.int64)[order]
