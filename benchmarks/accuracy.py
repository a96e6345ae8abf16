"""Accuracy of scaleright's performance model against published measurements, and the fit of its calibration.

Every row of ``validation/reference/{train,infer}_measured.csv`` that the ``validation`` package can map becomes a
prediction; the error of a row is predicted / measured − 1 in the source's own unit and convention
(TFLOP/s per GPU — model or hardware, causal or not — tokens/s per GPU, output tokens/s of the system, or TPOT).
Printed per source table: rows used and skipped, median and 90th-percentile absolute error, the median signed
error (bias) and the worst rows; then the overall medians against the targets (training ≤ 10 %, inference
throughput ≤ 15 %), the skipped rows by reason, and a check of each source's FLOP convention against the FLOPs per
token its own TFLOP/s ÷ tokens/s imply.

    python benchmarks/accuracy.py                 # errors with the default calibration
    python benchmarks/accuracy.py --fit           # fit the Calibration on all rows jointly, plus a held-out check
    python benchmarks/accuracy.py --fit --write   # also write the fitted values as the defaults of calibration.py
    python benchmarks/accuracy.py --fit --loso    # plus leave-one-source-out (one fit per fitted table)

``--fit`` needs scipy: ``pip install ".[validate]"``; the error report alone needs only scaleright.

The fit (``scaleright.estimate.fit``, the fitter ``scaleright calibrate`` uses: scipy ``least_squares``, trust-region
reflective, soft-L1 loss) minimises log(predicted / measured) over
training and inference rows together, one parameter set for everything; each row is weighted so that every
table on its side (training, inference) weighs the same and the two sides weigh the same in total. Parameters are
bounded to physical ranges (``FIT_BOUNDS``). Communication is not fitted here: the estimator costs collectives
from measured nccl-tests bus bandwidth (``scaleright.estimate.collectives``, fitted per fabric by
``validation/collectives_fit.py``). Left at their defaults: ``attention_bwd_efficiency`` (a kernel ratio from the
FlashAttention-2 paper), ``memory_efficiency``
(degenerate with ``elementwise_factor``) and ``gemm_half_dim``, which these rows cannot identify: fitted, it runs
to either end of [0, 512] depending on whether prefill is timed per prompt or batched. Tables whose hardware is
not the catalog part they are mapped to (``NOT_FITTED``: power-capped GPUs), or whose part has no GEMM measurement
(DGX-GB300; the RTX PRO 6000 PCIe server, whose PCIe peer-to-peer tier is also assumed), are reported but not fitted.
Held-out check: the tables are split in two halves (alternating, by table, never by row); we fit on one half,
report the error on the other, and swap.

Leave-one-source-out (``--loso``, the headline accuracy): each fitted table — training, inference throughput and
TPOT alike — is held out in turn; the fit on every other fitted table (training and inference) scores its rows.
Printed per held-out table: rows, median and p90 |error|, bias and the parameters on a bound in that fold; then
per kind the pooled held-out median and p90 beside the in-sample figure on the same rows, and the reported-only
tables scored with the fit on every fitted table (which never saw them), labelled and outside the pooled figures.
The last line: ``loso_median_pct=… loso_p90_pct=… in_sample_median_pct=… params_at_bound=…`` (training, issue 9),
then ``infer_loso_median_pct=… infer_loso_p90_pct=… infer_in_sample_median_pct=… tpot_loso_median_pct=…
tpot_loso_p90_pct=… tpot_in_sample_median_pct=…``. The ``*_loso_*`` figures pool the fitted tables' held-out
rows; the ``*in_sample_median_pct`` ones are the fitted report's overall figures (every mapped row of that kind,
the reported-only tables included), as the README quotes them. Without ``--loso`` the LOSO keys read ``nan``.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import multiprocessing
import os
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# The repository root on sys.path, so that `python3 benchmarks/<this>.py` imports the validation/ package (the
# reference data and its mapping to model inputs; not part of the installed wheel).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import validation as ref
from scaleright.estimate import fit as fitter
from scaleright.estimate.calibration import ARCH_TABLE, DEFAULT_CALIBRATION, PART_TABLE, Calibration, arch_key

TRAIN_TARGET = 0.10  # median |error| of training TFLOP/s (and tokens/s) per GPU
INFER_TARGET = 0.15  # median |error| of inference throughput
# (low, high) of each fitted parameter: the physical range, not a free knob
FIT_BOUNDS: dict[str, tuple[float, float]] = {
    # shares of the architecture's measured ceilings (``calibration.arch_factors``): at most 1 by construction
    "gemm_efficiency": (0.5, 1.0),
    "fp8_gemm_efficiency": (0.3, 1.0),
    "fp4_gemm_efficiency": (0.2, 1.0),
    "attention_efficiency": (0.3, 1.0),
    "elementwise_factor": (0.25, 3.0),
    "tp_overlap": (0.0, 1.0),  # a share of TP time hidden, where the framework overlaps it
    "step_overhead_s": (0.0, 0.1),
    "decode_overhead_s": (0.0, 0.02),
    "decode_memory_efficiency": (0.5, 1.0),
}
# Tables reported but left out of the fit: their hardware is not the catalog part the rows are mapped to, or the
# model lacks a term their layouts need.
NOT_FITTED = {
    "torchtitan H100 (500 W)": "H100 96GB HBM2e capped at 500 W, mapped to the 700 W h100-sxm",
    "torchtitan/torchao B200": "power-limited B200, mapped to the datasheet b200",
    # 60 of its 109 mapped rows run pipeline parallelism, now served as TensorRT-LLM runs it (pp micro-batches in
    # flight: EngineProfile.overlaps_pipeline_stages; the table's median |error| 48.0 % -> 23.4 %, bias -48 % ->
    # -17 %); what is left is in every layout, pp = 1 too (tp1 pp1 rows -21 %, prefill-heavy rows -30 %): the part
    # has no GEMM measurement of its own (rtx-pro-6000 is uncalibrated, so ``_apart_if_uncalibrated`` keeps it out
    # of the fit without this entry as well), and 53 rows run TP over a PCIe peer-to-peer tier that no reference row
    # measures (catalog: assumed; tp>1 pp1 rows -29 %)
    "TensorRT-LLM v1.0 RTX PRO 6000 (PCIe)": "PCIe server: no GEMM measurement of the part (uncalibrated), PCIe "
                                             "peer-to-peer tier assumed (not measured)",
}
CALIBRATION_PY = Path(__file__).resolve().parents[1] / "src" / "scaleright" / "estimate" / "calibration.py"


# ---- data and predictions ------------------------------------------------------------------------------------------


@dataclass
class Data:
    train: list[ref.TrainCase]
    infer: list[ref.InferCase]  # throughput and latency rows
    skipped: list[ref.Skipped]
    fpt: list[float | None]  # source FLOPs per token of each training case (calibration-free)
    not_fitted: dict[str, str]  # table -> why it is reported but not fitted (NOT_FITTED and the uncalibrated parts')

    @property
    def cases(self) -> list:
        return [*self.train, *self.infer]


def _gemm_measured(gpu) -> bool:
    """Whether ``gpu``'s part or architecture has a measured GEMM ceiling (``ARCH_TABLE`` / ``PART_TABLE``)."""
    entry = PART_TABLE.get(gpu.id) or ARCH_TABLE.get(arch_key(gpu.architecture or ""))
    return entry is not None and entry[0] is not None


