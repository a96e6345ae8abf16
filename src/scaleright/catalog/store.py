"""The catalog as one immutable object: built-in GPUs, prices and models, plus a user's overrides.

``Catalog.load(user_dir)`` reads the package's ``data/`` directory (via ``importlib.resources``), then, if a directory
is given or ``$SCALERIGHT_CATALOG`` names one, the same files there, each optional: ``gpus.yaml`` (a list of
accelerators), ``prices.csv`` (columns as ``PRICE_COLUMNS``), ``models.yaml`` (a list of model entries) with
``models/<file>.json``, and ``catalog.yaml`` (how the directory combines with the built-ins, ``SETTINGS``). User files
pass the same schema as the built-ins. A user GPU or model whose id/name exists replaces the built-in one, a new one is
added. A user price row overrides the built-in rows of the same GPU, kind, provider (``prices.provider_key``) and region
(``PriceRow.region``; a row that names no region stands for any region of its provider), and every other built-in row
stays, so importing one provider's prices keeps the others'; with ``prices: only`` in ``catalog.yaml`` the directory's
rows are the only prices (``price_rows_merged``). Any malformed file, unknown key or clashing alias raises
``CatalogFileError`` with one line, ``<file>: <field>: <what is allowed>``. Loaded catalogs are cached per directory for
the life of the process, and the validated entries of each directory on disk by its files' content hash (``cache``).
"""

from __future__ import annotations

import csv
import datetime
import functools
import io
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from scaleright.catalog.gpus import Accelerator, normalize_name
from scaleright.catalog.models import ModelEntry, parse_config_json
from scaleright.catalog.prices import PRICE_COLUMNS, PriceRow, provider_key
from scaleright.errors import CatalogFileError, InputError, UnknownNameError
from scaleright.limits import _show
from scaleright.textfile import _short, path_problem, read_text

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

__all__ = ["Catalog", "ENV_VAR", "SETTINGS", "get_gpu", "list_gpus", "price_rows_merged"]

ENV_VAR = "SCALERIGHT_CATALOG"
# catalog.yaml: key -> allowed values, the first the default. prices: "merge" (a user row overrides the built-in
# rows of its GPU, kind, provider and region, the rest stay) or "only" (the directory's prices.csv is every price)
SETTINGS: Mapping[str, tuple[str, ...]] = MappingProxyType({"prices": ("merge", "only")})
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True, eq=False)
class Catalog:
    """GPUs by id, price rows, models by name and their parsed configs. Build it with ``Catalog.load``."""

    gpus: Mapping[str, Accelerator]  # canonical id -> accelerator, in file order
    prices: tuple[PriceRow, ...]
    models: Mapping[str, ModelEntry]  # catalog name -> entry
    model_configs: Mapping[str, Mapping[str, Any]]  # catalog name -> parsed config.json (do not modify)
    _gpu_index: Mapping[str, str] = field(repr=False)  # normalized name -> id
    _model_index: Mapping[str, str] = field(repr=False)  # normalized name -> model name

    @classmethod
    def load(cls, user_dir: Path | str | None = None) -> Catalog:
        """Built-ins overlaid with ``user_dir`` (default: ``$SCALERIGHT_CATALOG`` if set)."""
        if user_dir is not None and str(user_dir) == "":
            raise InputError("catalog directory: empty path; give a directory (--catalog DIR), or none")
        origin = "given as argument"
        if user_dir is None:
            user_dir, origin = os.environ.get(ENV_VAR) or None, f"from ${ENV_VAR}"  # an empty variable is unset
        if user_dir is None:
            return _load(None)
        p = Path(user_dir).expanduser()
        why = path_problem(p, want="dir")
        if why is not None:
            if why == "directory not found":
                why = "catalog directory not found"
            raise CatalogFileError(f"{_short(p)}: {why} ({origin})")
        return _load(p.resolve())

    def gpu(self, name: str) -> Accelerator:
        """An accelerator by id or alias (case-insensitive; spaces, underscores and hyphens alike)."""
        gid = self._gpu_index.get(normalize_name(name))
        if gid is None:
            raise UnknownNameError("GPU", name, [n for g in self.gpus.values() for n in (g.id, *g.aliases)])
        return self.gpus[gid]

    def model_entry(self, name: str) -> ModelEntry:
        """A model entry by catalog name or alias (case-insensitive)."""
        key = self._model_index.get(normalize_name(name))
        if key is None:
            raise UnknownNameError("model", name, [n for m in self.models.values() for n in m.names()])
        return self.models[key]


