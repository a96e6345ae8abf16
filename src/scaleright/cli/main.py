"""The ``scaleright`` command: a thin typer layer over the Python API.

Each command group lives in its own module and registers itself via ``register(app)`` (``COMMANDS`` maps each
command to its module); ``main`` imports only the module of the command it runs, and the modules import their heavy
dependencies (numpy models, rich, torch) inside the commands, so start-up stays fast. As the program, ``plan`` and
``estimate`` also start without the cyclic garbage collector and with one BLAS thread (``cli.common.begin_startup``,
ended by the command's ``startup_imports``), pydantic looks for no plugin until ``end_program``, and the run's
objects are frozen before exit. Errors
rooted at ``ScalerightError`` and the argument parser's usage errors become one line on stderr and exit code 2
(control characters in them made visible); nothing else is caught.
"""

from __future__ import annotations

import gc
import sys
from importlib import import_module
from typing import TYPE_CHECKING, Any

import typer

from scaleright.cli.coercion import install as install_direct_coercion
from scaleright.cli.common import STARTUP_COMMANDS, begin_startup, end_program, running_as_program, visible
from scaleright.errors import InputError, ScalerightError


def _flags_take_no_value() -> None:
    """typer 0.2x prints ``<bool>`` after on/off flags in ``--help`` (``--json <bool>``), as if they took a value;
    they do not. Show no type for flags; every other option keeps its ``<type>``."""
    option = getattr(getattr(typer, "core", None), "TyperOption", None)
    shown = getattr(option, "display_type_rich", None)
    if option is None or shown is None or getattr(shown, "_scaleright", False):
        return

    def display_type_rich(self: Any, ctx: Any) -> str | None:
        if getattr(self, "is_flag", False) and not getattr(self, "count", False):
            return None
        return shown(self, ctx)  # type: ignore[no-any-return]

    display_type_rich._scaleright = True  # type: ignore[attr-defined]
    option.display_type_rich = display_type_rich


_flags_take_no_value()
install_direct_coercion()  # plain option values without a pydantic TypeAdapter each (cli.coercion)


# Command -> the module of ``scaleright.cli`` whose ``register(app: typer.Typer) -> None`` adds it (a module may add
# several). ``scaleright NAME ...`` imports only NAME's module; ``--help``, no command or an unknown one imports all.
COMMANDS = {
    "catalog": "catalog_cmd",
    "estimate": "estimate_cmd",
    "plan": "plan_cmd",
    "export": "export_cmd",
    "serve": "serve_cmd",
    "bench": "bench_cmd",
    "runs": "bench_cmd",
    "calibrate": "calibrate_cmd",
    "compare": "calibrate_cmd",
    "dashboard": "dashboard_cmd",
    "prices": "prices_cmd",
    "schema": "schema_cmd",
}


def make_app(command: str | None = None) -> typer.Typer:
    """The ``scaleright`` app with ``command`` registered, or every command when it is None or unknown."""
    new = typer.Typer(
        name="scaleright",
        help="One GPU or many? Which GPU, which layout, rent or buy? Estimates of memory, speed and cost, "
        "a planner, and a benchmark harness to measure the truth.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    new.callback(invoke_without_command=True)(_root)
    modules = [COMMANDS[command]] if command in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for name in modules:
        import_module(f"scaleright.cli.{name}").register(new)
    return new


def __getattr__(name: str) -> Any:
    """``app``: every command registered (built on first use, so importing this module stays cheap)."""
    if name == "app":
        value = globals()["app"] = make_app()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _command_of(argv: list[str]) -> str | None:
    """The command word of ``argv``: its first argument that is not an option (the root takes no valued option)."""
    return next((a for a in argv if not a.startswith("-")), None)


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


# typer ships its own copy of click (0.20+) or uses click itself (older); find its exception classes either way.
_CLICK_ERRORS = {c.__name__: c for c in typer.BadParameter.__mro__}
if TYPE_CHECKING:  # what mypy reads: the classes of typer's own copy (the typer this is checked with is 0.20+)
    from typer._click.exceptions import ClickException as _ClickException
    from typer._click.exceptions import UsageError as _UsageError
else:
    _ClickException = _CLICK_ERRORS["ClickException"]
    _UsageError = _CLICK_ERRORS["UsageError"]


def _usage_line(exc: _UsageError) -> str:
    """A usage error of the argument parser as one line: the message, then where to find help."""
    msg = visible(exc.format_message()).rstrip(".")  # a newline or ESC in what the user typed stays visible
    ctx = getattr(exc, "ctx", None)
    hint = ""
    if ctx is not None:  # "python -m scaleright estimate memory" names the command as "scaleright estimate memory"
        path = ctx.command_path
        hint = f"; try '{path[path.find('scaleright'):] if 'scaleright' in path else path} --help'"
    return f"error: {msg}{hint}"


# Options whose value is a path. The parser turns an empty value into Path("."), the working directory, which would
# then be read (``--catalog ''``) or written; an empty path is refused before the parser sees it.
# (``--model`` and ``--calibration`` also take catalog or profile names; their readers refuse an empty one themselves.)
PATH_OPTIONS = ("--catalog", "--db", "--html", "--out", "--export", "--trace", "--trace-out", "--input-lengths",
                "--output-lengths", "--fleet")


def _refuse_empty_paths(argv: list[str]) -> None:
    for i, arg in enumerate(argv):
        if arg == "--":
            return
        name, eq, value = arg.partition("=")
        if name in PATH_OPTIONS and ((eq and value == "") or (not eq and i + 1 < len(argv) and argv[i + 1] == "")):
            raise InputError(f"{name}: empty value; give a path")


def main() -> None:
    """Entry point: run the app, turning project errors and usage errors into one line and exit 2."""
    program = running_as_program()
    if program and _command_of(sys.argv[1:]) in STARTUP_COMMANDS:
        begin_startup()  # until the command's imports are done (cli.common.startup_imports)
    try:
        _run()
    finally:
        # The interpreter's last garbage collection, at exit, walks every object of the run (modules, validators,
        # the plan) and frees the classes and functions held in cycles, memory the process hands back anyway: a
        # sixth of a plan's wall time. Moved to the permanent generation those objects are skipped; atexit
        # handlers, the flush of stdout and stderr and the teardown of modules still run. Only as the program: a
        # caller's objects stay collectable.
        if program:
            end_program()
            gc.freeze()


def _run() -> None:
    try:
        _refuse_empty_paths(sys.argv[1:])
        rv = make_app(_command_of(sys.argv[1:]))(standalone_mode=False)
    except ScalerightError as exc:
        typer.echo(f"error: {visible(str(exc))}", err=True)
        sys.exit(2)
    except _UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # ``scaleright estimate`` alone: the group's help
            exc.show()
            sys.exit(exc.exit_code)
        typer.echo(_usage_line(exc), err=True)
        sys.exit(2)
    except _ClickException as exc:  # e.g. a file option that cannot be opened
        typer.echo(f"error: {visible(exc.format_message())}", err=True)
        sys.exit(exc.exit_code if exc.exit_code else 2)
    except typer.Abort:
        typer.echo("error: aborted", err=True)
        sys.exit(1)
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":
    main()
