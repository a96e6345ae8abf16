"""Pieces every result model shares: the number types, the base class, and the small objects several results hold.

A result is a frozen pydantic model whose JSON (``to_dict``, what ``--json`` prints) has exactly its declared keys:
an unknown key or a missing one is a validation error, never passed through. Keys whose value only some results
carry (a training option's step time, a spot option's preemptions) are optional and left out when absent, as the
JSON has always done. Open-ended mappings (a price per GPU id, an explanation's chart data) are declared as such.

Numbers: JSON has no Infinity or NaN, so a non-finite float is written as null (``Real``); a ``Real`` read back
from JSON null is NaN. ``OptReal`` is a number that may also be absent in meaning (None: not applicable).
"""

import math
from typing import TYPE_CHECKING, Any, Self

from pydantic import BaseModel, ConfigDict

from scaleright.pydantic_plugins import no_plugins

__all__ = ["Real", "OptReal", "Result", "Part", "plain", "CalibrationRecord", "CalibrationProvenance",
           "MemoryBreakdownGb", "TimeBreakdownS", "FrameworkRecord"]  # fmt: skip


def _number(v: object) -> float | int:
    if hasattr(v, "item") and callable(v.item) and getattr(v, "ndim", 1) == 0:  # numpy scalars
        v = v.item()
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"expected a number, got {type(v).__name__}")
    return v  # an int stays an int: the JSON keeps "4", not "4.0"


def _real(v: object) -> float:
    return math.nan if v is None else _number(v)


def _opt_real(v: object) -> float | None:
    return None if v is None else _number(v)


def _json_number(v: float | None) -> float | None:
    return v if v is None or math.isfinite(v) else None


_NUMBER_OR_NULL = {"anyOf": [{"type": "number"}, {"type": "null"}]}


class _Number:
    """The pydantic schema of ``Real`` / ``OptReal``: ``read`` validates, a non-finite float is null in JSON (an int
    stays an int), ``json_schema`` is the JSON Schema. The same validation, serialisation and JSON Schema as
    ``PlainValidator(read)``, ``PlainSerializer(..., when_used="json")`` and ``WithJsonSchema(json_schema)``, made as
    one core schema directly: those three are re-derived for each of the few hundred fields, about a third of what
    building the result models costs at start-up. ``Real`` and ``OptReal`` are classes rather than ``Annotated``
    aliases because pydantic checks every ``Annotated`` metadata object against a ``typing.Protocol``
    (``annotated_types.GroupedMetadata``), which Python 3.11 makes slow; a class it asks for its schema directly.
    Type checkers see ``float`` and ``float | None``."""

    read: Any
    json_schema: dict[str, Any]

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema as cs

        ser = cs.plain_serializer_function_ser_schema(_json_number, return_schema=cs.any_schema(), when_used="json")
        return cs.no_info_plain_validator_function(cls.read, serialization=ser)

    @classmethod
    def __get_pydantic_json_schema__(cls, core: Any, handler: Any) -> dict[str, Any]:
        import copy

        return copy.deepcopy(cls.json_schema)


if TYPE_CHECKING:
    Real = float
    OptReal = float | None
else:

    class Real(_Number):
        """A float; null in JSON where it is not finite (JSON has no Infinity or NaN), read back as NaN."""

        read = staticmethod(_real)
        json_schema = _NUMBER_OR_NULL | {"description": "a number; null where it is not finite"}

    class OptReal(_Number):
        """A float or None (not applicable); null in JSON for None and for a non-finite value."""

        read = staticmethod(_opt_real)
        json_schema = _NUMBER_OR_NULL | {"description": "a number; null where it does not apply or is not finite"}


_SCALARS = frozenset((str, int, float, bool, type(None)))


def plain(o: Any) -> Any:
    """``o`` with Python containers and scalars only (numpy arrays and scalars, tuples converted; non-finite
    floats kept: ``Real`` says how JSON writes them)."""
    if type(o) in _SCALARS:  # most of a result; exact types, so numpy's float64 (a float subclass) is converted
        return o
    if isinstance(o, dict):
        return {str(k): plain(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [plain(v) for v in o]
    if hasattr(o, "tolist") and callable(o.tolist):  # numpy arrays and scalars
        return plain(o.tolist())
    return o


class Part(BaseModel):
    """A nested object of a result: declared keys only, no coercion (an int is not a bool, a float not an int)."""

    # validators and serializers built on first use: a command builds only the result it prints (and its parts)
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)


class Result(Part):
    """A top-level result. ``to_dict()`` is the JSON the CLI prints with ``--json`` (``scaleright schema NAME``
    prints ``json_schema()``)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON object (plain dicts, lists, numbers, strings; non-finite numbers as None), keys as declared and
        optional ones only where present."""
        return self.model_dump(mode="json", exclude_unset=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Self:
        """Validate ``d`` (a result's dict, numpy values allowed): every declared key, nothing else."""
        cls._build()
        return cls.model_validate(plain(d))

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        with no_plugins():  # builds the model, and pydantic encodes defaults with TypeAdapters it builds
            return cls.model_json_schema(mode="serialization")

    @classmethod
    def _build(cls) -> None:
        """Build the validator and serializer (deferred to first use) without pydantic plugins
        (``scaleright.pydantic_plugins``)."""
        if not cls.__pydantic_complete__:
            with no_plugins():
                cls.model_rebuild()


class CalibrationProvenance(Part):
    """What a fitted calibration profile was fitted to (``estimate.calibration.Profile.record``)."""

    created_utc: str
    gpu: str
    fingerprint: str
    runs: int
    runs_sha256: str
    cross_validated_median_abs_pct: OptReal
    params_on_bound: list[str]


class CalibrationRecord(Part):
    """The calibration that produced every number of an estimate or plan."""

    name: str
    sha256: str
    source: str
    provenance: CalibrationProvenance | None


class MemoryBreakdownGb(Part):
    """Memory per GPU in GB (1e9 bytes) by component. ``gathered`` (ZeRO-3 transients) is training's,
    ``kv_cache`` inference's; a plan's options carry only their task's."""

    weights: Real
    gradients: Real
    optimizer: Real
    gathered: OptReal = None  # training only (ZeRO-3 / FSDP transients)
    activations: Real
    kv_cache: OptReal = None  # absent from a training plan's options
    overhead: Real


class TimeBreakdownS(Part):
    """Seconds per training step by part (``estimate.train.TIME_KEYS``)."""

    compute: Real
    recompute: Real
    tp_comm: Real
    cp_comm: Real
    ep_comm: Real
    pp_comm: Real
    bubble: Real
    dp_comm: Real
    optimizer: Real
    offload: Real  # PCIe traffic and the CPU optimizer step of offload that compute does not hide
    overhead: Real


class FrameworkRecord(Part):
    """The training-framework behaviour a step time assumes (``estimate.framework.Framework``)."""

    name: str
    tp_comm_overlap: bool
    tp_bwd_overlap: bool
    attention: str
    flash_version: int
    cp_variant: str
    pipeline_schedule: str
    fsdp_prefetch: bool
    dp_bucket_overlap: bool
    pp_p2p_overlap: bool
    grad_reduce_fp32: bool
    fp8_all_gather: bool
    description: str
