"""Dated GPU prices (rent per GPU-hour, purchase per GPU) with their sources, and the rule that picks one.

Rows come from ``validation/reference/gpu_prices.csv`` (seed articles, provider pages, SkyPilot catalogs, AWS
Capacity Blocks, ...), mapped to canonical GPU ids; per-instance and per-server prices are divided by the GPU count
given in the source ("derived: /8" in ``notes``). Items outside the accelerator catalog keep an ``other:<name>`` id,
and units that are not per GPU (``usd_per_system``, ``usd_per_kwh``, ...) are kept as they are; ``find_price``
ignores both. Prices age fast: every row keeps its date and source, and users override them (see ``store``).

Offer selection (``find_price``) is the buyer's rule: the cheapest valid offer across providers, preferring offers
no older than ``max_age_days`` (``MAX_PRICE_AGE_DAYS``); when every offer is older the cheapest is still returned,
marked ``stale``. An offer is invalid when ``price_data_errors`` flags it: a spot (preemptible) price above the same
provider's cheapest on-demand price for that GPU is a data error (it is usually a whole-VM or list price filed under
the wrong kind), reported and never chosen.

Kind ``serverless`` is a per-second-billed endpoint or container (Modal's rows, "Modal (serverless; CPU/RAM
extra)": the price is the GPU's alone, the container's CPU and RAM are billed on top). It is never a pricing mode's
offer (``RENT_KINDS``): ``plan.serving`` weighs it against a batch job and an always-on service only. Training under
mode ``cheapest`` does not take it either, because (1) its price leaves out the CPU and RAM a VM price includes (the
catalog has no price for them), so it would be compared low against every VM offer, and (2) the rows' source states
no GPUs-per-container limit, interconnect or multi-node support, which a training layout of the catalog's systems
assumes. For the data-error check a serverless row is neither the on-demand reference nor checked against it:
a serverless GPU-hour above a VM's is how serverless is priced (it bills no idle time).
"""

from __future__ import annotations

import datetime
import re
from typing import TYPE_CHECKING, Annotated, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from scaleright.errors import InputError
from scaleright.limits import LIMITS, _num, _show, bounds

if TYPE_CHECKING:
    from scaleright.catalog.store import Catalog

__all__ = ["PriceRow", "KINDS", "RENT_KINDS", "PRICE_COLUMNS", "USABLE_UNIT", "MAX_PRICE_AGE_DAYS", "find_price",
           "list_prices", "price_data_errors", "provider_key"]

# "reserved" is a reservation whose term the source does not state (AWS Capacity Blocks, a provider's "reserved"
# tier); reserved-1y / reserved-3y are 1- and 3-year terms; committed is a committed-use contract (GCP CUDs, ...)
# serverless: billed per second while a worker runs (module docstring)
KINDS = ("on-demand", "spot", "marketplace", "reserved", "reserved-1y", "reserved-3y", "committed", "serverless",
         "purchase")
# the kinds a pricing mode rents at (mode cheapest weighs each); serverless is weighed by plan.serving only
RENT_KINDS = tuple(k for k in KINDS if k not in ("serverless", "purchase"))
# Offers older than this are flagged stale. 180 days: the catalog's own rows show H100 rents moving by ~45 % within
# a year (the June 2025 AWS P5 cut noted against disintermediate.global's pre-cut $12.29/h; the seed article
# *Multi-GPU vs Single-GPU Scaling Economics: The 2026 Guide* reports H100 rent "dropped from $8/h" to $2.85-3.50),
# so a half-year-old price can be off by a quarter or more. Override per scenario (pricing.max_price_age_days).
MAX_PRICE_AGE_DAYS = 180
# compiled on first use (``re``'s cache): a plan over the built-in catalog alone reads no row's region
_REGION = (
    r"\b(?:(?:us|eu|ap|sa|ca|me|af|il|mx)-[a-z]+-\d|[a-z]+-[a-z]+\d(?=\b)|(?:east|west|north|south|central)us\d?"
    r"|(?:East|West|North|South|Central) US(?: \d)?|Iowa)\b"
)
PRICE_COLUMNS = ("gpu_id", "kind", "usd", "usd_low", "usd_high", "unit", "provider", "sku", "date", "source", "notes")
USABLE_UNIT = {k: "usd_per_gpu_hour" for k in KINDS} | {"purchase": "usd_per_gpu"}  # the unit find_price uses
FIRST_YEAR = 1999  # the first product sold as a GPU (GeForce 256) shipped in 1999: an earlier price is a typo

