"""Shared fixtures of the benchmark-harness tests: run the real CLI in a subprocess, build a run database."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

import pytest

FAULT_ENV = "SCALERIGHT_BENCH_FAULT"


def _cli(*args: object, env: dict[str, str] | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    return subprocess.run([sys.executable, "-m", "scaleright", *map(str, args)], capture_output=True, text=True,
                          env={**base, **(env or {})}, timeout=timeout)


@pytest.fixture(scope="session")
def cli() -> Callable[..., subprocess.CompletedProcess]:
    """``cli("bench", "train", ..., env={...})`` runs ``python -m scaleright`` and returns the completed process."""
    return _cli


def sample_run(i: int = 0, *, world_size: int = 1, tokens_per_s: float = 1000.0, status: str = "ok") -> dict:
    """Keyword arguments of ``RunStore.add`` for a synthetic train run."""
    return {
        "kind": "train",
        "model": {"layers": 2, "hidden": 64, "heads": 4, "vocab": 256, "seq_len": 64, "params": 120576, "i": i},
        "layout": {"strategy": "ddp", "world_size": world_size, "micro_batch": 8, "precision": "fp32",
                   "activation_checkpointing": False, "device_type": "cpu"},
        "metrics": {"tokens_per_s": tokens_per_s, "step_time_s_median": 0.01, "peak_memory_gb": 0.1,
                    "peak_memory_gb_per_rank": [0.1] * world_size},
        "hardware": {"gpus": [], "gpu_count": 0, "driver_version": None, "cpu_model": "test", "fingerprint": "abc"},
        "software": {"python": "3.11"},
        "status": status,
    }


@pytest.fixture
def make_run() -> Callable[..., dict]:
    """Factory of synthetic train-run records (see ``sample_run``)."""
    return sample_run
