"""Accuracy of the collective model (scaleright.estimate.collectives) against measured bus bandwidth.

For every row ``validation.collectives_fit`` maps (collectives.csv, and the PCIe rows of pcie_p2p.csv), the error is
|predicted / measured busbw − 1|. Printed per fabric family: rows, the median error of the shipped parameters
(``catalog/data/collective_fits.yaml``, in sample), the leave-one-source-out median (each source predicted by a fit
on the others; needs scipy, the ``validate`` extra) and the same two for messages of 64 MiB and more (gradient
buckets and FSDP shards); then the skipped rows by reason. The last line is machine-readable:
``loso_median_pct=… in_sample_median_pct=… params_at_bound=…``. Exit 1 when the shipped file was fitted on other
rows (its sha256 differs from the csv files'), or when a refit leaves a parameter on its bound.

    python benchmarks/collectives_accuracy.py
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scaleright.estimate.collectives import CollectiveFits
from validation import collectives_fit as cf

LARGE = 64 * 2**20


def main() -> int:
    rows, skipped, sha = cf.load_rows()
    shipped = CollectiveFits.builtin()
    stale = shipped.rows_sha256 != sha
    ins = np.log(cf.predict_busbw(rows, shipped)) - np.log([r.busbw_gb_per_s for r in rows])
    try:
        refit = cf.fit(rows)
        loso = cf.loso(rows)
        at_bound = refit.at_bound
    except ImportError:
        print("scipy missing: pip install '.[validate]' for the leave-one-source-out refits", file=sys.stderr)
        return 2
    print(f"collective model vs {len(rows)} measured rows ({len(skipped)} skipped); shipped fit "
          f"{shipped.fitted_on} sha256 {shipped.rows_sha256[:12]}{' (STALE: rows changed)' if stale else ''}")
    print(f"{'fabric':10s} {'rows':>5s} {'in-sample':>10s} {'LOSO':>8s} {'>=64MiB rows':>13s} {'in-sample':>10s} {'LOSO':>8s}")
    for f in sorted({r.fabric for r in rows}):
        ix = np.array([r.fabric == f for r in rows])
        big = ix & np.array([r.message_bytes >= LARGE for r in rows])
        med = lambda e, m: float(np.median(cf.pct(e[m]))) if m.any() else float("nan")
        print(f"{f:10s} {ix.sum():5d} {med(ins, ix):9.1f}% {med(loso, ix):7.1f}% {big.sum():13d} "
              f"{med(ins, big):9.1f}% {med(loso, big):7.1f}%")
    by_source = Counter(r.source for r in rows)
    print("sources: " + ", ".join(f"{s} ({k})" for s, k in by_source.most_common()))
    for (src, why), k in Counter((s.group, s.reason) for s in skipped).most_common():
        print(f"  skipped {k:3d}  {src}: {why}")
    print("parameters of the shipped fit: " + ", ".join(
        f"{f}.{p}={getattr(ff, p):.3g}" for f, ff in shipped.fabrics.items() if ff.status == "fitted"
        for p in ("eta", "alpha_us", "ll_eta", "ll_alpha_us", "nvls_eta", "nvls_alpha_us", "tree_ratio")
        if getattr(ff, p) is not None))  # fmt: skip
    print(f"loso_median_pct={float(np.median(cf.pct(loso))):.1f} in_sample_median_pct={float(np.median(cf.pct(ins))):.1f} "
          f"params_at_bound={','.join(at_bound) if at_bound else 'none'}")
    return 1 if stale or at_bound else 0


if __name__ == "__main__":
    sys.exit(main())
