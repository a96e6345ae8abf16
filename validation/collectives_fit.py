"""The fit of the collective model's per-fabric parameters to measured bus bandwidth (issue #9; validation code).

Rows: ``components/collectives.csv`` (nccl-tests / rccl-tests / all_reduce_bench bus bandwidth against message
size) and the PCIe rows of ``components/pcie_p2p.csv`` (cuda-samples peer-to-peer copies with and without P2P,
and one P2P-disabled latency matrix). Each row becomes a ``CollectiveRow``: the collective, its bytes, its group
(size, GPUs per node) on a ``System`` built here by hand from the row's own fabric columns (an independent mapping:
the fit never reads the catalog's systems.yaml), the algorithm the source forced (if any), the measured bus
bandwidth, and its source. Rows that cannot be mapped are ``Skipped`` with the reason (NIC speed not stated,
message size not stated, copy-engine NVLink figures, ...).

The model is ``scaleright.estimate.collectives`` itself (one home for the formula): for a parameter vector the
fit builds a ``CollectiveFits`` and predicts every row. Parameters (per fabric family, ``FREE``): the Simple
protocol's efficiency ``eta`` and step latency ``alpha_us``, the LL protocol's ``ll_eta`` and ``ll_alpha_us``
where the fabric has small-message rows, the tree's ``tree_ratio`` across nodes, NVLS's ``nvls_eta`` and ``nvls_alpha_us`` on NVSwitch. They are fitted
jointly (multi-node rows depend on the intra-node fabric too) with scipy ``least_squares`` (trust-region
reflective, soft-L1) on log(predicted / measured busbw), in log-parameter space, bounded to ``BOUNDS``; every
source weighs the same. A parameter that ends on its bound is reported: it means the model lacks a term.
Fabrics without rows (TPU ICI, NeuronLink) borrow NVSwitch's values and say so.

    python -m validation.collectives_fit            # fit, report, and write src/scaleright/catalog/data/collective_fits.yaml
    python -m validation.collectives_fit --check    # fit and report only

Leave-one-source-out (LOSO): for each source, refit on the other sources and predict its rows.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from scaleright.catalog.systems import System, Tier
from scaleright.estimate.collectives import CollectiveFits, FabricFit, bus_factor, collective_cost
from validation.files import Skipped, SkipRow, cell_float, read_rows, reference_dir

__all__ = ["BOUNDS", "FREE", "CollectiveRow", "FitResult", "fit", "load_rows", "loso", "main", "predict_busbw"]

GIB = 2**30
OUT_FILE = Path(__file__).resolve().parents[1] / "src" / "scaleright" / "catalog" / "data" / "collective_fits.yaml"

# free parameters per fabric family (the others are absent or borrowed)
FREE: dict[str, tuple[str, ...]] = {
    "nvswitch": ("eta", "alpha_us", "ll_eta", "ll_alpha_us", "nvls_eta", "nvls_alpha_us"),
    "xgmi": ("eta", "alpha_us", "ll_eta", "ll_alpha_us"),
    "nic": ("eta", "alpha_us", "tree_ratio"),
    "efa": ("eta", "alpha_us", "tree_ratio"),
    "pcie-host": ("eta", "alpha_us"),
    "pcie-p2p": ("eta",),
}
TIED = {("nic", "eta"): "efa"}  # (family, parameter) -> the family whose value it takes, when that one has rows
SIBLING = {"efa": "nic", "nic": "efa"}  # a family without rows in a (LOSO) training set takes its sibling's values
BORROWED: dict[str, str | dict[str, str]] = {"pcie-p2p": {"alpha_us": "pcie-host"}, "ici": "nvswitch", "neuronlink": "nvswitch"}
BOUNDS = {"eta": (0.02, 1.0), "ll_eta": (0.005, 1.0), "nvls_eta": (0.05, 1.0), "tree_ratio": (0.05, 1.0),
          "alpha_us": (0.05, 500.0), "ll_alpha_us": (0.05, 500.0), "nvls_alpha_us": (0.05, 2000.0)}  # fmt: skip
START = {"eta": 0.7, "ll_eta": 0.1, "nvls_eta": 0.5, "alpha_us": 5.0, "ll_alpha_us": 2.0, "nvls_alpha_us": 30.0, "tree_ratio": 0.6}


@dataclass(frozen=True)
class CollectiveRow:
    """One measured bus bandwidth and the model inputs it maps to."""

    file: str
    line: int
    source: str  # the source key (repository or thread), for leave-one-source-out
    label: str  # gpu / system as the row names it
    kind: str  # collective kind of scaleright.estimate.collectives
    message_bytes: float
    size: int
    system: System
    algorithm: str  # "auto" unless the source forced one
    busbw_gb_per_s: float  # measured (from the printed time where there is one)

    @property
    def fabric(self) -> str:
        """The fabric whose parameters this row measures most directly: the outermost tier the group uses."""
        inner = self.system.tiers[0]
        spans = inner.domain_gpus is not None and self.size > inner.domain_gpus
        return self.system.tiers[-1].fabric if spans else inner.fabric


def _source_key(src: str) -> str:
    s = src.split(" @")[0].split(" (")[0].strip()
    s = re.sub(r"\s+(network|Azure_Results|training|README|blogs)\b.*$", "", s)
    return s


# intra-node fabric by the row's gpu string: (tier kind, one-direction GB/s, peer link GB/s, NVLS capable, note)
def _intra(gpu: str, fabric: str) -> tuple[str, float, float | None, bool]:
    g = gpu.lower()
    if "4090" in g:
        return ("pcie-p2p" if "p2p" in (g + fabric.lower()) else "pcie-host", 31.5, None, False)
    if "5090" in g:  # stock driver: no P2P on GeForce 50-series (aikitoria PR #5: only with a patched driver)
        return ("pcie-host", 63.0, None, False)
    if "a100" in g:
        return ("nvswitch", 300.0, None, False)
    if "h100" in g or "h200" in g:
        return ("nvswitch", 450.0, None, True)
    if "gb200" in g or "b200" in g:
        return ("nvswitch", 900.0, None, True)
    if "mi355x" in g:  # gpus.yaml mi355x: 535.5 GB/s over 7 peers
        return ("xgmi", 535.5, 76.5, False)
    if "mi300x" in g or "mi325x" in g:  # S1: xGMI 64 GB/s per peer link, 7 peers
        return ("xgmi", 448.0, 64.0, False)
    raise SkipRow(f"no intra-node fabric mapping for gpu {gpu!r}")


def _algorithm(label: str) -> str:
    a = label.lower()
    if "nvlstree" in a:
        raise SkipRow("NVLSTree (NVLS inside nodes plus a tree across them) is not modelled")
    if "nvls_enable=0" in a or "ncclalgo=ring" in a.replace("_", "") or "allreduce:ring" in a or \
            a.startswith("ring, in-place"):  # fmt: skip
        return "ring"
    if "nvls_enable=1" in a:
        return "nvls"
    return "auto"


def _system(label: str, intra: tuple, g: int, nic: tuple[Any, float, float] | None) -> System:
    kind, bw, peer, nvls = intra
    tiers = [Tier(kind=kind, domain_gpus=g, bandwidth_gb_per_s=bw, peer_link_gb_per_s=peer,
                  in_network_reduction=nvls, source="row")]  # fmt: skip
    if nic is not None:
        tiers.append(Tier(kind=nic[0], bandwidth_gb_per_s=nic[1], shared_by_gpus=nic[2], source="row"))
    return System(id="row", name=label, accelerators=["row"], gpus_per_node=g, tiers=tiers, source="row")


def _collective_rows(directory) -> tuple[list[CollectiveRow], list[Skipped]]:
    rows, skipped = [], []
    for line, r in read_rows("components/collectives.csv", directory):
        src = _source_key(r["source"])
        try:
            kind = r["collective"].strip()
            nodes = int(r["num_nodes_count"])
            g = int(r["gpus_per_node_count"])
            n = int(r["num_gpus_count"])
            if kind.startswith("ib_write_bw"):
                raise SkipRow("ib_write_bw message size not stated")
            size_cell, bus = r["message_size_bytes"].strip(), r["busbw_GB_per_s_nccl_tests_definition"].strip()
            peak = re.search(r"~?([\d.]+)\s*\(peak\)", bus)
            if size_cell.isdigit():
                s = float(size_cell)
            elif "1GiB-8GiB" in size_cell:
                s = 8.0 * GIB  # the maximum over a 1-8 GiB sweep: saturated, taken at the top of the sweep
            elif "128MiB" in size_cell and peak:
                raise SkipRow("user-reported approximate peak of a sweep that stops at 128 MiB, at no stated size: "
                              "a check (tests/test_collectives.py), not a fitted row")  # fmt: skip
            else:
                raise SkipRow(f"message size {size_cell or 'blank'!r} not stated")
            busbw = float(peak.group(1)) if peak else cell_float(bus)
            if busbw is None:
                raise SkipRow(f"busbw {bus!r} is not a number")
            t_us = cell_float(r["time_us_microseconds"])
            if t_us:
                busbw = s * float(bus_factor(kind, n)) / (t_us * 1e-6) / 1e9
            elif busbw < 0.05:
                raise SkipRow(f"busbw {bus} printed with two decimals and no time: rounding error over 10%")
            nic = None
            if nodes > 1:
                per_gpu = cell_float(r["nic_bw_per_gpu_Gbit_per_s"])
                if per_gpu is None:
                    raise SkipRow(f"NIC speed {r['nic_bw_per_gpu_Gbit_per_s']!r}: not stated")
                fab = r["inter_node_fabric"]
                nic_kind = "efa" if "EFA" in fab else "roce" if "RoCE" in fab else "infiniband"
                m = re.search(r"(\d+)x ([\d.]+) Gb/s", fab)
                if m:  # e.g. "4x 200 Gb/s HCAs per node": the NIC's own speed and GPUs per NIC
                    nic = (nic_kind, float(m.group(2)) / 8.0, g / int(m.group(1)))
                else:
                    nic = (nic_kind, per_gpu / 8.0, 1.0)
            algo = _algorithm(r["algorithm_protocol"])
            system = _system(r["gpu"], _intra(r["gpu"], r["intra_node_fabric"]), g, nic)
            rows.append(CollectiveRow("collectives.csv", line, src, r["gpu"], kind, s, n, system, algo, busbw))
        except SkipRow as why:
            skipped.append(Skipped("collectives.csv", line, src, str(why)))
    return rows, skipped


def _mid(cell: str) -> float | None:
    m = re.match(r"\s*([\d.]+)(?:-([\d.]+))?", cell or "")
    if not m:
        return None
    lo = float(m.group(1))
    return (lo + float(m.group(2))) / 2 if m.group(2) else lo


def _pcie_rows(directory) -> tuple[list[CollectiveRow], list[Skipped]]:
    rows, skipped = [], []
    for line, r in read_rows("components/pcie_p2p.csv", directory):
        src = _source_key(r["source"])
        try:
            link = r["link"]
            if "PCIe" not in link or "NVLink" in link or (r["direction"] in ("H2D", "D2H", "") and \
                    not r["latency_us_microseconds"]):  # fmt: skip
                raise SkipRow("not a GPU-to-GPU PCIe transfer (host link, NVLink copy engine, or a peer query)")
            gen = re.search(r"PCIe ([345])\.0", link)
            if gen is None:
                raise SkipRow(f"PCIe generation or width not stated ({link!r}): no spec to scale")
            spec = {"3": 15.75, "4": 31.5, "5": 63.0}[gen.group(1)]
            p2p_off = "disabled" in (link + r["p2p_supported"] + r["test"]).lower() or \
                "not enabled" in link.lower() or r["p2p_supported"].lower().startswith("no")  # fmt: skip
            kind = "pcie-host" if p2p_off else "pcie-p2p"
            lat = _mid(r["latency_us_microseconds"])
            if lat is not None:  # latency matrix: a transfer of one int (4 bytes)
                s, busbw = 4.0, 4.0 / (lat * 1e-6) / 1e9
            else:
                v = _mid(r["achieved_GB_per_s"])
                if v is None:
                    raise SkipRow("no bandwidth value")
                busbw = v / 2.0 if r["direction"] == "bidirectional" else v  # per direction
                s = 64.0 * 2**20 if "simpleP2P" in r["tool"] else 160e6  # simpleP2P 64 MiB; p2pBandwidthLatencyTest 40M ints
            system = _system(r["gpu"], (kind, spec, None, False), 2, None)
            rows.append(CollectiveRow("pcie_p2p.csv", line, src, r["gpu"] + " / " + r["system"], "p2p", s, 2,
                                      system, "auto", busbw))  # fmt: skip
        except SkipRow as why:
            skipped.append(Skipped("pcie_p2p.csv", line, src, str(why)))
    return rows, skipped


def load_rows(directory=None) -> tuple[list[CollectiveRow], list[Skipped], str]:
    """Mapped rows, skipped rows, and the sha256 of the two csv files' bytes."""
    a, sa = _collective_rows(directory)
    b, sb = _pcie_rows(directory)
    ref = reference_dir(directory) / "components"
    h = hashlib.sha256()
    for name in ("collectives.csv", "pcie_p2p.csv"):
        h.update((ref / name).read_bytes())
    return a + b, sa + sb, h.hexdigest()