def get_gpu(name: str, *, catalog: Catalog | None = None) -> Accelerator:
    """An accelerator by id or alias from ``catalog`` (default: ``Catalog.load()``)."""
    return (catalog if catalog is not None else Catalog.load()).gpu(name)


def list_gpus(*, catalog: Catalog | None = None) -> list[Accelerator]:
    """Every accelerator of ``catalog`` (default: ``Catalog.load()``), in catalog order."""
    return list((catalog if catalog is not None else Catalog.load()).gpus.values())


# ---- loading -------------------------------------------------------------------------------------------------


def _validate(model: type[M], data: Any, file: object, where: str, context: dict | None = None) -> M:
    """``model(**data)``, or CatalogFileError naming the file, the entry and field, and what is allowed."""
    if not isinstance(data, dict):
        raise CatalogFileError(f"{file}: {where}: expected a mapping of fields, got {type(data).__name__}")
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = f"unknown key; allowed keys: {', '.join(model.model_fields)}"
        elif err["type"] == "missing":
            msg = "required field is missing"
        elif err["type"] in ("finite_number", "float_parsing", "float_type", "int_parsing", "int_type", "string_type"):
            msg = f"{msg} (got {_show(err.get('input'))})"
        msg = " ".join(msg.split())  # one line
        raise CatalogFileError(f"{file}: {where}{'.' + loc if loc else ''}: {msg}") from None


def _read_yaml_list(path: Traversable) -> list[Any]:
    from scaleright.userdata import load_yaml  # PyYAML only when a file is parsed (not on a cache hit)

    data = load_yaml(read_text(path), str(path))
    if data is None:
        return []
    if not isinstance(data, list):
        raise CatalogFileError(f"{path}: expected a list of entries at the top level, got {type(data).__name__}")
    return data


def _entry_label(data: Any, key: str, i: int) -> str:
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, str) and value else f"entry {i + 1}"


def _read_gpus(path: Traversable) -> list[Accelerator]:
    return [_validate(Accelerator, d, path, _entry_label(d, "id", i)) for i, d in enumerate(_read_yaml_list(path))]


def _read_models(path: Traversable) -> list[ModelEntry]:
    return [_validate(ModelEntry, d, path, _entry_label(d, "name", i)) for i, d in enumerate(_read_yaml_list(path))]


def _read_prices(path: Traversable, *, user: bool = False) -> list[tuple[str, PriceRow]]:
    """(row label, row) per data row; empty cells take the field's default. A user's rows may not be dated after
    today (UTC, with a day of slack); the built-in rows are reviewed and never depend on the machine's clock."""
    context = {"today": datetime.datetime.now(datetime.UTC).date()} if user else None
    reader = csv.DictReader(io.StringIO(read_text(path)))
    try:
        header = reader.fieldnames or []
        unknown = [c for c in header if c not in PRICE_COLUMNS]
        missing = [c for c in PRICE_COLUMNS if c not in header]
        if unknown or missing:
            what = f"unknown column(s) {unknown}" if unknown else f"missing column(s) {missing}"
            raise CatalogFileError(f"{path}: header: {what}; allowed columns: {', '.join(PRICE_COLUMNS)}")
        rows = []
        for rec in reader:
            label = f"row {reader.line_num}"
            if None in rec or None in rec.values():
                raise CatalogFileError(f"{path}: {label}: expected {len(PRICE_COLUMNS)} fields ({', '.join(header)})")
            rec = {k: v for k, v in rec.items() if v != ""}
            rows.append((label, _validate(PriceRow, rec, path, label, context)))
    except csv.Error as exc:
        line = reader.line_num + 1  # the record that failed starts after the last line read
        if "field larger than field limit" in str(exc):
            what = f"a field is longer than {csv.field_size_limit():,} characters"
        else:
            what = f"not valid CSV ({exc})"
        raise CatalogFileError(f"{path}: line {line}: {what}") from None
    return rows


