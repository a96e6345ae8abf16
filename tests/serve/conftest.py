"""Fixtures of the serving simulator's scenarios (the toy model and runner live in ``serve_toy.py``)."""

from __future__ import annotations

import pytest
import typer

from scaleright.catalog import get_gpu
from scaleright.cli import schema_cmd, serve_cmd


@pytest.fixture(scope="session")
def h100():
    return get_gpu("h100-sxm")


@pytest.fixture(scope="module")
def app():
    """A fresh typer app carrying the ``serve`` group and ``schema`` (the lead wires them into ``cli.main``)."""
    a = typer.Typer()

    @a.callback()
    def _root() -> None:
        """test root"""

    serve_cmd.register(a)
    schema_cmd.register(a)
    return a
