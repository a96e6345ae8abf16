"""Stored engine profiles: what ``scaleright calibrate --serving --name NAME`` fitted, by name, beside the training
calibration profiles.

A fitted profile (``bench.calibrate_serving.fit_engine``) is written atomically as
``<calibration dir>/engines/<NAME>.json`` (the directory of ``estimate.calibration.calibration_dir``; the same name
rule as a calibration profile, and no built-in engine's name) with its provenance: the base profile, the serve runs
and a hash of what was measured in them, the engines and versions that served them, the factors before and after
and the in-sample error. ``get_engine(NAME)`` (``estimate.engines``) falls back to this store, so ``serve simulate
--engine NAME``, ``serve capacity`` and fleet files take a stored name as they take ``vllm``.

A file that does not load as a profile is an ``InputError`` naming the file and the field, never a silent default.

Schema evolution. ``EngineProfile`` gains fields (``fused_elementwise``, ``max_num_seqs``, ``sequence_overhead_s``,
``dequantize_above_rows``, ``gemm_accumulate``, ``overlaps_pipeline_stages`` were added after the store's first files
were written), and a file holds the fields of the scaleright that wrote it. ``FIRST_SCHEMA_FIELDS``, the fields of the
first version, must be in every file: one of them absent is a damaged file, not an old one. A field added since that a
file lacks takes the value of the profile the file was fitted from (``provenance.base``: a built-in engine as shipped
now, or a stored profile, read by the same rules), and loading it says so once per file and process, on stderr: which
fields came from the base and that they were not fitted (``calibrate --serving --name NAME --force`` refits them). A
file without a base to take them from, or whose provenance lists such a field as fitted, does not load. A key this
version does not know (written by a newer scaleright) is refused, not ignored: it is a factor of the engine model the
file was fitted under, and simulating without it would describe another engine than the one measured.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scaleright.errors import CatalogFileError, InputError

if TYPE_CHECKING:
    from scaleright.estimate.engines import EngineProfile

__all__ = ["ENGINE_SUBDIR", "engine_dir", "engine_profile_path", "stored_engine_names", "load_engine_profile",
           "save_engine_profile", "read_stored", "engine_choice_text", "check_engine", "PROVENANCE_KEYS",
           "FIRST_SCHEMA_FIELDS"]

ENGINE_SUBDIR = "engines"  # under the calibration directory
# the ``EngineProfile`` fields of the store's first files (commit 9d538b6): every stored file holds them
FIRST_SCHEMA_FIELDS = ("name", "iteration_overhead_s", "hbm_fraction", "gemm_efficiency_factor",
                       "quantised_kv_precision", "frontend_latency_s", "custom_all_reduce", "status", "grounded_in",
                       "note")  # fmt: skip
_NOTED: set[tuple[str, tuple[str, ...]]] = set()  # (file, fields taken from its base) already said this process
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


def _number(where: str, key: str, v: Any, low: float = 0.0, high: float = math.inf) -> float:
    """``v`` as a float when it is a finite number in [low, high]; else one line naming the file and the field."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not low <= v <= high:
        rng = f">= {low:g}" if high == math.inf else f"in [{low:g}, {high:g}]"
        raise CatalogFileError(f"{where}: {key}={v!r} must be a finite number {rng}")
    return float(v)


def _count(where: str, key: str, v: Any, kind: str, *, none: bool = False) -> None:
    """One line naming the file and the field unless ``v`` is an integer from 1 to ``limits.LIMITS[kind]`` (or
    null, with ``none``)."""
    from scaleright.limits import check_limit

    if none and v is None:
        return
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise CatalogFileError(f"{where}: {key}={v!r} must be an integer >= 1" + (" or null" if none else ""))
    check_limit(f"{where}: {key}", v, kind)


