"""Reading the user's text files (scenarios, catalogs, configs, calibration profiles) with one-line errors."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from scaleright.errors import CatalogFileError

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

__all__ = ["read_text"]


def read_text(path: Path | Traversable) -> str:
    """The file's UTF-8 text, or ``CatalogFileError`` naming the file when it is missing, binary or unreadable."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CatalogFileError(f"{path}: file not found") from None
    except UnicodeDecodeError as exc:
        raise CatalogFileError(f"{path}: not a UTF-8 text file (byte {exc.start}: {exc.reason})") from None
    except OSError as exc:
        raise CatalogFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
