"""Validation of scaleright against published measurements: not part of the product, not shipped in the wheel.

The reference data (``validation/reference/``: specs, prices, measured training, inference and memory rows, model
configs, each row with its source) and the code that maps its rows to the model's three separate inputs (STYLE
habits 2 and 15): a ``TransformerSpec``, a catalog ``Accelerator`` with its ``Cluster``, and a ``Layout`` — plus the
measured number and the convention it was measured in. ``predict_train``, ``predict_infer`` and ``predict_memory``
evaluate one case with a ``Calibration``. Used by ``tests/`` and ``benchmarks/`` from the repository root
(``import validation``); scaleright itself never imports it.

- ``files``: where the data is (``reference_dir``), its rows and cells, ``Skipped``
- ``hardware``, ``models``: the GPUs and models the rows name, as catalog entries or shapes
- ``train_cases``, ``infer_cases``, ``memory_cases``: one case per row, or a counted reason why not
- ``conventions``: FLOPs per token in each source's convention
- ``predict``: the model's prediction for a case
"""

from validation.conventions import implied_flops_per_token, source_flops_per_token
from validation.files import REFERENCE_ENV_VAR, Skipped, read_rows, reference_dir
from validation.infer_cases import INFER_METRICS, InferCase, load_infer_cases
from validation.memory_cases import GIB, FormulaRow, MemoryCase, load_memory_cases
from validation.predict import predict_infer, predict_memory, predict_train
from validation.train_cases import TRAIN_METRICS, TrainCase, load_train_cases

__all__ = [
    "GIB",
    "INFER_METRICS",
    "REFERENCE_ENV_VAR",
    "TRAIN_METRICS",
    "FormulaRow",
    "InferCase",
    "MemoryCase",
    "Skipped",
    "TrainCase",
    "implied_flops_per_token",
    "load_infer_cases",
    "load_memory_cases",
    "load_train_cases",
    "predict_infer",
    "predict_memory",
    "predict_train",
    "read_rows",
    "reference_dir",
    "source_flops_per_token",
]