def _apart_if_uncalibrated(cases: list, not_fitted: dict[str, str]) -> list:
    """Rows on a part with no measured GEMM ceiling (flagged ``uncalibrated`` in every output: its ceiling is the
    median of the measured architectures) are their own table, added to ``not_fitted``: reported, never fitted (a
    fit on them would tune the shared factors to a chip the model has no ceiling for: GB300 has the same datasheet
    BF16 / FP8 rates as GB200 and measures ~1.2x faster at the same layouts)."""
    out = []
    for c in cases:
        if not _gemm_measured(c.gpu) and c.group not in not_fitted:
            group = f"{c.group} on {c.gpu.id}"
            not_fitted.setdefault(group, f"{c.gpu.id} has no GEMM measurement (uncalibrated)")
            c = dataclasses.replace(c, group=group)
        out.append(c)
    return out


def load_data() -> Data:
    train, s1 = ref.load_train_cases()
    infer, s2 = ref.load_infer_cases()
    not_fitted = dict(NOT_FITTED)
    train, infer = _apart_if_uncalibrated(train, not_fitted), _apart_if_uncalibrated(infer, not_fitted)
    fpt = [None if c.metric == "tokens_per_s_per_gpu" else ref.source_flops_per_token(c) for c in train]
    return Data(train=train, infer=infer, skipped=[*s1, *s2], fpt=fpt, not_fitted=not_fitted)


