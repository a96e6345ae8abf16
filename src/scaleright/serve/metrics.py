"""Serving metrics from a finished simulation, as ``vllm bench serve`` reports them.

Per request: TTFT = first token − arrival; TPOT = (end-to-end − TTFT) / (output tokens − 1) over requests with more
than one output token; end-to-end = finish − arrival. ITL is over every decode token (each iteration's time is the
gap between two tokens of every sequence it advances), weighted by tokens. Percentiles interpolate linearly
(numpy's default, as vllm bench serve). Throughputs divide by the span from the first arrival to the last
completion. Utilisations are time averages over that span: GPU = share of time an iteration is running, KV = used
blocks / blocks. Goodput counts requests meeting every SLO given (DistServe, Zhong et al. 2024).
"""

from __future__ import annotations

import numpy as np

__all__ = ["QUANTILES", "summary", "weighted_summary", "meets_slos"]

QUANTILES = (50, 90, 99)


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
