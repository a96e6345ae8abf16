"""Accuracy of scaleright's training-memory model (``estimate.memory.training_memory``) against published figures.

Measured peaks, each compared with what its source's counter measures (``validation.memory_cases``):

- ``memory_measured.csv``: torchtitan and torchao peak memory per GPU, the caching allocator's reserved peak
  (torchtitan logs ``torch.cuda.max_memory_reserved``), reported in GiB and converted to GB = 1e9 B, with the
  layout of the training row of the same run in ``train_measured.csv``;
- the BLOOM-176B sweeps of ``train_measured.csv``: nvidia-smi snapshots ("Mem=NNGB", read as GiB; everything the
  process holds: reserved memory, CUDA context, NCCL buffers) of layouts that ran, and the layouts that went out of
  memory ("Mem=OOM"), whose verdict (``fits``) the model must get right; a layout that ran must fit.

Every case carries the framework its run used (``validation.memory_cases.FRAMEWORKS``: torchtitan rows ``fsdp2``,
BLOOM rows ``megatron-2021`` with DeepSpeed's ZeRO-1 states), whose memory inputs ``estimate.memory.profiles``
supplies, printed per source; nothing is fitted to these rows. Formula rows (ZeRO model states, Korthikanti et al.
activation bytes, BLOOM checkpoint size) are exact checks of the model's own formulas and are printed apart.
Errors are predicted / published − 1.

The last line: ``median_pct=<median |error| over every measured row, %> oom_verdicts_right=<K>/<N>`` (N: the rows
that went out of memory; the layouts that ran are counted on the line before).

    python benchmarks/memory_accuracy.py
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

# The repository root on sys.path, so that `python3 benchmarks/<this>.py` imports the validation/ package (the
# reference data and its mapping to model inputs; not part of the installed wheel).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import validation as ref
from validation.memory_cases import MemoryCase, load_bloom_cases
from validation.predict import memory_breakdown

PARTS = ("weights", "gradients", "optimizer", "gathered", "activations", "overhead")


def _stats(errs: list[float]) -> str:
    a = np.abs(errs)
    return (f"median |error| {100 * np.median(a):.1f}%  (p90 {100 * np.percentile(a, 90):.1f}%, bias "
            f"{100 * np.median(errs):+.1f}%, {len(errs)} rows)")  # fmt: skip


def _row(c: MemoryCase) -> tuple[float, str]:
    m = memory_breakdown(c)
    pred = m.reserved_gb if c.counter == "reserved" else m.total_gb
    split = "/".join(f"{m.as_dict()[k]:.1f}" for k in PARTS)
    return pred, split


def measured_rows() -> dict[str, list[float]]:
    cases, _, skipped = ref.load_memory_cases()
    print("Measured peak memory per GPU (memory_measured.csv; the allocator's reserved peak)")
    print(f"  {'line':>4s} {'measured':>9s} {'predicted':>9s} {'error':>7s}  run  [{'/'.join(PARTS)} GB]")
    sources: dict[str, list[float]] = defaultdict(list)
    for c in cases:
        pred, split = _row(c)
        e = pred / c.measured_gb - 1
        sources[_source(c)].append(e)
        print(f"  {c.line:4d} {c.measured_gb:8.1f}G {pred:8.1f}G {100 * e:+6.1f}%  {c.label[:90]}  [{split}]")
    for s in skipped:
        if s.reason.startswith("no training row"):
            print(f"  {s.line:4d}  skipped: {s.reason}")
    print("  units: " + "; ".join(sorted({c.unit_note for c in cases})))
    print("  frameworks: " + _frameworks(cases))
    return dict(sources)


def _frameworks(cases: list[MemoryCase]) -> str:
    """The framework profiles and row-level overrides the cases ran with, counted."""
    counts: dict[str, int] = defaultdict(int)
    for c in cases:
        extra = [f"{k} {v}" for k, v in (("states", c.states), ("cross-entropy", c.cross_entropy)) if v]
        counts[c.framework + (f" ({', '.join(extra)})" if extra else "")] += 1
    return "; ".join(f"{k}: {n} rows" for k, n in sorted(counts.items()))


def _source(c: MemoryCase) -> str:
    """The publication a memory_measured.csv row comes from, for per-source figures."""
    if "B200" in c.group:
        return "torchao B200 (MX formats README, 2025)"
    if c.group == "Results":
        return "torchtitan H200 (Trainy / WhiteFiber, 2025)"
    return "torchtitan H100 (benchmarks, Dec 2024)"


def bloom_rows() -> tuple[list[float], list[MemoryCase], list[bool], list[bool]]:
    cases = load_bloom_cases()
    print("\nBLOOM-176B sweeps (train_measured.csv; nvidia-smi snapshots, Mem=NNGB read as GiB; Mem=OOM: went out "
          "of memory)")  # fmt: skip
    print(f"  {'line':>4s} {'measured':>9s} {'predicted':>9s} {'error':>7s} verdict  run  [{'/'.join(PARTS)} GB]")
    errs, oom_right, ran_fit = [], [], []
    for c in cases:
        m = memory_breakdown(c)
        pred, split = _row(c)
        if c.outcome == "oom":
            right = m.fits is False
            oom_right.append(right)
            verdict = "OOM ok " if right else "OOM MISSED"
            print(f"  {c.line:4d} {'OOM':>9s} {pred:8.1f}G {'':>7s} {verdict}  {c.label[:90]}  [{split}]")
            continue
        e = pred / c.measured_gb - 1
        errs.append(e)
        ran_fit.append(bool(m.fits))
        verdict = "fits   " if m.fits else "REFUSED"
        print(f"  {c.line:4d} {c.measured_gb:8.1f}G {pred:8.1f}G {100 * e:+6.1f}% {verdict}  {c.label[:90]}  "
              f"[{split}]")  # fmt: skip
    print("  frameworks: " + _frameworks(cases))
    return errs, cases, oom_right, ran_fit


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
    sources = measured_rows()
    bloom_errs, _, oom_right, ran_fit = bloom_rows()
    sources["BLOOM-176B nvidia-smi (bigscience chronicles)"] = bloom_errs
    formula_rows()
    print("\nPer source (out of sample: no parameter is fitted to any of these rows)")
    for k, v in sources.items():
        print(f"  {k:48s} {_stats(v)}")
    every = [e for v in sources.values() for e in v]
    print(f"  {'all measured rows':48s} {_stats(every)}")
    print(f"\nran_rows_fit={sum(ran_fit)}/{len(ran_fit)}  ({time.time() - t0:.1f} s)")
    print(f"median_pct={100 * np.median(np.abs(every)):.1f} oom_verdicts_right={sum(oom_right)}/{len(oom_right)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
