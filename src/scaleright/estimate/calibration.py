"""Efficiency parameters of the performance model: a few numbers with a physical meaning.

The model is physics (roofline compute, HBM bytes, measured collectives); ``arch_factors`` says how close the best
microbenchmarked GEMM and STREAM kernels come to each architecture's datasheet (``ARCH_TABLE``, from
``validation/reference/components``), and these parameters say what share of those ceilings end-to-end kernels
reach. Defaults are fitted to ``validation/reference/train_measured.csv``
and ``infer_measured.csv`` by ``benchmarks/accuracy.py --fit`` and should stay near the values reported by
independent microbenchmarks (quoted per field). A profile fitted to a user's own runs (``scaleright calibrate``)
is stored as JSON and loaded by name.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING

from scaleright.errors import CatalogFileError, InputError
from scaleright.limits import _show
from scaleright.textfile import _short, path_problem, read_text
from scaleright.userdata import load_json

if TYPE_CHECKING:
    from scaleright.catalog.gpus import Accelerator

__all__ = ["Calibration", "DEFAULT_CALIBRATION", "ArchFactors", "arch_factors", "arch_key", "ARCH_TABLE", "PART_TABLE",
           "load_calibration", "save_calibration", "calibration_dir", "check_profile_name", "profile_path",
           "PROFILE_NAME_MAX", "Profile", "load_profile", "check_provenance", "parameters_sha256", "PROVENANCE_SCHEMA",
           "MEMORY_CALIBRATION_RECORD"]


@dataclass(frozen=True)
class Calibration:
    """Efficiency factors: GEMM, attention and HBM fractions are shares of the architecture's measured ceilings
    (``arch_factors``); link factors are of the datasheet figure of the link in use."""

    # End-to-end share of the architecture's measured GEMM ceiling (``arch_factors``: the best large bf16 GEMM a
    # microbenchmark reaches, e.g. 80 % of peak on H100 SXM, 87 % on A100 SXM). Below 1: training and serving also
    # pay launch gaps, sustained clocks below the microbenchmark's and unfused epilogues.
    gemm_efficiency: float = 0.762
    # GEMMs whose smallest dimension is d run at gemm_efficiency · d / (d + gemm_half_dim): tile and wave
    # quantisation make thin GEMMs (high TP, small micro-batches, fine-grained experts) slower.
    gemm_half_dim: float = 96.0
    # FP8 / FP4 GEMMs reach a lower fraction of their (2x / 4x) peak: scaling factors, casts and the bf16
    # parts of each layer (torchao and Transformer Engine report 1.3-1.6x end-to-end over bf16, not 2x).
    fp8_gemm_efficiency: float = 0.702
    fp4_gemm_efficiency: float = 0.401
    # Flash attention forward/backward as a share of the architecture's GEMM ceiling (FlashAttention-2 paper: up to
    # 73 % of peak forward on A100; FlashAttention-3: 75 % on H100); the backward does 2.5x the forward's FLOPs.
    attention_efficiency: float = 0.477
    # The backward pass of flash attention relative to the forward's fraction of peak: FlashAttention-2 paper (Dao
    # 2023), A100: up to 73 % forward, 63 % backward (recomputing the scores and the dS matmuls stall more):
    # 63 / 73. A kernel ratio, not fitted (fitted alone, forward and backward trade against each other).
    attention_bwd_efficiency: float = 0.863
    # Streaming kernels (norms, activations, optimizer) as a share of the architecture's measured STREAM bandwidth
    # (``arch_factors``: 83 % of the datasheet on A100, 89 % on H100 for Triad). Not fitted (degenerate with
    # elementwise_factor): 0.92 x H100's 0.887 = 0.82 of the datasheet, the 80-90 % STREAM-like kernels reach.
    memory_efficiency: float = 0.92
    # Elementwise traffic per token per layer in units of (h + f) 16-bit values read or written in the forward
    # pass, relative to an unfused eager count (1.0); fused kernels and torch.compile lower it.
    # The fitted default is above 1: it also absorbs per-layer costs that weigh most on small models.
    elementwise_factor: float = 1.02
    # The training and inference estimators cost collectives from measured nccl-tests bus bandwidth per fabric
    # (``scaleright.estimate.collectives``, ``catalog/data/collective_fits.yaml``), scaled by these two factors:
    # 1 means the measured fits as they are; ``scaleright calibrate`` fits them to a user's own multi-GPU runs
    # (a slower or faster network than the reference machines). Not fitted by ``benchmarks/accuracy.py``.
    collective_bandwidth_scale: float = 1.0  # multiplies every fabric's achieved bandwidth fraction (η)
    collective_latency_scale: float = 1.0  # multiplies every fabric's fitted step latency (α)
    # Legacy α–β model (``estimate.comm.group_bandwidth``, kept for callers outside the estimators): NCCL bus
    # bandwidth as a fraction of the link's one-direction datasheet bandwidth, and the latency per ring step.
    # No longer fitted: the values of the last fit that used them.
    intra_link_efficiency: float = 0.547
    inter_link_efficiency: float = 0.95
    intra_latency_s: float = 5e-6
    inter_latency_s: float = 10e-6
    # Share of TP communication hidden behind GEMMs when the framework overlaps it (``Framework.tp_comm_overlap``:
    # Megatron-Core --tp-comm-overlap, torch async TP); frameworks that do not overlap hide none. Fitted inside its
    # bounds (0.77) in the joint fit and in every leave-one-source-out fit since the frameworks' own overlap rules
    # (it sat on 1, all hidden, while every framework was assumed to overlap).
    tp_overlap: float = 0.772
    # Fixed time per optimizer step outside the model (data loading, logging, launch gaps, synchronisation).
    step_overhead_s: float = 0.0336
    # Fixed time per engine iteration of an inference server (scheduling, sampling, launch gaps with CUDA graphs) of
    # ``engines.calibrated_engine``, the engine ``estimate infer`` and the TensorRT-LLM reference rows use. Fitted
    # inside its bounds (1.9 ms) since the model is the iteration model's steady state with TensorRT-LLM's fused
    # elementwise kernels; it sat at 0 while every decode row paid the training frameworks' unfused norm and
    # activation traffic and prefills ran apart from the decode steps.
    decode_overhead_s: float = 0.00193
    # Decode reads weights at this share of the architecture's measured STREAM bandwidth (TensorRT-LLM decode
    # GEMV kernels; 0.716 x H100's 0.887 = 64 % of the datasheet); KV-cache reads stream at the STREAM-like rate.
    decode_memory_efficiency: float = 0.716

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            huge = isinstance(v, int) and abs(v) > 1e300  # math.isfinite would raise OverflowError
            if isinstance(v, bool) or not isinstance(v, (int, float)) or huge or not math.isfinite(v) or v < 0:
                raise InputError(f"calibration {f.name}={_show(v)} must be a finite non-negative number")
        # fractions of a datasheet figure that divide a time: 0 would mean infinitely slow, so (0, 1]
        for name in ("gemm_efficiency", "fp8_gemm_efficiency", "fp4_gemm_efficiency", "attention_efficiency",
                     "attention_bwd_efficiency", "memory_efficiency", "intra_link_efficiency",
                     "inter_link_efficiency", "decode_memory_efficiency"):  # fmt: skip
            v = getattr(self, name)
            if not 0 < v <= 1:
                raise InputError(f"calibration {name}={v} must be greater than 0 and at most 1")
        if self.tp_overlap > 1:  # a share of TP communication hidden: 0 (none) to 1 (all)
            raise InputError(f"calibration tp_overlap={self.tp_overlap} must be at most 1")
        for name in ("collective_bandwidth_scale", "collective_latency_scale"):  # multipliers
            if getattr(self, name) <= 0:
                raise InputError(f"calibration {name}={getattr(self, name)} must be greater than 0")

    def tensor_scale(self, gpu: Accelerator) -> float:
        """The measured GEMM ceiling of ``gpu``'s architecture (``arch_factors(gpu).gemm_efficiency``), the factor
        that multiplies a datasheet tensor peak before this calibration's shares apply. Prefer
        ``scaleright.estimate.layer.roofline``, which sets up every peak and efficiency in one place."""
        return arch_factors(gpu).gemm_efficiency

    def replace(self, **changes: float) -> Calibration:
        return replace(self, **changes)

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


DEFAULT_CALIBRATION = Calibration()


# ---- architecture factors ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ArchFactors:
    """What microbenchmarks measured on one architecture: the best large bf16 GEMM as a fraction of the dense
    datasheet peak and STREAM Triad as a fraction of the datasheet HBM bandwidth. ``calibrated`` is False when either
    was not measured; the missing figure is then the median over the measured architectures (never one family's),
    and ``note`` says so."""

    architecture: str  # the table key (``arch_key``)
    gemm_efficiency: float
    memory_efficiency: float
    calibrated: bool
    source: str
    note: str = ""


# The references are rows of validation/reference/components/gemm_efficiency.csv and hbm_bandwidth.csv:
# GEMM: stas00/ml-engineering compute/accelerator/README.md @ 744d01e "Maximum Achievable Matmul FLOPS" (mamf-finder,
# mean of 100 iterations, best shape), BF16 table; HBM: Azure/AI-benchmarking-guide Azure_Results (BabelStream-style
# Triad), MI300X from its fork yosoyjay/AI-benchmarking-guide. Fractions are achieved / datasheet as the row states.
_GEMM_SRC = "mamf-finder BF16 (stas00/ml-engineering @ 744d01e)"
_HBM_SRC = "STREAM Triad (Azure/AI-benchmarking-guide)"
# key: (GEMM fraction or None, HBM fraction or None, measured part)
ARCH_TABLE: dict[str, tuple[float | None, float | None, str]] = {
    "volta": (None, None, "no measurement"),
    "turing": (None, None, "no measurement"),
    "ampere-ga100": (0.869, 0.834, "A100 SXM: 271.2 / 312 TFLOP/s; A100-SXM4-80GB Triad 1.70 / 2.039 TB/s"),
    # GA102 (RTX 3090, A10, A10G): the one measurement (zzc0721 torch.mm) is 76 TFLOP/s against the fp32-accumulate
    # rate of 71, i.e. above the peak it is compared with: not a usable ceiling
    "ampere-ga102": (None, None, "no usable measurement"),
    # AD102: L40S 269.2 / 362 TFLOP/s (zzc0721/torch-performance-test-data, torch.mm BF16); no HBM (GDDR) figure
    "ada-ad102": (0.744, None, "L40S: 269.2 / 362 TFLOP/s (torch.mm)"),
    "ada-ad104": (None, None, "no measurement"),
    # Hopper: H200 measures the same (GEMM: "H200 is the same"; Triad 4.15 / 4.8 = 0.865, within 2.5 % of H100's)
    "hopper": (0.803, 0.887, "H100 SXM: 794.5 / 989 TFLOP/s; H100 80GB HBM3 Triad 2.97 / 3.35 TB/s"),
    "blackwell": (0.776, None, "B200 SXM: 1745 / 2250 TFLOP/s"),
    "blackwell-gb202": (None, None, "no usable measurement (RTX 5090 reads 115 % of its datasheet peak)"),
    # Blackwell Ultra (GB300 / B300): another die than B200's (1.5x its FP4 rate, 288 GB), another power limit; no
    # GEMM or HBM row among the component measurements, so it does not borrow B200's
    "blackwell-ultra": (None, None, "no measurement"),
    "cdna2": (0.768, None, "MI250X (1 GCD): 147.0 / 191.5 TFLOP/s (ROCm 6.2, older table)"),
    "cdna3": (0.514, 0.774, "MI300X: 668.4 / 1300 TFLOP/s; MI300X Triad 4.10 / 5.3 TB/s"),
    "cdna4": (0.680, None, "MI355X: 1565 / 2300 TFLOP/s"),
    "gaudi2": (0.969, None, "Gaudi 2: 418.7 / 432 TFLOP/s"),
    "gaudi3": (0.741, None, "Gaudi 3: 1243 / 1677 TFLOP/s"),
    "tpu": (None, None, "no measurement"),
    "trainium": (None, None, "no measurement"),
}
# Exact parts whose own measurement differs from their architecture's (same chip, another power limit or clock)
PART_TABLE: dict[str, tuple[float | None, float | None, str]] = {
    "a100-40gb-pcie": (0.811, 0.834, "A100 PCIe: 252.9 / 312 TFLOP/s (250-300 W part); HBM as A100 SXM"),
    "a100-80gb-pcie": (0.811, 0.834, "A100 PCIe: 252.9 / 312 TFLOP/s (250-300 W part); HBM as A100 SXM"),
    "gb200": (0.729, None, "GB200 SXM: 1822 / 2500 TFLOP/s"),
    "mi325x": (0.604, 0.774, "MI325X: 784.9 / 1300 TFLOP/s (1000 W, TunableOp); HBM as MI300X"),
}


def _median(xs: list[float]) -> float:
    ys = sorted(xs)
    n = len(ys)
    return ys[n // 2] if n % 2 else 0.5 * (ys[n // 2 - 1] + ys[n // 2])


# stand-ins for an unmeasured figure: the median over the measured architectures (flagged uncalibrated)
MEDIAN_GEMM = _median([g for g, _, _ in ARCH_TABLE.values() if g is not None])
MEDIAN_HBM = _median([m for _, m, _ in ARCH_TABLE.values() if m is not None])


def arch_key(architecture: str) -> str:
    """The ``ARCH_TABLE`` key of a catalog ``architecture`` string ("Ampere (GA100)" -> "ampere-ga100")."""
    a = (architecture or "").lower()
    if a.startswith("ampere"):
        return "ampere-ga100" if "ga100" in a else "ampere-ga102"
    if a.startswith("ada"):
        return "ada-ad102" if "ad102" in a else "ada-ad104"
    if a.startswith("blackwell"):
        return "blackwell-gb202" if "gb202" in a else "blackwell-ultra" if "ultra" in a else "blackwell"
    for prefix, key in (("volta", "volta"), ("turing", "turing"), ("hopper", "hopper"), ("cdna2", "cdna2"),
                        ("cdna3", "cdna3"), ("cdna4", "cdna4"), ("gaudi2", "gaudi2"), ("gaudi3", "gaudi3"),
                        ("tpu", "tpu"), ("neuroncore", "trainium"), ("trainium", "trainium")):  # fmt: skip
        if a.startswith(prefix):
            return key
    return a.split(" (")[0].strip() or "unknown"


def arch_factors(gpu: Accelerator) -> ArchFactors:
    """The measured GEMM and HBM ceilings of ``gpu`` (its exact part if measured, else its architecture). An
    architecture without measurements is ``calibrated=False`` with the median of the measured ones and a note."""
    key = arch_key(getattr(gpu, "architecture", "") or "")
    gid = getattr(gpu, "id", "")
    gemm, hbm, where = PART_TABLE.get(gid) or ARCH_TABLE.get(key, (None, None, "architecture not in the table"))
    missing = [what for what, v in (("GEMM", gemm), ("HBM", hbm)) if v is None]
    note = ""
    if missing:
        note = (f"uncalibrated: no {' or '.join(missing)} measurement for {key} ({gid}); using the median of the "
                f"measured architectures ({' and '.join(missing)}), so treat its times as rough")
    source = "; ".join(x for x in (_GEMM_SRC if gemm is not None else "", _HBM_SRC if hbm is not None else "",
                                   where) if x)  # fmt: skip
    return ArchFactors(architecture=key, gemm_efficiency=gemm if gemm is not None else MEDIAN_GEMM,
                       memory_efficiency=hbm if hbm is not None else MEDIAN_HBM, calibrated=not missing,
                       source=source, note=note)  # fmt: skip


def calibration_dir() -> Path:
    """Where named calibration profiles live (``$SCALERIGHT_CALIBRATION_DIR`` or the user data directory)."""
    import os

    import platformdirs

    env = os.environ.get("SCALERIGHT_CALIBRATION_DIR")
    return Path(env) if env else Path(platformdirs.user_data_dir("scaleright")) / "calibrations"


PROFILE_NAME_MAX = 100  # characters in a calibration profile name
_NAME_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_NAME_CHARS = _NAME_START | {"-", "_"}


def check_profile_name(name: str, *, flag: str = "calibration name") -> str:
    """``name`` when it can name a profile: 1 to ``PROFILE_NAME_MAX`` letters, digits, ``-`` or ``_``, starting with a
    letter or digit, and not ``default`` (the built-in calibration). No ``.``: ``--calibration`` reads a name with a
    suffix as a file path, so such a profile could never be loaded by name."""
    if not isinstance(name, str):
        raise InputError(f"{flag}: must be text, not {type(name).__name__}")
    shown = repr(name) if len(name) <= 40 else repr(name[:37] + "...")
    rule = (f"a profile name is 1 to {PROFILE_NAME_MAX} letters, digits, '-' or '_', starting with a letter or digit "
            "(it is saved as <calibration dir>/<name>.json)")
    if not name or name[0] not in _NAME_START or not set(name) <= _NAME_CHARS:
        raise InputError(f"{flag}={shown}: {rule}")
    if len(name) > PROFILE_NAME_MAX:
        raise InputError(f"{flag}: {len(name)} characters is too long; {rule}")
    if name.lower() == "default":
        raise InputError(f"{flag}={shown}: 'default' names the built-in calibration; choose another name")
    return name


def profile_path(name: str, directory: Path | None = None, *, flag: str = "calibration name") -> Path:
    """``<dir>/<name>.json`` after checking the name and that the calibration directory is a directory (or absent,
    to be created on save). Reads nothing else and writes nothing."""
    import os

    from scaleright.textfile import _short, path_problem

    check_profile_name(name, flag=flag)
    d = directory or calibration_dir()
    why = path_problem(d, want="dir")
    if why not in (None, "directory not found"):
        source = " (from $SCALERIGHT_CALIBRATION_DIR)" if directory is None and os.environ.get(
            "SCALERIGHT_CALIBRATION_DIR") else ""
        raise InputError(f"calibration directory {_short(d)}{source}: {why}; profiles are saved in a directory")
    return d / f"{name}.json"


# ---- profiles with provenance --------------------------------------------------------------------------------------
#
# A profile is ``{"parameters": {...every Calibration field...}, "provenance": {...}}``. The provenance says what the
# values were fitted to and how well they do (written by ``scaleright calibrate``, ``bench/calibrate.py``):
#   schema              PROVENANCE_SCHEMA
#   created_utc         ISO 8601 time of the fit
#   scaleright_version  the version that fitted it
#   gpu, fingerprint    the catalog accelerator the runs were mapped to, and their hardware fingerprint
#   runs, runs_sha256   the stored run ids used, and SHA-256 of their records (canonical JSON, by id)
#   parameters          per fitted field: value (= the profile's), default, low, high, on_bound (null, low, high)
#   error               defaults, in_sample, cross_validated: rows, median_abs_pct, p90_abs_pct, rms_log
#                       (cross_validated also: method, folds)
#   forced              saved with --force although its cross-validated error is not better than the defaults'
# Profiles written before provenance existed (no such key; "meta" or a flat object of fields) still load: their
# record says "no provenance".

PROVENANCE_SCHEMA = 1
# What ``estimate memory`` records: memory has no fitted parameter (its overheads are documented terms, ``Overheads``)
MEMORY_CALIBRATION_RECORD: dict[str, object] = {"name": "none", "source": "not used: the memory model has no fitted "
                                                "parameters"}  # fmt: skip
_ERROR_KEYS = ("rows", "median_abs_pct", "p90_abs_pct", "rms_log")


def parameters_sha256(cal: Calibration) -> str:
    """SHA-256 of the calibration's values (canonical JSON): which numbers produced an estimate."""
    import hashlib

    return hashlib.sha256(json.dumps(cal.as_dict(), sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Profile:
    """A calibration and where it came from: ``default``, a named profile or a JSON file."""

    name: str  # "default", the profile name, or the path as given
    calibration: Calibration
    source: str  # "built-in", "profile" or "file"
    provenance: dict[str, object] | None  # validated (see above); None for the defaults and for old profiles

    @property
    def sha256(self) -> str:
        return parameters_sha256(self.calibration)

    def record(self) -> dict[str, object]:
        """What an estimate or plan records about the calibration that produced it (``--json``'s ``calibration``)."""
        prov = self.provenance
        summary: dict[str, object] | None = None
        if prov is not None:
            runs = prov["runs"]
            cv = prov["error"]
            assert isinstance(runs, list) and isinstance(cv, dict)
            summary = {"created_utc": prov["created_utc"], "gpu": prov["gpu"], "fingerprint": prov["fingerprint"],
                       "runs": len(runs), "runs_sha256": prov["runs_sha256"],
                       "cross_validated_median_abs_pct": cv["cross_validated"]["median_abs_pct"],
                       "params_on_bound": sorted(k for k, v in _dict(prov["parameters"]).items()
                                                 if _dict(v)["on_bound"] is not None)}  # fmt: skip
        return {"name": self.name, "sha256": self.sha256, "source": self.source, "provenance": summary}

    def line(self) -> str:
        """One line naming the calibration, for terminal output."""
        head = f"calibration: {self.name} (sha256 {self.sha256[:12]}"
        if self.source == "built-in":
            return head + "; built-in defaults, fitted to published measurements by benchmarks/accuracy.py)"
        r = self.record()["provenance"]
        if r is None:
            return head + "; no provenance)"
        assert isinstance(r, dict)
        cv = r["cross_validated_median_abs_pct"]
        cv_text = f"cross-validated median |error| {cv:.1f} %" if isinstance(cv, float) else "not cross-validated"
        bound = f"; on a bound: {', '.join(r['params_on_bound'])}" if r["params_on_bound"] else ""
        return (head + f"; fitted {str(r['created_utc'])[:10]} to {r['runs']} runs on {r['gpu']} (fingerprint "
                f"{r['fingerprint']}); {cv_text}{bound})")


def _dict(v: object) -> dict[str, object]:
    assert isinstance(v, dict)
    return v


def check_provenance(prov: object, cal: Calibration, where: str) -> dict[str, object]:
    """``prov`` when it has the structure above and agrees with ``cal``; else ``CatalogFileError`` naming the field."""

    def bad(field: str, what: str) -> CatalogFileError:
        return CatalogFileError(f"{where}: provenance.{field}: {what}")

    def num(v: object, field: str, *, null: bool = False) -> None:
        if v is None and null:
            return
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, int) and abs(v) > 1e300) or (
                not math.isfinite(v)):
            raise bad(field, f"must be a finite number{' or null' if null else ''}, got {_show(v)}")

    def text(v: object, field: str) -> None:
        if not isinstance(v, str) or not v or len(v) > 200:
            raise bad(field, f"must be text of 1 to 200 characters, got {_show(v)}")

    if not isinstance(prov, dict):
        raise CatalogFileError(f"{where}: provenance must be a JSON object, got {_show(prov)}")
    keys = {"schema", "created_utc", "scaleright_version", "gpu", "fingerprint", "runs", "runs_sha256", "parameters",
            "error", "forced"}  # fmt: skip
    missing, unknown = keys - set(prov), set(prov) - keys - {"solver"}
    if missing:
        raise CatalogFileError(f"{where}: provenance lacks {', '.join(sorted(missing))} (remove the provenance key to "
                               "load the parameters as a profile without provenance)")  # fmt: skip
    if unknown:
        raise CatalogFileError(f"{where}: provenance has unknown key(s) {sorted(unknown)}; allowed: {sorted(keys)}")
    if prov["schema"] != PROVENANCE_SCHEMA or isinstance(prov["schema"], bool):
        raise bad("schema", f"must be {PROVENANCE_SCHEMA}, got {_show(prov['schema'])}")
    for k in ("created_utc", "scaleright_version", "gpu", "fingerprint"):
        text(prov[k], k)
    import datetime as dt

    try:
        dt.datetime.fromisoformat(str(prov["created_utc"]))
    except ValueError:
        raise bad("created_utc", f"must be an ISO 8601 time, got {_show(prov['created_utc'])}") from None
    runs = prov["runs"]
    if (not isinstance(runs, list) or not runs or any(isinstance(r, bool) or not isinstance(r, int) or not
                                                      0 < r < 2**63 for r in runs) or len(set(runs)) != len(runs)):
        raise bad("runs", "must be a non-empty list of distinct run ids (integers from 1)")
    h = prov["runs_sha256"]
    if not isinstance(h, str) or len(h) != 64 or set(h) - set("0123456789abcdef"):
        raise bad("runs_sha256", f"must be 64 lowercase hex digits, got {_show(h)}")
    if not isinstance(prov["forced"], bool):
        raise bad("forced", f"must be true or false, got {_show(prov['forced'])}")
    params = prov["parameters"]
    allowed = {f.name for f in fields(Calibration)}
    if not isinstance(params, dict) or not params:
        raise bad("parameters", "must be a non-empty object of fitted fields")
    for name, p in params.items():
        if name not in allowed:
            raise bad(f"parameters.{name}", f"not a calibration field; allowed: {', '.join(sorted(allowed))}")
        if not isinstance(p, dict) or set(p) != {"value", "default", "low", "high", "on_bound"}:
            raise bad(f"parameters.{name}", "must be an object of value, default, low, high, on_bound")
        for k in ("value", "default", "low", "high"):
            num(p[k], f"parameters.{name}.{k}")
        if p["on_bound"] not in (None, "low", "high"):
            raise bad(f"parameters.{name}.on_bound", f"must be null, low or high, got {_show(p['on_bound'])}")
        if not p["low"] <= p["value"] <= p["high"]:
            raise bad(f"parameters.{name}", f"value {p['value']} is outside [{p['low']}, {p['high']}]")
        if not math.isclose(p["value"], getattr(cal, name), rel_tol=1e-12, abs_tol=0.0):
            raise bad(f"parameters.{name}.value", f"{p['value']} is not the profile's {name} ({getattr(cal, name)}): "
                      "edited by hand? remove the provenance key to use the edited values without provenance")
    err = prov["error"]
    if not isinstance(err, dict) or set(err) != {"defaults", "in_sample", "cross_validated"}:
        raise bad("error", "must be an object of defaults, in_sample, cross_validated")
    for part, e in err.items():
        extra = ("method", "folds") if part == "cross_validated" else ()
        if not isinstance(e, dict) or set(e) != {*_ERROR_KEYS, *extra}:
            raise bad(f"error.{part}", f"must be an object of {', '.join((*_ERROR_KEYS, *extra))}")
        for k in _ERROR_KEYS[1:]:
            num(e[k], f"error.{part}.{k}", null=True)
        for k in ("rows", *(("folds",) if extra else ())):
            if isinstance(e[k], bool) or not isinstance(e[k], int) or e[k] < 0:
                raise bad(f"error.{part}.{k}", f"must be a non-negative integer, got {_show(e[k])}")
        if extra:
            text(e["method"], f"error.{part}.method")
    if "solver" in prov and not isinstance(prov["solver"], dict):
        raise bad("solver", f"must be an object, got {_show(prov['solver'])}")
    return prov


def save_calibration(name: str, cal: Calibration, *, provenance: dict[str, object] | None = None,
                     directory: Path | None = None, overwrite: bool = False) -> Path:
    """Write ``cal`` atomically as ``<dir>/<name>.json`` with its provenance (checked as on load: what is saved
    loads). An existing profile is replaced only with ``overwrite=True`` (``scaleright calibrate --force``)."""
    from scaleright.textfile import write_atomic

    path = profile_path(name, directory)
    if path.exists() and not overwrite:
        raise InputError(f"calibration profile '{name}' already exists at {path}; pass --force (overwrite=True) to "
                         "replace it")
    body: dict[str, object] = {"parameters": cal.as_dict()}
    if provenance is not None:
        body["provenance"] = check_provenance(provenance, cal, f"calibration profile '{name}'")
    try:
        text = json.dumps(body, indent=2, allow_nan=False)
    except (TypeError, ValueError) as exc:  # a NaN or a non-JSON value in the provenance's free-form parts
        raise CatalogFileError(f"calibration profile '{name}': cannot be written as JSON ({exc})") from None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"calibration directory {path.parent}: cannot create it ({exc.strerror or exc})") from None
    return write_atomic(f"calibration profile '{name}'", path, text + "\n")


