"""Fresh rent prices without hand edits: SkyPilot catalog CSVs or a gpuhunt query → a user ``prices.csv``.

``scaleright prices import --from skypilot-catalog PATH --out DIR`` and ``--from gpuhunt --out DIR`` write
``DIR/prices.csv`` (columns ``PRICE_COLUMNS``) that ``--catalog DIR`` reads.

**SkyPilot's format** (read from the SkyPilot 0.14.1 source, ``sky/catalog/common.py`` and the fetchers in
``sky/catalog/data_fetchers/``; the hosted files are ``skypilot-org/skypilot-catalog``'s
``catalogs/v8/<cloud>/vms.csv``): one row per instance type, region and (where the cloud has them) availability
zone, with columns ``InstanceType, AcceleratorName, AcceleratorCount, vCPUs, MemoryGiB, Price, SpotPrice, Region``
and optionally ``AvailabilityZone`` and ``GpuInfo`` (a Python-literal dict whose ``Gpus[0].MemoryInfo.SizeInMiB``
is the memory of one GPU on AWS and Lambda; GCP and Azure put the bare accelerator name there). ``Price`` and
``SpotPrice`` are US dollars per instance-hour; an empty cell means no offer of that kind. The file names no cloud
and carries no date: the cloud is the name of the directory holding ``vms.csv`` (or ``--provider``), the date is
the file's modification day (when it was downloaded) unless ``--date`` gives the snapshot's day.

**gpuhunt** (``gpuhunt.query()``, the library dstack uses to read providers' public offer lists) returns
``CatalogItem`` records: ``provider``, ``instance_name``, ``location``, ``price`` (USD per instance-hour),
``gpu_count``, ``gpu_name``, ``gpu_memory`` (GB per GPU, nominal), ``spot``. Its rows are dated the day of the query.

**Mapping accelerator names to catalog GPU ids** is explicit, never a guess: ``FAMILIES`` lists the catalog parts a
vendor name can mean; the per-GPU memory (from ``GpuInfo``, SkyPilot's name convention — ``A100`` is the 40 GB part,
``A100-80GB`` the 80 GB one, ``V100`` 16 GB — or gpuhunt's ``gpu_memory``) and the form factor the instance type
states (``FORM_HINTS``: ``pcie``/``sxm``/``nvl`` in the name, or the provider's documented instance families)
narrow them; exactly one candidate left maps, otherwise the offer is skipped and reported (``unknown``: a name with
no catalog part; ``ambiguous``: e.g. an H100 whose instance does not say SXM or PCIe; ``memory``: no candidate
with that memory). Fractional GPUs (Azure's 1/6 A10, AWS's g6f L4 shares) are skipped: a share is not a GPU-hour.
GCP lists GPUs without a machine (the accelerator's own price): a GPU with a dedicated machine family (A2, A3, A4,
G2, G4: ``GCP_HOSTS``) is priced with the cheapest such host VM in its zone added; the others (N1-attached T4, V100,
...: the host is the user's choice) are skipped.

**Price per GPU-hour** = instance price / GPU count (noted ``derived: /N`` as in the built-in rows); per GPU id,
kind (``Price`` → on-demand, ``SpotPrice`` → spot), provider and region the cheapest instance is kept.
"""

from __future__ import annotations

import ast
import csv
import datetime
import functools
import hashlib
import io
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from scaleright.catalog.prices import PRICE_COLUMNS, PriceRow
from scaleright.errors import CatalogFileError, InputError
from scaleright.textfile import _short, path_problem, read_text

if TYPE_CHECKING:
    from scaleright.catalog.store import Catalog

__all__ = ["Offer", "ImportResult", "FAMILIES", "FORM_HINTS", "SKYPILOT_CLOUDS", "SOURCES", "resolve_gpu",
           "skypilot_files", "read_skypilot", "skypilot_source", "query_gpuhunt", "price_rows", "prices_csv"]

