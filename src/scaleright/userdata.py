"""Parsing the user's YAML and JSON text into plain data, with one-line errors and no surprises.

YAML is read with PyYAML's safe loader plus three refusals the plain loader
does not make: a key given twice in one mapping (PyYAML keeps the last silently), nesting deeper than
``MAX_DEPTH`` (the composer recurses and would raise ``RecursionError``) and integer literals longer than Python's
``sys.get_int_max_str_digits()`` (``ValueError``). JSON gets the same depth and integer limits and refuses
``NaN`` / ``Infinity`` literals, which are not JSON. Every failure is a ``CatalogFileError`` naming the file.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import ValidationError

from scaleright.errors import CatalogFileError
from scaleright.limits import _show
from scaleright.textfile import _short

if TYPE_CHECKING:
    import yaml

__all__ = ["MAX_DEPTH", "load_yaml", "load_json", "validation_line"]

MAX_DEPTH = 64  # nesting of mappings and lists; real scenarios, catalogs and HF configs use at most 5


@functools.cache
def _loader() -> Any:
    """The safe loader that refuses duplicate keys (PyYAML is imported here, on the first YAML parsed: a command that
    reads only JSON or the catalog cache never imports it). Parsing runs in libyaml's C parser when PyYAML has it (a
    tenth of the pure-Python parser's time on the catalog); construction, where the duplicate check lives, is Python
    in both."""
    import yaml

    base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class _UniqueKeyLoader(base):  # type: ignore[misc,valid-type]
        pass

    _UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
    return _UniqueKeyLoader


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    import yaml

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


MAX_VALUES = 1_000_000  # values in a document once YAML aliases are expanded (a real scenario or catalog has ~10**3)


def _depth_of_yaml(node: yaml.Node, limit: int) -> None:
    """Refuse nesting deeper than ``limit`` and documents that YAML aliases expand past ``MAX_VALUES`` values (an
    "alias bomb": nine lists of nine aliases of each other are 9**9 values for a few hundred bytes). Each node is
    visited once (aliases are the same node object), so the check itself is linear in the file."""
    import yaml

    depth: dict[int, int] = {}  # id(node) -> nesting below it, nodes done
    size: dict[int, int] = {}  # id(node) -> values once expanded
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    on_path: set[int] = set()
    while stack:
        n, done = stack.pop()
        key = id(n)
        kids = ([v for pair in n.value for v in pair] if isinstance(n, yaml.MappingNode)
                else list(n.value) if isinstance(n, yaml.SequenceNode) else [])  # fmt: skip
        if done:
            on_path.discard(key)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            if depth[key] > limit:
                raise CatalogFileError(f"nested deeper than {limit} levels (line {n.start_mark.line + 1})")
            if size[key] > MAX_VALUES:
                raise CatalogFileError(
                    f"YAML aliases expand it to more than {MAX_VALUES:,} values (line {n.start_mark.line + 1}); "
                    "write the values out or use fewer aliases"
                )
            continue
        if key in depth:
            continue
        if key in on_path or len(on_path) > limit:  # a recursive alias, or too deep to go on
            raise CatalogFileError(f"nested deeper than {limit} levels (line {n.start_mark.line + 1})")
        on_path.add(key)
        stack.append((n, True))
        stack.extend((k, False) for k in kids if id(k) not in depth)


_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def _rough_depth(text: str) -> int:
    """Upper bound of bracket nesting (flow style YAML / JSON), without recursion or a Python loop; the count of
    openers when that is already within MAX_DEPTH.

    The depth after each character is the running sum of +1 per opener and -1 per closer, floored at zero; a walk
    floored at zero equals the free walk minus its running minimum (where that is below zero)."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return text.count("[") + text.count("{")
    brackets = _NOT_BRACKET.sub("", text).encode("ascii")
    step = np.where(np.isin(np.frombuffer(brackets, dtype=np.uint8), (ord("["), ord("{"))), 1, -1)
    walk = np.cumsum(step)
    floor = np.minimum.accumulate(np.minimum(walk, 0))
    return int((walk - floor).max())


def load_yaml(text: str, where: str) -> Any:
    """Parse YAML ``text`` (from the file named ``where``) into plain Python data."""
    import yaml

    if _rough_depth(text) > MAX_DEPTH:
        raise CatalogFileError(f"{where}: nested deeper than {MAX_DEPTH} levels")
    try:
        loader = _loader()(text)
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

    unquoted = re.sub(r'"(?:[^"\\]|\\.)*"', lambda s: "_" * len(s.group()), text)  # strings blanked, same length
    m = re.search(r'(?:^|[:\[,])\s*(-?Infinity|NaN)\b', unquoted)
    return f"line {text.count(chr(10), 0, m.start(1)) + 1}: " if m else ""


def _big_int(exc: ValueError) -> str:
    if "digits" in str(exc):
        return f"an integer literal has more than {sys.get_int_max_str_digits()} digits"
    return str(exc).split(";")[0]


def validation_line(exc: ValidationError, source: str) -> str:
    """pydantic's first error as one line: the file, the field path as the user wrote it, what is allowed (the
    scenario and fleet files' messages)."""
    err = exc.errors()[0]
    loc = ".".join(_short(x, 40) for x in err["loc"] if x != "[key]") or "(top level)"
    if err["loc"] and err["loc"][-1] == "[key]":
        loc += " (a key)"
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = "unknown key"
    elif err["type"] == "literal_error":
        msg = f"must be one of {err['ctx']['expected']}" if "ctx" in err else msg
    elif err["type"] in ("int_parsing", "int_type", "int_from_float", "float_parsing", "float_type",
                         "string_type", "dict_type", "list_type", "model_type", "model_attributes_type"):  # fmt: skip
        msg = f"{msg} (got {_show(err.get('input'))})"
    msg = " ".join(msg.removeprefix("Value error, ").split())  # one line, whatever the message held
    return f"{source}: {loc}: {msg}"