def load_calibration(name_or_path: str | None, *, directory: Path | None = None) -> Calibration:
    """The default calibration (None or ``default``), a named profile, or a JSON file path."""
    return load_profile(name_or_path, directory=directory).calibration


def load_profile(name_or_path: str | None, *, directory: Path | None = None) -> Profile:
    """``load_calibration`` with the profile's name, source and validated provenance (None where it has none)."""
    if name_or_path in (None, "", "default"):
        return Profile("default", DEFAULT_CALIBRATION, "built-in", None)
    assert name_or_path is not None
    p = Path(name_or_path)
    named = not p.suffix and "/" not in str(name_or_path) and os.sep not in str(name_or_path)  # else: a path
    if named:
        d = directory or calibration_dir()
        why_dir = path_problem(d, want="dir")
        if why_dir is not None and why_dir != "directory not found":
            origin = ("given" if directory is not None else "from $SCALERIGHT_CALIBRATION_DIR"
                      if os.environ.get("SCALERIGHT_CALIBRATION_DIR") else "the user data directory")  # fmt: skip
            raise InputError(f"calibration directory {_short(d)!r} ({origin}): {why_dir}")
        p = d / f"{name_or_path}.json"
    why = path_problem(p)
    if why == "file not found" and named:
        known = sorted(x.stem for x in d.glob("*.json") if path_problem(x) is None) if why_dir is None else []
        raise InputError(f"calibration {_short(name_or_path)!r} not found; known: {', '.join(known) or 'none'} "
                         f"(in {_short(d)})")  # fmt: skip
    if why is not None:
        raise InputError(f"calibration {_short(p)!r}: {why}")
    data = load_json(read_text(p), str(p))
    params = data.get("parameters", data) if isinstance(data, dict) else data
    if not isinstance(params, dict):
        raise CatalogFileError(f"{p}: not a calibration profile (expected a JSON object of parameters)")
    allowed = {f.name for f in fields(Calibration)}
    unknown = set(params) - allowed
    if unknown:
        raise CatalogFileError(f"{p}: unknown calibration field(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
    for key, v in params.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise CatalogFileError(f"{p}: calibration {key} must be a number, got {_show(v)}")
        if isinstance(v, int) and abs(v) > 1e300:  # an integer no float can hold (math.isfinite would overflow)
            raise CatalogFileError(f"{p}: calibration {key} must be a finite number, got {_show(v)}")
    try:
        cal = Calibration(**params)
    except InputError as exc:
        raise CatalogFileError(f"{p}: {exc}") from None
    prov = data.get("provenance") if isinstance(data, dict) and "parameters" in data else None
    if prov is not None:
        prov = check_provenance(prov, cal, str(p))
    return Profile(str(name_or_path), cal, "profile" if named else "file", prov)