def predict(data: Data, cal: Calibration, groups: frozenset[str] | None = None) -> np.ndarray:
    """Predicted value of every case (NaN where a case is outside ``groups`` or the model says it does not fit)."""
    out = np.full(len(data.train) + len(data.infer), np.nan)
    for i, c in enumerate(data.train):
        if groups is None or c.group in groups:
            out[i] = ref.predict_train(c, cal, flops_per_token=data.fpt[i])["predicted"]
    n = len(data.train)
    for j, c in enumerate(data.infer):
        if groups is None or c.group in groups:
            out[n + j] = ref.predict_infer(c, cal)["predicted"]
    return out


def measured(data: Data) -> np.ndarray:
    return np.array([c.measured for c in data.cases], dtype=float)


def _is_train(c) -> bool:
    return isinstance(c, ref.TrainCase)


def _kind(c) -> str:
    if _is_train(c):
        return "train"
    return "latency" if c.metric == "tpot_s" else "infer"


def _pct(x: float) -> str:
    return "   n/a" if not np.isfinite(x) else f"{100 * x:5.1f}%"


def _stats(err: np.ndarray) -> tuple[float, float, float]:
    """(median |e|, p90 |e|, median e) over finite errors."""
    e = err[np.isfinite(err)]
    if not len(e):
        return float("nan"), float("nan"), float("nan")
    return float(np.median(np.abs(e))), float(np.percentile(np.abs(e), 90)), float(np.median(e))


_METRIC_NAME = {
    "model_tflops_per_gpu": "model TFLOP/s/GPU", "hardware_tflops_per_gpu": "hardware TFLOP/s/GPU",
    "tokens_per_s_per_gpu": "tokens/s/GPU", "output_tokens_per_s": "output tok/s (system)", "tpot_s": "TPOT s",
}  # fmt: skip


# ---- report --------------------------------------------------------------------------------------------------------