SOURCES = ("skypilot-catalog", "gpuhunt")
# The cloud directories of skypilot-org/skypilot-catalog (SkyPilot 0.14.1, sky/skylet/constants.py ALL_CLOUDS)
SKYPILOT_CLOUDS = ("aws", "azure", "gcp", "ibm", "lambda", "scp", "oci", "kubernetes", "runpod", "vast", "vsphere",
                   "cudo", "fluidstack", "paperspace", "primeintellect", "do", "nebius", "ssh", "slurm", "hyperbolic",
                   "seeweb", "shadeform", "yotta", "mithril", "verda")  # fmt: skip
_DISPLAY = {"aws": "AWS", "gcp": "GCP", "azure": "Azure", "lambda": "Lambda", "lambdalabs": "Lambda",
            "runpod": "RunPod", "oci": "OCI", "ibm": "IBM", "do": "DigitalOcean", "digitalocean": "DigitalOcean",
            "vast": "Vast.ai", "vastai": "Vast.ai", "nebius": "Nebius", "cudo": "Cudo", "fluidstack": "FluidStack",
            "paperspace": "Paperspace", "verda": "Verda", "hyperbolic": "Hyperbolic"}  # fmt: skip
SKYPILOT_REQUIRED = ("InstanceType", "AcceleratorName", "AcceleratorCount", "Price", "SpotPrice", "Region")

# Vendor accelerator name (upper case, letters and digits only) -> the catalog parts it can mean, with each part's
# form factor ("" where the catalog has one form of the part). Names not here are reported as unknown.
FAMILIES: dict[str, tuple[tuple[str, str], ...]] = {
    "A100": (("a100-40gb", "sxm"), ("a100-40gb-pcie", "pcie"), ("a100-80gb", "sxm"), ("a100-80gb-pcie", "pcie")),
    "H100": (("h100-sxm", "sxm"), ("h100-pcie", "pcie"), ("h100-nvl", "nvl")),
    "H100SXM": (("h100-sxm", "sxm"),),
    "H100MEGA": (("h100-sxm", "sxm"),),  # GCP a3-megagpu: the same SXM part with more NICs (SkyPilot fetch_gcp.py)
    "H100NVL": (("h100-nvl", "nvl"),),
    "H200": (("h200-sxm", "sxm"), ("h200-nvl", "nvl")),
    "H200SXM": (("h200-sxm", "sxm"),),
    "H200NVL": (("h200-nvl", "nvl"),),
    "V100": (("v100-32gb", "sxm"),),  # the catalog has the 32 GB SXM2 part only: a 16 GB V100 is reported
    "B200": (("b200", ""),), "GB200": (("gb200", ""),), "GB300": (("gb300", ""),), "GH200": (("gh200", ""),),
    "H800": (("h800", ""),), "H20": (("h20", ""),),
    "L4": (("l4", ""),), "L40": (("l40", ""),), "L40S": (("l40s", ""),), "T4": (("t4", ""),),
    "A10": (("a10", ""),), "A10G": (("a10g", ""),),
    "A6000": (("rtx-a6000", ""),), "RTXA6000": (("rtx-a6000", ""),),
    "RTX3090": (("rtx-3090", ""),), "RTX4090": (("rtx-4090", ""),), "RTX5090": (("rtx-5090", ""),),
    "RTX6000ADA": (("rtx-6000-ada", ""),), "RTXPRO6000": (("rtx-pro-6000", ""),),
    "RTXPRO6000WK": (("rtx-pro-6000", ""),),  # RunPod's Workstation Edition (SkyPilot fetch_runpod.py)
    "MI250X": (("mi250x", ""),), "MI300X": (("mi300x", ""),), "MI325X": (("mi325x", ""),),
    "MI355X": (("mi355x", ""),),
}
# SkyPilot names that fix the memory (GiB per GPU) where GpuInfo does not say: SkyPilot fetch_gcp.py
# ('A100': 40 * 1024, 'A100-80GB': 80 * 1024), fetch_aws.py (p3 V100: 16 GiB), fetch_azure.py ('V100-32GB').
_SKYPILOT_NAMES: dict[str, tuple[str, float | None, str]] = {  # name -> (family, GiB per GPU, form)
    "A100": ("A100", 40, ""), "A10080GB": ("A100", 80, ""), "A10080GBSXM": ("A100", 80, "sxm"),
    "V100": ("V100", 16, ""), "V10032GB": ("V100", 32, ""), "V100SXM2": ("V100", 16, "sxm"),
    "V100SXM232GB": ("V100", 32, "sxm"),
}
# Form factor stated by the instance type: (provider or None for any, regex on the instance type, form). Sources:
# AWS EC2 accelerated-computing docs (p4d/p4de: HGX A100 SXM4; p5/p5e/p5en: HGX H100/H200 SXM5), GCP's A2/A3
# machine types (HGX A100 / H100), Azure's ND-series (HGX) vs NC A100 v4 (A100 PCIe) and NC H100 v5 (H100 NVL),
# and SkyPilot's fetch_runpod.py, which files RunPod's 'A100-PCIe' as A100-80GB and 'H100-PCIe' as H100.
FORM_HINTS: tuple[tuple[str | None, re.Pattern[str], str], ...] = (
    (None, re.compile(r"pcie", re.I), "pcie"),
    (None, re.compile(r"sxm", re.I), "sxm"),
    (None, re.compile(r"nvl", re.I), "nvl"),
    ("aws", re.compile(r"^p(4d|4de|5|5e|5en)\."), "sxm"),
    ("gcp", re.compile(r"^a[23]-"), "sxm"),
    ("azure", re.compile(r"^Standard_ND", re.I), "sxm"),
    ("azure", re.compile(r"^Standard_NC\d+ads_A100_v4", re.I), "pcie"),
    ("azure", re.compile(r"^Standard_NC\d+a?d?i?s_H100_v5", re.I), "nvl"),
    ("runpod", re.compile(r"^\d+x_(A100-80GB|H100)_"), "pcie"),
)
_MEMORY_TOLERANCE = 0.12  # a nominal GiB figure within 12 % of the part's memory (AWS's L4: 22,888 MiB of 24 GiB)
_GIB = 2**30


