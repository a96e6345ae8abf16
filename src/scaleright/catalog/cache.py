"""The validated entries of a catalog directory (and of the built-in ``systems.yaml``; the parsed package data of
``collective_fits.yaml``), cached on disk by the content hash of their files.

Parsing the catalog's YAML (and importing the YAML library), validating it and building the validators is most of what
loading it costs; the validated entries, pickled, read back in a millisecond (the catalog's pydantic models build their
validators only when something is validated: ``defer_build``). The key is a SHA-256 over the bytes of every catalog file
of the directory (``gpus.yaml``, ``models.yaml``, ``prices.csv``, ``catalog.yaml``, ``models/*.json``), the source of
the modules that validate them, and the versions of scaleright, Python and pydantic: an edited file, edited code or an
upgraded package gets a new key, never a stale entry. Only entries that validated completely are written, and only when
they unpickle equal, with the same fields set. A cache file that cannot be read, does not unpickle, or holds anything
but the expected entries is ignored (the catalog is parsed from its files and the file rewritten); a cache directory
that cannot be written costs the speed-up, never the command. The cache directory is trusted as Python trusts its
``__pycache__`` (bytecode is code too): it is the user's own.

Location: ``$SCALERIGHT_CACHE_DIR`` if set, else ``platformdirs.user_cache_dir("scaleright")``; files are
``catalog-<key>.pickle``, written atomically (a temporary file renamed over the target), the newest ``KEEP`` kept.
``SCALERIGHT_NO_CACHE=1`` turns the cache off (reads and writes).
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import sys
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from scaleright.textfile import replace_atomically

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    from pydantic import BaseModel

M = TypeVar("M", bound="BaseModel")

__all__ = ["CACHE_ENV", "KEEP", "NO_CACHE_ENV", "cache_dir", "cached", "cached_data", "cached_entries", "layer_key",
           "read_layer", "write_layer"]

CACHE_ENV = "SCALERIGHT_CACHE_DIR"
NO_CACHE_ENV = "SCALERIGHT_NO_CACHE"
KEEP = 16  # cache files kept (several checkouts or user catalogs on one machine each have their own)
FORMAT = 2  # 1: JSON, re-validated on read; 2: pickle, type-checked on read (``_is_layer``, ``ok``)

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


@functools.lru_cache(maxsize=1)
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


def _key(tag: str, paths: list[tuple[str, Traversable]]) -> str | None:
    """SHA-256 over the code (``_code_digest``), ``tag`` and each named file's bytes; None if one cannot be read."""
    try:
        h = hashlib.sha256(_code_digest())
        h.update(tag.encode())
        for name, p in paths:
            data = p.read_bytes()
            h.update(f"\0{name}:{len(data)}:".encode())
            h.update(data)
    except (OSError, UnicodeError):
        return None
    return h.hexdigest()


def layer_key(root: Traversable, names: list[str], *, user: bool) -> str | None:
    """The cache key of the catalog directory ``root`` whose present files are ``names`` (among gpus.yaml, models.yaml,
    prices.csv, catalog.yaml), with every ``models/*.json`` beside them; None if a file cannot be read (the loader then
    reports it)."""
    paths = [(n, root / n) for n in sorted(names)]
    try:
        models = root / "models"
        if models.is_dir():
            paths += sorted((f"models/{p.name}", p) for p in models.iterdir() if p.name.endswith(".json"))
    except OSError:
        return None
    return _key("user" if user else "builtin", paths)


def _file(directory: Path, key: str) -> Path:
    return directory / f"catalog-{key}.pickle"


def _read(key: str | None) -> Any:
    """The entries cached under ``key``, or None when absent, unreadable, corrupt or of another key."""
    directory = cache_dir()
    if key is None or directory is None:
        return None
    try:
        raw = pickle.loads(_file(directory, key).read_bytes())
    except Exception:  # a damaged pickle raises almost anything; the cache is then ignored
        return None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT or raw.get("key") != key:
        return None
    return raw.get("entries")


def _all(items: Any, kind: type) -> bool:
    return all(isinstance(x, kind) for x in items)