_Usd = Annotated[float, *bounds("usd")]  # any unit; per-hour units are bounded tighter in ``_bounds``


class PriceRow(BaseModel):
    """One dated price. ``usd`` or both of ``usd_low``/``usd_high`` make it usable; unknown keys are an error."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, defer_build=True)  # .inf, nan: errors

    gpu_id: str = Field(pattern=r"^(other:)?[a-z0-9][a-z0-9.\-]*$")  # catalog GPU id, or other:<name>
    kind: Literal["on-demand", "spot", "marketplace", "reserved", "reserved-1y", "reserved-3y", "committed",
                  "serverless", "purchase"]
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
    age_days: int | None = None  # set by find_price: days from the start of ``date`` to today; None: date unknown
    stale: bool | None = None  # set by find_price: older than max_age_days, or of unknown date

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
    def region(self) -> str:
        """The cloud region named in ``provider`` or ``sku`` (us-east-1, us-central1, eastus, Iowa, ...), or ''."""
        m = re.search(_REGION, f"{self.provider} {self.sku}")
        return m.group(0) if m else ""

    def age_on(self, today: datetime.date) -> int | None:
        """Days from the earliest day ``date`` can mean (a bare year: 1 January) to ``today``; None if undated."""
        if self.date is None:
            return None
        year, month, day = [*[int(p) for p in self.date.split("-")], 1, 1][:3]
        return (today - datetime.date(year, month, day)).days

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


def provider_key(provider: str) -> str:
    """The provider a row belongs to, for comparing its kinds: the first word, lower-case ("GCP us-central1" and
    "GCP A3-High Spot" are both ``gcp``; "RunPod Secure" and "RunPod (community)" are both ``runpod``)."""
    words = re.findall(r"[a-z0-9.]+", provider.lower())
    return words[0] if words else ""


def _usable(r: PriceRow) -> bool:
    return r.unit == USABLE_UNIT[r.kind] and r.price is not None


_ERRORS_KEEP = 8  # price tables whose data errors are kept (``_data_errors``)
_errors_of: dict[int, tuple[tuple[PriceRow, ...], dict[int, str]]] = {}


def _data_errors(rows: tuple[PriceRow, ...]) -> dict[int, str]:
    """``_find_data_errors(rows)``, kept for the last ``_ERRORS_KEEP`` tables by identity: a catalog's ``prices``
    tuple and its frozen rows never change, and the entry holds the tuple, so its ``id`` is not reused while kept
    (hashing the ~200 rows of the tuple on every ``find_price`` cost more than the lookup saves)."""
    hit = _errors_of.get(id(rows))
    if hit is not None and hit[0] is rows:
        return hit[1]
    errors = _find_data_errors(rows)
    if len(_errors_of) >= _ERRORS_KEEP:
        del _errors_of[next(iter(_errors_of))]  # the oldest
    _errors_of[id(rows)] = (rows, errors)
    return errors


def _find_data_errors(rows: tuple[PriceRow, ...]) -> dict[int, str]:
    cheapest_od: dict[tuple[str, str], PriceRow] = {}
    for r in rows:
        if r.kind == "on-demand" and _usable(r) and provider_key(r.provider):
            k = (r.gpu_id, provider_key(r.provider))
            if k not in cheapest_od or cast(float, r.price) < cast(float, cheapest_od[k].price):
                cheapest_od[k] = r
    errors: dict[int, str] = {}
    for i, r in enumerate(rows):
        od = cheapest_od.get((r.gpu_id, provider_key(r.provider)))
        if r.kind == "spot" and _usable(r) and od is not None and cast(float, r.price) > cast(float, od.price):
            errors[i] = (f"{r.gpu_id} spot ${r.price:g}/h from {r.provider!r} ({r.date or 'undated'}) is above the "
                         f"same provider's on-demand ${od.price:g}/h ({od.provider!r}, {od.date or 'undated'}): a "
                         "data error (a whole-VM or list price under the wrong kind?), never chosen")  # fmt: skip
    return errors


def price_data_errors(*, catalog: Catalog | None = None) -> list[str]:
    """One line per price row that is flagged as a data error and never chosen by ``find_price`` (a spot price
    above the same provider's cheapest on-demand price for the GPU; ``provider_key`` says what "same" means).
    Serverless rows are neither the reference nor checked (module docstring)."""
    return list(_data_errors(_catalog(catalog).prices).values())


def find_price(gpu: str, kind: str, *, catalog: Catalog | None = None, today: datetime.date | None = None,
               max_age_days: float = MAX_PRICE_AGE_DAYS, provider: str | None = None) -> PriceRow:  # fmt: skip
    """The offer to use for ``gpu`` (any alias) and ``kind`` (one of ``KINDS``): the one a buyer would take.

    Rule: keep rows of that GPU and kind in the usable unit (``usd_per_gpu_hour`` for rent, ``usd_per_gpu`` for
    purchase) that carry a price (``usd``, or both ends of a range, whose midpoint is the price) and that
    ``price_data_errors`` does not flag and that are not dated after ``today`` (default: today, UTC; an earlier day
    replays the prices known then); of those no older than ``max_age_days`` (a bare year or month counts from its
    first day, so it is as old as it can be), return the cheapest (ties: the
    newest, then provider and sku in order); when none is that recent, the cheapest of all, marked stale. The
    returned row has ``usd`` set to that price, ``price_basis`` saying whether it is the quoted ``usd`` or the
    midpoint of ``usd_low``/``usd_high``, ``age_days`` and ``stale`` (True when older than ``max_age_days`` or
    undated). ``provider`` keeps only that provider's offers (compared by ``provider_key``). Raises
    ``UnknownNameError`` for an unknown GPU and ``InputError`` (naming the GPU, the kind, the kinds that do have a
    price and how to add one) when no row fits.
    """
    cat = _catalog(catalog)
    _check_kind(kind)
    gpu_id = cat.gpu(gpu).id
    bad = _data_errors(cat.prices)
    usable = [r for i, r in enumerate(cat.prices) if r.gpu_id == gpu_id and _usable(r) and i not in bad
              and (provider is None or provider_key(r.provider) == provider_key(provider))]  # fmt: skip
    rows = [r for r in usable if r.kind == kind]
    if not rows and provider is not None:
        raise InputError(f"no {kind} price for GPU '{gpu_id}' from provider '{provider}'")
    if not rows:
        have = sorted({r.kind for r in usable}, key=KINDS.index)
        unit = USABLE_UNIT[kind]
        override = {"purchase": "purchase_usd_per_gpu", "serverless": "serverless_usd_per_gpu_hour"}.get(
            kind, "price_usd_per_gpu_hour")
        raise InputError(
            f"no {kind} price for GPU '{gpu_id}'; kinds with a price: {', '.join(have) if have else 'none'}; add a "
            f"row '{gpu_id},{kind},<usd>,,,{unit},<provider>,,<YYYY-MM-DD>,<source>,' to DIR/prices.csv and pass "
            f"--catalog DIR, or set pricing.{override} in the scenario"
        )
    day = today if today is not None else datetime.datetime.now(datetime.UTC).date()
    ages = {id(r): r.age_on(day) for r in rows}
    known = [r for r in rows if (ages[id(r)] or 0) >= 0]  # an offer dated after ``today`` was not yet known
    if not known:
        raise InputError(f"no {kind} price for GPU '{gpu_id}' dated on or before {day.isoformat()}")
    rows = known

    def fresh(r: PriceRow) -> bool:
        age = ages[id(r)]
        return age is not None and age <= max_age_days

    pool = [r for r in rows if fresh(r)] or rows
    pick = min(pool, key=lambda r: (r.price, tuple(-x for x in r.date_key), r.provider, r.sku))
    basis = "usd" if pick.usd is not None else "midpoint of low/high"
    return pick.model_copy(update={"usd": pick.price, "price_basis": basis, "age_days": ages[id(pick)],
                                   "stale": not fresh(pick)})  # fmt: skip
