"""Upper bounds on every count and size a user can give, each with the reason it is there.

A bound keeps numbers finite (numpy int64 and float64 overflow silently) and catches typos (a micro-batch of
2**63 is not a plan). Each bound is generous: well above anything built or published, so a real input never
meets it. ``check_limit`` raises one line naming the user's field, the bound and why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scaleright.errors import InputError

__all__ = ["Limit", "LIMITS", "check_limit"]


@dataclass(frozen=True)
class Limit:
    high: float  # largest allowed value (inclusive)
    why: str  # the reason, printed with the error


LIMITS: dict[str, Limit] = {
    "gpus": Limit(1_048_576, "2**20; the largest clusters built have ~10**5 GPUs"),
    "gpus_per_node": Limit(1_024, "the largest scale-up domain sold (NVL576) has 576 GPUs"),
    "parallel_degree": Limit(1_048_576, "a parallel degree cannot exceed the 2**20 GPU bound"),
    "global_batch": Limit(16_777_216, "2**24 sequences per step; published runs use at most ~10**4"),
    "micro_batch": Limit(65_536, "2**16 sequences per GPU per micro-step"),
    "seq_len": Limit(16_777_216, "2**24 tokens; the longest published context windows are ~10**7"),
    "tokens": Limit(1e17, "10**17 tokens; the largest published training runs use ~10**13"),
    "epochs": Limit(1e6, "10**6 passes over a dataset"),
    "lora_rank": Limit(65_536, "2**16; adapters use ranks up to ~10**3"),
    "requests_per_s": Limit(1e7, "10**7 requests/s; the busiest public APIs serve ~10**5"),
    "requests_per_day": Limit(1e12, "10**12 requests/day"),
    "tokens_per_request": Limit(16_777_216, "2**24 tokens, the seq_len bound"),
    "batch": Limit(1_048_576, "2**20 concurrent sequences"),
    "hours": Limit(1e7, "10**7 hours (over a thousand years)"),
    "usd": Limit(1e15, "10**15 US dollars (above world GDP)"),
    "usd_per_hour": Limit(1e6, "10**6 US dollars per hour per GPU"),
    "months": Limit(1_200, "100 years"),
    "years": Limit(100, "100 years"),
    "nproc": Limit(1_024, "processes per node; a node has at most a few hundred cores or GPUs"),
    "nnodes": Limit(65_536, "2**16 nodes"),
    "steps": Limit(1_000_000, "10**6 benchmark steps or repetitions"),
    "timeout_s": Limit(604_800, "one week"),
    "bytes": Limit(1e15, "a petabyte"),
    "link_gbps": Limit(1e5, "10**5 Gb/s per GPU; the fastest NICs sold carry 800 Gb/s"),
}


def check_limit(field: str, value: float, kind: str, *, low: float | None = None) -> float:
    """``value`` when it is finite, at least ``low`` (if given) and at most ``LIMITS[kind].high``; otherwise
    ``InputError`` naming ``field``. Booleans are not numbers."""
    lim = LIMITS[kind]
    if isinstance(value, bool):
        raise InputError(f"{field}={value!r}: must be a number, not a boolean")
    try:
        v = float(value)
    except OverflowError:
        v = math.inf if value > 0 else -math.inf
    except (TypeError, ValueError):
        raise InputError(f"{field}: must be a number (got {_show(value)})") from None
    if math.isnan(v) or (math.isinf(v) and isinstance(value, float)):
        raise InputError(f"{field}: must be finite (got {value!r})")
    if low is not None and v < low:
        raise InputError(f"{field} must be >= {_num(low)} (got {_show(value)})")
    if v > lim.high:
        raise InputError(f"{field} must be <= {_num(lim.high)} ({lim.why}); got {_show(value)}")
    return value


def _num(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


def _show(value: object) -> str:
    """``value`` for a message: huge integers as their digit count, not 4,300 digits (or a ValueError)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    s = repr(value)
    return s if len(s) <= 40 else s[:37] + "..."
