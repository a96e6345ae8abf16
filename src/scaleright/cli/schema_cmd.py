"""``scaleright schema NAME``: the JSON Schema of a result, NAME in memory, train, infer, plan, simulate, capacity or
fleet."""

from __future__ import annotations

import json

import typer

from scaleright.cli.common import check_choice


def register(app: typer.Typer) -> None:
    app.command("schema")(schema_cmd)


def schema_cmd(
    name: str = typer.Argument(..., help="memory, train, infer, plan, simulate, capacity or fleet."),
) -> None:
    """Print the JSON Schema of a result's --json: memory, train, infer, plan, simulate, capacity or fleet.

    memory, train, infer: `scaleright estimate ...`; plan: `scaleright plan`; simulate: `scaleright serve simulate`
    (one pool); capacity: `scaleright serve capacity`; fleet: `scaleright serve simulate --fleet FILE`. Draft
    2020-12; every object admits only its declared keys."""
    from scaleright.results import RESULTS, result_model

    check_choice("NAME", name, tuple(RESULTS))
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **result_model(name).json_schema()}
    typer.echo(json.dumps(schema, indent=2, allow_nan=False))
