"""The model catalog: Hugging Face ``config.json`` files with their provenance and published parameter counts.

Configs are copied verbatim from ``validation/reference/model_configs`` (its ``SOURCES.md`` gives each file's
source and fidelity); ``gpt3-175b.json`` is written in the gpt2 format from Brown et al. 2020, Table 2.1. Published
parameter counts are the model cards' or papers' figures, not counts derived from the configs; null where the
source was not read. A model is named by its catalog name or alias (case-insensitive) or by a path to any
``config.json``. No network.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field

from scaleright.errors import CatalogFileError, InputError, UnknownNameError
from scaleright.limits import bounds
from scaleright.textfile import _short, path_problem, read_text

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    from scaleright.catalog.store import Catalog

__all__ = ["ModelEntry", "get_model_entry", "load_model_config", "parse_config_json"]


_Billions = Annotated[float, *bounds("billions")]  # a parameter count in billions, bounded (scaleright.limits)


class ModelEntry(BaseModel):
    """One catalog model. Unknown keys are an error."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, defer_build=True)

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")  # catalog name, e.g. "llama-3.1-70b"
    aliases: list[str] = []  # other names, e.g. the Hugging Face repo id
    family: str = Field(pattern=r"^[a-z0-9_]+$")  # architecture family (llama, mixtral, gpt2, ...)
    file: str = Field(pattern=r"^[\w.\-]+\.json$")  # config file name inside the catalog's models/ directory
    source: str  # where the config was read
    fidelity: Literal["verbatim", "transcription", "derivative", "constructed"]
    published_params_total_b: _Billions | None = Field(default=None, gt=0)  # billions; None: not read
    published_params_active_b: _Billions | None = Field(default=None, gt=0)  # per token; = total for dense models
    published_params_source: str  # where the counts were read, or "not read"

    def names(self) -> list[str]:
        """Every name this model answers to."""
        return [self.name, *self.aliases]


def parse_config_json(path: Path | Traversable) -> dict[str, Any]:
    """A config.json as a dict; ``CatalogFileError`` naming the file and the JSON error position."""
    from scaleright.userdata import load_json

    data = load_json(read_text(path), str(path))
    if not isinstance(data, dict):
        raise CatalogFileError(f"{path}: expected a JSON object at the top level, got {type(data).__name__}")
    return data


def _catalog(catalog: Catalog | None) -> Catalog:
    from scaleright.catalog.store import Catalog

    return catalog if catalog is not None else Catalog.load()


def get_model_entry(name: str, *, catalog: Catalog | None = None) -> ModelEntry:
    """The catalog entry of a model name or alias; ``UnknownNameError`` lists the closest names."""
    return _catalog(catalog).model_entry(name)


def load_model_config(
    name_or_path: str | Path, *, catalog: Catalog | None = None
) -> tuple[dict[str, Any], ModelEntry | None]:
    """``(config, entry)`` for a catalog name/alias, or ``(config, None)`` for a path to a ``config.json`` file
    (or a directory holding one). The config is a fresh copy the caller may modify."""
    text = str(name_or_path)
    if text == "":
        raise InputError("model: empty name; give a catalog model name or a path to a config.json")
    path = Path(name_or_path)
    why = path_problem(path)
    if why is not None and why.startswith("is a directory"):
        inner = path / "config.json"
        inner_why = path_problem(inner)
        if inner_why is None:
            return parse_config_json(inner), None
        if inner_why != "file not found":
            raise CatalogFileError(f"model {_short(inner)!r}: {inner_why}")
        cat = _catalog(catalog)
        try:  # a directory in the working directory that happens to share a catalog name does not hide the model
            entry = cat.model_entry(text)
        except UnknownNameError:
            raise CatalogFileError(
                f"model {_short(path)!r}: is a directory, expected a config.json file or a directory containing one"
            ) from None
        return cast("dict[str, Any]", copy.deepcopy(cat.model_configs[entry.name])), entry  # the configs are dicts
    if why is None:
        return parse_config_json(path), None
    if why != "file not found" or path.suffix == ".json":
        # something is there but cannot be read as a file (a FIFO, a device, a loop, a broken link, a name too
        # long), or a .json path that does not exist: the truth, not "unknown model"
        raise CatalogFileError(f"model {_short(path)!r}: {why}")
    cat = _catalog(catalog)
    entry = cat.model_entry(str(name_or_path))
    return cast("dict[str, Any]", copy.deepcopy(cat.model_configs[entry.name])), entry  # the configs are dicts
