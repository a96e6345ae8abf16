"""Shared pieces of the CLI: JSON output, rich tables, option validation, terminal safety.

Option checks, catalog and calibration resolution and ``visible`` are the Python API's (``scaleright.api``; checks
named by flag with ``FLAGS``): a notebook and the command get the same line from one place, without the CLI's
libraries; ``check_choice``, ``catalog_from``, ``catalog_files``, ``calibration_from``, ``profile_from`` and
``visible`` are re-exported here for the commands, and ``json_safe`` as ``_clean`` (what ``emit_json`` prints).

Terminal safety: every string that comes from the user (a scenario name, a model path, a catalog id, an error
message quoting them) reaches the terminal through ``visible`` (control characters such as ESC, CR or NUL shown
as ``\\x1b``-style escapes, so no escape sequence runs) and, where rich renders it, through ``esc`` (markup such
as ``[/bold]`` shown as text, never parsed). Table cells are rich ``Text`` objects, which are never parsed.
"""

from __future__ import annotations

import gc
import json
import math
import os
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import typer

from scaleright.api import calibration_from, catalog_files, catalog_from, check_choice, profile_from, visible
from scaleright.api import json_safe as _clean

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["CatalogOpt", "JsonOpt", "calibration_from", "profile_from", "catalog_files", "catalog_from", "check_choice",
           "check_output_path", "console", "emit_json", "esc", "fmt", "table", "visible",
           "write_output", "running_as_program", "begin_startup", "startup_imports", "STARTUP_COMMANDS",
           "BLAS_THREAD_VARS"]  # fmt: skip

# Wide tables when output is piped (rich falls back to 80 columns otherwise); $COLUMNS still wins. No emoji codes:
# ":smile:" in a user's name stays as typed.
# Made on first use: a command that prints JSON never imports rich.
class _LazyConsole:
    _real: Console | None = None

    def __getattr__(self, name: str) -> Any:
        if _LazyConsole._real is None:
            from rich.console import Console

            _LazyConsole._real = Console(width=None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160,
                                         emoji=False)  # fmt: skip
        return getattr(_LazyConsole._real, name)


console = cast("Console", _LazyConsole())


def running_as_program() -> bool:
    """``scaleright.cli.main.main`` runs as the program (the ``scaleright`` script or ``python -m scaleright``,
    whose ``__main__`` holds it), not called inside another one (a test, a notebook)."""
    cli_main = sys.modules.get("scaleright.cli.main")
    ours = getattr(cli_main, "main", None)
    return ours is not None and getattr(sys.modules.get("__main__"), "main", None) is ours


# Commands whose every path opens with ``startup_imports``: as the program, ``main`` calls ``begin_startup`` for them
# and ``startup_imports`` ends what it began.
STARTUP_COMMANDS = ("estimate", "plan")
# Where OpenBLAS (numpy's BLAS) reads its thread count, once, when numpy loads; a user's setting is kept.
BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
_begun: dict[str, bool] = {}
_program = ExitStack()  # what begin_startup keeps open until end_program


def begin_startup() -> None:
    """The start of a ``STARTUP_COMMANDS`` command run as the program, until its ``startup_imports`` end.

    The cyclic garbage collector is off: start-up builds long-lived objects (modules, classes, the models'
    validators), among which a collection finds almost nothing to free (about a hundred objects a plan's start-up
    leaves in cycles) but walks everything made so far, dozens of times.

    numpy loads with one BLAS thread (``OPENBLAS_NUM_THREADS=1`` while it loads, unless the user set one of
    ``BLAS_THREAD_VARS``; no child process inherits it): OpenBLAS starts a thread per CPU, and each spins about
    0.1 s of CPU waiting for work that these commands never give it. Their numpy is elementwise (no matrix products,
    no linear algebra), which OpenBLAS's threads do not run.

    pydantic neither looks for nor applies plugins until ``end_program`` (``scaleright.pydantic_plugins``): every
    model the command builds is scaleright's own, and the search reads the metadata of every installed
    distribution."""
    gc.disable()
    if "numpy" not in sys.modules and not any(v in os.environ for v in BLAS_THREAD_VARS):
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
        _begun["blas_threads"] = True
    from scaleright.pydantic_plugins import no_plugins

    _program.enter_context(no_plugins())


def end_program() -> None:
    """The end of what ``begin_startup`` began for the whole command (``PYDANTIC_DISABLE_PLUGINS`` as it was)."""
    _program.close()


@contextmanager
def startup_imports() -> Iterator[None]:
    """A command's imports, the end of its start-up (``begin_startup``): what start-up made is moved out of the
    collector's reach for good (``gc.freeze``) and the collector turned on, so the command's own work is collected
    as always and its collections walk only what the work makes; ``OPENBLAS_NUM_THREADS`` is unset again. Nothing
    changes where nothing began (``main`` called inside another program, or a command outside
    ``STARTUP_COMMANDS``)."""
    try:
        yield
    finally:
        if _begun.pop("blas_threads", False):
            os.environ.pop("OPENBLAS_NUM_THREADS", None)
        if running_as_program() and not gc.isenabled():
            gc.freeze()
            gc.enable()


def esc(s: object) -> str:
    """``visible(s)`` with rich markup escaped, for interpolating a user string into a rich markup string."""
    from rich.markup import escape

    return escape(visible(s))


CatalogOpt = typer.Option(
    None, "--catalog", help="Directory with gpus.yaml / prices.csv / models.yaml overriding the built-in catalog "
    "(default: $SCALERIGHT_CATALOG).", show_default=False,
)  # fmt: skip
JsonOpt = typer.Option(False, "--json", help="Print one JSON object instead of tables.")


def emit_json(obj: Any) -> None:
    """Print ``obj`` as JSON: non-finite floats become null (JSON has no Infinity or NaN; a miss is a loud bug)."""
    typer.echo(json.dumps(_clean(obj), indent=2, sort_keys=False, allow_nan=False))


def table(title: str, columns: list[str], rows: list[list[Any]], *, caption: str | None = None) -> None:
    """A rich table; every title, header and cell is shown as text (``visible``), never parsed as markup."""
    from rich.table import Table
    from rich.text import Text

    t = Table(title=Text(visible(title)), caption=Text(visible(caption)) if caption else None, show_lines=False)
    for c in columns:
        t.add_column(Text(visible(c)), overflow="fold")
    for r in rows:
        t.add_row(*[Text(visible(fmt(x))) for x in r])
    console.print(t)


def fmt(x: Any) -> str:
    """A table cell: None and NaN as "—", booleans as yes/no, floats to about three significant figures."""
    if hasattr(x, "item") and callable(x.item) and getattr(x, "ndim", 1) == 0:  # numpy scalars
        x = x.item()
    if x is None:
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        if math.isnan(x):
            return "—"
        if math.isinf(x):
            return "∞" if x > 0 else "-∞"
        if x == 0:
            return "0"
        if abs(x) >= 1e15:  # not hundreds of digits
            return f"{x:.3g}"
        if abs(x) >= 1000:
            return f"{x:,.0f}"
        if abs(x) >= 10:
            return f"{x:.1f}"
        if abs(x) >= 0.01:
            return f"{x:.3g}"
        return f"{x:.2e}"
    return str(x)


def check_output_path(flag: str, path: Path) -> None:
    """Fail early (before any long computation) when ``path`` cannot be a file to write."""
    from scaleright.textfile import check_output_path as _check

    _check(flag, path)


def write_output(flag: str, path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (UTF-8) atomically; an OS error becomes one line naming ``flag`` and the path."""
    from scaleright.textfile import write_atomic

    write_atomic(flag, path, text)