def _base_values(where: str, path: Path, data: dict[str, Any], added: list[str],
                 seen: tuple[Path, ...]) -> dict[str, Any]:  # fmt: skip
    """The values of ``added`` (fields newer than the file) in the profile the file was fitted from (module
    docstring), said once on stderr; one line naming the file when there is no such profile."""
    from scaleright.estimate.engines import ENGINES

    prov = data.get("provenance")
    base = prov.get("base") if isinstance(prov, dict) else None
    refit = f"refit it with calibrate --serving --name {path.stem} --force"
    if not isinstance(base, str) or not base:
        raise CatalogFileError(f"{where}: missing {', '.join(added)} (stored before they existed) and its provenance "
                               f"names no base engine to take them from; {refit}")  # fmt: skip
    fitted = prov.get("fitted") if isinstance(prov, dict) else None
    claimed = [n for n in added if isinstance(fitted, list) and n in fitted]
    if claimed:
        raise CatalogFileError(f"{where}: missing {', '.join(claimed)}, which its provenance lists as fitted")
    prof = ENGINES[base] if base in ENGINES else _stored_base(where, base, seen)
    values = {n: getattr(prof, n) for n in added}
    said = (str(path), tuple(added))
    if said not in _NOTED:
        _NOTED.add(said)
        kind = "built-in engine" if base in ENGINES else "stored profile"
        sys.stderr.write(f"note: engine profile {path} was stored before {', '.join(added)} existed: "
                         + ", ".join(f"{n}={v!r}" for n, v in values.items())
                         + f" taken from its base, the {kind} {base!r}, not fitted ({refit})\n")  # fmt: skip
    return values


def _stored_path(name: str) -> Path | None:
    """``<engine dir>/<name>.json`` when a profile is stored under ``name`` (a plain file, no link); None when none
    is, or the store cannot hold the name (a '.' or a '/')."""
    from scaleright.estimate.calibration import check_profile_name

    try:
        check_profile_name(name)
    except InputError:
        return None
    path = engine_dir() / f"{name}.json"
    return None if path.is_symlink() or not path.is_file() else path


def _load(path: Path, seen: tuple[Path, ...]) -> EngineProfile:
    """The stored profile in the file ``path``, read by these rules (``seen``: the files on the chain of bases)."""
    from scaleright.textfile import read_text
    from scaleright.userdata import load_json

    return _read(load_json(read_text(path), str(path)), path, seen)[0]


def _stored_base(where: str, base: str, seen: tuple[Path, ...]) -> EngineProfile:
    """The stored profile ``base`` a file was fitted from (itself read by these rules); one line when there is none
    or the chain of bases returns to a file already on it."""
    target = _stored_path(base)
    if target is None:
        raise CatalogFileError(f"{where}: its base engine {base!r} (provenance.base) is neither built-in nor stored, "
                               "so the fields it lacks have no value; refit it with calibrate --serving --name")
    if target in seen:
        raise CatalogFileError(f"{where}: its chain of base profiles returns to {target} (provenance.base)")
    return _load(target, seen)


