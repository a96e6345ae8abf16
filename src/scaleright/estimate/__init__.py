"""Estimate: memory per GPU, training step time and MFU, inference latency and throughput, from physics.

Model, layout and hardware are separate inputs (``TransformerSpec``, ``Layout``, a catalog ``Accelerator`` and a
``catalog.systems.System``, found by ``system_of``), combined only here. ``Calibration`` holds the few efficiency
factors fitted to measurements.
"""

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
