"""Errors of the benchmark harness, rooted at ``ScalerightError`` so the CLI prints one line and exits 2.

A failed rank (crash, hang, out of memory) is a ``BenchRunError`` whose message names the rank, the world size
and the cause; a missing optional dependency is a ``BenchDependencyError``; a run id not in the database is a
``RunNotFoundError``.
"""

from __future__ import annotations

from scaleright.errors import InputError, ScalerightError

__all__ = ["BenchRunError", "BenchDependencyError", "RunNotFoundError", "RunStoreError"]


class BenchRunError(ScalerightError):
    """A benchmark run failed: one rank crashed, hung past the timeout or ran out of memory."""

    def __init__(self, message: str, *, rank: int | None = None, cause: str = "crash", world_size: int = 0):
        self.rank, self.cause, self.world_size = rank, cause, world_size
        super().__init__(message)


class BenchDependencyError(ScalerightError):
    """An optional dependency of the benchmark harness (torch) is not installed."""


class RunNotFoundError(InputError):
    """A run id that is not in the run database."""


class RunStoreError(InputError):
    """The run database file cannot be used (not a SQLite file, wrong schema)."""