def _key(name: str) -> str:
    return re.sub(r"[^A-Z0-9]", "", name.upper())


def _provider_key(provider: str) -> str:
    return re.sub(r"[^a-z0-9]", "", provider.lower())


@dataclass(frozen=True)
class Offer:
    """One instance offer as read: price per instance-hour, the GPUs it has, where it is."""

    provider: str  # skypilot cloud directory or gpuhunt provider name, e.g. "aws"
    instance_type: str
    accelerator: str  # the vendor name as the source writes it
    gpu_count: float
    gpu_memory_gib: float | None  # per GPU, when the source says
    usd_per_hour: float  # per instance
    kind: str  # on-demand | spot
    region: str
    form: str = ""  # form factor the source's name states (SkyPilot's A100-80GB-SXM)
    note: str = ""  # how the price was composed, when not one listed instance price


@dataclass
class ImportResult:
    """The rows to write and what was left out, counted by reason (one key per accelerator name and reason)."""

    rows: list[PriceRow]
    skipped: Counter[str] = field(default_factory=Counter)
    offers_read: int = 0


def resolve_gpu(family: str, memory_gib: float | None, provider: str, instance_type: str, *, form: str = "",
                catalog: Catalog) -> tuple[str | None, str]:  # fmt: skip
    """The catalog GPU id an offer's accelerator is, or (None, reason). See the module docstring for the rule."""
    cands = FAMILIES.get(_key(family))
    if cands is None:
        return None, "unknown: no catalog GPU of that name"
    cands = tuple(c for c in cands if c[0] in catalog.gpus)
    if memory_gib is not None:
        cands = tuple(c for c in cands
                      if abs(catalog.gpus[c[0]].memory_gb * 1e9 / _GIB - memory_gib) <= _MEMORY_TOLERANCE * memory_gib)
        if not cands:
            return None, f"memory: no catalog part of that name has {memory_gib:g} GiB"
    forms = {form} if form else set()
    pk = _provider_key(provider)
    for prov, pattern, hint in FORM_HINTS:
        if (prov is None or prov == pk) and pattern.search(instance_type):
            forms.add(hint)
    if len({c[1] for c in cands}) > 1:  # the catalog has this part in more than one form: the instance must say
        if len(forms) > 1:
            return None, f"ambiguous: instance type names forms {sorted(forms)}"
        cands = tuple(c for c in cands if c[1] in forms)
        if not cands:
            return None, "ambiguous: the instance type does not say SXM, PCIe or NVL"
    elif forms and cands[0][1] and cands[0][1] not in forms:
        return None, f"form: the catalog has the {cands[0][1].upper()} part only, the instance is {sorted(forms)[0]}"
    ids = sorted({c[0] for c in cands})
    if len(ids) != 1:
        return None, f"ambiguous: could be {', '.join(ids)}"
    return ids[0], ""