def report(data: Data, cal: Calibration, title: str, *, worst: int = 5) -> dict[str, float]:
    """Print the per-table and overall errors of ``cal``; return the overall medians."""
    pred = predict(data, cal)
    err = pred / measured(data) - 1
    cases = data.cases
    by_group: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(cases):
        by_group[c.group].append(i)
    skipped = Counter(s.group for s in data.skipped)
    print(f"\n=== {title} ===")
    print("error = predicted / measured - 1, in the source's unit and convention\n")
    head = f"{'table':38s} {'used':>4s} {'skip':>4s} {'med|e|':>7s} {'p90|e|':>7s} {'bias':>7s}  metric"
    for kind, label in (("train", "Training"), ("infer", "Inference throughput"), ("latency", "Inference latency "
                        "(TPOT at the Little's-law concurrency; reported separately)")):  # fmt: skip
        groups = sorted({c.group for c in cases if _kind(c) == kind} | {s.group for s in data.skipped if (
            ("TensorRT" not in s.group) == (kind == "train")) and (("TPOT" in s.group) == (kind == "latency"))})
        print(f"{label}\n{head}")
        for g in groups:
            idx = by_group.get(g, [])
            med, p90, bias = _stats(err[idx]) if idx else (float("nan"),) * 3
            metrics = sorted({_METRIC_NAME[cases[i].metric] for i in idx})
            print(f"{g:38s} {len(idx):4d} {skipped.get(g, 0):4d} {_pct(med):>7s} {_pct(p90):>7s} {_pct(bias):>7s}  "
                  f"{', '.join(metrics)}")  # fmt: skip
            ranked = sorted((i for i in idx if np.isfinite(err[i])), key=lambda i: -abs(err[i]))[:worst]
            for i in ranked:
                c = cases[i]
                print(f"      {100 * err[i]:+7.1f}%  line {c.line:3d}  {c.label[:80]}  measured {c.measured:.4g}, "
                      f"predicted {pred[i]:.4g}")  # fmt: skip
            nofit = [cases[i] for i in idx if not np.isfinite(pred[i])]
            if nofit:
                print(f"      ({len(nofit)} rows the model says do not fit in memory: lines "
                      f"{', '.join(str(c.line) for c in nofit[:12])}{' ...' if len(nofit) > 12 else ''})")
        print()
    out = {}
    for kind in ("train", "infer", "latency"):
        idx = [i for i, c in enumerate(cases) if _kind(c) == kind]
        out[kind] = _stats(err[idx])[0]
        out[kind + "_p90"] = _stats(err[idx])[1]
        out[kind + "_n"] = int(np.isfinite(err[idx]).sum())
    tf = [i for i, c in enumerate(cases) if _is_train(c) and c.metric != "tokens_per_s_per_gpu"]
    out["train_tflops"] = _stats(err[tf])[0]
    print("Overall")
    met = {k: "met" if out[k] <= t else "NOT met" for k, t in (("train", TRAIN_TARGET), ("infer", INFER_TARGET))}
    print(f"  training, all rows          median |e| {_pct(out['train'])}  p90 {_pct(out['train_p90'])}  "
          f"({out['train_n']} rows; target <= {TRAIN_TARGET:.0%}: {met['train']})")
    print(f"  training, TFLOP/s rows only median |e| {_pct(out['train_tflops'])}  ({len(tf)} rows)")
    print(f"  inference throughput        median |e| {_pct(out['infer'])}  p90 {_pct(out['infer_p90'])}  "
          f"({out['infer_n']} rows; target <= {INFER_TARGET:.0%}: {met['infer']})")
    print(f"  inference TPOT (separate)   median |e| {_pct(out['latency'])}  p90 {_pct(out['latency_p90'])}  "
          f"({out['latency_n']} rows)")
    return out


def report_skipped(data: Data) -> None:
    print("\nSkipped rows by reason")
    for (src, reason), n in sorted(Counter((s.source, s.reason) for s in data.skipped).items(), key=lambda x: -x[1]):
        print(f"  {n:4d}  {src}: {reason}")
    print(f"  {len(data.skipped):4d}  total (used: {len(data.train)} training, {len(data.infer)} inference)")


def report_conventions(data: Data) -> None:
    """Implied FLOPs/token (source TFLOP/s ÷ source tokens/s) over ours in the declared convention, per table."""
    print("\nFLOP-convention check (source TFLOP/s / source tokens/s, over our FLOPs/token in that convention)")
    ratios: dict[str, list[float]] = defaultdict(list)
    for c, f in zip(data.train, data.fpt, strict=True):
        implied = ref.implied_flops_per_token(c)
        if implied and f:
            ratios[c.group].append(implied / f)
    for g, r in sorted(ratios.items()):
        r = np.array(r)
        print(f"  {g:38s} {len(r):4d} rows  median {np.median(r):.3f}  range {r.min():.3f}-{r.max():.3f}  "
              f"({data.train[[c.group for c in data.train].index(g)].convention})")


# ---- fit -----------------------------------------------------------------------------------------------------------

_POOL_DATA: Data | None = None  # set before forking the worker pool
_NAMES = tuple(FIT_BOUNDS)


def _predict_star(args: tuple[Calibration, frozenset[str]]) -> np.ndarray:
    cal, groups = args
    assert _POOL_DATA is not None  # set before the pool forks
    return predict(_POOL_DATA, cal, groups)


@contextmanager
def fit_pool(data: Data) -> Iterator:
    """The worker pool ``fit`` predicts its Jacobian columns with: forked processes that read ``data``
    (``_predict_star``), two at most (the machine's cores are shared)."""
    global _POOL_DATA
    _POOL_DATA = data
    with multiprocessing.get_context("fork").Pool(max(1, min(2, os.cpu_count() or 1))) as pool:
        yield pool


def table_errors(data: Data, cal: Calibration, group: str, meas: np.ndarray) -> tuple[list[int], np.ndarray]:
    """(the rows of table ``group``, their errors predicted / measured − 1 under ``cal``), predicting only them."""
    idx = [i for i, c in enumerate(data.cases) if c.group == group]
    return idx, predict(data, cal, frozenset({group}))[idx] / meas[idx] - 1


