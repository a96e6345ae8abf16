"""Hardware, price and model catalog: what the estimator knows about accelerators, what they cost, and model shapes.

Built-in data lives in ``data/`` (sources in each entry); a user directory (argument or ``$SCALERIGHT_CATALOG``)
overrides or extends it with the same schema. See ``store`` for the override rules.
"""

from scaleright.catalog.gpus import LINKS, PRECISIONS, Accelerator, normalize_name
from scaleright.catalog.models import ModelEntry, get_model_entry, load_model_config
from scaleright.catalog.prices import KINDS, PriceRow, find_price, list_prices
from scaleright.catalog.store import ENV_VAR, Catalog, get_gpu, list_gpus

__all__ = [
    "Accelerator",
    "Catalog",
    "ENV_VAR",
    "KINDS",
    "LINKS",
    "ModelEntry",
    "PRECISIONS",
    "PriceRow",
    "find_price",
    "get_gpu",
    "get_model_entry",
    "list_gpus",
    "list_prices",
    "load_model_config",
    "normalize_name",
]