# ---- SkyPilot catalog CSVs -------------------------------------------------------------------------------------


def skypilot_files(path: Path, provider: str | None) -> list[tuple[Path, str]]:
    """(vms.csv, cloud) pairs under ``path``: a vms.csv file, a cloud directory holding one, or a catalog root
    (``catalogs/v8``) with ``<cloud>/vms.csv`` in it. The cloud is ``provider`` or the directory's name."""
    why = path_problem(path, want="dir")
    if why is None:
        if path_problem(path / "vms.csv") is None:
            pairs = [(path / "vms.csv", provider or path.resolve().name)]
        else:
            pairs = sorted((p, provider or p.parent.name) for p in path.glob("*/vms.csv") if path_problem(p) is None)
            if not pairs:
                raise InputError(f"PATH={_short(path)}: no vms.csv in it nor in its <cloud>/ subdirectories "
                                 "(a SkyPilot catalog directory such as skypilot-catalog/catalogs/v8)")  # fmt: skip
    else:
        why = path_problem(path)
        if why is not None:
            raise InputError(f"PATH={_short(path)}: {why}")
        pairs = [(path, provider or path.resolve().parent.name)]
    if provider is not None and len(pairs) > 1:
        raise InputError(f"--provider={provider}: names the cloud of one vms.csv, and PATH={_short(path)} holds "
                         f"{len(pairs)} (one per <cloud>/ directory); drop --provider")  # fmt: skip
    for file, cloud in pairs:
        if provider is None and cloud not in SKYPILOT_CLOUDS:
            raise InputError(f"PATH={_short(file)}: the directory name '{cloud}' is not a SkyPilot cloud "
                             f"({', '.join(SKYPILOT_CLOUDS)}); keep the catalog's <cloud>/vms.csv layout or pass "
                             "--provider NAME")  # fmt: skip
    return pairs


def _number(file: Path, line: int, column: str, text: str | None, *, allow_empty: bool) -> float | None:
    s = (text or "").strip()
    if s == "" or s.lower() == "nan":
        if allow_empty:
            return None
        raise CatalogFileError(f"{_short(file)}: line {line}: {column}: empty; a number is required")
    try:
        v = float(s)
    except ValueError:
        raise CatalogFileError(f"{_short(file)}: line {line}: {column}: {s[:40]!r} is not a number") from None
    if not math.isfinite(v) or v < 0:
        raise CatalogFileError(f"{_short(file)}: line {line}: {column}: {s[:40]!r}; a finite number >= 0 is allowed")
    return v


@functools.lru_cache(maxsize=4096)  # a catalog repeats each instance's GpuInfo once per region and zone
def _gpuinfo_gib(text: str | None) -> float | None:
    """Per-GPU memory from SkyPilot's ``GpuInfo`` (AWS, Lambda: a Python-literal dict); None when it holds none."""
    if not text or "SizeInMiB" not in text or len(text) > 10_000:
        return None
    try:
        info = ast.literal_eval(text)
        mib = info["Gpus"][0]["MemoryInfo"]["SizeInMiB"]
    except (ValueError, SyntaxError, KeyError, IndexError, TypeError, MemoryError, RecursionError):
        return None
    return float(mib) / 1024 if isinstance(mib, (int, float)) and mib > 0 else None


