"""Stored engine profiles: what ``scaleright calibrate --serving --name NAME`` fitted, by name, beside the training
calibration profiles.

A fitted profile (``bench.calibrate_serving.fit_engine``) is written atomically as
``<calibration dir>/engines/<NAME>.json`` (the directory of ``estimate.calibration.calibration_dir``; the same name
rule as a calibration profile, and no built-in engine's name) with its provenance: the base profile, the serve runs
and a hash of what was measured in them, the engines and versions that served them, the factors before and after
and the in-sample error. ``get_engine(NAME)`` (``estimate.engines``) falls back to this store, so ``serve simulate
--engine NAME``, ``serve capacity`` and fleet files take a stored name as they take ``vllm``.

A file that does not load as a profile is an ``InputError`` naming the file and the field, never a silent default.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scaleright.errors import CatalogFileError, InputError

if TYPE_CHECKING:
    from scaleright.estimate.engines import EngineProfile

__all__ = ["ENGINE_SUBDIR", "engine_dir", "engine_profile_path", "stored_engine_names", "load_engine_profile",
           "save_engine_profile", "read_stored", "engine_choice_text", "check_engine", "PROVENANCE_KEYS"]

ENGINE_SUBDIR = "engines"  # under the calibration directory
# what a stored profile's provenance holds (all written by ``calibrate --serving --name``)
PROVENANCE_KEYS = ("created_utc", "base", "runs", "runs_sha256", "engines", "gpus", "fitted", "before", "after",
                   "on_bound", "median_abs_pct_error_before", "median_abs_pct_error_after", "in_sample")


def engine_dir() -> Path:
    """``<calibration dir>/engines`` ($SCALERIGHT_CALIBRATION_DIR or the user data directory)."""
    from scaleright.estimate.calibration import calibration_dir

    return calibration_dir() / ENGINE_SUBDIR


def engine_profile_path(name: str, *, flag: str = "--name") -> Path:
    """``<engine dir>/<name>.json`` after checking the name: a calibration profile's rule, and not a built-in
    engine's name (which ``--engine`` would always resolve to the built-in)."""
    from scaleright.estimate.calibration import check_profile_name
    from scaleright.estimate.engines import ENGINES

    check_profile_name(name, flag=flag)
    if name in ENGINES:
        raise InputError(f"{flag}={name!r} names a built-in engine profile ({', '.join(ENGINES)}); choose another "
                         "name for the fitted one")  # fmt: skip
    return engine_dir() / f"{name}.json"


def stored_engine_names() -> tuple[str, ...]:
    """Names of the stored engine profiles (files in the engine directory), sorted."""
    d = engine_dir()
    if not d.is_dir():
        return ()
    return tuple(sorted(p.stem for p in d.glob("*.json") if p.is_file() and not p.is_symlink()))


def engine_choice_text() -> str:
    """'allowed: … (built-in); stored: …' for an error message."""
    from scaleright.estimate.engines import ENGINES

    stored = stored_engine_names()
    return (f"allowed: {', '.join(ENGINES)} (built-in); stored: {', '.join(stored) or 'none'} "
            f"(calibrate --serving --name NAME stores one)")  # fmt: skip


def check_engine(flag: str, name: str) -> str:
    """``name`` when it names a built-in or a stored engine profile, else one line naming ``flag`` and both lists."""
    from scaleright.estimate.engines import ENGINES

    if name in ENGINES or name in stored_engine_names():
        return name
    raise InputError(f"{flag}={name!r} not allowed; {engine_choice_text()}")


