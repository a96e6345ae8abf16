"""The ``scaleright`` command: a thin typer layer over the Python API.

Each command group lives in its own module and registers itself on ``app`` via ``register(app)``; the modules
import their heavy dependencies (numpy models, torch) inside the commands, so ``--help`` stays fast. Errors
rooted at ``ScalerightError`` become one line on stderr and exit code 2; nothing else is caught.
"""

from __future__ import annotations

import sys

import typer

from scaleright.cli import bench_cmd, calibrate_cmd, catalog_cmd, estimate_cmd, plan_cmd
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
_GROUPS = (catalog_cmd, estimate_cmd, plan_cmd, bench_cmd, calibrate_cmd)
for _group in _GROUPS:
    _group.register(app)


def main() -> None:
    """Entry point: run the app, turning project errors into one line and exit 2."""
    try:
        app()
    except ScalerightError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