# GCP lists each GPU without a machine (InstanceType empty, the accelerator's own price) and the machines without
# GPUs; a GPU's instance is that price plus its host VM's. For the GPUs that need a dedicated machine family these are
# the hosts (SkyPilot 0.14.1 sky/catalog/gcp_catalog.py _ACC_INSTANCE_TYPE_DICTS, from cloud.google.com/compute/docs/
# gpus), the cheapest in the same zone taken, as SkyPilot's optimizer does; GPUs attached to N1 machines (T4, V100,
# P100, ...) have a host of the user's choosing and are skipped.
GCP_HOSTS: dict[str, dict[int, tuple[str, ...]]] = {
    "A100": {1: ("a2-highgpu-1g",), 2: ("a2-highgpu-2g",), 4: ("a2-highgpu-4g",), 8: ("a2-highgpu-8g",),
             16: ("a2-megagpu-16g",)},
    "A100-80GB": {1: ("a2-ultragpu-1g",), 2: ("a2-ultragpu-2g",), 4: ("a2-ultragpu-4g",), 8: ("a2-ultragpu-8g",)},
    "L4": {1: ("g2-standard-4", "g2-standard-8", "g2-standard-12", "g2-standard-16", "g2-standard-32"),
           2: ("g2-standard-24",), 4: ("g2-standard-48",), 8: ("g2-standard-96",)},
    "H100": {1: ("a3-highgpu-1g",), 2: ("a3-highgpu-2g",), 4: ("a3-highgpu-4g",), 8: ("a3-highgpu-8g",)},
    "H100-MEGA": {8: ("a3-megagpu-8g",)},
    "H200": {8: ("a3-ultragpu-8g",)},
    "B200": {8: ("a4-highgpu-8g",)},
    "RTXPRO6000": {1: ("g4-standard-48",), 2: ("g4-standard-96",), 4: ("g4-standard-192",),
                   8: ("g4-standard-384",)},
}  # fmt: skip


@dataclass(frozen=True)
class _Row:
    name: str
    count: float
    memory_gib: float | None
    instance_type: str
    region: str
    zone: str
    usd: dict[str, float]  # kind -> price per hour


def _skypilot_rows(file: Path) -> tuple[list[_Row], list[_Row]]:
    """(GPU rows, machine rows without GPUs) of one vms.csv."""
    reader = csv.DictReader(io.StringIO(read_text(file)))
    gpus: list[_Row] = []
    machines: list[_Row] = []
    try:
        header = reader.fieldnames or []
        missing = [c for c in SKYPILOT_REQUIRED if c not in header]
        if missing:
            raise CatalogFileError(f"{_short(file)}: header: missing column(s) {', '.join(missing)}; a SkyPilot "
                                   f"vms.csv has {', '.join(SKYPILOT_REQUIRED)}")  # fmt: skip
        for rec in reader:
            line = reader.line_num
            name = (rec.get("AcceleratorName") or "").strip()
            usd = {}
            for column, kind in (("Price", "on-demand"), ("SpotPrice", "spot")):
                v = _number(file, line, column, rec.get(column), allow_empty=True)
                if v is not None:
                    usd[kind] = v
            where = ((rec.get("InstanceType") or "").strip(), (rec.get("Region") or "").strip(),
                     (rec.get("AvailabilityZone") or "").strip())  # fmt: skip
            if not name or name.lower() == "nan":
                machines.append(_Row("", 0, None, *where, usd))  # a machine without GPUs
                continue
            count = _number(file, line, "AcceleratorCount", rec.get("AcceleratorCount"), allow_empty=False)
            assert count is not None
            gpus.append(_Row(name, count, _gpuinfo_gib(rec.get("GpuInfo")), *where, usd))
    except csv.Error as exc:
        raise CatalogFileError(f"{_short(file)}: line {reader.line_num + 1}: not valid CSV ({exc})") from None
    return gpus, machines


