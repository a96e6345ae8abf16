"""Estimate: memory per GPU, training step time and MFU, inference latency and throughput, from physics.

Model, layout and hardware are separate inputs (``TransformerSpec``, ``Layout``, a catalog ``Accelerator`` and a
``catalog.systems.System``, found by ``system_of``), combined only here. ``Calibration`` holds the few efficiency
factors fitted to measurements.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scaleright.estimate.calibration import DEFAULT_CALIBRATION, Calibration, load_calibration, save_calibration
    from scaleright.estimate.comm import Cluster, collective_time_s, system_of
    from scaleright.estimate.infer import InferEstimate, estimate_infer, max_batch
    from scaleright.estimate.layout import Layout
    from scaleright.estimate.memory import (
        LoraConfig,
        MemoryBreakdown,
        Overheads,
        inference_memory,
        kv_cache_bytes,
        training_memory,
    )
    from scaleright.estimate.train import TrainEstimate, estimate_train

# name -> module: loaded on first access (PEP 562), so ``estimate train`` does not import the inference model
_LAZY = {
    **dict.fromkeys(("DEFAULT_CALIBRATION", "Calibration", "load_calibration", "save_calibration"), "calibration"),
    **dict.fromkeys(("Cluster", "collective_time_s", "system_of"), "comm"),
    **dict.fromkeys(("InferEstimate", "estimate_infer", "max_batch"), "infer"),
    "Layout": "layout",
    **dict.fromkeys(("LoraConfig", "MemoryBreakdown", "Overheads", "inference_memory", "kv_cache_bytes",
                     "training_memory"), "memory"),
    **dict.fromkeys(("TrainEstimate", "estimate_train"), "train"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(f"scaleright.estimate.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'scaleright.estimate' has no attribute {name!r}")


__all__ = [
    "Calibration",
    "Cluster",
    "DEFAULT_CALIBRATION",
    "InferEstimate",
    "Layout",
    "LoraConfig",
    "MemoryBreakdown",
    "Overheads",
    "TrainEstimate",
    "collective_time_s",
    "estimate_infer",
    "estimate_train",
    "inference_memory",
    "kv_cache_bytes",
    "load_calibration",
    "max_batch",
    "save_calibration",
    "system_of",
    "training_memory",
]
