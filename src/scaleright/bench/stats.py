"""Summary statistics of repeated timings: the median and the spread (p10, p90, min, max, IQR).

Percentiles use numpy's default linear interpolation (``numpy.percentile``, method="linear"). The median, not the
mean, is the headline number, after nanoGPT ``bench.py`` and the "report median and spread" habit of STYLE.md.

Agreement of repetitions: the coefficient of variation, sample standard deviation (n - 1) over the mean. Above
``SPREAD_CV_LIMIT`` (10 %) the repetitions disagree more than run-to-run noise on an idle machine explains (a loaded
or throttled machine, a background job, too few warm-up steps) and the harness warns; the median is still reported.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["SPREAD_CV_LIMIT", "coefficient_of_variation", "elementwise_max", "spread_warning", "summarize"]

SPREAD_CV_LIMIT = 0.10  # repetitions whose coefficient of variation is above this disagree (module doc)


def summarize(values: Sequence[float], prefix: str) -> dict[str, float]:
    """``{prefix}_median, _p10, _p90, _min, _max, _iqr`` of ``values`` (at least one value)."""
    assert len(values) > 0, "summarize needs at least one value"
    a = np.asarray(values, dtype=float)
    p10, p25, p50, p75, p90 = np.percentile(a, [10, 25, 50, 75, 90])
    return {
        f"{prefix}_median": float(p50),
        f"{prefix}_p10": float(p10),
        f"{prefix}_p90": float(p90),
        f"{prefix}_min": float(a.min()),
        f"{prefix}_max": float(a.max()),
        f"{prefix}_iqr": float(p75 - p25),
    }


def elementwise_max(per_rank: Sequence[Sequence[float]]) -> list[float]:
    """Per repetition, the slowest rank's time: a synchronous step is as slow as its slowest rank."""
    assert per_rank and all(len(r) == len(per_rank[0]) for r in per_rank), "ranks timed different step counts"
    return [float(x) for x in np.max(np.asarray(per_rank, dtype=float), axis=0)]


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    """Sample standard deviation (n - 1) / mean; None for fewer than two values or a mean that is not positive."""
    a = np.asarray(values, dtype=float)
    if a.size < 2 or not a.mean() > 0:
        return None
    return float(a.std(ddof=1) / a.mean())


def spread_warning(cv: float | None, repetitions: int, what: str, *, limit: float = SPREAD_CV_LIMIT) -> str | None:
    """A one-line warning when ``repetitions`` of ``what`` whose coefficient of variation is ``cv`` disagree beyond
    ``limit``, else None."""
    if cv is None or cv <= limit:
        return None
    return (f"{what}: the {repetitions} repetitions disagree (coefficient of variation {cv:.0%}, above "
            f"{limit:.0%}); the median is reported, but it is uncertain: is the machine busy or throttled?")