def read_skypilot(file: Path, cloud: str) -> list[Offer]:
    """Every priced GPU offer of one SkyPilot ``vms.csv``; on GCP a GPU priced alone gets its host VM's price added
    (``GCP_HOSTS``), or stays without an instance type (and is skipped by ``price_rows``) where it has none."""
    gpus, machines = _skypilot_rows(file)
    hosts: dict[tuple[str, str], list[_Row]] = {}
    if cloud == "gcp":
        for m in machines:
            hosts.setdefault((m.zone, m.instance_type), []).append(m)
    offers: list[Offer] = []
    for r in gpus:
        fam, mem, form = _SKYPILOT_NAMES.get(_key(r.name), (r.name, None, ""))
        mem = r.memory_gib or mem
        for kind, usd in r.usd.items():
            instance, note = r.instance_type, ""
            if not instance and cloud == "gcp" and r.count == int(r.count):
                options = GCP_HOSTS.get(r.name, {}).get(int(r.count), ())
                priced = [(h.usd[kind], h.instance_type) for name in options for h in hosts.get((r.zone, name), [])
                          if kind in h.usd]  # fmt: skip
                if priced:
                    host_usd, instance = min(priced)
                    note = f"GPU ${usd:.10g}/h + host VM {instance} ${host_usd:.10g}/h in {r.zone}"
                    usd += host_usd
                elif options:
                    note = f"GPU-only price and no {kind} {' or '.join(options)} host VM priced in {r.zone or '?'}"
            offers.append(Offer(provider=cloud, instance_type=instance, accelerator=fam, gpu_count=r.count,
                                gpu_memory_gib=mem, usd_per_hour=usd, kind=kind, region=r.region, form=form,
                                note=note))  # fmt: skip
    return offers


def skypilot_source(file: Path, cloud: str) -> str:
    digest = hashlib.sha256(file.read_bytes()).hexdigest()[:12]
    return f"SkyPilot catalog {cloud}/vms.csv (skypilot-org/skypilot-catalog format; file sha256 {digest})"


# ---- gpuhunt ---------------------------------------------------------------------------------------------------

GPUHUNT_MISSING = "the gpuhunt library is not installed; install it with: pip install 'scaleright[prices]'"


def query_gpuhunt(providers: Sequence[str] = ()) -> tuple[list[Offer], str]:
    """Offers from ``gpuhunt.query`` (network: gpuhunt reads providers' public offer lists) and the source text.
    Raises ``InputError`` with one line when gpuhunt is missing or the query fails."""
    try:
        import gpuhunt
    except ImportError:
        raise InputError(GPUHUNT_MISSING) from None
    try:
        items = gpuhunt.query(provider=list(providers) or None, min_gpu_count=1)
    except Exception as exc:  # gpuhunt's network and provider errors: one line, not a traceback
        raise InputError(f"gpuhunt query failed: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}") from None
    offers = []
    for it in items:
        name = getattr(it, "gpu_name", None)
        count = getattr(it, "gpu_count", 0) or 0
        price = getattr(it, "price", None)
        if not name or count <= 0 or price is None or not math.isfinite(price) or price < 0:
            continue
        mem = getattr(it, "gpu_memory", None)
        offers.append(Offer(provider=str(it.provider), instance_type=str(it.instance_name), accelerator=str(name),
                            gpu_count=float(count), gpu_memory_gib=float(mem) if mem else None,
                            usd_per_hour=float(price), kind="spot" if it.spot else "on-demand",
                            region=str(it.location or "")))  # fmt: skip
    return offers, f"gpuhunt {_version(gpuhunt)} query (providers' public offer lists)".replace("gpuhunt  ", "gpuhunt ")


