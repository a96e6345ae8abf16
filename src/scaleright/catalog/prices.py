"""Dated GPU prices (rent per GPU-hour, purchase per GPU) with their sources, and the rule that picks one.

Rows come from ``validation/reference/gpu_prices.csv`` (seed articles, provider pages, SkyPilot catalogs, AWS
Capacity Blocks, ...), mapped to canonical GPU ids; per-instance and per-server prices are divided by the GPU count
given in the source ("derived: /8" in ``notes``). Items outside the accelerator catalog keep an ``other:<name>`` id,
and units that are not per GPU (``usd_per_system``, ``usd_per_kwh``, ...) are kept as they are; ``find_price``
ignores both. Prices age fast: every row keeps its date and source, and users override them (see ``store``).
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from scaleright.errors import InputError
from scaleright.limits import LIMITS, _num, _show, bounds

if TYPE_CHECKING:
    from scaleright.catalog.store import Catalog

__all__ = ["PriceRow", "KINDS", "PRICE_COLUMNS", "USABLE_UNIT", "find_price", "list_prices"]

KINDS = ("on-demand", "spot", "marketplace", "reserved", "purchase")
PRICE_COLUMNS = ("gpu_id", "kind", "usd", "usd_low", "usd_high", "unit", "provider", "sku", "date", "source", "notes")
USABLE_UNIT = {k: "usd_per_gpu_hour" for k in KINDS} | {"purchase": "usd_per_gpu"}  # the unit find_price uses
FIRST_YEAR = 1999  # the first product sold as a GPU (GeForce 256) shipped in 1999: an earlier price is a typo

_Usd = Annotated[float, *bounds("usd")]  # any unit; per-hour units are bounded tighter in ``_bounds``


class PriceRow(BaseModel):
    """One dated price. ``usd`` or both of ``usd_low``/``usd_high`` make it usable; unknown keys are an error."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)  # .inf / nan are errors

    gpu_id: str = Field(pattern=r"^(other:)?[a-z0-9][a-z0-9.\-]*$")  # catalog GPU id, or other:<name>
    kind: Literal["on-demand", "spot", "marketplace", "reserved", "purchase"]
    usd: _Usd | None = Field(default=None, ge=0)  # the price, in ``unit``
    usd_low: _Usd | None = Field(default=None, ge=0)  # low end of a quoted range (or the cheapest listing)
    usd_high: _Usd | None = Field(default=None, ge=0)  # high end of a quoted range ("up to")
    unit: str = Field(pattern=r"^usd_[a-z_]+$")  # usd_per_gpu_hour, usd_per_gpu, or a kept unit (usd_per_kwh, ...)
    provider: str = ""
    sku: str = ""
    date: str | None = Field(default=None, pattern=r"^\d{4}(-\d{2}(-\d{2})?)?$")  # YYYY[-MM[-DD]]; None: unknown
    source: str
    notes: str = ""
    price_basis: Literal["usd", "midpoint of low/high"] | None = None  # set by find_price on the row it returns

    @field_validator("date")
    @classmethod
    def _real_date(cls, v: str | None, info: ValidationInfo) -> str | None:
        """A calendar date (2026-02-30 and 9999-99-99 are not), from 1999 on, and, when the validation context
        gives ``today`` (a user's file), not after it: a wrong date would win as "the newest price" in
        ``find_price``."""
        if v is None:
            return v
        parts = [int(p) for p in v.split("-")]
        year, month, day = [*parts, 1, 1][:3]
        try:
            datetime.date(year, month, day)
        except ValueError as exc:
            raise ValueError(f"{v!r} is not a calendar date ({exc}); give YYYY, YYYY-MM or YYYY-MM-DD") from None
        if year < FIRST_YEAR:
            raise ValueError(f"{v!r} is before {FIRST_YEAR}, when the first GPU shipped")
        today = (info.context or {}).get("today")
        if today is not None:
            latest = today + datetime.timedelta(days=1)  # a price written today east of UTC is dated tomorrow in UTC
            if tuple(parts) > (latest.year, latest.month, latest.day)[: len(parts)]:
                raise ValueError(f"{v!r} is in the future (today is {today}); a price is dated when it was read")
        return v

    @model_validator(mode="after")
    def _bounds(self) -> PriceRow:
        if "hour" in self.unit:
            lim = LIMITS["usd_per_hour"]
            for name in ("usd", "usd_low", "usd_high"):
                v = getattr(self, name)
                if v is not None and v > lim.high:
                    raise ValueError(f"{name} must be <= {_num(lim.high)} for unit {self.unit} ({lim.why}); "
                                     f"got {_show(v)}")  # fmt: skip
        return self

    @model_validator(mode="after")
    def _some_price(self) -> PriceRow:
        if self.usd is None and self.usd_low is None and self.usd_high is None:
            raise ValueError("one of usd, usd_low, usd_high is required")
        if self.usd_low is not None and self.usd_high is not None and self.usd_low > self.usd_high:
            raise ValueError(f"usd_low={self.usd_low} > usd_high={self.usd_high}")
        return self

    @property
    def date_key(self) -> tuple[int, int, int]:
        """Sort key: unknown dates first, a bare year before any month of that year."""
        parts = [int(p) for p in (self.date or "0").split("-")]
        year, month, day = [*parts, 0, 0][:3]
        return (year, month, day)

    @property
    def price(self) -> float | None:
        """``usd``, else the midpoint of ``usd_low``/``usd_high``, else None (a one-sided bound is not a price)."""
        if self.usd is not None:
            return self.usd
        if self.usd_low is not None and self.usd_high is not None:
            return (self.usd_low + self.usd_high) / 2
        return None