# ---- parameters -------------------------------------------------------------------------------------------------

def _names(present: set[str] | None = None) -> list[tuple[str, str]]:
    """(family, parameter) of the free parameters: every family of ``FREE`` that has rows (default: all).

    RDMA NICs share one line-rate fraction (``TIED``: InfiniBand/RoCE take EFA's ``eta`` when EFA rows are present):
    the RoCE rows (MI355X, 2 nodes) saturate at the xGMI limit and cannot identify it, and ib_write_bw (97 %) and
    the NCCL maintainer's NDR figure (46-48 of 50 GB/s) put every RDMA NIC at the same fraction.
    """
    present = set(FREE) if present is None else present
    out = []
    for f, ps in FREE.items():
        if f not in present:
            continue
        out += [(f, p) for p in ps if TIED.get((f, p)) not in present]
    return out


def fits_from_vector(x: np.ndarray, present: set[str] | None = None) -> CollectiveFits:
    names = _names(present)
    vals: dict[str, dict[str, float]] = {f: {} for f in FREE}
    for (f, p), v in zip(names, x, strict=True):
        vals[f][p] = float(v)
    for (f, p), other in TIED.items():
        if vals[f] and p not in vals[f] and vals[other]:
            vals[f][p] = vals[other][p]
    status = {f: "fitted" for f in FREE}
    for f in FREE:
        if not vals[f]:
            sib = SIBLING.get(f)
            if sib is None or not vals[sib]:
                raise ValueError(f"fabric {f} has no rows and no sibling with rows to borrow from")
            vals[f] = dict(vals[sib])
            status[f] = f"borrowed from {sib} (no rows)"
    for f, what in BORROWED.items():
        if isinstance(what, dict):
            for p, src in what.items():
                vals[f][p] = vals[src][p]
    fabrics = {f: FabricFit(**v, status=status[f]) for f, v in vals.items()}
    for f, whole in BORROWED.items():
        if isinstance(whole, str):
            o = vals[whole]
            fabrics[f] = FabricFit(eta=o["eta"], alpha_us=o["alpha_us"], ll_eta=o.get("ll_eta"),
                                   ll_alpha_us=o.get("ll_alpha_us"), status=f"borrowed from {whole}")  # fmt: skip
    return CollectiveFits(fabrics)