def fit(data: Data, base: Calibration, groups: frozenset[str], pool) -> tuple[Calibration, dict]:
    """The one fitter (``scaleright.estimate.fit``) on the weighted log errors of the rows in ``groups``; the
    Jacobian's columns are predicted in parallel by ``pool``."""
    counts = Counter(c.group for c in data.cases if c.group in groups)  # rows per table
    side_of = {c.group: _is_train(c) for c in data.cases if c.group in groups}
    tables = Counter(side_of.values())  # tables per side (training, inference)
    # every table of a side weighs the same, and training and inference weigh the same in total
    weights = np.array([1 / np.sqrt(counts[c.group] * tables[_is_train(c)]) if c.group in groups else 0.0
                        for c in data.cases])  # fmt: skip
    res = fitter.fit(lambda cal: predict(data, cal, groups), measured(data), base, FIT_BOUNDS, weights=weights,
                     predict_many=lambda cals: pool.map(_predict_star, [(c, groups) for c in cals]))
    return res.calibration, {"nfev": res.nfev, "seconds": res.seconds, "cost": res.cost, "status": res.status,
                             "on_bound": res.on_bound}  # fmt: skip


def held_out_split(data: Data) -> tuple[frozenset[str], frozenset[str]]:
    """Alternate the tables (sorted by name, training and inference separately) into two halves."""
    halves: tuple[set[str], set[str]] = (set(), set())
    for kind in ("train", "infer", "latency"):
        groups = sorted({c.group for c in data.cases if _kind(c) == kind and c.group not in data.not_fitted})
        for k, g in enumerate(groups):
            halves[k % 2].add(g)
    return frozenset(halves[0]), frozenset(halves[1])


def _median_abs(err: np.ndarray, idx: list[int]) -> float:
    e = err[idx]
    e = e[np.isfinite(e)]
    return float(np.median(np.abs(e))) if len(e) else float("nan")


def held_out(data: Data, base: Calibration, pool) -> None:
    a, b = held_out_split(data)
    print("\nHeld-out check (fit on half of the tables, error on the other half)")
    meas = measured(data)
    for fit_on, test_on, name in ((a, b, "A->B"), (b, a, "B->A")):
        cal, info = fit(data, base, fit_on, pool)
        err = predict(data, cal, test_on) / meas - 1
        tr = [i for i, c in enumerate(data.cases) if c.group in test_on and _kind(c) == "train"]
        inf = [i for i, c in enumerate(data.cases) if c.group in test_on and _kind(c) == "infer"]
        lat = [i for i, c in enumerate(data.cases) if c.group in test_on and _kind(c) == "latency"]
        print(f"  {name}: fitted on {len(fit_on)} tables ({info['seconds']:.0f} s); held-out tables: "
              f"{', '.join(sorted(test_on))}")
        print(f"        held-out median |e|: training {_pct(_median_abs(err, tr))} ({len(tr)} rows), "
              f"inference throughput {_pct(_median_abs(err, inf))} ({len(inf)} rows), "
              f"TPOT {_pct(_median_abs(err, lat))} ({len(lat)} rows)")
        print("        fitted: " + ", ".join(f"{n}={getattr(cal, n):.3g}" for n in _NAMES))


def at_bound(cal: Calibration) -> list[str]:
    """Fitted parameters within 0.1 % of their range from a bound."""
    return [n for n in _NAMES if min(getattr(cal, n) - FIT_BOUNDS[n][0], FIT_BOUNDS[n][1] - getattr(cal, n))
            <= 1e-3 * (FIT_BOUNDS[n][1] - FIT_BOUNDS[n][0])]  # fmt: skip


_KIND_LABEL = {"train": "training", "infer": "inference throughput", "latency": "inference TPOT"}


def loso_tables(data: Data) -> list[str]:
    """The tables a leave-one-source-out run holds out in turn: every fitted table, training, then inference
    throughput, then TPOT, each by name."""
    kind_of = {c.group: _kind(c) for c in data.cases}
    order = list(_KIND_LABEL)
    return sorted((g for g in kind_of if g not in data.not_fitted), key=lambda g: (order.index(kind_of[g]), g))