def _catalog(catalog: Catalog | None) -> Catalog:
    from scaleright.catalog.store import Catalog

    return catalog if catalog is not None else Catalog.load()


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise InputError(f"price kind '{kind}' is not one of {', '.join(KINDS)}")


def list_prices(gpu: str | None = None, kind: str | None = None, *, catalog: Catalog | None = None) -> list[PriceRow]:
    """Every price row (file order), optionally for one GPU (any alias) and one kind."""
    cat = _catalog(catalog)
    gpu_id = cat.gpu(gpu).id if gpu is not None else None
    if kind is not None:
        _check_kind(kind)
    return [r for r in cat.prices if (gpu_id is None or r.gpu_id == gpu_id) and (kind is None or r.kind == kind)]


def find_price(gpu: str, kind: str, *, catalog: Catalog | None = None) -> PriceRow:
    """The price to use for ``gpu`` (any alias) and ``kind`` (on-demand, spot, marketplace, reserved, purchase).

    Rule: keep rows of that GPU and kind in the usable unit (``usd_per_gpu_hour`` for rent, ``usd_per_gpu`` for
    purchase) that carry a price (``usd``, or both ends of a range); take those with the most recent ``date``
    (unknown dates are oldest; a bare year counts as older than any month of that year); among them return the
    median by price, the lower of the two middle rows when their number is even (so the result is a quoted price).
    The returned row has ``usd`` set to that price and ``price_basis`` saying whether it is the quoted ``usd`` or
    the midpoint of ``usd_low``/``usd_high``. Raises ``UnknownNameError`` for an unknown GPU and ``InputError``
    (naming the GPU, the kind and the kinds that do have a price) when no row fits.
    """
    cat = _catalog(catalog)
    _check_kind(kind)
    gpu_id = cat.gpu(gpu).id
    usable = [r for r in cat.prices if r.gpu_id == gpu_id and r.unit == USABLE_UNIT[r.kind] and r.price is not None]
    rows = [r for r in usable if r.kind == kind]
    if not rows:
        have = sorted({r.kind for r in usable}, key=KINDS.index)
        raise InputError(
            f"no {kind} price for GPU '{gpu_id}'; kinds with a price: {', '.join(have) if have else 'none'}"
        )
    newest = max(r.date_key for r in rows)
    recent = sorted((r for r in rows if r.date_key == newest), key=lambda r: (r.price, r.provider, r.sku))
    pick = recent[(len(recent) - 1) // 2]  # lower median
    basis = "usd" if pick.usd is not None else "midpoint of low/high"
    return pick.model_copy(update={"usd": pick.price, "price_basis": basis})
