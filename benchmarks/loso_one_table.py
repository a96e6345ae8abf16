"""One fold of ``benchmarks/accuracy.py --fit --loso``: hold out one fitted table, fit on every other fitted table
(training and inference), score the held-out table. A minute instead of the full run's twenty.

    python benchmarks/loso_one_table.py                                   # the TPOT table
    python benchmarks/loso_one_table.py --table "TensorRT-LLM v0.17 throughput"
    python benchmarks/loso_one_table.py --exclude-model qwen3-30b-a3b     # a diagnosis: those rows out of the fit

``--exclude-model`` drops a catalog model's inference rows from the data before the fit (diagnosis only: which rows
pull a parameter). Everything else is ``accuracy.py``'s own functions (``load_data``, ``fit_pool``, ``fit``,
``table_errors``, ``at_bound``). Last line, machine-readable: ``fold_median_pct=… fold_p90_pct=… fold_bias_pct=…
params_at_bound=…``.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import accuracy
from scaleright.estimate.calibration import DEFAULT_CALIBRATION

TPOT_TABLE = "TensorRT-LLM online serving (TPOT)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--table", default=TPOT_TABLE, help=f"the fitted table to hold out (default: {TPOT_TABLE!r})")
    ap.add_argument("--exclude-model", action="append", default=[], metavar="MODEL",
                    help="drop this catalog model's inference rows before the fit (repeatable; diagnosis only)")
    args = ap.parse_args(argv)
    if importlib.util.find_spec("scipy") is None:
        ap.error('the fit needs scipy: pip install ".[validate]"')
    data = accuracy.load_data()
    if args.exclude_model:
        data.infer = [c for c in data.infer if c.spec.name not in args.exclude_model]
    tables = accuracy.loso_tables(data)
    if args.table not in tables:
        ap.error(f"--table {args.table!r} is not a fitted table; fitted: {', '.join(tables)}")
    t0 = time.time()
    with accuracy.fit_pool(data) as pool:
        cal, info = accuracy.fit(data, DEFAULT_CALIBRATION, frozenset(tables) - {args.table}, pool)
    meas = accuracy.measured(data)
    out = (float("nan"),) * 3
    print(f"held out: {args.table}" + (f"; excluded models: {', '.join(args.exclude_model)}" if args.exclude_model
                                       else ""))  # fmt: skip
    print("fitted: " + ", ".join(f"{n}={getattr(cal, n):.4g}" for n in accuracy._NAMES))
    bound = accuracy.at_bound(cal)
    kind_of = {c.group: accuracy._kind(c) for c in data.cases}  # the inference tables in the fit, for context
    for g in [args.table, *(t for t in tables if t != args.table and kind_of[t] != "train")]:
        idx, err = accuracy.table_errors(data, cal, g, meas)
        med, p90, bias = accuracy._stats(err)
        tag = "held out" if g == args.table else "in fit  "
        print(f"  {tag} {g:40s} {len(idx):4d} rows  med|e| {accuracy._pct(med)}  p90 {accuracy._pct(p90)}  "
              f"bias {accuracy._pct(bias)}")  # fmt: skip
        if g == args.table:
            out = (med, p90, bias)
    print(f"({time.time() - t0:.0f} s; {info['nfev']} evaluations; on a bound: {', '.join(bound) or 'none'})")
    print(f"fold_median_pct={100 * out[0]:.1f} fold_p90_pct={100 * out[1]:.1f} fold_bias_pct={100 * out[2]:.1f} "
          f"params_at_bound={len(bound)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
