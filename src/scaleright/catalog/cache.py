"""The validated entries of a catalog directory (and of the built-in ``systems.yaml``), cached on disk by the content
hash of their files.

Parsing the catalog's YAML (and importing the YAML library) is most of what loading it costs; the validated entries,
written as JSON, read back in a few milliseconds. The key is a SHA-256 over the bytes of every catalog file of the
directory (``gpus.yaml``, ``models.yaml``, ``prices.csv``, ``models/*.json``), the source of the modules that
validate them, and the versions of scaleright, Python and pydantic: an edited file or an upgraded package gets a new
key, never a stale entry. Only a layer that validated completely is written; a read-back entry is validated again
by the same pydantic models (cheap: no YAML), and must come back with the same fields set, else it is not written.
An unreadable, corrupt or foreign cache file is ignored (the catalog is parsed from its files and the entry
rewritten); a cache directory that cannot be written costs the speed-up, never the command.

Location: ``$SCALERIGHT_CACHE_DIR`` if set, else ``platformdirs.user_cache_dir("scaleright")``; files are
``catalog-<key>.json``, written atomically (a temporary file renamed over the target), the newest ``KEEP`` kept.
``SCALERIGHT_NO_CACHE=1`` turns the cache off (reads and writes).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    from pydantic import BaseModel

M = TypeVar("M", bound="BaseModel")

__all__ = ["CACHE_ENV", "KEEP", "NO_CACHE_ENV", "cache_dir", "cached_entries", "layer_key", "read_layer",
           "write_layer"]

CACHE_ENV = "SCALERIGHT_CACHE_DIR"
NO_CACHE_ENV = "SCALERIGHT_NO_CACHE"
KEEP = 16  # cache files kept (several checkouts or user catalogs on one machine each have their own)
FORMAT = 1

# The code whose behaviour is baked into a cached layer: the validators and the loader.
_CODE = ("catalog/gpus.py", "catalog/models.py", "catalog/prices.py", "catalog/store.py", "catalog/systems.py",
         "catalog/cache.py", "limits.py", "userdata.py", "workload/spec.py")  # fmt: skip


def cache_dir() -> Path | None:
    """Where cache files live; None when the cache is off."""
    if os.environ.get(NO_CACHE_ENV, "") not in ("", "0"):
        return None
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("scaleright"))


def _code_digest() -> bytes:
    import pydantic

    from scaleright import __version__

    h = hashlib.sha256(f"{FORMAT}|{__version__}|{sys.version_info[:2]}|{pydantic.VERSION}".encode())
    root = files("scaleright")
    for rel in _CODE:
        data = (root / rel).read_bytes()
        h.update(f"{rel}:{len(data)}:".encode())
        h.update(data)
    return h.digest()


def layer_key(root: Traversable, names: list[str], *, user: bool) -> str | None:
    """The cache key of the catalog directory ``root`` whose present files are ``names`` (among gpus.yaml,
    models.yaml, prices.csv), with every ``models/*.json`` beside them; None if a file cannot be read (the loader
    then reports it)."""
    try:
        h = hashlib.sha256(_code_digest())
        h.update(b"user" if user else b"builtin")
        paths = [(n, root / n) for n in sorted(names)]
        models = root / "models"
        if models.is_dir():
            paths += sorted((f"models/{p.name}", p) for p in models.iterdir() if p.name.endswith(".json"))
        for name, p in paths:
            data = p.read_bytes()
            h.update(f"\0{name}:{len(data)}:".encode())
            h.update(data)
    except (OSError, UnicodeError):
        return None
    return h.hexdigest()


def _file(directory: Path, key: str) -> Path:
    return directory / f"catalog-{key}.json"


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json", exclude_unset=True)


def _same(a: Any, b: Any) -> bool:
    """Equal values and the same fields given, recursively (a nested model's ``model_fields_set`` too)."""
    return bool(a == b) and _dump(a) == _dump(b)


def _revalidate(data: dict[str, Any], *, user: bool) -> dict[str, Any]:
    from scaleright.catalog.gpus import Accelerator
    from scaleright.catalog.models import ModelEntry
    from scaleright.catalog.prices import PriceRow

    context = {"today": datetime.datetime.now(datetime.UTC).date()} if user else None
    gpus = {g["id"]: Accelerator.model_validate(g) for g in data["gpus"]}
    models = {m["name"]: ModelEntry.model_validate(m) for m in data["models"]}
    prices = [(str(label), PriceRow.model_validate(r, context=context)) for label, r in data["prices"]]
    configs = data["configs"]
    if not isinstance(configs, dict) or set(configs) != set(models) or not all(
            isinstance(c, dict) for c in configs.values()):  # fmt: skip
        raise ValueError("cache: configs do not match the models")
    return {"gpus": gpus, "models": models, "prices": prices, "configs": configs}


def _read_raw(key: str | None) -> dict[str, Any] | None:
    """The cache file of ``key`` as a dict, or None when absent, unreadable, corrupt or of another key."""
    directory = cache_dir()
    if key is None or directory is None:
        return None
    try:
        raw = json.loads(_file(directory, key).read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT or raw.get("key") != key:
        return None
    return raw


def read_layer(key: str | None, *, user: bool) -> dict[str, Any] | None:
    """The cached entries under ``key`` (``gpus``, ``models``, ``prices``, ``configs``), or None when absent,
    unreadable or invalid."""
    raw = _read_raw(key)
    if raw is None:
        return None
    try:
        return _revalidate(raw, user=user)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):  # ValidationError is a ValueError
        return None


def write_layer(key: str | None, layer: dict[str, Any], *, user: bool) -> Path | None:
    """Write ``layer``'s entries under ``key`` if they read back identical; the file, or None if not written."""
    if key is None or cache_dir() is None:
        return None
    data = {
        "gpus": [_dump(g) for g in layer["gpus"].values()],
        "models": [_dump(m) for m in layer["models"].values()],
        "prices": [[label, _dump(r)] for label, r in layer["prices"]],
        "configs": layer["configs"],
    }

    def same(back: dict[str, Any]) -> bool:
        return (all(_same(back[k][n], v) for k in ("gpus", "models") for n, v in layer[k].items())
                and list(back["gpus"]) == list(layer["gpus"]) and list(back["models"]) == list(layer["models"])
                and len(back["prices"]) == len(layer["prices"])
                and all(a[0] == b[0] and _same(a[1], b[1]) for a, b in zip(back["prices"], layer["prices"],
                                                                           strict=True))
                and back["configs"] == layer["configs"])  # fmt: skip

    return _write_raw(key, data, lambda d: same(_revalidate(d, user=user)))


def cached_entries(tag: str, path: Traversable, model: type[M], build: Callable[[], tuple[M, ...]]) -> tuple[M, ...]:
    """``build()`` (the validated entries of the one file ``path``, of pydantic ``model``), or the same entries from
    the cache when ``path``'s bytes and the code are unchanged; written on a miss (same guarantees as a layer)."""
    try:
        data = path.read_bytes()
        h = hashlib.sha256(_code_digest())
        h.update(f"{tag}:{len(data)}:".encode())
        h.update(data)
        key: str | None = h.hexdigest()
    except (OSError, UnicodeError):
        key = None
    raw = _read_raw(key)
    if raw is not None:
        try:
            return tuple(model.model_validate(e) for e in raw["entries"])
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
            pass
    out = build()

    def same(d: dict[str, Any]) -> bool:
        back = [model.model_validate(e) for e in d["entries"]]
        return len(back) == len(out) and all(_same(a, b) for a, b in zip(back, out, strict=True))

    if key is not None and cache_dir() is not None:
        _write_raw(key, {"entries": [_dump(e) for e in out]}, same)
    return out


def _write_raw(key: str, data: dict[str, Any], reads_back: Callable[[dict[str, Any]], bool]) -> Path | None:
    """Write ``data`` as the cache file of ``key`` (atomically) if ``reads_back`` confirms the JSON round trip."""
    directory = cache_dir()
    if directory is None:
        return None
    data = {"format": FORMAT, "key": key, **data}
    try:
        text = json.dumps(data, allow_nan=False, separators=(",", ":"))
        if not reads_back(json.loads(text)):
            return None
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None
    target = _file(directory, key)
    tmp: str | None = None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".catalog-", suffix=".tmp", dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, target)
        tmp = None
        _prune(directory)
    except OSError:
        return None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return target


def _prune(directory: Path) -> None:
    """Keep the ``KEEP`` most recently written cache files; remove only files this module names."""
    found = []
    for p in directory.glob("catalog-*.json"):
        stem = p.name.removeprefix("catalog-").removesuffix(".json")
        if len(stem) == 64 and all(c in "0123456789abcdef" for c in stem):
            try:
                found.append((p.stat().st_mtime_ns, p))
            except OSError:
                pass
    for _, p in sorted(found, reverse=True)[KEEP:]:
        try:
            p.unlink()
        except OSError:
            pass
