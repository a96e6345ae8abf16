"""The CLI's commands and their options, as a dict (for the frozen-flag test; ``python -m tests.cli_flags`` rewrites
``tests/cli_flags.json`` after a deliberate change)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

SNAPSHOT = Path(__file__).with_name("cli_flags.json")


def flag_set() -> dict[str, list[str]]:
    """``{"estimate train": ["--model <text>", "--json", ...], ...}``: every leaf command's options in order, with the
    type a value takes (none for an on/off flag) and arguments as ``<NAME>``."""
    from scaleright.cli.main import app

    out: dict[str, list[str]] = {}

    def walk(cmd, path: list[str]) -> None:
        sub = getattr(cmd, "commands", None)
        if sub:
            if path and cmd.params:  # a group that also runs on its own (``calibrate``: fit, or list/show/delete)
                out[" ".join(path)] = params(cmd)
            for name, c in sorted(sub.items()):
                walk(c, [*path, name])
            return
        out[" ".join(path)] = params(cmd)

    def params(cmd) -> list[str]:
        items = []
        for p in cmd.params:
            if getattr(p, "param_type_name", "") != "option":
                items.append(f"<{p.name.upper()}>")
            elif p.is_flag:
                items.append(" / ".join(sorted(p.opts) + sorted(p.secondary_opts)))
            else:
                shown = p.display_type(None) if hasattr(p, "display_type") else f"<{p.type.name}>"  # typer 0.2x / older
                items.append(f"{sorted(p.opts)[0]} {shown}")
        return items

    walk(typer.main.get_command(app), [])
    return out


if __name__ == "__main__":
    SNAPSHOT.write_text(json.dumps(flag_set(), indent=1) + "\n")
    print(f"wrote {SNAPSHOT}", file=sys.stderr)
