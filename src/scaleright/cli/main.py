"""The ``scaleright`` command: a thin typer layer over the Python API.

Each command group lives in its own module and registers itself on ``app`` via ``register(app)``. Errors
rooted at ``ScalerightError`` become one line on stderr and exit code 2; nothing else is caught.
"""

from __future__ import annotations

import importlib
import sys

import typer

from scaleright.errors import ScalerightError

app = typer.Typer(
    name="scaleright",
    help="One GPU or many? Which GPU, which layout, rent or buy? Estimates of memory, speed and cost, "
    "a planner, and a benchmark harness to measure the truth.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)



@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
) -> None:
    """One GPU or many? Which GPU, which layout, rent or buy?"""
    if version:
        from scaleright import __version__

        typer.echo(__version__)
        raise typer.Exit(0)
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(0)


# Command-group modules, each with ``register(app: typer.Typer) -> None``.
_GROUPS = (
    "scaleright.cli.catalog_cmd",
    "scaleright.cli.estimate_cmd",
    "scaleright.cli.plan_cmd",
    "scaleright.cli.bench_cmd",
    "scaleright.cli.calibrate_cmd",
)

for _mod in _GROUPS:
    try:
        _m = importlib.import_module(_mod)
    except ModuleNotFoundError as exc:  # a group not built yet
        if exc.name != _mod:
            raise
        continue
    _m.register(app)


def main() -> None:
    """Entry point: run the app, turning project errors into one line and exit 2."""
    try:
        app()
    except ScalerightError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
