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
           "check_profile_name", "profile_path", "PROFILE_NAME_MAX"]


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


def save_calibration(name: str, cal: Calibration, *, meta: dict[str, object] | None = None,
                     directory: Path | None = None, overwrite: bool = False) -> Path:
    """Write ``cal`` atomically as ``<dir>/<name>.json`` with optional metadata (fingerprint, runs used, fit error).
    An existing profile is replaced only with ``overwrite=True`` (``scaleright calibrate --force``)."""
    from scaleright.textfile import write_atomic

    path = profile_path(name, directory)
    if path.exists() and not overwrite:
        raise InputError(f"calibration profile '{name}' already exists at {path}; pass --force (overwrite=True) to "
                         "replace it")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"calibration directory {path.parent}: cannot create it ({exc.strerror or exc})") from None
    # meta is flat (fingerprint, gpu, fit report); a NaN there is stored as null, never as the non-JSON NaN
    meta = {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in (meta or {}).items()}
    text = json.dumps({"parameters": cal.as_dict(), "meta": meta}, indent=2, allow_nan=False)
    return write_atomic(f"calibration profile '{name}'", path, text + "\n")


def load_calibration(name_or_path: str | None, *, directory: Path | None = None) -> Calibration:
    """The default calibration (None or ``default``), a named profile, or a JSON file path."""
    if name_or_path in (None, "", "default"):
        return DEFAULT_CALIBRATION
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
        return Calibration(**params)
    except InputError as exc:
        raise CatalogFileError(f"{p}: {exc}") from None