def _is_layer(d: Any) -> bool:
    from scaleright.catalog.gpus import Accelerator
    from scaleright.catalog.models import ModelEntry
    from scaleright.catalog.prices import PriceRow

    return (isinstance(d, dict) and set(d) == {"gpus", "models", "prices", "configs", "settings"}
            and isinstance(d["gpus"], dict) and _all(d["gpus"].values(), Accelerator)
            and all(k == g.id for k, g in d["gpus"].items())
            and isinstance(d["models"], dict) and _all(d["models"].values(), ModelEntry)
            and all(k == m.name for k, m in d["models"].items())
            and isinstance(d["prices"], list) and all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str)
                                                      and isinstance(p[1], PriceRow) for p in d["prices"])
            and isinstance(d["configs"], dict) and set(d["configs"]) == set(d["models"])
            and _all(d["configs"].values(), dict)
            and isinstance(d["settings"], dict) and _all([*d["settings"], *d["settings"].values()], str))  # fmt: skip


def read_layer(key: str | None) -> dict[str, Any] | None:
    """The cached entries of a catalog directory under ``key`` (``gpus``, ``models``, ``prices``, ``configs``,
    ``settings``; whether the directory is a user's is part of the key), or None."""
    entries = _read(key)
    return entries if _is_layer(entries) else None


def write_layer(key: str | None, layer: dict[str, Any]) -> Path | None:
    """Cache ``layer``'s entries under ``key``; the file, or None if not written."""
    entries = {k: layer[k] for k in ("gpus", "models", "prices", "configs", "settings")}
    return _write(key, entries, _is_layer)


def cached_entries(tag: str, path: Traversable, model: type[M], build: Callable[[], tuple[M, ...]]) -> tuple[M, ...]:
    """``build()`` (the validated entries of the one file ``path``, of pydantic ``model``), or the same entries from
    the cache when ``path``'s bytes and the code are unchanged; written on a miss."""
    return cached(tag, path, build, lambda e: isinstance(e, tuple) and _all(e, model))


def cached_data(tag: str, path: Traversable, build: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``build()`` (plain data parsed from the one file ``path``: a mapping of strings, numbers, lists and mappings,
    such as a YAML file of package data), or the same data from the cache when ``path``'s bytes and the code are
    unchanged; written on a miss. A hit costs neither the parse nor the import of the YAML library."""
    return cached(tag, path, build, lambda e: isinstance(e, dict))


T = TypeVar("T")


def cached(tag: str, path: Traversable, build: Callable[[], T], ok: Callable[[Any], bool]) -> T:
    """``build()``, or what it returned before for the same bytes of ``path`` and the same code (``ok`` checks
    what the cache holds); written on a miss."""
    key = _key(tag, [("", path)])
    hit = _read(key)
    if ok(hit):
        return hit  # type: ignore[no-any-return]
    out = build()
    _write(key, out, ok)
    return out


def _fields_set(o: Any) -> Any:
    """Every value of ``o`` with, for each pydantic model in it, the fields it was given (compared on write)."""
    if hasattr(o, "model_fields_set"):
        return (type(o).__name__, sorted(o.model_fields_set), {k: _fields_set(v) for k, v in o.__dict__.items()})
    if isinstance(o, dict):
        return {k: _fields_set(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_fields_set(v) for v in o]
    return o


def _write(key: str | None, entries: Any, ok: Callable[[Any], bool]) -> Path | None:
    """Pickle ``entries`` as the cache file of ``key`` (atomically), if they unpickle equal with the same fields."""
    directory = cache_dir()
    if key is None or directory is None:
        return None
    try:
        blob = pickle.dumps({"format": FORMAT, "key": key, "entries": entries}, protocol=pickle.HIGHEST_PROTOCOL)
        back = pickle.loads(blob)["entries"]
        if not (ok(back) and back == entries and _fields_set(back) == _fields_set(entries)):
            return None
    except Exception:  # anything that does not pickle is simply not cached
        return None
    target = _file(directory, key)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        replace_atomically(target, blob, prefix=".catalog-")
        _prune(directory)
    except OSError:
        return None
    return target


def _prune(directory: Path) -> None:
    """Keep the ``KEEP`` most recently written cache files; remove only files this module names."""
    found = []
    for p in directory.glob("catalog-*.pickle"):
        stem = p.name.removeprefix("catalog-").removesuffix(".pickle")
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
