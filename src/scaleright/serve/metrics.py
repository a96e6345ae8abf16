"""Serving metrics from a finished simulation, as ``vllm bench serve`` reports them.

Per request: TTFT = first token − arrival; TPOT = (end-to-end − TTFT) / (output tokens − 1) over requests with more
than one output token; end-to-end = finish − arrival. ITL is over every decode token (each iteration's time is the
gap between two tokens of every sequence it advances), weighted by tokens. Percentiles interpolate linearly
(numpy's default, as vllm bench serve). Throughputs divide by the span from the first arrival to the last
completion. Utilisations are time averages over that span: GPU = share of time an iteration is running, KV = used
blocks / blocks. Goodput counts requests meeting every SLO given (DistServe, Zhong et al. 2024).

Over time (``Timeline``): the fleet's integrals (busy, used KV blocks, waiting and in-system requests) are read at
between ``points`` and ``2 · points`` evenly spaced instants — an event every ``dt``; when the buffer fills, every
other sample is dropped and ``dt`` doubles — so a run of any length costs a few hundred events, and the averages
over each interval between two samples are exact differences of the integrals the totals above come from.
``quantile_curve`` gives the latency distribution at fixed probabilities (a CDF at a bounded number of points).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from scaleright.serve.kernel import Environment

__all__ = ["CDF_PROBABILITIES", "QUANTILES", "TIMELINE_POINTS", "Timeline", "meets_slos", "quantile_curve", "summary",
           "weighted_summary"]

QUANTILES = (50, 90, 99)
TIMELINE_POINTS = 120  # a timeline keeps between this many and twice this many samples
SAMPLE_PRIORITY = 3  # after every entity's event of the same instant (``kernel.Priority``)
# a latency CDF: 0 to 100 % in 1 % steps, with the tail resolved to 99.9 %
CDF_PROBABILITIES = (*(i / 100 for i in range(100)), 0.995, 0.999, 1.0)


def summary(values_s) -> dict[str, float]:
    """{mean, p50, p90, p99} of ``values_s`` in milliseconds (NaN when empty)."""
    v = np.asarray(values_s, dtype=float) * 1e3
    if not v.size:
        return {"mean": float("nan"), **{f"p{q}": float("nan") for q in QUANTILES}}
    ps = np.percentile(v, QUANTILES)
    return {"mean": float(v.mean()), **{f"p{q}": float(p) for q, p in zip(QUANTILES, ps, strict=True)}}


def weighted_summary(values_s, weights) -> dict[str, float]:
    """{mean, p50, p90, p99} in ms of values repeated ``weights`` times (the smallest value whose cumulative weight
    reaches the quantile)."""
    v = np.asarray(values_s, dtype=float) * 1e3
    w = np.asarray(weights, dtype=float)
    if not v.size or w.sum() <= 0:
        return summary([])
    order = np.argsort(v, kind="stable")
    v, w = v[order], w[order]
    cum = np.cumsum(w)
    out = {"mean": float((v * w).sum() / cum[-1])}
    for q in QUANTILES:
        out[f"p{q}"] = float(v[min(np.searchsorted(cum, q / 100 * cum[-1]), v.size - 1)])
    return out


def meets_slos(ttft_s, e2e_s, output_tokens, *, slo_ttft_ms: float | None, slo_tpot_ms: float | None,
               multi=None) -> np.ndarray:  # fmt: skip
    """Per request: True when it meets every SLO given (TTFT; TPOT over its output tokens after the first — a
    request of one token has no TPOT and meets that SLO). ``multi`` marks the requests whose TPOT counts (default:
    more than one output token). Goodput = ``meets_slos(...).sum()`` over the span (DistServe's definition)."""
    ttft, e2e, out = (np.asarray(x, dtype=float) for x in (ttft_s, e2e_s, output_tokens))
    multi = out > 1 if multi is None else np.asarray(multi, dtype=bool)
    good = np.ones(ttft.shape, dtype=bool)
    if slo_ttft_ms is not None:
        good &= ttft * 1e3 <= slo_ttft_ms
    if slo_tpot_ms is not None:
        tpot = np.where(multi, (e2e - ttft) / np.maximum(out - 1, 1), 0.0)
        good &= tpot * 1e3 <= slo_tpot_ms
    return good


def quantile_curve(values_s, probabilities: Sequence[float] = CDF_PROBABILITIES) -> list[float]:
    """Latencies in ms at the given cumulative probabilities (linear interpolation, as ``summary``); [] when empty."""
    v = np.asarray(values_s, dtype=float) * 1e3
    return [float(x) for x in np.quantile(v, probabilities)] if v.size else []


class Timeline:
    """Fleet-wide integrals sampled at a bounded number of instants (module docstring). ``replicas()`` lists the
    replicas serving now (``Replica.integrals``); ``finished()`` is True once nothing is left to serve (sampling
    stops there). Samples of a replica that leaves (an autoscaled fleet) are not supported: the fleet here is
    fixed."""

    def __init__(self, env: Environment, replicas: Callable[[], Sequence], finished: Callable[[], bool], *,
                 points: int = TIMELINE_POINTS, dt_s: float = 1e-3):  # fmt: skip
        self.replicas, self.finished, self.points = replicas, finished, points
        self.dt_s = dt_s
        self.samples = 0  # events this timeline added to the environment
        cap = 2 * points + 1
        self._a = np.zeros((6, cap))  # time, busy, kv block-s, queue, system, replicas
        self._n = 0
        env.schedule(env.now, SAMPLE_PRIORITY, self._sample)

    def _sample(self, env: Environment) -> None:
        self.samples += 1
        reps = self.replicas()
        now = env.now
        tot = [0.0, 0.0, 0.0, 0.0]
        for r in reps:
            for k, v in enumerate(r.integrals(now)):
                tot[k] += v
        if self._n == self._a.shape[1]:  # full: keep every other sample, sample half as often
            keep = self._a[:, ::2]
            self._n = keep.shape[1]
            self._a[:, : self._n] = keep
            self.dt_s *= 2
        self._a[:, self._n] = (now, *tot, len(reps))
        self._n += 1
        if not self.finished():
            env.schedule(now + self.dt_s, SAMPLE_PRIORITY, self._sample)

    def series(self, kv_blocks_per_replica: int) -> dict[str, np.ndarray]:
        """Per interval between two samples: its start and end (s), the mean GPU busy share of the replicas, KV
        blocks used / blocks, requests waiting and in system (fleet totals) and the replica count."""
        a = self._a[:, : self._n]
        if self._n < 2:
            return {k: np.zeros(0) for k in ("start_s", "end_s", "gpu_busy", "kv_used", "queue", "in_system",
                                              "replicas")}  # fmt: skip
        dt = np.diff(a[0])
        reps = np.maximum(a[5, 1:], 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            rate = np.diff(a[1:5], axis=1) / np.where(dt > 0, dt, np.nan)
        return {"start_s": a[0, :-1].copy(), "end_s": a[0, 1:].copy(), "gpu_busy": rate[0] / reps,
                "kv_used": rate[1] / (reps * kv_blocks_per_replica), "queue": rate[2], "in_system": rate[3],
                "replicas": a[5, 1:].copy()}  # fmt: skip
