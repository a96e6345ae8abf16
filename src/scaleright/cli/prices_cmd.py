"""``scaleright prices import --from skypilot-catalog PATH --out DIR`` / ``--from gpuhunt --out DIR``: fresh rent
prices as a user catalog ``DIR/prices.csv`` that ``--catalog DIR`` reads (``scaleright.catalog.prices_import``)."""

from __future__ import annotations

import datetime
from collections import Counter
from pathlib import Path

import typer

from scaleright.cli.common import check_choice, console, esc
from scaleright.errors import InputError

prices_app = typer.Typer(help="Refresh rent prices from SkyPilot's catalog files or the gpuhunt library.",
                         no_args_is_help=True)  # fmt: skip


def register(app: typer.Typer) -> None:
    app.add_typer(prices_app, name="prices")


def _date(value: str | None) -> datetime.date | None:
    if value is None:
        return None
    today = datetime.datetime.now(datetime.UTC).date()
    try:
        day = datetime.date.fromisoformat(value)
    except ValueError:
        raise InputError(f"--date={value!r}: not a date; give YYYY-MM-DD") from None
    if day > today + datetime.timedelta(days=1):
        raise InputError(f"--date={value}: in the future (today is {today}); give the day the prices were read")
    return day


def _check_out(out: Path) -> None:
    """Fail before reading anything when ``--out`` cannot be a directory to write (``write_files`` says the same)."""
    from scaleright.textfile import path_problem

    why = path_problem(out, want="dir")
    if why == "directory not found" and path_problem(out.parent, want="dir") is not None:
        raise InputError(f"--out={out}: its parent directory {str(out.parent)!r} does not exist")
    if why not in (None, "directory not found"):
        raise InputError(f"--out={out}: {why}")


@prices_app.command("import")
def import_cmd(
    source: str = typer.Option(..., "--from", help="skypilot-catalog (SkyPilot's vms.csv files, given as PATH) or "
                               "gpuhunt (queries providers' public offer lists; needs the 'prices' extra)."),
    path: Path | None = typer.Argument(None, help="skypilot-catalog: a <cloud>/vms.csv, a <cloud> directory, or a "
                                       "catalog root holding <cloud>/vms.csv (skypilot-catalog/catalogs/v8)."),
    out: Path = typer.Option(..., "--out", help="Directory to write prices.csv into (created if its parent exists; "
                             "an existing prices.csv there is replaced)."),
    provider: str | None = typer.Option(None, "--provider", help="skypilot-catalog: the cloud of PATH when its "
                                        "directory is not named after one; gpuhunt: only these providers "
                                        "(comma-separated, e.g. aws,lambdalabs)."),
    date: str | None = typer.Option(None, "--date", help="YYYY-MM-DD the prices were read (default: the file's "
                                    "modification day for skypilot-catalog, today for gpuhunt)."),
) -> None:
    """Write DIR/prices.csv with the cheapest on-demand and spot price per GPU-hour per GPU, provider and region,
    each dated and sourced; offers whose accelerator maps to no single catalog GPU are skipped and counted."""
    from scaleright.catalog import prices_import as pi
    from scaleright.catalog.prices import KINDS
    from scaleright.catalog.store import Catalog
    from scaleright.cli.export_cmd import write_files

    check_choice("--from", source, pi.SOURCES)
    day = _date(date)
    _check_out(out)
    providers = [p.strip() for p in (provider or "").split(",") if p.strip()]
    if provider is not None and not providers:
        raise InputError("--provider: empty; give a provider name")
    catalog = Catalog.load(None)
    inputs: list[Path] = []
    results = []
    if source == "skypilot-catalog":
        if path is None:
            raise InputError("--from skypilot-catalog: PATH is required (a SkyPilot vms.csv or catalog directory)")
        if len(providers) > 1:
            raise InputError(f"--provider={provider}: give one cloud for a skypilot-catalog PATH")
        for file, cloud in pi.skypilot_files(path, providers[0] if providers else None):
            inputs.append(file)
            offers = pi.read_skypilot(file, cloud)
            if day is None:
                mtime = datetime.datetime.fromtimestamp(file.stat().st_mtime, datetime.UTC).date()
                if mtime > datetime.datetime.now(datetime.UTC).date() + datetime.timedelta(days=1):
                    raise InputError(f"PATH={file}: modified on {mtime}, in the future (a wrong clock?); give the "
                                     "day the catalog was read with --date YYYY-MM-DD")  # fmt: skip
                file_day, note = mtime, "date: the file's modification day (the CSV carries no date)"
            else:
                file_day, note = day, "date: given by --date"
            results.append(pi.price_rows(offers, catalog=catalog, date=file_day.isoformat(),
                                         source=pi.skypilot_source(file, cloud), origin="SkyPilot catalog",
                                         date_note=note))  # fmt: skip
    else:
        if path is not None:
            raise InputError(f"PATH={path}: --from gpuhunt takes no PATH (it queries the providers)")
        offers, src = pi.query_gpuhunt(providers)
        query_day = day or datetime.datetime.now(datetime.UTC).date()
        note = "date: given by --date" if day else "date: the day of the query"
        results.append(pi.price_rows(offers, catalog=catalog, date=query_day.isoformat(), source=src,
                                     origin="gpuhunt", date_note=note))  # fmt: skip
    rows = [r for res in results for r in res.rows]
    skipped = sum((res.skipped for res in results), start=Counter[str]())
    read = sum(res.offers_read for res in results)
    if not rows:
        why = "; ".join(f"{k} ×{n}" for k, n in skipped.most_common(5)) or "no priced GPU offers"
        raise InputError(f"--from {source}: no offer maps to a catalog GPU ({read} offers read; {why})")
    (written,) = write_files(out, {"prices.csv": pi.prices_csv(rows)}, inputs=inputs)
    gpus = sorted({r.gpu_id for r in rows})
    kinds = Counter[str](r.kind for r in rows)
    by_kind = ", ".join(f"{k} {kinds[k]}" for k in KINDS if k in kinds)
    console.print(f"wrote {esc(written)}: {len(rows)} prices ({by_kind}) for {len(gpus)} GPUs "
                  f"({esc(', '.join(gpus))}) from {read} offers; use it with --catalog {esc(out)}")  # fmt: skip
    if skipped:
        console.print(f"skipped {sum(skipped.values())} offers (not mapped to a catalog GPU, or not a whole GPU):")
        for reason, n in sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0])):
            console.print(f"  {n:>6}  {esc(reason)}")
