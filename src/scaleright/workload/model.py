"""Load a model by catalog name or ``config.json`` path into a ``TransformerSpec``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scaleright.workload.spec import TransformerSpec, from_hf_config

if TYPE_CHECKING:
    from scaleright.catalog.store import Catalog

__all__ = ["load_model"]


def load_model(name_or_path: str, *, catalog: Catalog | None = None) -> TransformerSpec:
    """A catalog model (``llama-3.1-70b``, case-insensitive, aliases allowed) or a path to any HF ``config.json``."""
    from scaleright.catalog.models import load_model_config

    cfg, entry = load_model_config(name_or_path, catalog=catalog)
    name = entry.name if entry is not None else str(name_or_path)
    return from_hf_config(cfg, name=name, source=str(name_or_path))
