"""Cost per million tokens, for training and for serving, and the break-even against a pay-per-token API.

Source: the seed article *Multi-GPU vs Single-GPU Scaling Economics: The 2026 Guide*, section "Cost Economics -
Capex vs Opex & Unit Economics", whose Unit-Economics Calculator outputs "cost per hour and cost per million
tokens" and compares them with API prices "to determine break-even" (its "a 7B model must achieve ~50%
utilisation to beat an API's cost" is that comparison; the article gives no inputs for it, so it is a concept
here, not a test).

Serving: a deployment that costs ``usd_per_hour`` (all its GPUs, rented, or owned via
``owned_cost_per_gpu_hour_usd x gpus``) and sustains ``tokens_per_s`` when busy produces
``tokens_per_s x 3600 x utilisation`` tokens per hour it is paid for, so

    $/1M tokens = usd_per_hour x 1e6 / (tokens_per_s x 3600 x utilisation).

Self-hosting matches an API priced at that figure; the utilisation that reaches parity with an API price is the
same equation solved for ``utilisation``.

An API bills input (prompt) and output (completion) tokens at separate prices; for a request mix of ``input_len``
prompt and ``output_len`` completion tokens it costs, per 1M output tokens served,

    api_usd_per_1m_output_tokens_blended = out_price + in_price x input_len / output_len

which is what a self-hosted deployment (costed per output token: it serves the prompts too) must be compared with.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scaleright.plan.economics._units import SECONDS_PER_HOUR, TOKENS_PER_MILLION
from scaleright.plan.economics._validate import checked, out

_ROUNDING = 1e-12

__all__ = [
    "training_cost_usd_per_1m_tokens",
    "inference_cost_usd_per_1m_tokens",
    "api_break_even_usd_per_1m_tokens",
    "utilisation_needed_for_api_parity",
    "api_usd_per_1m_output_tokens_blended",
]


def training_cost_usd_per_1m_tokens(*, tokens: ArrayLike, cost_usd: ArrayLike) -> float | NDArray[np.float64]:
    """Training cost per million tokens trained on: ``cost_usd / tokens x 1e6``.

    ``cost_usd`` is the whole job (e.g. ``cost_per_job_usd``); ``tokens`` counts every token processed, epochs
    included.
    """
    n = checked("tokens", tokens, gt=0)
    c = checked("cost_usd", cost_usd, ge=0)
    return out(c / n * TOKENS_PER_MILLION)


def inference_cost_usd_per_1m_tokens(
    *, tokens_per_s: ArrayLike, usd_per_hour: ArrayLike, utilisation: ArrayLike
) -> float | NDArray[np.float64]:
    """Serving cost per million generated tokens: ``usd_per_hour x 1e6 / (tokens_per_s x 3600 x utilisation)``.

    ``tokens_per_s`` and ``usd_per_hour`` are for the whole deployment (all replicas, all GPUs);
    ``utilisation`` is the fraction of paid hours spent serving at that throughput. Zero utilisation costs
    ``inf`` per token (unless the deployment is free).
    """
    tps = checked("tokens_per_s", tokens_per_s, gt=0)
    usd = checked("usd_per_hour", usd_per_hour, ge=0)
    u = checked("utilisation", utilisation, ge=0, le=1)
    tokens_per_hour = tps * SECONDS_PER_HOUR * u
    cost = np.divide(
        usd * TOKENS_PER_MILLION,
        tokens_per_hour,
        out=np.full(np.broadcast(usd, tokens_per_hour).shape, np.inf),
        where=tokens_per_hour > 0,
    )
    return out(np.where(usd == 0, 0.0, cost))


def api_break_even_usd_per_1m_tokens(
    *, tokens_per_s: ArrayLike, usd_per_hour: ArrayLike, utilisation: ArrayLike
) -> float | NDArray[np.float64]:
    """The API price per million tokens at which self-hosting costs the same.

    Equal to the self-hosted ``inference_cost_usd_per_1m_tokens``: an API priced above it is dearer than
    self-hosting at this throughput, cost and utilisation; below it, the API wins.
    """
    return inference_cost_usd_per_1m_tokens(
        tokens_per_s=tokens_per_s, usd_per_hour=usd_per_hour, utilisation=utilisation
    )


def utilisation_needed_for_api_parity(
    *, tokens_per_s: ArrayLike, usd_per_hour: ArrayLike, api_usd_per_1m_tokens: ArrayLike
) -> float | NDArray[np.float64]:
    """Utilisation at which self-hosting costs the API's price: ``usd_per_hour x 1e6 / (tokens_per_s x 3600 x api)``.

    Returns ``inf`` where that exceeds 1: even fully busy, self-hosting cannot beat the API ("never").
    """
    tps = checked("tokens_per_s", tokens_per_s, gt=0)
    usd = checked("usd_per_hour", usd_per_hour, ge=0)
    api = checked("api_usd_per_1m_tokens", api_usd_per_1m_tokens, gt=0)
    u = usd * TOKENS_PER_MILLION / (tps * SECONDS_PER_HOUR * api)
    # a rounding hair above 1 (the API priced exactly at full-utilisation cost) is still parity at 1
    return out(np.where(u > 1.0 + _ROUNDING, np.inf, np.minimum(u, 1.0)))


def api_usd_per_1m_output_tokens_blended(
    *, api_usd_per_1m_input_tokens: ArrayLike, api_usd_per_1m_output_tokens: ArrayLike, input_len: ArrayLike,
    output_len: ArrayLike,
) -> float | NDArray[np.float64]:  # fmt: skip
    """What an API charges per 1M output tokens once the prompts are paid for (module docstring):
    ``out_price + in_price x input_len / output_len``."""
    p_in = checked("api_usd_per_1m_input_tokens", api_usd_per_1m_input_tokens, ge=0)
    p_out = checked("api_usd_per_1m_output_tokens", api_usd_per_1m_output_tokens, ge=0)
    n_in = checked("input_len", input_len, ge=0)
    n_out = checked("output_len", output_len, gt=0)
    return out(p_out + p_in * n_in / n_out)