def _version(module: Any) -> str:
    """The installed distribution's version (gpuhunt keeps it in ``gpuhunt.version``, not on the package)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpuhunt")
    except PackageNotFoundError:
        return str(getattr(module, "__version__", ""))


# ---- rows out --------------------------------------------------------------------------------------------------


def price_rows(offers: Iterable[Offer], *, catalog: Catalog, date: str, source: str, origin: str,
               date_note: str = "") -> ImportResult:  # fmt: skip
    """Cheapest per-GPU-hour offer per (GPU id, kind, provider, region) as ``PriceRow``s, and what was skipped.
    ``origin`` names the source in ``provider`` ("SkyPilot catalog", "gpuhunt")."""
    best: dict[tuple[str, str, str, str], tuple[float, Offer]] = {}
    skipped: Counter[str] = Counter()
    resolved: dict[tuple[str, float | None, str, str, str], tuple[str | None, str]] = {}
    n = 0
    for o in offers:
        n += 1
        if o.gpu_count < 1 or o.gpu_count != int(o.gpu_count):
            skipped[f"{o.accelerator}: fractional GPU ({o.gpu_count:g} per instance)"] += 1
            continue
        if not o.instance_type:  # GCP's attachable GPUs: the accelerator alone, the VM it needs is billed on top
            skipped[f"{o.accelerator}: " + (o.note or "no instance type (a GPU-only price; its host VM, billed on "
                                            "top, is the user's choice)")] += 1
            continue
        if o.usd_per_hour <= 0:
            skipped[f"{o.accelerator}: price $0 (no offer)"] += 1
            continue
        key = (o.accelerator, o.gpu_memory_gib, o.provider, o.instance_type, o.form)
        if key not in resolved:  # each instance type recurs once per region and zone
            resolved[key] = resolve_gpu(*key[:4], form=o.form, catalog=catalog)
        gpu_id, why = resolved[key]
        if gpu_id is None:
            mem = f" {o.gpu_memory_gib:g} GiB" if o.gpu_memory_gib else ""
            skipped[f"{o.accelerator}{mem}: {why}"] += 1
            continue
        per_gpu = o.usd_per_hour / o.gpu_count
        k = (gpu_id, o.kind, _provider_key(o.provider), o.region)
        if k not in best or per_gpu < best[k][0]:
            best[k] = (per_gpu, o)
    rows = []
    for (gpu_id, kind, _, region), (per_gpu, o) in sorted(best.items()):
        count = int(o.gpu_count)
        sku = o.instance_type if count == 1 else f"{o.instance_type} (${o.usd_per_hour:.10g}/h, {count} GPUs)"
        notes = [f"cheapest {kind} instance in the region; csv accelerator '{o.accelerator}'"]
        if o.note:
            notes.append(o.note)
        if count > 1:
            notes.append(f"derived: /{count} (${o.usd_per_hour:.10g}/h per instance of {count} GPUs)")
        if date_note:
            notes.append(date_note)
        display = _DISPLAY.get(_provider_key(o.provider), o.provider)
        rec: dict[str, Any] = {
            "gpu_id": gpu_id, "kind": kind, "usd": round(per_gpu, 6), "unit": "usd_per_gpu_hour",
            "provider": f"{display} {region} (via {origin})".replace("  ", " "), "sku": sku, "date": date,
            "source": source, "notes": "; ".join(notes),
        }  # fmt: skip
        try:
            rows.append(PriceRow.model_validate(rec, context={"today": datetime.datetime.now(datetime.UTC).date()}))
        except ValidationError as exc:
            err = exc.errors()[0]
            skipped[f"{o.accelerator}: {'.'.join(map(str, err['loc']))}: {err['msg']}"] += 1
    return ImportResult(rows=rows, skipped=skipped, offers_read=n)


def prices_csv(rows: Iterable[PriceRow]) -> str:
    """The rows as a ``prices.csv`` text with the ``PRICE_COLUMNS`` header (the loader's format)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(PRICE_COLUMNS)
    for r in rows:
        d = r.model_dump()
        w.writerow(["" if d[c] is None else (repr(d[c]) if isinstance(d[c], float) else d[c]) for c in PRICE_COLUMNS])
    return buf.getvalue()

