"""Shared pieces of the CLI: catalog resolution, JSON output, rich tables, option validation."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from scaleright.errors import InputError

__all__ = ["CatalogOpt", "JsonOpt", "catalog_from", "emit_json", "table", "console", "check_choice", "fmt",
           "check_output_path", "write_output"]

import os
import sys

# Wide tables when output is piped (rich falls back to 80 columns otherwise); $COLUMNS still wins.
console = Console(width=None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160)

CatalogOpt = typer.Option(
    None, "--catalog", help="Directory with gpus.yaml / prices.csv / models.yaml overriding the built-in catalog "
    "(default: $SCALERIGHT_CATALOG).", show_default=False,
)  # fmt: skip
JsonOpt = typer.Option(False, "--json", help="Print one JSON object instead of tables.")


def catalog_from(path: Path | None):
    from scaleright.catalog import Catalog
    from scaleright.textfile import _short, path_problem

    if path is not None and (why := path_problem(path, want="dir")):  # the truth: a loop, too long, not found...
        raise InputError(f"--catalog={_short(path)}: {why}")
    return Catalog.load(path)


def _clean(o: Any) -> Any:
    if isinstance(o, float) and (math.isnan(o) or math.isinf(o)):
        return None
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    if hasattr(o, "item") and callable(o.item):  # numpy scalars
        return _clean(o.item())
    return o


def emit_json(obj: Any) -> None:
    typer.echo(json.dumps(_clean(obj), indent=2, sort_keys=False))


def table(title: str, columns: list[str], rows: list[list[Any]], *, caption: str | None = None) -> None:
    t = Table(title=title, caption=caption, show_lines=False)
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*[fmt(x) for x in r])
    console.print(t)


def fmt(x: Any) -> str:
    if x is None:
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        if math.isinf(x):
            return "∞"
        if x == 0:
            return "0"
        if abs(x) >= 1000:
            return f"{x:,.0f}"
        if abs(x) >= 10:
            return f"{x:.1f}"
        if abs(x) >= 0.01:
            return f"{x:.3g}"
        return f"{x:.2e}"
    return str(x)


def check_choice(field: str, value: str, allowed: tuple[str, ...] | list[str]) -> str:
    if value not in allowed:
        raise InputError(f"{field}={value!r} not allowed; allowed: {', '.join(allowed)}")
    return value


def check_output_path(flag: str, path: Path) -> None:
    """Fail early (before any long computation) when ``path`` cannot be a file to write."""
    from scaleright.textfile import check_output_path as _check

    _check(flag, path)


def write_output(flag: str, path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (UTF-8) atomically; an OS error becomes one line naming ``flag`` and the path."""
    from scaleright.textfile import write_atomic

    write_atomic(flag, path, text)