def leave_one_source_out(data: Data, base: Calibration, pool, full: Calibration | None = None) -> dict[str, float]:
    """For each fitted table (``loso_tables``: training and inference): fit on every other fitted table (training
    and inference), error on that table's rows only. Returns the pooled median and 90th percentile of |error| over
    the held-out rows of each kind (``train``, ``infer``, ``latency``; ``<kind>_p90``, ``<kind>_n`` rows) and the
    seconds the training and the inference folds took (``train_s``, ``infer_s``). With ``full`` (the fit on every
    fitted table): also the in-sample figures of ``full`` on the same rows (``<kind>_in_sample``), and the
    reported-only tables (``not_fitted``, in no fit) scored with ``full``, labelled, outside the pooled figures."""
    tables = loso_tables(data)
    all_groups = frozenset(tables)
    meas = measured(data)
    kind_of = {c.group: _kind(c) for c in data.cases}
    rows_of: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(data.cases):
        rows_of[c.group].append(i)
    err = np.full(len(data.cases), np.nan)
    out: dict[str, float] = {"train_s": 0.0, "infer_s": 0.0}
    bound_count: Counter[str] = Counter()
    print("\nLeave-one-source-out (each fitted table in turn; fit on all the other fitted tables, training and "
          "inference; error on the held-out table only)")
    kind = None
    for g in tables:
        if kind_of[g] != kind:
            kind = kind_of[g]
            print(f"  held out: {_KIND_LABEL[kind]} tables")
        t = time.time()
        cal, info = fit(data, base, all_groups - {g}, pool)
        idx, e = table_errors(data, cal, g, meas)
        err[idx] = e
        out["train_s" if kind == "train" else "infer_s"] += time.time() - t
        med, p90, bias = _stats(err[idx])
        bound = at_bound(cal)
        bound_count.update(bound)
        on = ", ".join(f"{n}={getattr(cal, n):.3g} ({'low' if getattr(cal, n) <= sum(FIT_BOUNDS[n]) / 2 else 'high'})"
                       for n in bound)  # fmt: skip
        print(f"  {g:38s} {len(idx):4d} rows  held-out med|e| {_pct(med)}  p90 {_pct(p90)}  bias {_pct(bias)}  "
              f"({info['seconds']:.0f} s)" + (f"  on a bound: {on}" if bound else ""))  # fmt: skip
    in_sample = predict(data, full) / meas - 1 if full is not None else None
    for k, label in _KIND_LABEL.items():
        idx = [i for g in tables if kind_of[g] == k for i in rows_of[g]]
        out[k], out[k + "_p90"], _ = _stats(err[idx])
        out[k + "_n"] = int(np.isfinite(err[idx]).sum())
        line = f"  pooled held-out {label + ' rows:':26s} median |e| {_pct(out[k])}  p90 {_pct(out[k + '_p90'])}  " \
               f"({out[k + '_n']} rows)"  # fmt: skip
        if in_sample is not None:
            out[k + "_in_sample"], p90_in, _ = _stats(in_sample[idx])
            line += f"; in-sample on the same rows {_pct(out[k + '_in_sample'])}, p90 {_pct(p90_in)}"
        print(line)
    print(f"  parameters on a bound (fits out of {len(tables)}): "
          + (", ".join(f"{n} {k}" for n, k in bound_count.most_common()) or "none"))
    print(f"  wall time: {out['train_s']:.0f} s for the training folds, {out['infer_s']:.0f} s for the inference "
          "folds")
    if in_sample is not None:
        nf = sorted(g for g in data.not_fitted if g in rows_of)
        if nf:
            print("  reported, never fitted (in no fold, nor in the fit on every fitted table; scored with that fit):")
        for g in nf:
            idx = rows_of[g]
            med, p90, bias = _stats(in_sample[idx])
            print(f"  {g:38s} {len(idx):4d} rows  not fitted     {_pct(med)}  p90 {_pct(p90)}  bias {_pct(bias)}  "
                  f"({_KIND_LABEL[kind_of[g]]})")  # fmt: skip
    return out