def _groups(rows: list[CollectiveRow]) -> list[tuple[CollectiveRow, np.ndarray, np.ndarray]]:
    """Rows that differ only in message size, evaluated as one array: (first row, row indices, sizes)."""
    by: dict[tuple, list[int]] = {}
    for i, r in enumerate(rows):
        by.setdefault((r.system.model_dump_json(), r.kind, r.algorithm, r.size), []).append(i)
    return [(rows[ix[0]], np.array(ix), np.array([rows[i].message_bytes for i in ix])) for ix in by.values()]


def predict_busbw(rows: list[CollectiveRow], fits: CollectiveFits, groups=None) -> np.ndarray:
    """The model's bus bandwidth (GB/s) for each row."""
    out = np.empty(len(rows))
    for r, ix, sizes in groups if groups is not None else _groups(rows):
        c = collective_cost(r.kind, sizes, system=r.system, size=r.size, algorithm=r.algorithm, fits=fits)
        out[ix] = c.busbw_gb_per_s
    return out


@dataclass(frozen=True)
class FitResult:
    x: np.ndarray
    fits: CollectiveFits
    at_bound: list[str]
    residual_log: np.ndarray  # log(pred / measured) per row, in-sample
    names: list[tuple[str, str]]  # (family, parameter) of each entry of x


