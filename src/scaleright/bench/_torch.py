"""Lazy access to the optional ``torch`` dependency (``pip install 'scaleright[bench]'``).

The parent process never imports torch for ``bench train`` and ``bench comm`` (the workers do); it only checks that
torch is installed, so ``--dry-run`` works without it.
"""

from __future__ import annotations

import importlib.util
from importlib import metadata
from types import ModuleType

from scaleright.bench.errors import BenchDependencyError

__all__ = ["require_torch", "check_torch", "torch_installed", "torch_version"]

_MISSING = "torch is not installed; install the benchmark extra: pip install 'scaleright[bench]'"


def torch_installed() -> bool:
    """True when ``torch`` can be imported (checked without importing it)."""
    return importlib.util.find_spec("torch") is not None


def torch_version() -> str | None:
    """Installed torch version from package metadata (no import), or None."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def require_torch() -> ModuleType:
    """Import and return ``torch``, or raise ``BenchDependencyError`` with the install hint."""
    if not torch_installed():
        raise BenchDependencyError(_MISSING)
    import torch

    return torch


def check_torch() -> None:
    """Raise ``BenchDependencyError`` when torch is missing, without importing it."""
    if not torch_installed():
        raise BenchDependencyError(_MISSING)