def _read_settings(path: Traversable) -> dict[str, str]:
    """``catalog.yaml``: a mapping of ``SETTINGS`` keys to one of their allowed values."""
    from scaleright.userdata import load_yaml

    data = load_yaml(read_text(path), str(path))
    if data is None:
        return {}
    allowed = "; ".join(f"{k}: {' | '.join(v)}" for k, v in SETTINGS.items())
    if not isinstance(data, dict):
        raise CatalogFileError(f"{path}: expected a mapping ({allowed}), got {type(data).__name__}")
    for k, v in data.items():
        if k not in SETTINGS:
            raise CatalogFileError(f"{path}: {k}: unknown key; allowed keys: {', '.join(SETTINGS)}")
        if v not in SETTINGS[k]:
            raise CatalogFileError(f"{path}: {k}: {_show(v)} is not one of {', '.join(SETTINGS[k])}")
    return {str(k): str(v) for k, v in data.items()}


def _region_key(region: str) -> str:
    return "".join(c for c in region.lower() if c.isalnum())  # "East US" and "eastus" are one region


def price_rows_merged(builtin: Iterable[PriceRow], user: Iterable[PriceRow], *, mode: str = "merge") -> list[int]:
    """The indices of the ``builtin`` rows that stay beside the ``user`` rows: with ``mode`` "merge", those that no
    user row overrides (same GPU, kind, provider by ``provider_key``, and region, where a row that names no region
    matches every region of its provider); with "only", none."""
    rows = list(builtin)
    if mode == "only" or not rows:  # (the first layer: nothing before it to override)
        return []
    regions: dict[tuple[str, str, str], set[str]] = {}
    for r in user:
        regions.setdefault((r.gpu_id, r.kind, provider_key(r.provider)), set()).add(_region_key(r.region))
    if not regions:  # no user row: every built-in row stays
        return list(range(len(rows)))
    keep = []
    for i, r in enumerate(rows):
        got = regions.get((r.gpu_id, r.kind, provider_key(r.provider)))
        if got is None or not ((region := _region_key(r.region)) == "" or "" in got or region in got):
            keep.append(i)
    return keep


def _by_key(entries: Iterable[M], key: str, file: object) -> dict[str, M]:
    out: dict[str, M] = {}
    for e in entries:
        k = getattr(e, key)
        if k in out:
            raise CatalogFileError(f"{file}: {k}.{key}: duplicate {key} '{k}'; each must be unique")
        out[k] = e
    return out


def _index(entries: Mapping[str, Any], origin: Mapping[str, object], field_name: str) -> dict[str, str]:
    """Normalized name -> key; a name claimed by two entries is an error in the later entry's file."""
    index: dict[str, str] = {}
    for key, e in entries.items():
        for n in e.names():
            other = index.setdefault(normalize_name(n), key)
            if other != key:
                raise CatalogFileError(f"{origin[key]}: {key}.{field_name}: '{n}' already names '{other}'")
    return index


_FILES = ("gpus.yaml", "models.yaml", "prices.csv", "catalog.yaml")  # the files a directory may hold, and models/


def _present(path: Traversable, user: bool) -> bool:
    """Whether the optional catalog file ``path`` is there. In a user directory, a name that exists but is not a
    regular file (a directory, a broken link, a FIFO, ...) is an error, never silently skipped."""
    if not user:
        return path.is_file()
    why = path_problem(path)  # type: ignore[arg-type]
    if why is None:
        return True
    if why == "file not found":
        return False
    raise CatalogFileError(f"{_short(path)}: {why}")


def _misnamed(root: Path) -> None:
    """A file in a user catalog directory that looks like a catalog file under another name (``gpu.yaml``,
    ``gpus.yml``, ``price.csv``, ``Models.yaml``) would be ignored without a word: refuse it, with the right name.
    Other files (a README, ``inventory.yaml``, ``my-gpus.yaml``) are left alone."""
    import difflib

    try:
        names = sorted(p.name for p in root.iterdir())
    except OSError as exc:
        raise CatalogFileError(f"{_short(root)}: cannot list the catalog directory ({exc.strerror})") from None
    stems = {f.rpartition(".")[0]: f for f in _FILES}
    for name in names:
        if name in _FILES or name == "models" or name.startswith("."):
            continue
        stem, _, ext = name.lower().rpartition(".")
        if ext not in ("yaml", "yml", "csv", "tsv", "json", "txt") or not stem:
            continue
        for inner in (".yaml", ".yml", ".csv"):  # gpus.yaml.txt, as some editors save it
            stem = stem.removesuffix(inner)
        near = max(stems, key=lambda s: difflib.SequenceMatcher(None, stem, s).ratio())
        if difflib.SequenceMatcher(None, stem, near).ratio() > 0.8:
            raise CatalogFileError(
                f"{_short(root / name)}: not a catalog file name; did you mean {stems[near]}? "
                f"(a catalog directory holds {', '.join(_FILES)} and models/*.json)"
            )