def _weights(rows: list[CollectiveRow]) -> np.ndarray:
    from collections import Counter

    per_source = Counter(r.source for r in rows)
    return np.array([1.0 / math.sqrt(per_source[r.source]) for r in rows])


def fit(rows: list[CollectiveRow]) -> FitResult:
    """Least-squares fit of the free parameters (needs scipy: the ``validate`` extra)."""
    from scipy.optimize import least_squares

    present = {r.fabric for r in rows}
    names = _names(present)
    lo = np.log([BOUNDS[p][0] for _, p in names])
    hi = np.log([BOUNDS[p][1] for _, p in names])
    x0 = np.log([START[p] for _, p in names])
    meas = np.log([r.busbw_gb_per_s for r in rows])
    w = _weights(rows)
    groups = _groups(rows)

    def resid(z):
        return w * (np.log(predict_busbw(rows, fits_from_vector(np.exp(z), present), groups)) - meas)

    # min() over protocols and algorithms makes the cost piecewise smooth: start from a few points, keep the best
    sol = None
    for shift in (0.0, -0.5, 0.5):
        z0 = np.clip(x0 + shift, lo + 1e-6, hi - 1e-6)
        cand = least_squares(resid, z0, bounds=(lo, hi), loss="soft_l1", f_scale=0.2, diff_step=1e-3)
        if sol is None or cand.cost < sol.cost:
            sol = cand
    assert sol is not None
    x = np.exp(sol.x)
    at = [f"{f}.{p}" for (f, p), z, a, b in zip(names, sol.x, lo, hi, strict=True) if min(z - a, b - z) < 1e-3]
    fits = fits_from_vector(x, present)
    return FitResult(x, fits, at, np.log(predict_busbw(rows, fits)) - meas, names)


