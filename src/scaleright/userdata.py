"""Parsing the user's YAML and JSON text into plain data, with one-line errors and no surprises.

YAML is read with PyYAML's safe loader plus three refusals the plain loader
does not make: a key given twice in one mapping (PyYAML keeps the last silently), nesting deeper than
``MAX_DEPTH`` (the composer recurses and would raise ``RecursionError``) and integer literals longer than Python's
``sys.get_int_max_str_digits()`` (``ValueError``). JSON gets the same depth and integer limits and refuses
``NaN`` / ``Infinity`` literals, which are not JSON. Every failure is a ``CatalogFileError`` naming the file.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import yaml

from scaleright.errors import CatalogFileError

__all__ = ["MAX_DEPTH", "load_yaml", "load_json"]

MAX_DEPTH = 64  # nesting of mappings and lists; real scenarios, catalogs and HF configs use at most 5


class _UniqueKeyLoader(yaml.SafeLoader):
    """Safe loader that refuses duplicate keys (pure-Python: the C loader cannot be hooked per mapping)."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    loader.flatten_mapping(node)
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None, None, f"a mapping key must be a plain value, not {type(key).__name__}", key_node.start_mark
            ) from None
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} given twice (first on line {seen[key] + 1})", key_node.start_mark
            )
        seen[key] = key_node.start_mark.line
    return dict(loader.construct_pairs(node, deep=deep))


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _depth_of_yaml(node: yaml.Node, limit: int) -> None:
    stack = [(node, 1)]
    while stack:
        n, d = stack.pop()
        if d > limit:
            raise CatalogFileError(f"nested deeper than {limit} levels (line {n.start_mark.line + 1})")
        if isinstance(n, yaml.MappingNode):
            stack.extend((v, d + 1) for pair in n.value for v in pair)
        elif isinstance(n, yaml.SequenceNode):
            stack.extend((v, d + 1) for v in n.value)


def _rough_depth(text: str) -> int:
    """Upper bound of bracket nesting (flow style YAML / JSON), computed without recursion."""
    depth = best = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            best = max(best, depth)
        elif ch in "]}":
            depth = max(0, depth - 1)
    return best


def load_yaml(text: str, where: str) -> Any:
    """Parse YAML ``text`` (from the file named ``where``) into plain Python data."""
    if _rough_depth(text) > MAX_DEPTH:
        raise CatalogFileError(f"{where}: nested deeper than {MAX_DEPTH} levels")
    try:
        loader = _UniqueKeyLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _depth_of_yaml(node, MAX_DEPTH)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except CatalogFileError as exc:
        raise CatalogFileError(f"{where}: {exc}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f"line {mark.line + 1}: " if mark is not None else ""
        raise CatalogFileError(f"{where}: not valid YAML ({line}{exc.problem or exc.context})") from None
    except yaml.YAMLError as exc:
        raise CatalogFileError(f"{where}: not valid YAML ({str(exc).splitlines()[0] if str(exc) else exc})") from None
    except RecursionError:
        raise CatalogFileError(f"{where}: nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # an integer literal over Python's digit limit
        raise CatalogFileError(f"{where}: {_big_int(exc)}") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def load_json(text: str, where: str) -> Any:
    """Parse JSON ``text`` (from the file named ``where``) into plain Python data."""
    if _rough_depth(text) > MAX_DEPTH:
        raise CatalogFileError(f"{where}: nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise CatalogFileError(f"{where}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise CatalogFileError(f"{where}: nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        if "is not a JSON number" in str(exc):
            raise CatalogFileError(f"{where}: {_constant_line(text)}{exc}") from None
        raise CatalogFileError(f"{where}: {_big_int(exc)}") from None


def _constant_line(text: str) -> str:
    """``"line N: "`` of the first NaN / Infinity literal (outside strings, after ``:``, ``[`` or ``,``), or ``""``."""
    import re

    m = re.search(r'(?:^|[:\[,])\s*(-?Infinity|NaN)\b', re.sub(r'"(?:[^"\\]|\\.)*"', lambda s: "_" * len(s.group()), text))
    return f"line {text.count(chr(10), 0, m.start(1)) + 1}: " if m else ""


def _big_int(exc: ValueError) -> str:
    if "digits" in str(exc):
        return f"an integer literal has more than {sys.get_int_max_str_digits()} digits"
    return str(exc).split(";")[0]
