"""Which hardware and software produced a measurement.

Hardware: GPU names and count and the driver version from ``nvidia-smi --query-gpu=name,driver_version
--format=csv,noheader`` (NVIDIA's documented query interface), falling back to the names the workers reported through
``torch.cuda.get_device_name``; CPU model from ``/proc/cpuinfo`` ("model name"), else ``platform.processor()``.
The fingerprint is the first 12 hex digits of SHA-256 over the canonical JSON of (gpus, gpu_count, driver_version,
cpu_model): stable across runs on the same machine, different when any of them changes.
Software: python, torch (package metadata, no import), scaleright, plus CUDA runtime and backend seen by the ranks.
"""

from __future__ import annotations

import hashlib
import json
import platform
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from scaleright.bench._torch import torch_version

__all__ = ["hardware_info", "software_info", "fingerprint_of", "nvidia_smi_query"]


def nvidia_smi_query(fields: str, *, units: bool = True) -> list[list[str]] | None:
    """One row per GPU of the comma-separated ``fields`` from ``nvidia-smi --query-gpu=FIELDS --format=csv,noheader``
    (``,nounits`` with ``units=False``: numbers without their units), each value stripped; None without nvidia-smi
    or when it fails."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, f"--query-gpu={fields}", "--format=csv,noheader" + ("" if units else ",nounits")],
                             capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return [[c.strip() for c in line.split(",")] for line in out.splitlines() if line.strip()]


def _nvidia_smi() -> tuple[list[str], str | None]:
    rows = nvidia_smi_query("name,driver_version")
    if rows is None:
        return [], None
    return [r[0] for r in rows], (rows[0][1] if rows and len(rows[0]) > 1 else None)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def fingerprint_of(hardware: dict) -> str:
    """12-hex-digit SHA-256 of the identifying hardware fields."""
    key = {k: hardware.get(k) for k in ("gpus", "gpu_count", "driver_version", "cpu_model")}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]


def hardware_info(reported_gpus: Sequence[str] = ()) -> dict:
    """GPU names and count, driver version, CPU model, and the ``fingerprint`` of these."""
    gpus, driver = _nvidia_smi()
    if not gpus:
        gpus = list(reported_gpus)
    hw = {"gpus": gpus, "gpu_count": len(gpus), "driver_version": driver, "cpu_model": _cpu_model()}
    return {**hw, "fingerprint": fingerprint_of(hw)}


def software_info(**extra: object) -> dict:
    """python, torch and scaleright versions, plus ``extra`` (e.g. torch_cuda, backend)."""
    from scaleright import __version__

    return {"python": platform.python_version(), "torch": torch_version(), "scaleright": __version__,
            "platform": platform.platform(), **extra}