def _read(data: Any, path: Path, seen: tuple[Path, ...]) -> tuple[EngineProfile, list[str]]:
    """The profile, and the fields it took from its base (``seen``: the files already on the chain of bases)."""
    from scaleright.estimate.engines import GEMM_ACCUMULATES, SEQUENCE_OVERHEAD_BOUNDS_S, EngineProfile
    from scaleright.estimate.moe import MOE_DISPATCH
    from scaleright.workload.precision import KV_PRECISIONS

    where = f"engine profile {path}"
    if not isinstance(data, dict) or not isinstance(data.get("profile"), dict):
        raise CatalogFileError(f"{where}: not an engine profile (expected an object with 'profile')")
    p = dict(data["profile"])
    names = [f.name for f in fields(EngineProfile)]
    extra = sorted(set(p) - set(names))
    if extra:
        raise CatalogFileError(f"{where}: unknown field {', '.join(extra)}: not a factor this scaleright models (a "
                               f"newer version wrote it?); upgrade scaleright, or refit it with calibrate --serving "
                               f"--name {path.stem} --force")  # fmt: skip
    missing = [n for n in FIRST_SCHEMA_FIELDS if n not in p]
    if missing:
        raise CatalogFileError(f"{where}: missing {', '.join(missing)}")
    added = [n for n in names if n not in p]  # fields newer than the file: its base's values
    for key in ("iteration_overhead_s", "gemm_efficiency_factor", "frontend_latency_s"):
        _number(where, key, p[key])
    hbm = p["hbm_fraction"]
    if hbm is not None and (isinstance(hbm, bool) or not isinstance(hbm, (int, float)) or not 0 < hbm <= 1):
        raise CatalogFileError(f"{where}: hbm_fraction={hbm!r} must lie in (0, 1] or be null")
    if not isinstance(p["quantised_kv_precision"], str) or p["quantised_kv_precision"] not in KV_PRECISIONS:
        raise CatalogFileError(f"{where}: quantised_kv_precision={p['quantised_kv_precision']!r} not allowed; "
                               f"allowed: {', '.join(KV_PRECISIONS)}")  # fmt: skip
    for key in ("custom_all_reduce", "fused_elementwise", "overlaps_pipeline_stages"):
        if key in p and not isinstance(p[key], bool):
            raise CatalogFileError(f"{where}: {key}={p[key]!r} must be true or false")
    if "max_num_seqs" in p:
        _count(where, "max_num_seqs", p["max_num_seqs"], "batch")
    if "sequence_overhead_s" in p:
        p["sequence_overhead_s"] = _number(where, "sequence_overhead_s", p["sequence_overhead_s"],
                                           *SEQUENCE_OVERHEAD_BOUNDS_S)  # fmt: skip
    if "dequantize_above_rows" in p:
        _count(where, "dequantize_above_rows", p["dequantize_above_rows"], "tokens_per_request", none=True)
    if "gemm_accumulate" in p and p["gemm_accumulate"] not in GEMM_ACCUMULATES:
        raise CatalogFileError(f"{where}: gemm_accumulate={p['gemm_accumulate']!r} not allowed; allowed: "
                               f"{', '.join(GEMM_ACCUMULATES)}")  # fmt: skip
    if "moe_dispatch" in p and p["moe_dispatch"] not in MOE_DISPATCH:  # a later field (moe_dispatch)
        raise CatalogFileError(f"{where}: moe_dispatch={p['moe_dispatch']!r} not allowed; allowed: "
                               f"{', '.join(MOE_DISPATCH)}")  # fmt: skip
    for key in ("name", "status", "note"):
        if not isinstance(p[key], str):
            raise CatalogFileError(f"{where}: {key} must be text")
    if p["name"] != path.stem:
        raise CatalogFileError(f"{where}: name={p['name']!r} differs from the file's name {path.stem!r}")
    g = p["grounded_in"]
    if not isinstance(g, list) or not all(isinstance(x, str) for x in g):
        raise CatalogFileError(f"{where}: grounded_in must be a list of text")
    if added:
        p.update(_base_values(where, path, data, added, (*seen, path)))
    prof = EngineProfile(**{**p, "grounded_in": tuple(g), "hbm_fraction": None if hbm is None else float(hbm)})
    return prof, added


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
    path = _stored_path(name)
    return None if path is None else _load(path, ())


def read_stored(path: Path) -> dict[str, Any]:
    """What ``calibrate list`` shows of one stored engine profile: its provenance and the fields it took from its
    base profile (``from_base``, not fitted: the file predates them), or why it does not load."""
    from scaleright.errors import ScalerightError
    from scaleright.textfile import read_text
    from scaleright.userdata import load_json

    try:
        data = load_json(read_text(path), str(path))
        prof, added = _read(data, path, ())
    except ScalerightError as exc:
        return {"name": path.stem, "path": str(path), "ok": False, "error": str(exc)}
    return {"name": path.stem, "path": str(path), "ok": True, "profile": asdict(prof),
            "provenance": data.get("provenance"), "from_base": added}  # fmt: skip


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
    _read(json.loads(text), path, ())  # what is saved loads (checked before anything is written)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"engine profile directory {path.parent}: cannot create it ({exc.strerror or exc})") from None
    return write_atomic(f"engine profile '{name}'", path, text + "\n")
