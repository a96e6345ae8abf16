"""Efficiency parameters of the performance model: a few numbers with a physical meaning.

The model is physics (roofline compute, HBM bytes, α–β communication); these parameters say how close real
kernels and collectives come to the datasheet. Defaults are fitted to ``validation/reference/train_measured.csv``
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

__all__ = ["Calibration", "DEFAULT_CALIBRATION", "load_calibration", "save_calibration", "calibration_dir",
           "check_profile_name", "profile_path", "PROFILE_NAME_MAX", "Profile", "load_profile", "check_provenance",
           "parameters_sha256", "PROVENANCE_SCHEMA", "MEMORY_CALIBRATION_RECORD"]


@dataclass(frozen=True)
class Calibration:
    """Efficiency factors; every fraction is of the datasheet figure of the GPU or link in use."""

    # Large 16-bit GEMMs reach 70-80 % of the dense peak on A100/H100 (cuBLAS microbenchmarks; e.g. NVIDIA's
    # "Matrix Multiplication Background" guide and the 750-800 TFLOP/s bf16 reported for H100 SXM).
    # This is Hopper's figure (see tensor_scale_* for other generations). The fitted default lies below that range:
    # fitted to end-to-end runs, it also absorbs losses the model does not time (launch gaps, H100 clocks below
    # boost at 700 W, unfused ops). A100's effective figure is 0.58 x tensor_scale_ampere = 0.72, inside it.
    gemm_efficiency: float = 0.589
    # GEMMs whose smallest dimension is d run at gemm_efficiency · d / (d + gemm_half_dim): tile and wave
    # quantisation make thin GEMMs (high TP, small micro-batches, fine-grained experts) slower.
    gemm_half_dim: float = 96.0
    # FP8 / FP4 GEMMs reach a lower fraction of their (2x / 4x) peak: scaling factors, casts and the bf16
    # parts of each layer (torchao and Transformer Engine report 1.3-1.6x end-to-end over bf16, not 2x).
    fp8_gemm_efficiency: float = 0.65
    fp4_gemm_efficiency: float = 0.378
    # Flash attention forward/backward reach 35-75 % of peak (FlashAttention-2 paper: up to 73 % fwd on A100;
    # FlashAttention-3: 75 % fwd on H100); the backward does 2.5x the forward's FLOPs.
    # The fitted forward default (0.40) lies inside that range.
    attention_efficiency: float = 0.428
    # The backward pass of flash attention runs at a lower fraction of peak than the forward (FlashAttention-2
    # paper, A100: up to 73 % forward, 63 % backward; recomputing the scores and the dS matmuls stall more).
    # The fitted default is the fit's lower bound (0.2): the long-sequence reference runs (llm-foundry 2023,
    # torchtitan) used FlashAttention-2-era backward kernels on H100, which stay far below their A100 figures.
    attention_bwd_efficiency: float = 0.2
    # Streaming kernels (norms, activations, optimizer) reach 80-90 % of HBM bandwidth (STREAM-like copies).
    memory_efficiency: float = 0.80
    # Elementwise traffic per token per layer in units of (h + f) 16-bit values read or written in the forward
    # pass, relative to an unfused eager count (1.0); fused kernels and torch.compile lower it.
    # The fitted default is above 1: it also absorbs per-layer costs that weigh most on small models.
    elementwise_factor: float = 1.66
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
    # Share of TP communication hidden behind GEMMs when the framework overlaps it (Megatron-Core
    # --tp-comm-overlap, torch async TP; ``train_step_arrays(tp_comm_overlap=False)`` for frameworks that do not).
    # The fitted default is the fit's upper bound (0.9).
    tp_overlap: float = 0.9
    # Fixed time per optimizer step outside the model (data loading, logging, launch gaps, synchronisation).
    step_overhead_s: float = 0.0121
    # Fixed time per decode iteration of an inference server (scheduling, sampling, launch gaps with CUDA graphs).
    decode_overhead_s: float = 0.0
    # Datasheet tensor peaks assume the boost clock; generations differ in how much of it they sustain under dense
    # tensor load at their power limit (A100 holds its 1.41 GHz at 400 W; H100 SXM at 700 W runs well below its
    # boost clock). Tensor throughput (GEMMs and attention) relative to Hopper's fraction of peak (1.0 = same);
    # other architectures use 1.0. Fitted across several tables per generation (A100: llm-foundry x2, BLOOM,
    # Megatron GPT-3; Blackwell: Megatron-Bridge B200 and GB200).
    tensor_scale_ampere: float = 1.24
    tensor_scale_blackwell: float = 0.926
    # Decode reads weights and KV cache at this fraction of HBM bandwidth (TensorRT-LLM/vLLM decode kernels).
    decode_memory_efficiency: float = 0.581

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
        for name in ("tensor_scale_ampere", "tensor_scale_blackwell", "collective_bandwidth_scale",
                     "collective_latency_scale"):  # multipliers  # fmt: skip
            if getattr(self, name) <= 0:
                raise InputError(f"calibration {name}={getattr(self, name)} must be greater than 0")

    def tensor_scale(self, gpu: Accelerator) -> float:
        """The sustained-tensor-throughput factor of ``gpu``'s architecture (see the fields above)."""
        arch = (getattr(gpu, "architecture", "") or "").lower()
        if arch.startswith("ampere"):
            return self.tensor_scale_ampere
        if arch.startswith("blackwell"):
            return self.tensor_scale_blackwell
        return 1.0

    def replace(self, **changes: float) -> Calibration:
        return replace(self, **changes)

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


DEFAULT_CALIBRATION = Calibration()


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