def _profile_from(data: Any, path: Path) -> EngineProfile:
    from scaleright.estimate.engines import EngineProfile
    from scaleright.workload.precision import KV_PRECISIONS

    where = f"engine profile {path}"
    if not isinstance(data, dict) or not isinstance(data.get("profile"), dict):
        raise CatalogFileError(f"{where}: not an engine profile (expected an object with 'profile')")
    p = data["profile"]
    names = [f.name for f in fields(EngineProfile)]
    missing, extra = [n for n in names if n not in p], sorted(set(p) - set(names))
    if missing or extra:
        raise CatalogFileError(f"{where}: " + "; ".join(
            x for x in (f"missing {', '.join(missing)}" if missing else "",
                        f"unknown {', '.join(extra)}" if extra else "") if x))  # fmt: skip
    for key in ("iteration_overhead_s", "gemm_efficiency_factor", "frontend_latency_s"):
        v = p[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise CatalogFileError(f"{where}: {key}={v!r} must be a finite number >= 0")
    hbm = p["hbm_fraction"]
    if hbm is not None and (isinstance(hbm, bool) or not isinstance(hbm, (int, float)) or not 0 < hbm <= 1):
        raise CatalogFileError(f"{where}: hbm_fraction={hbm!r} must lie in (0, 1] or be null")
    if p["quantised_kv_precision"] not in KV_PRECISIONS:
        raise CatalogFileError(f"{where}: quantised_kv_precision={p['quantised_kv_precision']!r} not allowed; "
                               f"allowed: {', '.join(KV_PRECISIONS)}")  # fmt: skip
    if not isinstance(p["custom_all_reduce"], bool):
        raise CatalogFileError(f"{where}: custom_all_reduce must be true or false")
    for key in ("name", "status", "note"):
        if not isinstance(p[key], str):
            raise CatalogFileError(f"{where}: {key} must be text")
    if p["name"] != path.stem:
        raise CatalogFileError(f"{where}: name={p['name']!r} differs from the file's name {path.stem!r}")
    g = p["grounded_in"]
    if not isinstance(g, list) or not all(isinstance(x, str) for x in g):
        raise CatalogFileError(f"{where}: grounded_in must be a list of text")
    return EngineProfile(**{**p, "grounded_in": tuple(g), "hbm_fraction": None if hbm is None else float(hbm)})


def check_engine_name(name: str) -> str:
    """``name`` when it is a built-in engine profile or a stored one; else ``ValueError`` with the allowed names (the
    one check of a scenario's and a fleet file's ``engine`` field, read by pydantic as the field's message)."""
    from scaleright.estimate.engines import ENGINES

    if name not in ENGINES and load_engine_profile(name) is None:
        raise ValueError(f"{name!r} not allowed; {engine_choice_text()}")
    return name


def load_engine_profile(name: str) -> EngineProfile | None:
    """The stored profile ``name``, or None when none is stored under that name (a name the store cannot hold,
    with a '.' or a '/', is None too). A stored file that does not load is a ``CatalogFileError``."""
    from scaleright.estimate.calibration import check_profile_name
    from scaleright.textfile import read_text
    from scaleright.userdata import load_json

    try:
        check_profile_name(name)
    except InputError:
        return None
    path = engine_dir() / f"{name}.json"
    if path.is_symlink() or not path.is_file():
        return None
    return _profile_from(load_json(read_text(path), str(path)), path)


def read_stored(path: Path) -> dict[str, Any]:
    """What ``calibrate list`` shows of one stored engine profile: its provenance, or why it does not load."""
    from scaleright.errors import ScalerightError
    from scaleright.textfile import read_text
    from scaleright.userdata import load_json

    try:
        data = load_json(read_text(path), str(path))
        prof = _profile_from(data, path)
    except ScalerightError as exc:
        return {"name": path.stem, "path": str(path), "ok": False, "error": str(exc)}
    return {"name": path.stem, "path": str(path), "ok": True, "profile": asdict(prof),
            "provenance": data.get("provenance")}  # fmt: skip


def save_engine_profile(name: str, profile: EngineProfile, *, provenance: dict[str, Any],
                        overwrite: bool = False) -> Path:  # fmt: skip
    """Write ``profile`` as the stored profile ``name`` (its ``name`` set to ``name``) with ``provenance``
    (``PROVENANCE_KEYS``), atomically; an existing one is replaced only with ``overwrite`` (``--force``)."""
    import dataclasses

    from scaleright.textfile import write_atomic

    path = engine_profile_path(name)
    if path.exists() and not overwrite:
        raise InputError(f"--name={name}: an engine profile already exists at {path}; pass --force to replace it")
    missing = [k for k in PROVENANCE_KEYS if k not in provenance]
    if missing:
        raise InputError(f"engine profile {name!r}: provenance lacks {', '.join(missing)}")
    body = {"profile": asdict(dataclasses.replace(profile, name=name)), "provenance": provenance}
    try:
        text = json.dumps(body, indent=2, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise CatalogFileError(f"engine profile {name!r}: cannot be written as JSON ({exc})") from None
    _profile_from(json.loads(text), path)  # what is saved loads (checked before anything is written)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"engine profile directory {path.parent}: cannot create it ({exc.strerror or exc})") from None
    return write_atomic(f"engine profile '{name}'", path, text + "\n")