def print_parameters(fitted: Calibration, default: Calibration) -> None:
    print("\nFitted calibration (all training + inference rows jointly)")
    print(f"  {'parameter':26s} {'default':>10s} {'fitted':>10s}  bounds")
    for n in _NAMES:
        lo, hi = FIT_BOUNDS[n]
        v = getattr(fitted, n)
        flag = "  <- at bound" if n in at_bound(fitted) else ""
        print(f"  {n:26s} {getattr(default, n):10.4g} {v:10.4g}  [{lo:g}, {hi:g}]{flag}")


def _fmt(v: float) -> str:
    s = f"{v:.3g}"
    return s if any(ch in s for ch in ".e") else s + ".0"


def write_defaults(cal: Calibration, path: Path = CALIBRATION_PY) -> None:
    """Replace the default value (only the value) of every fitted field in ``calibration.py``."""
    text = path.read_text()
    for n in _NAMES:
        text, k = re.subn(rf"^(    {n}: float = )([^\s#]+)", lambda m, n=n: m.group(1) + _fmt(getattr(cal, n)), text,
                          flags=re.M)  # fmt: skip
        if k != 1:
            raise SystemExit(f"{path}: expected one default for {n}, found {k}")
    path.write_text(text)
    print(f"\nwrote fitted defaults to {path} (check that each field's comment still states its range)")


# ---- main ----------------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fit", action="store_true", help="fit the calibration on all rows and run the held-out check")
    ap.add_argument("--write", action="store_true", help="with --fit: write the fitted defaults into calibration.py")
    ap.add_argument("--worst", type=int, default=5, help="worst rows printed per table (default 5)")
    ap.add_argument("--no-held-out", action="store_true", help="with --fit: skip the held-out check")
    ap.add_argument("--loso", action="store_true",
                    help="with --fit: also leave each fitted table (training and inference) out in turn (one fit "
                         "per table; slow)")
    args = ap.parse_args(argv)
    if args.write and not args.fit:
        ap.error("--write needs --fit")
    if args.fit and importlib.util.find_spec("scipy") is None:
        ap.error('--fit needs scipy: pip install ".[validate]"')
    t0 = time.time()
    data = load_data()
    report(data, DEFAULT_CALIBRATION, "default calibration", worst=args.worst)
    report_skipped(data)
    report_conventions(data)
    if args.fit:
        with fit_pool(data) as pool:
            all_groups = frozenset(c.group for c in data.cases if c.group not in data.not_fitted)
            print("\nNot fitted (reported only): " + "; ".join(f"{g}: {why}" for g, why in data.not_fitted.items()))
            cal, info = fit(data, DEFAULT_CALIBRATION, all_groups, pool)
            print_parameters(cal, DEFAULT_CALIBRATION)
            print(f"  ({info['nfev']} evaluations, {info['seconds']:.0f} s, status {info['status']})")
            fitted = report(data, cal, "fitted calibration", worst=args.worst)
            if not args.no_held_out:
                held_out(data, DEFAULT_CALIBRATION, pool)
            nan = float("nan")
            loso = (leave_one_source_out(data, DEFAULT_CALIBRATION, pool, cal) if args.loso else
                    {k: nan for k in ("train", "train_p90", "infer", "infer_p90", "latency", "latency_p90")})
        if args.write:
            write_defaults(cal)
        bound = at_bound(cal)
        print(f"\n({time.time() - t0:.1f} s)")
        print("fitted parameters on a bound: " + (", ".join(bound) or "none"))
        print(f"loso_median_pct={100 * loso['train']:.1f} loso_p90_pct={100 * loso['train_p90']:.1f} "
              f"in_sample_median_pct={100 * fitted['train']:.1f} params_at_bound={len(bound)} "
              f"infer_loso_median_pct={100 * loso['infer']:.1f} infer_loso_p90_pct={100 * loso['infer_p90']:.1f} "
              f"infer_in_sample_median_pct={100 * fitted['infer']:.1f} "
              f"tpot_loso_median_pct={100 * loso['latency']:.1f} tpot_loso_p90_pct={100 * loso['latency_p90']:.1f} "
              f"tpot_in_sample_median_pct={100 * fitted['latency']:.1f}")
        return 0
    print(f"\n({time.time() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