def loso(rows: list[CollectiveRow]) -> np.ndarray:
    """log(pred / measured) per row, each predicted by a fit without its source."""
    out = np.full(len(rows), np.nan)
    for src in sorted({r.source for r in rows}):
        train = [r for r in rows if r.source != src]
        test_i = [i for i, r in enumerate(rows) if r.source == src]
        res = fit(train)
        pred = predict_busbw([rows[i] for i in test_i], res.fits)
        out[test_i] = np.log(pred) - np.log([rows[i].busbw_gb_per_s for i in test_i])
    return out


def pct(logerr: np.ndarray) -> np.ndarray:
    """|predicted / measured − 1| in percent."""
    return 100.0 * np.abs(np.expm1(logerr))


def per_fabric(rows: list[CollectiveRow], logerr: np.ndarray) -> dict[str, tuple[int, float]]:
    out = {}
    for f in sorted({r.fabric for r in rows}):
        e = pct(np.array([x for r, x in zip(rows, logerr, strict=True) if r.fabric == f]))
        out[f] = (len(e), float(np.median(e)))
    return out


def write_yaml(res: FitResult, rows: list[CollectiveRow], sha: str, path: Path = OUT_FILE) -> None:
    import yaml

    names = res.names
    data: dict = {
        "rows_sha256": sha,
        "fitted_on": _dt.date.today().isoformat(),
        "rows_used": len(rows),
        "written_by": "python -m validation.collectives_fit (do not edit by hand)",
        "model": "scaleright.estimate.collectives: busbw = B / (1 + alpha_total*B/(S*f)), B = eta * link spec",
        "params_at_bound": res.at_bound,
        "fabrics": {},
    }
    vals = dict(zip(names, res.x, strict=True))
    for f, ff in res.fits.fabrics.items():
        params = {}
        for p in ("eta", "alpha_us", "ll_eta", "ll_alpha_us", "nvls_eta", "nvls_alpha_us", "tree_ratio"):
            v = getattr(ff, p)
            if v is None:
                continue
            if (f, p) in vals:
                params[p] = {"value": round(float(v), 6), "bounds": list(BOUNDS[p])}
            else:
                params[p] = {"value": round(float(v), 6), "borrowed": True}
        data["fabrics"][f] = {"status": ff.status, "rows": sum(r.fabric == f for r in rows), "params": params}
    header = ("# Fitted parameters of scaleright.estimate.collectives, one entry per fabric family. Written by\n"
              "# validation/collectives_fit.py from validation/reference/components/collectives.csv and pcie_p2p.csv\n"
              "# (rows_sha256 is the sha256 of those two files). eta: achieved fraction of the link's one-direction\n"
              "# spec; alpha_us: latency of one algorithm step (µs); ll_*: NCCL's LL protocol; nvls_*: NVLink SHARP.\n")  # fmt: skip
    path.write_text(header + yaml.safe_dump(data, sort_keys=False, width=110, default_flow_style=None), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="fit and report; do not write the yaml")
    ap.add_argument("--no-loso", action="store_true", help="skip the leave-one-source-out refits")
    args = ap.parse_args(argv)
    rows, skipped, sha = load_rows()
    res = fit(rows)
    ins = per_fabric(rows, res.residual_log)
    lo = per_fabric(rows, loso(rows)) if not args.no_loso else {}
    print(f"rows used {len(rows)}, skipped {len(skipped)}; sha256 {sha[:12]}")
    for f, (k, e) in ins.items():
        print(f"  {f:10s} rows {k:3d}  in-sample median |err| {e:5.1f}%  LOSO {lo.get(f, (0, float('nan')))[1]:5.1f}%")
    for (f, p), v in zip(res.names, res.x, strict=True):
        print(f"  {f}.{p} = {v:.4g}")
    print(f"params at bound: {res.at_bound or 'none'}")
    if not args.check:
        write_yaml(res, rows, sha)
        print(f"wrote {OUT_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