def _check_families(models: Mapping[str, ModelEntry], configs: Mapping[str, Mapping[str, Any]], file: object) -> None:
    """An entry's ``family`` must be its config's ``model_type`` (after the spec's aliases, e.g. RefinedWebModel is
    falcon): a disagreement means the entry points at the wrong file, or the family is a typo."""
    from scaleright.workload.spec import _FAMILY_ALIASES

    for name, entry in models.items():
        mt = configs[name].get("model_type")
        if isinstance(mt, str) and entry.family not in (mt, _FAMILY_ALIASES.get(mt, mt)):
            raise CatalogFileError(
                f"{file}: {name}.family: '{entry.family}' disagrees with model_type '{mt}' in models/{entry.file}"
            )


class _Layer:
    """The files of one catalog directory (built-in or user), each optional, validated."""

    def __init__(self, root: Traversable, *, user: bool = False):
        from scaleright.catalog import cache

        if user:
            _misnamed(root)  # type: ignore[arg-type]
        gpus, models, prices = root / "gpus.yaml", root / "models.yaml", root / "prices.csv"
        self.files = {"gpus": gpus, "models": models, "prices": prices, "settings": root / "catalog.yaml"}
        present = {k: _present(p, user) for k, p in self.files.items()}
        key = cache.layer_key(root, [p.name for k, p in self.files.items() if present[k]], user=user)
        hit = cache.read_layer(key)
        if hit is not None:  # validated when it was written; on read, checked to be entries of these types
            self.gpus, self.models, self.prices = hit["gpus"], hit["models"], hit["prices"]
            self.configs, self.settings = hit["configs"], hit["settings"]
            return
        self.gpus = _by_key(_read_gpus(gpus), "id", gpus) if present["gpus"] else {}
        self.models = _by_key(_read_models(models), "name", models) if present["models"] else {}
        self.prices = _read_prices(prices, user=user) if present["prices"] else []
        self.configs = {name: parse_config_json(root / "models" / m.file) for name, m in self.models.items()}
        self.settings = _read_settings(self.files["settings"]) if present["settings"] else {}
        _check_families(self.models, self.configs, models)
        cache.write_layer(key, vars(self))


@functools.lru_cache(maxsize=1)
def _builtin() -> _Layer:
    return _Layer(files("scaleright.catalog") / "data")


@functools.lru_cache(maxsize=16)
def _load(user_dir: Path | None) -> Catalog:
    layers = [_builtin()]
    if user_dir is not None:
        layers.append(_Layer(user_dir, user=True))
    gpus: dict[str, Accelerator] = {}
    models: dict[str, ModelEntry] = {}
    configs: dict[str, Any] = {}
    prices: list[tuple[object, str, PriceRow]] = []
    gpu_origin: dict[str, object] = {}
    model_origin: dict[str, object] = {}
    for layer in layers:
        gpus.update(layer.gpus)
        gpu_origin.update(dict.fromkeys(layer.gpus, layer.files["gpus"]))
        models.update(layer.models)
        configs.update(layer.configs)
        model_origin.update(dict.fromkeys(layer.models, layer.files["models"]))
        mode = layer.settings.get("prices", SETTINGS["prices"][0])
        kept = price_rows_merged([p[2] for p in prices], [r for _, r in layer.prices], mode=mode)
        prices = [prices[i] for i in kept]
        prices += [(layer.files["prices"], label, r) for label, r in layer.prices]
    for file, label, r in prices:
        if not r.gpu_id.startswith("other:") and r.gpu_id not in gpus:
            raise CatalogFileError(
                f"{file}: {label}.gpu_id: unknown GPU '{r.gpu_id}'; allowed: a catalog GPU id, "
                "or other:<name> for items outside the catalog"
            )
    return Catalog(
        gpus=MappingProxyType(gpus),
        prices=tuple(r for _, _, r in prices),
        models=MappingProxyType(models),
        model_configs=MappingProxyType(configs),
        _gpu_index=MappingProxyType(_index(gpus, gpu_origin, "aliases")),
        _model_index=MappingProxyType(_index(models, model_origin, "aliases")),
    )
