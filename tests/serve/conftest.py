"""Fixtures of the serving simulator's scenarios (the toy model and runner live in ``serve_toy.py``)."""

from __future__ import annotations

import pytest

from scaleright.catalog import get_gpu


@pytest.fixture(scope="session")
def h100():
    return get_gpu("h100-sxm")
