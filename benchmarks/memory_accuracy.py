"""Accuracy of scaleright's training-memory model (``estimate.memory.training_memory``) against published figures.

Measured peaks: every ``measured`` row of ``validation/reference/memory_measured.csv`` (torchtitan and torchao peak
memory per GPU, reported in GiB and converted to GB = 1e9 B), with the layout of the training row of the same run
in ``train_measured.csv``; then, separately, the BLOOM-176B nvidia-smi snapshots that ``train_measured.csv`` notes
carry ("Mem=NNGB", read as GiB as nvidia-smi reports MiB; they include the CUDA context and the allocator cache).
Formula rows (ZeRO model states, Korthikanti et al. activation bytes, BLOOM checkpoint size) are exact checks of the
model's own formulas and are printed apart. Errors are predicted / published − 1.

    python benchmarks/memory_accuracy.py
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import numpy as np

# The repository root on sys.path, so that `python3 benchmarks/<this>.py` imports the validation/ package (the
# reference data and its mapping to model inputs; not part of the installed wheel).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import validation as ref
from scaleright.estimate.memory import training_memory

GIB_PER_GB = ref.GIB / 1e9


def _breakdown(case) -> tuple[float, dict[str, float]]:
    m = training_memory(case.spec, layout=case.layout, seq_len=case.seq_len, precision=case.precision)
    return m.total_gb, m.as_dict()


def measured_rows() -> list[float]:
    cases, _, skipped = ref.load_memory_cases()
    print("Measured peak memory per GPU (memory_measured.csv)")
    print(f"  {'line':>4s} {'measured':>9s} {'predicted':>9s} {'error':>7s}  run  [weights/grads/optimizer/activations/"
          f"overhead GB]")  # fmt: skip
    errs = []
    for c in cases:
        pred, parts = _breakdown(c)
        e = pred / c.measured_gb - 1
        errs.append(e)
        split = "/".join(f"{parts[k]:.1f}" for k in ("weights", "gradients", "optimizer", "activations", "overhead"))
        print(f"  {c.line:4d} {c.measured_gb:8.1f}G {pred:8.1f}G {100 * e:+6.1f}%  {c.label[:95]}  [{split}]")
    for s in skipped:
        if s.reason.startswith("no training row"):
            print(f"  {s.line:4d}  skipped: {s.reason}")
    units = sorted({c.unit_note for c in cases})
    print("  units: " + "; ".join(units))
    if errs:
        a = np.abs(errs)
        print(f"  median |error| {100 * np.median(a):.1f}%  (p90 {100 * np.percentile(a, 90):.1f}%, bias "
              f"{100 * np.median(errs):+.1f}%, {len(errs)} rows)")
    return errs


def bloom_snapshots() -> list[float]:
    train, _ = ref.load_train_cases()
    notes = {line: row["notes"] for line, row in ref.read_rows("train_measured.csv")}
    print("\nBLOOM-176B nvidia-smi snapshots (train_measured.csv notes; Mem=NNGB read as GiB; includes the "
          "allocator cache)")
    errs = []
    for c in train:
        if not c.group.startswith("BLOOM"):
            continue
        m = re.search(r"Mem=(\d+(?:\.\d+)?)GB", notes[c.line])
        if not m:
            continue
        meas = float(m.group(1)) * GIB_PER_GB
        pred, _ = _breakdown(c)
        e = pred / meas - 1
        errs.append(e)
        print(f"  {c.line:4d} {meas:8.1f}G {pred:8.1f}G {100 * e:+6.1f}%  {c.label[:100]}")
    if errs:
        a = np.abs(errs)
        print(f"  median |error| {100 * np.median(a):.1f}%  (p90 {100 * np.percentile(a, 90):.1f}%, bias "
              f"{100 * np.median(errs):+.1f}%, {len(errs)} rows)")
    return errs


def formula_rows() -> None:
    _, formulas, skipped = ref.load_memory_cases()
    print("\nFormula rows (exact checks of the model's own formulas)")
    for f in formulas:
        e = f.predicted / f.published - 1
        print(f"  {f.line:4d} {f.published:12.6g} {f.predicted:12.6g} {f.unit:13s} {100 * e:+7.3f}%  {f.label}  "
              f"({f.how})")
    for s in skipped:
        if not s.reason.startswith("no training row"):
            print(f"  {s.line:4d}  skipped: {s.reason}")


def main() -> int:
    t0 = time.time()
    measured_rows()
    bloom_snapshots()
    formula_rows()
    print(f"\n({time.time() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
