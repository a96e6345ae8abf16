"""Shared fixtures of the benchmark-harness tests: run the real CLI in a subprocess, build a run database."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

import pytest

from cli_helpers import run_main

FAULT_ENV = "SCALERIGHT_BENCH_FAULT"


def _cli(*args: object, env: dict[str, str] | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    return subprocess.run([sys.executable, "-m", "scaleright", *map(str, args)], capture_output=True, text=True,
                          env={**base, **(env or {})}, timeout=timeout)


@pytest.fixture(scope="session")
def cli() -> Callable[..., subprocess.CompletedProcess]:
    """``cli("bench", "train", ..., env={...})`` runs ``python -m scaleright`` and returns the completed process."""
    return _cli


@pytest.fixture
def run_cli(monkeypatch, capsys) -> Callable[..., tuple[int, str, str]]:
    """``run_cli("runs", "list", ...)`` runs the CLI in this process; returns (exit code, stdout, stderr)."""

    def run(*args: object) -> tuple[int, str, str]:
        return run_main([str(a) for a in args], monkeypatch, capsys)

    return run


# A CPU described in a user catalog, as the README tells users to (form_factor: cpu marks it as a CPU)
CPU_ENTRY = """\
- id: test-cpu
  name: test CPU
  vendor: generic
  architecture: x86-64
  memory_gb: 16
  memory_type: DDR
  hbm_bandwidth_tb_per_s: 0.02
  dense_tflops: {fp32: 0.1, tf32: null, bf16: 0.05, fp16: null, fp8: null, int8: null, fp4: null}
  tdp_w: 100
  intra_node_link: pcie
  intra_node_gb_per_s_per_gpu: 5
  gpus_per_node: 2
  nic_gbps_per_gpu: 10
  form_factor: cpu
  unverified: [dense_tflops, hbm_bandwidth_tb_per_s]
  source: assumed figures describing the test machine
"""


@pytest.fixture
def cpu_catalog(tmp_path):
    """A user catalog directory holding ``CPU_ENTRY`` (``--catalog``; the CPU is ``--gpu test-cpu``)."""
    d = tmp_path / "catalog"
    d.mkdir()
    (d / "gpus.yaml").write_text(CPU_ENTRY)
    return d


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
