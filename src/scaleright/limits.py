"""Upper bounds on every count and size a user can give, each with the reason it is there.

A bound keeps numbers finite (numpy int64 and float64 overflow silently) and catches typos (a micro-batch of
2**63 is not a plan). Each bound is generous: well above anything built or published, so a real input never
meets it. ``check_limit`` raises one line naming the user's field, the bound and why.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scaleright.errors import InputError

__all__ = ["Limit", "LIMITS", "check_limit", "bounds", "text_bounds"]


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
    "chips_per_domain": Limit(65_536, "2**16 accelerators sharing one intra-node link; a TPU v5p pod has 8,960"),
    "fraction": Limit(1, "a fraction of the whole"),
    "latency_s": Limit(86_400, "one day; latency targets are seconds or less"),
    "usd_per_kwh": Limit(1_000, "10**3 US dollars per kWh; retail electricity costs ~0.1"),
    "kg_co2e_per_kwh": Limit(10, "coal-fired power emits ~1 kg CO2e per kWh"),
    "pue": Limit(10, "the least efficient data centres report a PUE of ~3"),
    "name_chars": Limit(200, "characters in a name"),
    "path_chars": Limit(4_096, "characters in a path (PATH_MAX on Linux)"),
    "list_items": Limit(10_000, "entries in one list of names"),
    "layers": Limit(1_048_576, "2**20 blocks; the deepest published models have ~10**2"),
    "vocab": Limit(67_108_864, "2**26 tokens; the largest published vocabularies have ~2.6 * 10**5"),
    "experts": Limit(65_536, "2**16 experts per layer; published MoE models have at most ~10**3"),
    "positions": Limit(1_000_000_000, "10**9 positions; max_position_embeddings is informational"),
    "memory_gb": Limit(1e6, "10**6 GB (a petabyte) on one device"),
    "tb_per_s": Limit(1e4, "10**4 TB/s; the fastest HBM delivers ~10"),
    "tflops": Limit(1e7, "10**7 TFLOP/s on one device; the fastest deliver ~10**4"),
    "watts": Limit(1e6, "a megawatt on one device"),
    "gb_per_s": Limit(1e6, "10**6 GB/s per device link; NVLink 5 delivers ~900"),
    "gbps": Limit(1e7, "10**7 Gb/s per device; NICs deliver ~800"),
    "billions": Limit(1e9, "10**18 parameters; the largest published models have ~10**12"),
    "link_gbps": Limit(1e5, "10**5 Gb/s per GPU; the fastest NICs sold carry 800 Gb/s"),
    "hidden": Limit(1_048_576, "2**20; the widest published models are ~3 x 10**4 wide"),
    "heads": Limit(65_536, "2**16 attention heads"),
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


class _Validators:
    """Pydantic metadata: ``before`` (if given) runs before the type's own validation and ``after`` after it. The
    same core schema as ``BeforeValidator(before), AfterValidator(after)`` (so the same errors), made directly as
    one object: pydantic's two classes are two metadata objects per field, each inspecting its function's
    signature, for the few hundred bounded fields of the scenario and catalog models built at start-up."""

    __slots__ = ("after", "before")

    def __init__(self, before: Callable[[Any], Any] | None, after: Callable[[Any], Any]) -> None:
        self.before, self.after = before, after

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema as cs

        schema = handler(source)
        if self.before is not None:
            schema = cs.no_info_before_validator_function(self.before, schema)
        return cs.no_info_after_validator_function(self.after, schema)


def bounds(kind: str) -> tuple[object, ...]:
    """The pydantic metadata bounding an int or float by ``LIMITS[kind]``, for ``Annotated[int, *bounds(kind)]``:
    booleans are refused (YAML ``yes`` is not 1), and a value above the bound fails with the bound and its reason,
    before pydantic's own parsing can turn it into an overflow or a misleading message. Combine with
    ``Field(ge=..., gt=...)`` for the lower bound. Meant for non-negative quantities (counts, sizes, rates, prices):
    an integer below -2**64 is refused as negative."""
    from pydantic_core import PydanticCustomError

    lim = LIMITS[kind]

    def too_big(value: object) -> PydanticCustomError:
        return PydanticCustomError(
            "limit", "must be <= {high} ({why}); got {got}",
            {"high": _num(lim.high), "why": lim.why, "got": _show(value)},
        )

    def before(value: object) -> object:
        if isinstance(value, bool):
            raise PydanticCustomError("bool_not_number", "must be a number, not a boolean (got {got})",
                                      {"got": str(value).lower()})  # fmt: skip
        if isinstance(value, (int, float)):
            if isinstance(value, float) and not math.isfinite(value):
                return value  # inf / NaN: pydantic's allow_inf_nan=False refuses them ("a finite number")
            if value > lim.high:
                raise too_big(value)
            if isinstance(value, int) and value.bit_length() > 64:
                raise PydanticCustomError("limit", "must not be negative; got {got}", {"got": _show(value)})
        return value

    def after(value: object) -> object:
        if isinstance(value, (int, float)) and value > lim.high:
            raise too_big(value)
        return value

    return (_Validators(before, after),)


def text_bounds(kind: str) -> tuple[object, ...]:
    """The pydantic metadata for ``Annotated[str, *text_bounds(kind)]``: at most ``LIMITS[kind]`` characters and no
    control characters (a newline or an escape sequence in a name would break one-line messages and terminals).
    Stored as written; printers escape."""
    from pydantic_core import PydanticCustomError

    lim = LIMITS[kind]

    def check(value: str) -> str:
        if len(value) > lim.high:
            raise PydanticCustomError("limit", "must be at most {high} characters ({why}); got {got}",
                                      {"high": _num(lim.high), "why": lim.why, "got": f"{len(value):,}"})  # fmt: skip
        bad = next((c for c in value if ord(c) < 32 or ord(c) == 127), None)
        if bad is not None:
            raise PydanticCustomError("control_character", "must not contain control characters (got {got})",
                                      {"got": repr(bad)})  # fmt: skip
        return value

    return (_Validators(None, check),)
