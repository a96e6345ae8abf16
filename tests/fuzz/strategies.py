"""Generated inputs for the CLI: scenario YAML, HF config.json files, user catalog directories and argument vectors.

Every generator builds one ``Case`` (an argument vector, the files it reads, and whether the input is *known
invalid* by construction) from a ``Chooser``, so the same code and the same mutation tables drive both Hypothesis
(``HypothesisChooser`` inside ``st.composite``: shrinking works) and the long seeded run of ``benchmarks/fuzz.py``
(``RandomChooser``: fast and reproducible from ``(seed, index)``).

An input starts from a valid template and gets at most one mutation: a field set to a value from ``VALUES`` (wrong
type, boolean, negative, zero, a fraction, huge integers 2**63 / 10**400 / 5001 digits, inf / nan / 1e308, long,
markup and ANSI strings, containers, deep nesting), an unknown or duplicated key, a cross-field conflict, or a file
replaced by a directory, a broken link or a misnamed file. ``known_invalid`` is True only when the documented
schema (``scaleright.plan.scenario``, the catalog models, ``scaleright.limits.LIMITS``, the config reader's bounds)
or the issue's list of failures says the input must be refused; otherwise it is False and either ending (exit 0
with finite numbers, or exit 2 with one line) is accepted.
"""

from __future__ import annotations

import functools
import json
import math
import os
import random
import re
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from hypothesis import strategies as st

import scaleright
from scaleright.limits import LIMITS

T = TypeVar("T")

PACKAGE_DATA = Path(scaleright.__file__).parent / "catalog" / "data"
MODELS_DIR = PACKAGE_DATA / "models"
MAX_DIM = 10_000_000  # the config reader's bound on dimensions and counts (scaleright.workload.spec.MAX_DIM)
MAX_POSITIONS = 1_000_000_000  # its bound on max_position_embeddings / sliding_window

__all__ = [
    "Case", "Dir", "DIR", "Link", "Fifo", "FIFO", "Val", "Spec", "VALUES", "Chooser", "RandomChooser",
    "HypothesisChooser",
    "FAMILIES", "GENERATORS", "generate", "scenarios", "configs", "catalogs", "cli_args", "any_case", "is_invalid",
]  # fmt: skip


# ---- what a case is ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dir:
    """A directory at this path (in place of a file)."""


DIR = Dir()


@dataclass(frozen=True)
class Link:
    """A symbolic link to ``target`` (relative to the link's directory; may not exist)."""

    target: str


@dataclass(frozen=True)
class Fifo:
    """A named pipe (nothing ever writes to it: a reader that opens it blocks)."""


FIFO = Fifo()
FileContent = str | bytes | Dir | Link | Fifo


@dataclass(frozen=True, repr=False)
class Case:
    """One CLI invocation: ``scaleright *argv`` run in a fresh directory holding ``files``."""

    family: str  # scenario, config, catalog, cli
    argv: tuple[str, ...]
    files: tuple[tuple[str, FileContent], ...] = ()  # (relative path, content), created in this order
    known_invalid: bool = False  # True: the input must be refused (exit 2); False: exit 0 or exit 2 both fine
    why: str = "valid template"  # the mutation, e.g. "training.global_batch = int 2**63"
    outputs: tuple[str, ...] = ()  # relative paths (a trailing / means a directory) the command may write

    def __repr__(self) -> str:  # short: Hypothesis prints it with every failing example
        files = ", ".join(f"{p} ({len(c) if isinstance(c, (str, bytes)) else type(c).__name__})" for p, c in self.files)
        argv = " ".join(_runs(a) for a in self.argv)
        return f"Case({self.family}: scaleright {_elide(argv, 300)} | files: {files} | {self.why})"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # Hypothesis's printer: not field by field
        p.text(repr(self))

    def reproducer(self, limit: int = 3000) -> str:
        """A shell snippet that recreates the files and runs the command. A run of n copies of one character
        (n >= 40) is written <c*n>; contents over ``limit`` characters are elided in the middle."""
        lines: list[str] = []
        made: set[str] = set()

        def mkdir(d: str) -> None:
            if d not in (".", "") and d not in made:
                lines.append(f"mkdir -p {_sh(d)}")
                made.add(d)

        for path, content in self.files:
            if isinstance(content, Dir):
                mkdir(path)
            elif isinstance(content, Link):
                mkdir(str(Path(path).parent))
                lines.append(f"ln -s {_sh(content.target)} {_sh(path)}")
            elif isinstance(content, Fifo):
                mkdir(str(Path(path).parent))
                lines.append(f"mkfifo {_sh(path)}")
            else:
                mkdir(str(Path(path).parent))
                if isinstance(content, bytes) and content.startswith(b"SQLite format 3"):
                    variant = next((v for v in RUN_DB_VARIANTS if _runs_db(v) == content), "ok")
                    lines.append(
                        f"python3 -c \"import sys; sys.path[:0] = ['tests', 'src']; from fuzz.strategies "
                        f"import _runs_db; open('{path}', 'wb').write(_runs_db('{variant}'))\""
                    )
                    continue
                if isinstance(content, bytes) and not _is_utf8(content):
                    lines.append(f"printf '%b' {_sh(_escape_bytes(content[:limit]))} > {_sh(path)}")
                    continue
                text = _runs(content.decode("utf-8") if isinstance(content, bytes) else content)
                if len(text) > limit:
                    text = text[: limit // 2] + f"...<{len(text) - limit} chars elided>..." + text[-limit // 2 :]
                if text == "":
                    lines.append(f": > {_sh(path)}")
                else:
                    lines.append(f"cat > {_sh(path)} <<'EOF'\n{text.rstrip(chr(10))}\nEOF")
        lines.append("scaleright " + " ".join(_sh(_runs(a)) for a in self.argv))
        return "\n".join(lines)


def _is_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _escape_bytes(b: bytes) -> str:
    return "".join(chr(x) if 32 <= x < 127 and x != 92 else f"\\x{x:02x}" for x in b)


def _runs(s: str, n: int = 40) -> str:
    """``s`` with every run of at least ``n`` copies of one character written as <c*count>."""
    return re.sub(r"(.)\1{" + str(n - 1) + ",}", lambda m: f"<{m.group(1)}*{len(m.group(0))}>", s, flags=re.S)


def _elide(s: str, limit: int) -> str:
    return s if len(s) <= limit else f"{s[:40]}...<{len(s)} chars>...{s[-20:]}"


def _sh(s: str) -> str:
    if s and all(c.isalnum() or c in "-_./=:,+@%" for c in s):
        return s
    return "'" + s.replace("'", "'\\''") + "'"


# ---- choosers: the one interface both Hypothesis and the seeded benchmark draw through ---------------------------


class Chooser(Protocol):
    def choice(self, options: Sequence[T]) -> T: ...

    def integer(self, lo: int, hi: int) -> int: ...

    def coin(self, percent: int = 50) -> bool: ...


class RandomChooser:
    """Draws from a seeded ``random.Random`` (the benchmark: one chooser per ``(seed, index)``)."""

    def __init__(self, seed: int | str):
        self._rng = random.Random(seed)

    def choice(self, options: Sequence[T]) -> T:
        return options[self._rng.randrange(len(options))]

    def integer(self, lo: int, hi: int) -> int:
        return self._rng.randint(lo, hi)

    def coin(self, percent: int = 50) -> bool:
        return self._rng.randrange(100) < percent


class HypothesisChooser:
    """Draws through Hypothesis (``st.composite``), so failing cases shrink towards the first option."""

    def __init__(self, draw: Callable[[st.SearchStrategy[Any]], Any]):
        self._draw = draw

    def choice(self, options: Sequence[T]) -> T:
        return options[self._draw(st.integers(0, len(options) - 1))]

    def integer(self, lo: int, hi: int) -> int:
        return self._draw(st.integers(lo, hi))

    def coin(self, percent: int = 50) -> bool:
        return self._draw(st.integers(0, 99)) >= 100 - percent  # shrinks to False


# ---- the mutation table: values in YAML, JSON and command-line form ---------------------------------------------


@dataclass(frozen=True)
class Val:
    """One mutation value, written for each kind of input, with the classes it belongs to (``tags``)."""

    label: str
    yaml: str  # YAML flow text
    json: str  # JSON text (may be a non-JSON literal such as NaN on purpose)
    cli: str | None  # command-line text; None: no command-line form
    tags: frozenset[str]
    number: float | None = None  # numeric value for bound checks (inf beyond float)
    integral: bool = False  # an integer (or a string of one)
    length: int | None = None  # characters, for a string


def _yaml_float(x: float) -> str:
    if math.isnan(x):
        return ".nan"
    if math.isinf(x):
        return ".inf" if x > 0 else "-.inf"
    s = repr(x)
    if "e" in s:  # YAML 1.1 (PyYAML) needs a dot and a signed exponent, or the scalar is a string
        mant, exp = s.split("e")
        mant = mant if "." in mant else mant + ".0"
        exp = exp if exp[0] in "+-" else "+" + exp
        s = f"{mant}e{exp}"
    return s


def _int(n: int, label: str | None = None) -> Val:
    s = str(n)
    tags = {"number"} | ({"negative"} if n < 0 else set()) | ({"zero"} if n == 0 else set())
    if abs(n) >= 2**63:
        tags.add("beyond64")
    num = float(n) if abs(n) < 10**308 else (math.inf if n > 0 else -math.inf)
    return Val(label or f"int {s}", s, s, s, frozenset(tags), num, True)


def _digits(n: int) -> Val:
    s = "1" + "0" * (n - 1)  # built as text: str() of such an int raises ValueError past 4300 digits
    return Val(f"int of {n} digits", s, s, s, frozenset({"number", "beyond64", "bigdigits"}), math.inf, True)


def _float(x: float, label: str | None = None, *extra: str) -> Val:
    tags = {"number", *extra}
    if not math.isfinite(x):
        tags.add("nonfinite")
    if x < 0:
        tags.add("negative")
    if x == 0:
        tags.add("zero")
    js = "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity") if math.isinf(x) else repr(x)
    return Val(
        label or f"float {x!r}",
        _yaml_float(x),
        js,
        repr(x),
        frozenset(tags),
        x,
        x.is_integer() if math.isfinite(x) else False,
    )


def _str(s: str, label: str, *extra: str, cli: bool = True) -> Val:
    tags = {"string", *extra}
    num: float | None = None
    integral = False
    try:
        num = float(s)
        integral = s.strip().lstrip("+-").isdigit()
        tags.add("numeric_string")
    except ValueError:
        pass
    return Val(label, json.dumps(s), json.dumps(s), s if cli else None, frozenset(tags), num, integral, len(s))


def _raw(label: str, yaml_text: str, json_text: str, cli: str | None, *tags: str) -> Val:
    return Val(label, yaml_text, json_text, cli, frozenset(tags))


HTML_PROBE = "<script>alert('fuzz')</script>"  # must never reach an HTML report unescaped (harness checks)


def _deep(n: int) -> Val:
    s = "[" * n + "1" + "]" * n
    return Val(f"list nested {n} deep", s, s, None, frozenset({"deep"}))


VALUES: tuple[Val, ...] = (
    # booleans (YAML 1.1 spells them many ways)
    _raw("bool yes", "yes", "true", "yes", "bool"),
    _raw("bool no", "no", "false", "no", "bool"),
    _raw("bool on", "on", "true", "on", "bool"),
    _raw("bool true", "true", "true", "true", "bool"),
    _raw("bool false", "false", "false", "false", "bool"),
    # signs and small numbers
    _int(-1),
    _int(-5),
    _float(-7.5),
    _int(0),
    _float(0.0),
    _float(2.5, None, "fraction"),
    _float(0.5, None, "fraction"),
    _int(3),
    _float(1e-300, None, "tiny"),
    _float(5e-324, None, "tiny"),
    # beyond every bound: int32, float64-exact, int64, uint64, float64, Python's digit limit
    _int(2**31, "int 2**31"),
    _int(2**53 + 1, "int 2**53+1"),
    _int(2**62, "int 2**62"),
    _int(2**63, "int 2**63"),
    _int(2**64, "int 2**64"),
    _int(-(2**63) - 1, "int -2**63-1"),
    _int(10**400, "int 10**400"),
    _digits(5001),
    _float(1e308, None, "huge_float"),
    _float(1.7976931348623157e308, None, "huge_float"),
    _raw("float 1e309 (inf)", "1.0e+309", "1e309", "1e309", "nonfinite"),
    _float(math.inf),
    _float(-math.inf),
    _float(math.nan),
    # strings
    _str("abc", "string 'abc'"),
    _str("12", "numeric string '12'"),
    _str("", "empty string", "empty"),
    _str("x" * 300, "string of 300 chars", "long"),
    _str("y" * 5000, "string of 5000 chars", "long"),
    _str("[/bold]", "markup '[/bold]'", "markup"),
    _str("[bold red]x[/]", "markup '[bold red]x[/]'", "markup"),
    _str("\x1b[31mred\x1b[0m", "ANSI escape string", "markup"),
    _str("[link=file:///etc/passwd]x[/link]", "markup link", "markup"),
    _str(HTML_PROBE, "HTML script tag", "html"),
    _str("a\nb", "string with a newline", "newline"),
    _str("nul\x00byte", "string with a NUL byte", "nul", cli=False),
    _str("\ud800", "lone surrogate", "surrogate", cli=False),
    _str("\u202egpu\U0001f600", "RTL mark and emoji"),
    # YAML 1.1 spellings of numbers (hex, octal, sexagesimal, underscores; 1e3 without a dot is a string)
    _raw("hex 0x10", "0x10", "0x10", "0x10", "spelling"),
    _raw("octal 010", "010", "010", "010", "spelling"),
    _raw("sexagesimal 1:30", "1:30", "1:30", "1:30", "spelling"),
    _raw("underscores 1_000", "1_000", "1_000", "1_000", "spelling"),
    _raw("1e3 (a YAML string)", "1e3", "1e3", "1e3", "spelling"),
    _raw("YAML tag !!binary", "!!binary aGk=", '"aGk="', None, "spelling"),
    # containers and nesting
    _raw("null", "null", "null", None, "null"),
    _raw("list [1, 2]", "[1, 2]", "[1, 2]", None, "list"),
    _raw("empty list", "[]", "[]", None, "list", "empty"),
    _raw("mapping {a: 1}", "{a: 1}", '{"a": 1}', None, "dict"),
    _raw("empty mapping", "{}", "{}", None, "dict", "empty"),
    _deep(70),
    _deep(3000),
    _deep(50_000),
)
CLI_VALUES = tuple(v for v in VALUES if v.cli is not None)
STRING_VALUES = tuple(v for v in VALUES if "string" in v.tags)


@dataclass(frozen=True)
class Spec:
    """What a field allows: its kind and bounds (``low``/``high`` inclusive unless ``low_open``)."""

    kind: str  # int, float, str (free text), choice, name (must name an existing thing), bool
    low: float | None = None
    low_open: bool = False
    high: float | None = None
    nullable: bool = False


def is_invalid(spec: Spec, v: Val) -> bool:
    """True when ``v`` certainly breaks ``spec``; False when it may be fine (never a false alarm)."""
    t = v.tags
    if "deep" in t:
        return True
    if "null" in t:
        return not spec.nullable
    if spec.kind == "bool":
        return "bool" not in t
    if spec.kind in ("int", "float"):
        if t & {"bool", "nonfinite", "list", "dict", "bigdigits", "nul", "newline"}:
            return True
        if "string" in t and "numeric_string" not in t:
            return True
        n = v.number
        if n is None:
            return False
        if spec.kind == "int" and not v.integral:
            return True
        if spec.kind == "int" and abs(n) >= 2**63:
            return True
        if not math.isfinite(n):
            return True
        if spec.low is not None and (n < spec.low or (spec.low_open and n == spec.low)):
            return True
        return spec.high is not None and n > spec.high
    if spec.kind == "str":
        too_long = spec.high is not None and v.length is not None and v.length > spec.high
        return bool(t & {"bool", "list", "dict"}) or too_long
    return True  # choice / name: no table value is an allowed choice or an existing name


def _lim(kind: str) -> float | None:
    """The bound ``scaleright.limits.LIMITS`` gives ``kind``; None where the checkout has none (then a huge
    value is not known to be invalid)."""
    return LIMITS[kind].high if kind in LIMITS else None


def _lim_max(*kinds: str) -> float | None:
    """The largest of the bounds ``LIMITS`` gives these kinds (where branches bound one quantity differently, a value
    is known invalid only above all of them)."""
    highs = [h for h in (_lim(k) for k in kinds) if h is not None]
    return max(highs) if highs else None


def _pos(kind_or_high: str | float | None = None, *, integer: bool = False, nullable: bool = False,
         low: float = 0, low_open: bool = True) -> Spec:  # fmt: skip
    high = _lim_max(*kind_or_high.split("|")) if isinstance(kind_or_high, str) else kind_or_high
    return Spec("int" if integer else "float", low, low_open, high, nullable)


CHOICE = Spec("choice")
NAME = Spec("name")
TEXT = Spec("str")


# ---- (a) scenarios -----------------------------------------------------------------------------------------------

TRAINING_FIELDS: dict[str, Spec] = {
    "tokens": _pos("tokens", nullable=True),
    "dataset_tokens": _pos("tokens", nullable=True),
    "epochs": _pos("epochs"),
    "seq_len": _pos("seq_len", integer=True, low=1, low_open=False),
    "global_batch": _pos("global_batch", integer=True, low=1, low_open=False),
    "precision": CHOICE,
    "optimizer": CHOICE,
    "lora_rank": _pos("lora_rank", integer=True, low=1, low_open=False),
    "framework": Spec("name", nullable=True),  # a preset name or a mapping of overrides
}
INFERENCE_FIELDS: dict[str, Spec] = {
    "requests_per_s": _pos("requests_per_s", nullable=True),
    "requests_per_day": _pos("requests_per_day", nullable=True),
    "input_len": _pos("tokens_per_request", integer=True, low=1, low_open=False),
    "output_len": _pos("tokens_per_request", integer=True, low=1, low_open=False),
    "ttft_slo_s": _pos("latency_s", nullable=True),
    "tpot_slo_s": _pos("latency_s", nullable=True),
    "precision": CHOICE,
    "kv_precision": CHOICE,
    "api_usd_per_1m_output_tokens": _pos("usd", nullable=True),
    "api_usd_per_1m_input_tokens": _pos("usd", nullable=True, low_open=False),
    "arrival": CHOICE,
    "burstiness": _pos(1000.0),
    "diurnal_amplitude": _pos(1.0, low_open=False),
    "trace": Spec("name", nullable=True),  # a trace file that must exist
    "engine": CHOICE,
    "headroom": _pos(10.0, low_open=False),
    "prefix_cache_hit_rate": _pos(1.0, low_open=False),  # < 1: the boundary case 1.0 is rejected (not a failure)
    "result_cache_hit_rate": _pos(1.0, low_open=False),
    "services": Spec("name", nullable=True),  # a list of 2-8 service mappings: no table value is one
    "tiers": Spec("name", nullable=True),  # a list of 1-3 tier mappings
}
CONSTRAINT_FIELDS: dict[str, Spec] = {
    "deadline_h": _pos("hours", nullable=True),
    "budget_usd": _pos("usd", nullable=True),
    "max_gpus": _pos("gpus", integer=True, low=1, low_open=False),
    "gpus_per_node": _pos("gpus_per_node|chips_per_domain", integer=True, low=1, low_open=False, nullable=True),
    "interconnect": CHOICE,
    "allow_offload": Spec("bool"),  # training only: any value in a serving scenario is refused
}
BATCH_JOB_FIELDS: dict[str, Spec] = {  # inference.batch_job
    "requests_per_run": _pos("requests_per_day"),
    "runs_per_month": _pos(24.0 * 31),
    "run_within_h": _pos("hours"),
    "startup_s": _pos("latency_s", low_open=False, nullable=True),
}
PRICING_FIELDS: dict[str, Spec] = {
    "mode": CHOICE,
    "hours_per_day": _pos(24.0),
    "horizon_months": _pos("months"),
    "electricity_usd_per_kwh": _pos("usd_per_kwh", low_open=False),
    "pue": _pos("pue", low=1.0, low_open=False),
    "grid_kg_co2e_per_kwh": _pos("kg_co2e_per_kwh", low_open=False),
    "load_fraction": _pos(1.0),
    "ops_overhead_usd_per_gpu_hour": _pos("usd_per_hour", low_open=False),
    "server_share_usd_per_gpu": _pos("usd", low_open=False),
    "facility_upgrade_usd": _pos("usd", low_open=False),
    "depreciation_years": _pos("years"),
    "resale_fraction": _pos(1.0, low_open=False),
    "max_price_age_days": _pos("hours", low_open=False),
    "spot_preemptions_per_hour": _pos(3600.0, low_open=False),
    "checkpoint_write_gb_per_s": _pos("gb_per_s"),
    "spot_reprovision_s": _pos("latency_s", low_open=False),
    "checkpoint_interval_h": _pos("hours", nullable=True),
    "demand_gpus_by_hour": Spec("name", nullable=True),  # 24 counts: no table value is such a list
    "monthly_jobs": Spec("name", nullable=True),
    "burst_kind": CHOICE,
    "data_provider": Spec("str", high=_lim("name_chars"), nullable=True),
    "data_gb": _pos("usd", low_open=False),
    "egress_usd_per_gb": _pos("usd", low_open=False),
    "cost_of_capital_per_year": _pos(1.0, low_open=False),
    "data_sensitivity": CHOICE,
    "serverless_usd_per_gpu_hour": _pos("usd_per_hour", low_open=False, nullable=True),
    "serverless_idle_timeout_s": _pos("latency_s", low_open=False),
}
TOP_FIELDS: dict[str, Spec] = {"name": Spec("str", high=_lim("name_chars")), "model": NAME, "task": CHOICE}
PRICE_OVERRIDE = {"price_usd_per_gpu_hour": _pos("usd_per_hour", low_open=False),
                  "purchase_usd_per_gpu": _pos("usd", low_open=False)}  # fmt: skip

TRAIN_MODELS = ("gpt2", "llama-3.2-1b", "llama-3.1-8b", "qwen2.5-7b", "mixtral-8x7b", "llama-2-13b")
INFER_MODELS = ("gpt2", "llama-3.2-1b", "llama-3.1-8b", "qwen2.5-7b")
GPU_SETS = (("h100-sxm", "a100-80gb"), ("h100-sxm",), ("l4", "rtx-4090"), ("a100-80gb", "l40s"))


@dataclass(frozen=True)
class Dup:
    """A key written twice in one mapping (the first value, then the second)."""

    first: Any
    second: Any


def to_yaml(d: dict[str, Any], indent: int = 0) -> str:
    """Block-style YAML of nested dicts; ``Val`` values are written verbatim, ``Dup`` as two lines."""
    pad = " " * indent
    lines: list[str] = []
    for k, v in d.items():
        for x in (v.first, v.second) if isinstance(v, Dup) else (v,):
            if isinstance(x, dict) and x and not isinstance(x, _Flow):
                lines.append(f"{pad}{k}:")
                lines.append(to_yaml(x, indent + 2))
            else:
                lines.append(f"{pad}{k}: {_flow(x)}")
    return "\n".join(lines)


class _Flow(dict):
    """A mapping written in flow style ({a: 1})."""


def _flow(v: Any) -> str:
    if isinstance(v, Val):
        return v.yaml
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _yaml_float(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_flow(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {_flow(x)}" for k, x in v.items()) + "}"
    raise TypeError(type(v))


def to_json(v: Any, indent: int = 0) -> str:
    """JSON text of nested dicts and lists; ``Val`` values are written verbatim, ``Dup`` as two members."""
    pad = " " * (indent + 2)
    if isinstance(v, Val):
        return v.json
    if isinstance(v, dict):
        items = []
        for k, x in v.items():
            for y in (x.first, x.second) if isinstance(x, Dup) else (x,):
                items.append(f"{pad}{json.dumps(k)}: {to_json(y, indent + 2)}")
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}" if items else "{}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(to_json(x, indent + 2) for x in v) + "]"
    return json.dumps(v)


FRAMEWORK_VALUES: tuple[Any, ...] = ("megatron-core", "deepspeed", "fsdp2", "megatron-2021", "accelerate",
                                     "llm-foundry", _Flow({"name": "megatron-core", "attention": "materialized"}))
SERVING_EXTRAS: tuple[dict[str, Any], ...] = (
    {"arrival": "diurnal", "diurnal_amplitude": 0.8},
    {"burstiness": 4.0, "headroom": 0.5},
    {"engine": "sglang", "prefix_cache_hit_rate": 0.5},
    {"engine": "trtllm", "result_cache_hit_rate": 0.2},
    {"engine": "llama.cpp"},
    {"services": [_Flow({"name": "chat", "share": 0.7}), _Flow({"name": "batch", "share": 0.3, "priority": -1})]},
    {"tiers": [_Flow({"model": "gpt2", "escalate": 0.2})]},
)
PRICING_EXTRAS: tuple[dict[str, Any], ...] = (
    {"spot_preemptions_per_hour": 0.1, "checkpoint_write_gb_per_s": 5.0, "spot_reprovision_s": 300.0},
    {"checkpoint_interval_h": 2.0, "max_price_age_days": 30.0},
    {"data_provider": "AWS", "data_gb": 1000.0, "egress_usd_per_gb": 0.09},
    {"cost_of_capital_per_year": 0.08, "burst_kind": "spot"},
    {"serverless_usd_per_gpu_hour": 2.5, "serverless_idle_timeout_s": 30.0},
    {"data_sensitivity": "on-premises"},
)
BATCH_JOBS: tuple[dict[str, Any], ...] = (
    {"requests_per_run": 10_000.0, "runs_per_month": 4.0},
    {"requests_per_run": 2_000.0, "runs_per_month": 1.0, "run_within_h": 8.0, "startup_s": 120.0},
    {"requests_per_run": 500.0, "runs_per_month": 30.0, "run_within_h": 2.0, "startup_s": 0.0},
)


def _base_scenario(c: Chooser) -> dict[str, Any]:
    training = c.coin(65)
    if training:
        task = c.choice(("pretrain", "full-finetune", "lora", "qlora"))
        s: dict[str, Any] = {"name": c.choice(("fuzz training", "t")), "model": c.choice(TRAIN_MODELS), "task": task}
        tr: dict[str, Any] = {"tokens": c.choice((1e8, 1e9, 2e10)), "seq_len": c.choice((512, 2048, 4096)),
                              "global_batch": c.choice((16, 64, 256))}  # fmt: skip
        if c.coin(40):
            tr["precision"] = c.choice(("bf16", "fp16", "fp8"))
        if c.coin(30):
            tr["optimizer"] = c.choice(("adamw", "adam8bit", "sgd"))
        if task in ("lora", "qlora") and c.coin(50):
            tr["lora_rank"] = c.choice((8, 16, 64))
        if c.coin(25):
            tr["framework"] = c.choice(FRAMEWORK_VALUES)
        s["training"] = tr
    else:
        s = {"name": c.choice(("fuzz serving", "i")), "model": c.choice(INFER_MODELS), "task": "inference"}
        inf: dict[str, Any] = {"requests_per_s": c.choice((0.5, 5.0, 50.0)), "input_len": c.choice((128, 1024)),
                               "output_len": c.choice((64, 256))}  # fmt: skip
        if c.coin(30):
            inf["precision"] = c.choice(("bf16", "fp8", "int4"))
        if c.coin(30):
            inf["ttft_slo_s"], inf["tpot_slo_s"] = c.choice(((1.0, 0.05), (5.0, 0.2)))
        if c.coin(20):  # an occasional job: its load is the runs, not a rate (no service extras)
            del inf["requests_per_s"]
            inf["batch_job"] = dict(c.choice(BATCH_JOBS))
        elif c.coin(35):
            inf.update(c.choice(SERVING_EXTRAS))
        s["inference"] = inf
    cons: dict[str, Any] = {"gpu_types": list(c.choice(GPU_SETS)), "max_gpus": c.choice((1, 2, 4, 8, 16))}
    if training and c.coin(30):
        cons[c.choice(("deadline_h", "budget_usd"))] = c.choice((10.0, 1000.0))
    if training and c.coin(15):
        cons["allow_offload"] = not c.coin(70)  # mostly false: offload forbidden
    s["constraints"] = cons
    if c.coin(40):
        s["pricing"] = {"mode": c.choice(("on-demand", "spot", "marketplace", "own"))}
        if c.coin(30):
            s["pricing"].update(c.choice(PRICING_EXTRAS))
    return s


def _section_fields(task: str, doc: dict[str, Any] | None = None) -> dict[str, dict[str, Spec]]:
    out = {"": TOP_FIELDS, "constraints": CONSTRAINT_FIELDS, "pricing": PRICING_FIELDS}
    out["inference" if task == "inference" else "training"] = (
        INFERENCE_FIELDS if task == "inference" else TRAINING_FIELDS
    )
    if doc is not None and isinstance(doc.get("inference"), dict) and "batch_job" in doc["inference"]:
        out["inference.batch_job"] = BATCH_JOB_FIELDS
    return out


def _set(doc: dict[str, Any], section: str, key: str, value: Any) -> None:
    target = doc
    for part in section.split(".") if section else ():  # "inference.batch_job": a mapping inside a section
        target = target.setdefault(part, {})
    target[key] = value


def _mutate_scenario(c: Chooser, s: dict[str, Any]) -> tuple[bool, str, list[tuple[str, FileContent]]]:
    """Mutate ``s`` in place; return (known invalid, description, extra files)."""
    task = s["task"]
    sections = _section_fields(task, s)
    kind = c.choice(("value", "value", "value", "value", "value", "unknown_key", "duplicate_key", "section",
                     "cross", "gpu_types", "price_map", "model_path", "boundary", "boundary"))  # fmt: skip
    if kind == "boundary":  # several fields at their upper bound (valid), or one just past it
        pool = [
            (sec, k, sp)
            for sec, fields in sections.items()
            for k, sp in fields.items()
            if sp.kind in ("int", "float") and sp.high is not None
            and k not in ("dataset_tokens", "requests_per_day", "requests_per_run")
        ]
        picked = {c.choice(pool) for _ in range(c.integer(1, 4))}
        over = c.coin(30)
        parts = []
        for i, (sec, key, sp) in enumerate(sorted(picked, key=lambda t: (t[0], t[1]))):
            value: float = int(sp.high) if sp.kind == "int" else float(sp.high)
            if over and i == 0:
                value = value + 1 if sp.kind == "int" else value * (1 + 1e-6)
            _set(s, sec, key, value)
            parts.append(f"{sec + '.' if sec else ''}{key}={'bound+' if over and i == 0 else 'bound'}")
        return over, "at the bound: " + ", ".join(parts), []
    if kind == "value":
        section = c.choice(tuple(sections))
        key = c.choice(tuple(sections[section]))
        v = c.choice(VALUES)
        if section == "training" and key == "dataset_tokens":
            s["training"].pop("tokens", None)
        if section == "inference" and key == "requests_per_day":
            s["inference"].pop("requests_per_s", None)
        _set(s, section, key, v)
        invalid = is_invalid(sections[section][key], v)
        if key == "framework" and v.label == "empty mapping":
            invalid = False  # a mapping of no overrides: the default preset, as documented
        if key == "allow_offload" and task == "inference":
            invalid = True  # offload is a training constraint (plan.scenario)
        return invalid, f"{section + '.' if section else ''}{key} = {v.label}", []
    if kind == "unknown_key":
        section = c.choice(tuple(sections))
        key = c.choice(("bogus", "max_gpu", "Model", "training_tokens"))
        _set(s, section, key, c.choice((1, "x", True)))
        return True, f"unknown key {section + '.' if section else ''}{key}", []
    if kind == "duplicate_key":
        section = c.choice(tuple(k for k in sections if k == "" or k in s))
        target = s[section] if section else s
        key = c.choice(tuple(target))
        second = target[key] if c.coin(50) else c.choice(VALUES)
        target[key] = Dup(target[key], second)
        return True, f"key {section + '.' if section else ''}{key} given twice", []
    if kind == "section":
        section = c.choice(("training", "inference", "constraints", "pricing"))
        v = c.choice((*tuple(x for x in VALUES if not x.tags & {"null", "dict"}), _deep(70)))
        s[section] = v
        return True, f"section {section} = {v.label}", []
    if kind == "cross":
        what = c.choice(("other_section", "tokens_and_dataset", "no_tokens", "both_rates", "deadline_inference",
                         "no_model", "no_task", "batch_and_rate", "batch_hours_per_day", "batch_arrival",
                         "offload_inference"))  # fmt: skip
        batch = task == "inference" and "batch_job" in s["inference"]
        if what == "other_section":
            if task == "inference":
                s["training"] = {"tokens": 1e9}
            else:
                s["inference"] = {"requests_per_s": 1.0}
        elif what == "tokens_and_dataset" and task != "inference":
            s["training"]["dataset_tokens"] = 1e9
        elif what == "no_tokens" and task != "inference":
            s["training"].pop("tokens")
        elif what == "both_rates" and task == "inference":
            s["inference"]["requests_per_day"] = 1000.0
        elif what == "deadline_inference" and task == "inference":
            s["constraints"]["deadline_h"] = 10.0
        elif what == "batch_and_rate" and batch:
            s["inference"][c.choice(("requests_per_s", "requests_per_day"))] = 100.0
        elif what == "batch_hours_per_day" and batch:
            s.setdefault("pricing", {})["hours_per_day"] = 8.0
        elif what == "batch_arrival" and batch:
            s["inference"]["arrival"] = "diurnal"
        elif what == "offload_inference" and task == "inference":
            s["constraints"]["allow_offload"] = c.coin(50)
        elif what == "no_model":
            del s["model"]
        elif what == "no_task":
            del s["task"]
        else:
            return False, "valid template", []
        return True, f"cross-field: {what}", []
    if kind == "gpu_types" and c.coin(10):
        n = c.choice((10_001, 50_000))
        s["constraints"]["gpu_types"] = [s["constraints"]["gpu_types"][0]] * n
        over = _lim("list_items") is not None and n > _lim("list_items")
        return over, f"constraints.gpu_types lists one GPU {n} times", []
    if kind == "gpu_types":
        v = c.choice(VALUES)
        if c.coin(50):
            s["constraints"]["gpu_types"] = v
            return v.label != "null", f"constraints.gpu_types = {v.label}", []
        s["constraints"]["gpu_types"] = [s["constraints"]["gpu_types"][0], v]
        return True, f"constraints.gpu_types = [gpu, {v.label}]", []
    if kind == "price_map":
        key = c.choice(tuple(PRICE_OVERRIDE))
        gpu = s["constraints"]["gpu_types"][0]
        if c.coin(25):
            name = c.choice(("nope-gpu", "[/bold]", "x" * 300))
            s.setdefault("pricing", {})[key] = {name: 2.0}
            return True, f"pricing.{key} for unknown GPU {name[:20]!r}", []
        v = c.choice(VALUES)
        s.setdefault("pricing", {})[key] = _Flow({gpu: v})
        return is_invalid(PRICE_OVERRIDE[key], v), f"pricing.{key}.{gpu} = {v.label}", []
    # model_path: a config.json path (valid), an over-long one, a directory, a missing file
    what = c.choice(("config", "config_dir", "long", "missing", "markup_name", "extreme_config"))
    if what == "extreme_config":
        base = dict(_shipped()[c.choice(("llama-3.2-1b", "gpt2", "mixtral-8x7b"))])
        new, _, _, label = mutate_config(_ForcedBoundary(c), base)
        s["model"] = "m/config.json"
        return False, f"model = {label}", [("m/config.json", to_json(new) + "\n")]
    if what == "config":
        s["model"] = "m/config.json"
        return False, "model = path to a config.json", [("m/config.json", _shipped_text("llama-3.2-1b"))]
    if what == "config_dir":
        s["model"] = "m"
        return False, "model = directory holding config.json", [("m/config.json", _shipped_text("gpt2"))]
    if what == "markup_name":
        s["model"] = "[bold]m[/bold].json"
        return False, "model = config path with markup in its name", [("[bold]m[/bold].json", _shipped_text("gpt2"))]
    if what == "long":
        s["model"] = "x" * 300 + ".json"
        return True, "model = path of 300 chars", []
    s["model"] = "missing/config.json"
    return True, "model = missing config path", []


def alias_bomb(levels: int) -> str:
    """YAML whose last anchor expands to 9**(levels+1) leaves: cheap to parse by reference, ruinous to walk."""
    lines = ['bomb0: &b0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"bomb{i}: &b{i} [" + ", ".join([f"*b{i - 1}"] * 9) + "]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


class _ForcedBoundary:
    """A chooser whose first choice is the config "boundary" mutation; the rest come from ``inner``."""

    def __init__(self, inner: Chooser):
        self._inner, self._first = inner, True

    def choice(self, options: Sequence[T]) -> T:
        if self._first:
            self._first = False
            return next(o for o in options if o == "boundary")
        return self._inner.choice(options)

    def integer(self, lo: int, hi: int) -> int:
        return self._inner.integer(lo, hi)

    def coin(self, percent: int = 50) -> bool:
        return self._inner.coin(percent)


def gen_scenario(c: Chooser) -> Case:
    s = _base_scenario(c)
    invalid, why, extra = (False, "valid template", []) if c.coin(15) else _mutate_scenario(c, s)
    doc = c.choice(("yaml", "yaml", "yaml", "yaml", "yaml", "yaml", "yaml", "yaml", "empty", "list", "scalar",
                    "binary", "deep_top", "crlf"))  # fmt: skip
    if doc == "yaml":
        text: str | bytes = to_yaml(s) + "\n"
    elif doc == "crlf":
        text = (to_yaml(s) + "\n").replace("\n", "\r\n")
    elif doc == "empty":
        text, invalid, why = "", True, "empty file"
    elif doc == "list":
        text, invalid, why = "- a\n- b\n", True, "top level is a list"
    elif doc == "scalar":
        text, invalid, why = "42\n", True, "top level is a number"
    elif doc == "binary":
        text, invalid, why = b"\xff\xfe\x00name: x\n", True, "not UTF-8"
    else:
        text, invalid, why = "a: " + "[" * 100 + "]" * 100 + "\n", True, "nested 100 deep at the top"
    rare = c.integer(0, 299)  # the rare cases sit mid-range: Hypothesis favours the ends of a range
    if rare == 137:  # about 1 in 300: each may cost a full time limit
        text, invalid, why = to_yaml(s) + "\n" + alias_bomb(8), True, "YAML alias bomb (9**8 leaves by reference)"
    elif rare == 138:
        text, invalid, why = FIFO, True, "scenario file is a named pipe"
    elif 139 <= rare < 144:
        tag = c.choice(
            (
                "!!python/object/apply:os.system ['true']",
                "!!python/name:os.system",
                "!!set {a, b}",
                "!!timestamp 2024-01-01",
                "&a [*a]",
            )
        )
        text, invalid, why = to_yaml(s) + f"\nfuzz: {tag}\n", True, f"YAML tag or alias {tag.split()[0]}"
    argv = ["plan", "s.yaml"]
    text_out = "markup" in why or "ANSI" in why or c.coin(25)
    if not text_out:
        argv.append("--json")
    outputs: tuple[str, ...] = ()
    if "HTML" in why:
        argv += ["--html", "out.html"]
        outputs = ("out.html",)
    elif c.coin(10):
        which = c.choice(("out.html", "s.yaml", "x" * 300 + ".html", "nodir/out.html", "."))
        argv += ["--html", which]
        if which == "out.html":
            outputs = ("out.html",)
        else:
            invalid, why = True, f"--html {_elide(which, 40)}" + ("" if why == "valid template" else f"; {why}")
    return Case("scenario", tuple(argv), (("s.yaml", text), *extra), invalid, why, outputs)


# ---- (b) HF config.json files ------------------------------------------------------------------------------------

CONFIG_INT_KEYS: dict[str, Spec] = {
    k: Spec("int", 1, False, MAX_DIM, True)
    for k in ("hidden_size", "n_embd", "num_attention_heads", "n_head", "num_key_value_heads", "num_kv_heads",
              "num_hidden_layers", "n_layer", "intermediate_size", "n_inner", "ffn_hidden_size", "vocab_size",
              "head_dim", "num_local_experts", "num_experts", "num_experts_per_tok", "moe_intermediate_size",
              "n_routed_experts", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
} | {
    k: Spec("int", 0, False, MAX_DIM, True)
    for k in ("q_lora_rank", "n_shared_experts", "first_k_dense_replace", "shared_expert_intermediate_size")
} | {
    k: Spec("int", 0, False, MAX_POSITIONS, True)
    for k in ("max_position_embeddings", "n_positions", "sliding_window")
}  # fmt: skip
_LLAMA_LIKE = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2", "phi3")
# Keys each family's reader reads (scaleright.workload.spec): a bad value elsewhere may be an ignored HF key.
_READ_INTS = {
    "llama": ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "num_hidden_layers",
              "intermediate_size", "vocab_size", "sliding_window", "max_position_embeddings"),
    "mixtral": ("num_local_experts", "num_experts_per_tok"),
    "qwen3_moe": ("num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size"),
    "gpt2": ("n_embd", "n_head", "n_layer", "vocab_size", "n_positions", "n_inner"),
    "gpt_neox": ("hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size", "vocab_size",
                 "max_position_embeddings"),
    "falcon": ("hidden_size", "num_attention_heads", "num_hidden_layers", "vocab_size", "ffn_hidden_size",
               "max_position_embeddings"),
    "deepseek_v3": ("hidden_size", "num_attention_heads", "num_hidden_layers", "vocab_size", "kv_lora_rank",
                    "q_lora_rank", "qk_nope_head_dim", "v_head_dim", "moe_intermediate_size",
                    "n_routed_experts", "num_experts_per_tok", "n_shared_experts", "first_k_dense_replace",
                    "intermediate_size", "max_position_embeddings"),
    "deepseek_v32": ("index_n_heads", "index_head_dim", "index_topk"),  # with deepseek_v3's (model_type table)
    "gpt_oss": ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "num_hidden_layers",
                "intermediate_size", "vocab_size", "sliding_window", "max_position_embeddings", "num_local_experts",
                "num_experts_per_tok"),
    "llama4": ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "num_hidden_layers",
               "intermediate_size", "vocab_size", "max_position_embeddings", "num_local_experts",
               "num_experts_per_tok"),
}  # fmt: skip
_READ_BOOLS = {"llama": ("tie_word_embeddings", "attention_bias", "mlp_bias", "use_sliding_window"),
               "gpt2": ("tie_word_embeddings",), "gpt_neox": ("tie_word_embeddings", "use_parallel_residual"),
               "falcon": ("tie_word_embeddings", "new_decoder_architecture", "parallel_attn", "bias"),
               "deepseek_v3": ("tie_word_embeddings", "attention_bias"),
               "gpt_oss": ("tie_word_embeddings", "attention_bias"),
               "llama4": ("tie_word_embeddings", "attention_bias", "use_qk_norm")}  # fmt: skip
_READ_PROBS = {"llama": ("attention_dropout", "hidden_dropout", "resid_pdrop"),
               "gpt2": ("resid_pdrop", "attn_pdrop", "embd_pdrop"),
               "gpt_neox": ("attention_dropout", "hidden_dropout"), "falcon": ("attention_dropout", "hidden_dropout"),
               "deepseek_v3": ("attention_dropout",), "gpt_oss": ("attention_dropout",),
               "llama4": ("attention_dropout",)}  # fmt: skip


def _family(cfg: dict[str, Any]) -> str:
    mt = cfg.get("model_type")
    mt = {"RefinedWebModel": "falcon", "RefinedWeb": "falcon", "deepseek_v2": "deepseek_v3", "kimi_k2": "deepseek_v3",
          "deepseek_v32": "deepseek_v3", "llama4_text": "llama4"}.get(mt, mt)
    return "llama" if mt in _LLAMA_LIKE else str(mt)


def _reads(table: dict[str, tuple[str, ...]], cfg: dict[str, Any]) -> set[str]:
    fam = _family(cfg)
    return set(table.get(fam, ())) | set(table.get(str(cfg.get("model_type")), ()))


def _config_bound(*kinds: str, fallback: int = MAX_DIM) -> Callable[[], int]:
    """The smallest bound any reader puts on a config size (``LIMITS`` where present, else the reader's own)."""
    return lambda: int(min([fallback] + [h for h in (_lim(k) for k in kinds) if h is not None]))


CONFIG_BOUNDS: dict[str, Callable[[], int]] = {
    "hidden_size": _config_bound("width"), "n_embd": _config_bound("width"),
    "intermediate_size": _config_bound("width"), "n_inner": _config_bound("width"),
    "num_hidden_layers": _config_bound("layers"), "n_layer": _config_bound("layers"),
    "vocab_size": _config_bound("vocab"), "max_position_embeddings": _config_bound("positions", fallback=MAX_POSITIONS),
    "n_positions": _config_bound("positions", fallback=MAX_POSITIONS),
}  # fmt: skip
CONFIG_REQUIRED = (("hidden_size", "n_embd"), ("num_hidden_layers", "n_layer"), ("vocab_size",),
                   ("num_attention_heads", "n_head"))  # fmt: skip
CONFLICTS = (("hidden_size", "n_embd"), ("num_hidden_layers", "n_layer"), ("num_attention_heads", "n_head"))


@functools.cache
def _shipped() -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(MODELS_DIR.glob("*.json"))}


@functools.cache
def _shipped_text(name: str) -> str:
    return (MODELS_DIR / f"{name}.json").read_text(encoding="utf-8")


PARSE_LEVEL = ("JSON literal", "nested", "config.json is")  # mutations any reader of the file must refuse


def mutate_config(c: Chooser, cfg: dict[str, Any]) -> tuple[dict[str, Any] | None, str | bytes | None, bool, str]:
    """One mutation of a config dict: (new dict or None, raw text or None, known invalid, description). Mutations
    whose description holds one of ``PARSE_LEVEL`` break the file as JSON; the others break it as a model."""
    cfg = dict(cfg)
    if isinstance(cfg.get("text_config"), dict):  # a multimodal config (llama4): the reader reads its language model
        new, raw, invalid, why = mutate_config(c, cfg["text_config"])
        return (dict(cfg, text_config=new) if new is not None else None), raw, invalid, f"text_config: {why}"
    kind = c.choice(("int", "int", "int", "bool", "prob", "model_type", "conflict", "indivisible", "kv_indivisible",
                     "remove", "nan_literal", "deep", "duplicate", "document", "boundary", "boundary"))  # fmt: skip
    if kind == "boundary":  # sizes at the largest value every reader accepts: products must stay finite
        keys = sorted(k for k in _reads(_READ_INTS, cfg) if k in CONFIG_BOUNDS and isinstance(cfg.get(k), int))
        picked = sorted({c.choice(keys) for _ in range(c.integer(1, 3))})
        for k in picked:
            cfg[k] = CONFIG_BOUNDS[k]()
        return cfg, None, False, "config at the bound: " + ", ".join(f"{k}={cfg[k]}" for k in picked)
    if kind == "int":
        keys = [k for k in cfg if k in CONFIG_INT_KEYS and isinstance(cfg[k], int) and not isinstance(cfg[k], bool)]
        key = c.choice(keys)
        v = c.choice(VALUES)
        read = key in _reads(_READ_INTS, cfg)
        cfg[key] = v
        return cfg, None, read and is_invalid(CONFIG_INT_KEYS[key], v), f"config {key} = {v.label}"
    if kind == "bool":
        key = c.choice(sorted(_reads(_READ_BOOLS, cfg)) or ["tie_word_embeddings"])
        v = c.choice(VALUES)
        cfg[key] = v
        return cfg, None, is_invalid(Spec("bool", nullable=True), v), f"config {key} = {v.label}"
    if kind == "prob":
        key = c.choice(sorted(_reads(_READ_PROBS, cfg)) or ["attention_dropout"])
        v = c.choice(VALUES)
        cfg[key] = v
        return cfg, None, is_invalid(Spec("float", 0, False, 1.0, True), v), f"config {key} = {v.label}"
    if kind == "model_type":
        v = c.choice((*VALUES, _raw("string 'bogus_arch'", '"bogus_arch"', '"bogus_arch"', None, "string")))
        cfg["model_type"] = v
        return cfg, None, True, f"config model_type = {v.label}"
    if kind == "conflict":
        for a, b in CONFLICTS:
            have = a if a in cfg else b if b in cfg else None
            if have is not None and isinstance(cfg[have], int):
                other = b if have == a else a
                cfg[other] = cfg[have] * 2
                return cfg, None, True, f"config gives both {have} and {other}, with different values"
        return cfg, None, False, "valid config"
    if kind == "indivisible":
        h = "hidden_size" if "hidden_size" in cfg else "n_embd" if "n_embd" in cfg else None
        n = "num_attention_heads" if "num_attention_heads" in cfg else "n_head" if "n_head" in cfg else None
        if h and n and cfg.get("head_dim") is None and _family(cfg) != "deepseek_v3" and cfg[n] > 1:  # MLA: any
            cfg[h] = cfg[n] * (cfg[h] // cfg[n]) + 1
            return cfg, None, True, f"config {h}={cfg[h]} not divisible by {n}={cfg[n]}"
        return cfg, None, False, "valid config"
    if kind == "kv_indivisible":
        n = cfg.get("num_attention_heads")
        if "num_key_value_heads" in cfg and isinstance(n, int) and n > 2 and _family(cfg) != "deepseek_v3":
            cfg["num_key_value_heads"] = n - 1
            return cfg, None, True, f"config num_key_value_heads={n - 1} does not divide num_attention_heads={n}"
        return cfg, None, False, "valid config"
    if kind == "remove":
        keys = [k for alts in CONFIG_REQUIRED for k in alts if k in cfg]
        key = c.choice(keys)
        del cfg[key]
        return cfg, None, True, f"config without {key}"
    if kind == "nan_literal":
        key = c.choice([k for k in cfg if isinstance(cfg[k], float)] or ["rms_norm_eps"])
        v = c.choice((_float(math.nan), _float(math.inf), _float(-math.inf)))
        cfg[key] = v
        return cfg, None, True, f"config {key} = JSON literal {v.json}"
    if kind == "deep":
        v = c.choice((_deep(70), _deep(3000), _deep(50_000)))
        cfg["fuzz_extra"] = v
        return cfg, None, True, f"config with an extra key {v.label}"
    if kind == "duplicate":
        key = c.choice([k for k in cfg if not isinstance(cfg[k], (dict, list))])
        cfg[key] = Dup(cfg[key], cfg[key])
        return cfg, None, False, f"config key {key} given twice (same value)"
    what = c.choice(("list", "number", "string", "empty", "binary", "truncated"))
    raw: str | bytes = {"list": "[1, 2]", "number": "42", "string": '"config"', "empty": "",
                        "binary": b"\xff\xfe{}", "truncated": to_json(cfg)[:-2]}[what]  # fmt: skip
    return None, raw, True, f"config.json is {what}"


def gen_config(c: Chooser) -> Case:
    name = c.choice(tuple(_shipped()))
    cfg = _shipped()[name]
    if c.coin(15):
        new, raw, invalid, why = cfg, None, False, f"shipped {name} config"
    else:
        new, raw, invalid, why = mutate_config(c, cfg)
        why = f"{name}: {why}"
    text = raw if raw is not None else to_json(new) + "\n"
    where = c.choice(("m.json", "m.json", "d/config.json"))
    model_arg = "d" if where == "d/config.json" and c.coin(50) else where
    cmd = c.choice(("memory", "memory", "memory_infer", "train", "infer"))
    argv = ["estimate"]
    if cmd == "memory":
        argv += ["memory", "--model", model_arg, "--task", c.choice(("pretrain", "lora", "full-finetune"))]
    elif cmd == "memory_infer":
        argv += ["memory", "--model", model_arg, "--task", "inference"]
    elif cmd == "train":
        argv += ["train", "--model", model_arg, "--gpus", "8", "--global-batch", "64", "--tokens", "1e9"]
    else:
        argv += ["infer", "--model", model_arg, "--input-len", "128", "--output-len", "32"]
    if c.coin(85):
        argv.append("--json")
    return Case("config", tuple(argv), ((where, text),), invalid, why)


# ---- (c) user catalog directories --------------------------------------------------------------------------------

GPU_FIELDS: dict[str, Spec] = {
    "memory_gb": _pos("memory_gb"), "hbm_bandwidth_tb_per_s": _pos("tb_per_s"),
    "tdp_w": _pos("watts", nullable=True), "intra_node_gb_per_s_per_gpu": _pos("gb_per_s"),
    "gpus_per_node": Spec("int", 1, False, _lim_max("gpus_per_node", "chips_per_domain")),
    "nic_gbps_per_gpu": _pos("gbps"),
    "id": NAME, "intra_node_link": CHOICE, "name": TEXT, "vendor": TEXT,
    "launch_year": Spec("int", None, False, None, True),
}  # fmt: skip
PRICE_FIELDS: dict[str, Spec] = {
    "usd": Spec("float", 0, False, None, True), "usd_low": Spec("float", 0, False, None, True),
    "kind": CHOICE, "gpu_id": NAME, "unit": NAME, "provider": TEXT, "date": NAME, "notes": TEXT,
}  # fmt: skip
MODEL_ENTRY_FIELDS: dict[str, Spec] = {
    "name": NAME, "family": NAME, "file": NAME, "fidelity": CHOICE, "source": TEXT,
    "published_params_total_b": _pos("billions", nullable=True),
}  # fmt: skip
BAD_DATES = ("9999-99-99", "2024-13-01", "2024-02-30", "2024-00-10", "24-01-01", "2024/01/01", "yesterday")
PRICE_HEADER = "gpu_id,kind,usd,usd_low,usd_high,unit,provider,sku,date,source,notes"


@functools.cache
def _h100_entry() -> dict[str, Any]:
    import yaml

    gpus = yaml.safe_load((PACKAGE_DATA / "gpus.yaml").read_text(encoding="utf-8"))
    g = dict(next(x for x in gpus if x["id"] == "h100-sxm"))
    g.update(id="fuzz-gpu", name="Fuzz GPU 80GB", aliases=["fuzz gpu"], unverified=[], source="fuzz")
    g.pop("notes", None)
    g["dense_tflops"] = _Flow(g["dense_tflops"])
    return g


def _model_entry() -> dict[str, Any]:
    return {"name": "fuzz-model", "aliases": ["fuzz/model"], "family": "llama", "file": "fuzz-model.json",
            "source": "fuzz", "fidelity": "constructed", "published_params_total_b": 1.2,
            "published_params_source": "not read"}  # fmt: skip


FUZZ_MODEL_CONFIG = {"model_type": "llama", "hidden_size": 2048, "num_attention_heads": 32, "num_key_value_heads": 8,
                     "num_hidden_layers": 16, "intermediate_size": 8192, "vocab_size": 128256,
                     "max_position_embeddings": 131072, "tie_word_embeddings": True, "rms_norm_eps": 1e-05}  # fmt: skip


def _csv_cell(s: str) -> str:
    return '"' + s.replace('"', '""') + '"' if any(ch in s for ch in ',"\n\r') else s


def gen_catalog(c: Chooser) -> Case:
    gpu = _h100_entry() | {}
    price = {"gpu_id": "fuzz-gpu", "kind": "on-demand", "usd": "2.5", "usd_low": "", "usd_high": "",
             "unit": "usd_per_gpu_hour", "provider": "fuzzcloud", "sku": "", "date": "2025-01-01",
             "source": "fuzz", "notes": ""}  # fmt: skip
    entry = _model_entry()
    cfg: dict[str, Any] | None = dict(FUZZ_MODEL_CONFIG)
    cfg_raw: str | bytes | None = None
    names = {"gpus": "cat/gpus.yaml", "prices": "cat/prices.csv", "models": "cat/models.yaml"}
    extra_files: list[tuple[str, FileContent]] = []
    price_header, price_tail = PRICE_HEADER, ""
    invalid, why = False, "valid user catalog"
    valid_for: tuple[str, ...] = ()  # commands that never read the mutated part (there it is no error)
    catalog_arg = "cat"
    if not c.coin(15):
        where = c.choice(("gpu", "gpu", "gpu", "price", "price", "price", "entry", "entry", "config", "config",
                          "structure", "structure", "header", "dup"))  # fmt: skip
        if where == "gpu":
            key = c.choice((*tuple(GPU_FIELDS), "dense_tflops.bf16", "unknown"))
            if key == "unknown":
                gpu["bogus_key"] = 1
                invalid, why = True, "gpus.yaml: unknown key"
            elif key == "dense_tflops.bf16":
                v = c.choice(VALUES)
                gpu["dense_tflops"] = _Flow(gpu["dense_tflops"] | {"bf16": v})
                invalid, why = is_invalid(_pos("tflops", nullable=True), v), f"gpus.yaml dense_tflops.bf16 = {v.label}"
            else:
                v = c.choice(VALUES)
                gpu[key] = v
                invalid, why = is_invalid(GPU_FIELDS[key], v), f"gpus.yaml {key} = {v.label}"
                if key == "name" and v.tags & {"empty"}:
                    invalid = False
        elif where == "price":
            key = c.choice(tuple(PRICE_FIELDS))
            if key == "date" and c.coin(60):
                d = c.choice(BAD_DATES)
                price["date"] = d
                invalid, why = True, f"prices.csv date = {d}"
            elif key == "notes" and c.coin(40):
                price["notes"] = "n" * c.choice((131_073, 200_000))
                invalid, why = False, f"prices.csv notes of {len(price['notes'])} chars (over csv's field limit)"
            else:
                v = c.choice(STRING_VALUES + tuple(x for x in CLI_VALUES if "string" not in x.tags))
                cell = v.cli if v.cli is not None else ""
                price[key] = cell
                spec = PRICE_FIELDS[key]
                # a CSV cell is text: numbers are read from their spelling; an empty cell is the default
                if cell == "":
                    invalid = key in ("gpu_id", "kind", "unit", "source") or key == "usd"
                elif spec.kind == "float":
                    try:
                        x = float(cell)
                        invalid = not math.isfinite(x) or x < 0
                    except ValueError:
                        invalid = True
                else:
                    invalid = spec.kind in ("choice", "name")
                why = f"prices.csv {key} = {v.label}"
        elif where == "header":
            what = c.choice(("extra_column", "missing_column", "extra_field", "short_row", "binary"))
            if what == "extra_column":
                price_header += ",bogus"
                price_tail = ",x"
            elif what == "missing_column":
                price_header = PRICE_HEADER.rsplit(",", 1)[0]
                price.pop("notes")
            elif what == "extra_field":
                price_tail = ",surplus"
            elif what == "short_row":
                price.pop("notes")
            invalid, why = True, f"prices.csv {what.replace('_', ' ')}"
            if what == "binary":
                price["provider"] = "\udcff"
        elif where == "entry":
            key = c.choice((*tuple(MODEL_ENTRY_FIELDS), "family_mismatch", "alias_clash", "unknown"))
            if key == "family_mismatch":
                entry["family"] = c.choice(("gpt2", "mixtral", "falcon"))
                invalid, why = True, f"models.yaml family {entry['family']} disagrees with model_type llama"
            elif key == "alias_clash":
                entry["aliases"] = [c.choice(("llama-3.1-8b", "gpt2", "meta-llama/Llama-2-7b-hf"))]
                invalid, why = True, f"models.yaml alias {entry['aliases'][0]} already names a built-in model"
            elif key == "unknown":
                entry["bogus"] = 1
                invalid, why = True, "models.yaml: unknown key"
            else:
                v = c.choice(VALUES)
                entry[key] = v
                invalid, why = is_invalid(MODEL_ENTRY_FIELDS[key], v), f"models.yaml {key} = {v.label}"
                if key == "name" and "string" in v.tags and re.fullmatch(r"[a-z0-9][a-z0-9.\-]*", json.loads(v.json)):
                    valid_for = ("gpus", "prices", "models")  # a valid new name: only "fuzz-model" stops resolving
        elif where == "config":
            new, raw, invalid, why = mutate_config(c, cfg)
            cfg, cfg_raw, why = new, raw, f"models/fuzz-model.json: {why}"
            if invalid and not any(p in why for p in PARSE_LEVEL):
                valid_for = ("gpus", "prices")  # the model's config is only built by commands that use it
        elif where == "dup":
            which = c.choice(("gpu", "entry"))
            target = gpu if which == "gpu" else entry
            key = c.choice(("name", "source", "memory_gb" if which == "gpu" else "fidelity"))
            target[key] = Dup(target[key], target[key])
            invalid, why = True, f"{'gpus' if which == 'gpu' else 'models'}.yaml key {key} given twice"
        else:  # structure: misnamed files, directories, links, the catalog path itself
            what = c.choice(("misnamed", "dir", "broken_link", "loop", "models_dir_file", "catalog_file",
                             "catalog_missing", "catalog_empty_arg", "catalog_long", "empty_dir", "config_missing",
                             "fifo", "bom"))  # fmt: skip
            invalid = True
            if what == "misnamed":
                which = c.choice(tuple(names))
                wrong = {"gpus": c.choice(("cat/gpu.yaml", "cat/GPUS.yaml", "cat/gpus.yml")),
                         "prices": c.choice(("cat/price.csv", "cat/prices.CSV")),
                         "models": c.choice(("cat/model.yaml", "cat/models.yml"))}[which]  # fmt: skip
                names[which] = wrong
                why = f"catalog file misnamed {wrong.split('/')[1]}"
            elif what == "fifo":
                which = c.choice(tuple(names))
                extra_files.append((names.pop(which), FIFO))
                why = f"catalog {which} file is a named pipe"
            elif what == "bom":
                price_header = "\ufeff" + price_header
                invalid, why = False, "prices.csv starts with a UTF-8 byte-order mark"
            elif what in ("dir", "broken_link", "loop"):
                which = c.choice(tuple(names))
                path = names.pop(which)
                content: FileContent = (
                    DIR if what == "dir" else Link("nowhere.yaml") if what == "broken_link" else Link(Path(path).name)
                )
                extra_files.append((path, content))
                kind_name = {"dir": "directory", "broken_link": "broken link"}.get(what, "symlink loop")
                why = f"catalog {Path(path).name} is a {kind_name}"
            elif what == "models_dir_file":
                cfg, cfg_raw = None, None
                extra_files.append(("cat/models", "not a directory\n"))
                why = "catalog models/ is a file"
            elif what == "config_missing":
                cfg, cfg_raw = None, None
                why = "models.yaml names a config file that does not exist"
            elif what == "catalog_file":
                catalog_arg = "cat/gpus.yaml"
                why = "--catalog names a file"
            elif what == "catalog_missing":
                catalog_arg = "nocat"
                why = "--catalog names a missing directory"
            elif what == "catalog_empty_arg":
                catalog_arg = ""
                why = "--catalog ''"
            elif what == "catalog_long":
                catalog_arg = "c" * 300
                why = "--catalog of 300 chars"
            else:
                names.clear()
                cfg, cfg_raw = None, None
                invalid, why = False, "empty catalog directory"
    files: list[tuple[str, FileContent]] = [("cat", DIR)]
    if "gpus" in names:
        files.append((names["gpus"], to_yaml_list([gpu])))
    if "prices" in names:
        row = ",".join(_csv_cell(str(price[k])) for k in PRICE_HEADER.split(",") if k in price) + price_tail
        text = f"{price_header}\n{row}\n"
        files.append((names["prices"], text.encode("utf-8", "surrogateescape") if "\udcff" in text else text))
    if "models" in names:
        files.append((names["models"], to_yaml_list([entry])))
    if cfg is not None or cfg_raw is not None:
        files.append(("cat/models/fuzz-model.json", cfg_raw if cfg_raw is not None else to_json(cfg) + "\n"))
    files += extra_files
    empty = not names
    cmd = c.choice(("gpus", "prices", "models", "memory", "plan")) if not empty else c.choice(("gpus", "models"))
    argv: list[str]
    if cmd == "gpus":
        argv = ["catalog", "gpus", "--catalog", catalog_arg]
    elif cmd == "prices":
        argv = ["catalog", "prices", "--catalog", catalog_arg] + (["--gpu", "fuzz-gpu"] if c.coin(50) else [])
    elif cmd == "models":
        argv = ["catalog", "models", "--catalog", catalog_arg]
    elif cmd == "memory":
        argv = ["estimate", "memory", "--model", "fuzz-model", "--gpu", "fuzz-gpu", "--catalog", catalog_arg]
    else:
        scen = {"name": "catalog fuzz", "model": "fuzz-model", "task": "lora",
                "training": {"tokens": 1e9, "seq_len": 2048, "global_batch": 64},
                "constraints": {"gpu_types": ["fuzz-gpu"], "max_gpus": 8}}  # fmt: skip
        files.append(("s.yaml", to_yaml(scen) + "\n"))
        argv = ["plan", "s.yaml", "--catalog", catalog_arg]
    if invalid and cmd in valid_for:
        invalid, why = False, why + " (not read by this command)"
    text_out = "markup" in why or "ANSI" in why or c.coin(30)
    if not text_out:
        argv.append("--json")
    return Case("catalog", tuple(argv), tuple(files), invalid, why)


def to_yaml_list(entries: list[dict[str, Any]]) -> str:
    """A YAML list of block mappings."""
    out = []
    for e in entries:
        body = to_yaml(e, 2).splitlines()
        out.append("- " + body[0].lstrip() + "\n" + "\n".join(body[1:]))
    return "\n".join(out) + "\n"


# ---- (d) command-line argument vectors ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Flag:
    name: str
    spec: Spec
    applies: str = "all"  # all, training, inference, lora
    default: str | None = None


INT1 = dict(integer=True, low=1, low_open=False)
MEMORY_FLAGS = (
    Flag("--gpus", _pos("gpus", **INT1)), Flag("--tp", _pos("parallel_degree", **INT1)),
    Flag("--pp", _pos("parallel_degree", **INT1)), Flag("--cp", _pos("parallel_degree", **INT1), "training", "1"),
    Flag("--ep", _pos("parallel_degree", **INT1), "training", "1"),
    Flag("--zero", Spec("int", 0, False, 3), "training", "0"),
    Flag("--seq-len", _pos("tokens_per_request", **INT1)),
    Flag("--micro-batch", _pos("micro_batch", **INT1), "training", "1"),
    Flag("--global-batch", _pos("global_batch", **INT1), "training"), Flag("--recompute", CHOICE, "training", "none"),
    Flag("--precision", CHOICE), Flag("--kv-precision", CHOICE, "inference"),
    Flag("--batch", _pos("batch", **INT1), "inference", "1"),
    Flag("--lora-rank", _pos("lora_rank", **INT1), "lora", "16"),
    Flag("--lora-targets", CHOICE, "lora"), Flag("--optimizer", CHOICE, "training", "adamw"), Flag("--gpu", NAME),
    Flag("--model", NAME), Flag("--task", CHOICE), Flag("--states", CHOICE, "training", "zero"),
    Flag("--cross-entropy", CHOICE, "training", "fused"), Flag("--framework", CHOICE, "training"),
    Flag("--attention", CHOICE, "training"),
)  # fmt: skip
TRAIN_FLAGS = (
    Flag("--gpus", _pos("gpus", **INT1)), Flag("--tp", _pos("parallel_degree", **INT1)),
    Flag("--pp", _pos("parallel_degree", **INT1)), Flag("--dp", _pos("gpus", **INT1)),
    Flag("--zero", Spec("int", 0, False, 3)), Flag("--virtual-stages", _pos("parallel_degree", **INT1)),
    Flag("--seq-len", _pos("tokens_per_request", **INT1)), Flag("--global-batch", _pos("global_batch", **INT1)),
    Flag("--micro-batch", _pos("micro_batch", **INT1)), Flag("--lora-rank", _pos("lora_rank", **INT1), "lora", "16"),
    Flag("--gpus-per-node", _pos("gpus_per_node|chips_per_domain", **INT1)),
    Flag("--inter-node-gbps-per-gpu", _pos("link_gbps")),
    Flag("--tokens", _pos("tokens")), Flag("--precision", CHOICE), Flag("--recompute", CHOICE),
    Flag("--calibration", NAME), Flag("--gpu", NAME), Flag("--model", NAME),
    Flag("--etp", _pos("parallel_degree", integer=True, low=1, low_open=False)),
    Flag("--dp-shard", _pos("gpus", integer=True, low=1, low_open=False)),
    Flag("--framework", CHOICE), Flag("--attention", CHOICE), Flag("--cp-variant", CHOICE),
    Flag("--pipeline-schedule", CHOICE),
)  # fmt: skip
INFER_FLAGS = (
    Flag("--gpus", _pos("gpus", **INT1)), Flag("--tp", _pos("parallel_degree", **INT1)),
    Flag("--pp", _pos("parallel_degree", **INT1)), Flag("--input-len", _pos("tokens_per_request", **INT1)),
    Flag("--output-len", _pos("tokens_per_request", **INT1)), Flag("--batch", _pos("batch", **INT1)),
    Flag("--concurrency", _pos("batch", **INT1)),
    Flag("--gpus-per-node", _pos("gpus_per_node|chips_per_domain", **INT1)),
    Flag("--precision", CHOICE), Flag("--kv-precision", CHOICE), Flag("--calibration", NAME), Flag("--gpu", NAME),
)  # fmt: skip
CLI_MODELS = ("gpt2", "llama-3.2-1b", "llama-3.1-8b", "qwen2.5-7b", "mixtral-8x7b", "llama-3.1-70b")
CLI_GPUS = ("h100-sxm", "a100-80gb", "l4", "rtx-4090", "mi300x", "H100")
CALIBRATION_FIELDS = ("gemm_efficiency", "gemm_half_dim", "memory_efficiency", "intra_latency_s", "elementwise_factor")


def _with(argv: list[str], flag: str, value: str | None) -> list[str]:
    """``argv`` with ``flag`` set to ``value`` (replacing an earlier value; ``None``: a switch)."""
    out = list(argv)
    if flag in out:
        i = out.index(flag)
        del out[i : i + (1 if value is None or i + 1 >= len(out) or out[i + 1].startswith("--") else 2)]
    return out + ([flag] if value is None else [flag, value])


def _estimate_argv(c: Chooser) -> tuple[list[str], str, int]:
    """A valid estimate command: (argv, task, tp)."""
    cmd = c.choice(("memory", "memory", "train", "infer"))
    model = c.choice(CLI_MODELS)
    gpus = c.choice((1, 2, 8))
    tp = c.choice(tuple(t for t in (1, 2, 4, 8) if gpus % t == 0))
    argv = ["estimate", cmd, "--model", model, "--gpu", c.choice(CLI_GPUS), "--gpus", str(gpus)]
    if tp > 1 or c.coin(30):
        argv += ["--tp", str(tp)]
    if cmd == "memory":
        task = c.choice(("pretrain", "full-finetune", "lora", "qlora", "inference"))
        argv += ["--task", task, "--seq-len", str(c.choice((512, 2048, 8192)))]
        if task != "inference" and c.coin(40):
            argv += ["--zero", str(c.choice((0, 1, 2, 3))), "--recompute", c.choice(("none", "selective", "full"))]
        if task != "inference" and c.coin(30):
            argv += c.choice((["--states", "megatron"], ["--states", "deepspeed-bf16"], ["--states", "zero"],
                              ["--cross-entropy", "eager"], ["--cross-entropy", "fused"]))  # fmt: skip
        if task != "inference" and c.coin(25):
            argv += c.choice((["--framework", "deepspeed"], ["--framework", "megatron-core"], ["--framework", "fsdp2"],
                              ["--attention", "materialized"], ["--framework", "llm-foundry", "--attention", "flash"]))
        if task == "inference" and c.coin(40):
            argv += ["--batch", str(c.choice((1, 8, 64)))]
    elif cmd == "train":
        task = c.choice(("pretrain", "full-finetune", "lora", "qlora"))
        argv += ["--task", task, "--global-batch", str(8 * gpus), "--tokens", c.choice(("1e9", "2e10"))]
        if tp > 1 and c.coin(40):
            argv.append("--sequence-parallel")
        if c.coin(35):
            argv += ["--framework", c.choice(("megatron-core", "deepspeed", "fsdp2", "megatron-2021", "accelerate",
                                              "llm-foundry"))]  # fmt: skip
        if c.coin(25):
            argv += c.choice((["--attention", "materialized"], ["--attention", "flash"],
                              ["--pipeline-schedule", "interleaved", "--pp", "1"], ["--cp-variant", "ulysses"],
                              ["--pipeline-schedule", "zero-bubble"], ["--dp-shard", "1"]))  # fmt: skip
    else:
        task = "inference"
        argv += ["--input-len", str(c.choice((128, 1000))), "--output-len", str(c.choice((16, 500)))]
        if c.coin(40):
            argv += ["--batch", c.choice(("1", "8", "max"))]
    if task in ("lora", "qlora") and c.coin(40):
        argv += ["--lora-rank", str(c.choice((8, 64)))]
    if cmd in ("memory", "train") and task != "inference" and c.coin(20):  # offload (ZeRO-Offload needs ZeRO >= 1)
        which = c.choice((("--offload-optimizer",), ("--offload-activations",),
                          ("--offload-optimizer", "--offload-activations")))
        if "--offload-optimizer" in which:
            argv = _with(argv, "--zero", c.choice(("1", "2", "3")))
        argv += list(which)
    return argv, task, tp


def _applies(flag: Flag, task: str) -> bool:
    return (flag.applies == "all" or (flag.applies == "training" and task != "inference")
            or (flag.applies == "inference" and task == "inference")
            or (flag.applies == "lora" and task in ("lora", "qlora")))  # fmt: skip


RUN_DB_VARIANTS = ("ok", "bad_json", "big_int", "incomplete")


@functools.cache
def _runs_db(variant: str) -> bytes:
    """The bytes of a small run database of two train runs: ``ok`` (complete rows, as ``bench train`` stores them),
    ``incomplete`` (rows without step times), ``bad_json`` (a column whose JSON does not parse), ``big_int`` (a
    5001-digit integer in a column)."""
    from scaleright.bench.db import RunStore

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "runs.sqlite"
        store = RunStore(path)
        for ws in (1, 2):
            metrics = {"tokens_per_s": 1234.5 * ws * 0.9, "step_time_s_median": 0.2 / 0.9, "peak_memory_gb": 0.05}
            if variant == "incomplete":
                metrics = {"tokens_per_s": 1234.5 * ws}
            store.add(
                kind="train",
                model={"preset": "tiny", "layers": 2, "hidden": 64, "heads": 2, "vocab": 256, "seq_len": 128},
                layout={
                    "strategy": "ddp",
                    "precision": "fp32",
                    "world_size": ws,
                    "nproc_per_node": ws,
                    "micro_batch": 2,
                    "global_batch": 2 * ws,
                    "batch_size": 2,
                },
                metrics=metrics,
                hardware={"fingerprint": "cpu-fuzz"},
                software={"python": "3.11"},
                time_utc=f"2026-01-0{ws}T00:00:00+00:00",
            )
        if variant in ("bad_json", "big_int"):
            bad = "{not json" if variant == "bad_json" else '{"tokens_per_s": 1' + "0" * 5000 + "}"
            with sqlite3.connect(path) as conn:
                conn.execute("UPDATE runs SET metrics_json = ?", (bad,))
            conn.close()
        return path.read_bytes()


def gen_cli(c: Chooser) -> Case:
    group = c.choice(("estimate", "estimate", "estimate", "estimate", "runs", "plan_paths", "catalog", "calibrate",
                      "bench", "export", "dashboard", "prices", "schema", "profiles", "serve_report"))  # fmt: skip
    if group in _NEW_GROUPS:
        return _NEW_GROUPS[group](c)
    if group == "export":
        return _gen_export(c)
    if group == "dashboard":
        return _gen_dashboard(c)
    if group == "bench":
        return _gen_bench(c)
    if group == "runs":
        return _gen_runs(c)
    if group == "catalog":
        return _gen_catalog_cli(c)
    if group == "plan_paths":
        return _gen_plan_paths(c)
    if group == "calibrate":
        return _gen_calibrate(c)
    argv, task, _tp = _estimate_argv(c)
    cmd = argv[1]
    files: list[tuple[str, FileContent]] = []
    invalid, why = False, "valid estimate"
    if c.coin(12):
        pass
    else:
        kind = c.choice(("value", "value", "value", "value", "not_applicable", "sp_tp1", "unknown_flag",
                         "missing_required", "extra_arg", "path", "calibration_file", "conflict", "boundary",
                         "boundary", "offload"))  # fmt: skip
        flags = {"memory": MEMORY_FLAGS, "train": TRAIN_FLAGS, "infer": INFER_FLAGS}[cmd]
        if kind == "boundary":  # several counts at their upper bound (valid), or one just past it
            pool = [
                f
                for f in flags
                if _applies(f, task)
                and f.spec.kind in ("int", "float")
                and f.spec.high
                and f.name not in ("--tp", "--pp", "--dp", "--zero", "--lora-rank", "--virtual-stages", "--etp",
                                   "--dp-shard")
            ]
            picked = sorted({c.choice(pool) for _ in range(c.integer(1, 3))}, key=lambda f: f.name)
            over = c.coin(30)
            parts = []
            for i, f in enumerate(picked):
                high = f.spec.high
                value = (
                    str(int(high) + (1 if over and i == 0 else 0))
                    if f.spec.kind == "int"
                    else repr(high * (1 + 1e-6) if over and i == 0 else high)
                )
                argv = _with(argv, f.name, value)
                parts.append(f"{f.name}={'bound+' if over and i == 0 else 'bound'}")
            invalid, why = over, "at the bound: " + " ".join(parts)
        if kind == "value":
            flag = c.choice(tuple(f for f in flags if _applies(f, task)))
            v = c.choice(CLI_VALUES)
            argv = _with(argv, flag.name, v.cli)
            invalid = is_invalid(flag.spec, v) or (v.cli == "" and flag.spec.kind != "str")
            if flag.name == "--calibration" and v.cli in ("", "default"):
                invalid = False
            why = f"{flag.name} {v.label}"
        elif kind == "not_applicable" and cmd == "memory":
            flag = c.choice(tuple(f for f in flags if not _applies(f, task)) or (None,))
            if flag is not None:
                value = {"--recompute": "full", "--kv-precision": "fp8", "--lora-targets": "q,v",
                         "--optimizer": "sgd", "--states": "megatron", "--cross-entropy": "eager",
                         "--framework": "deepspeed", "--attention": "flash"}.get(flag.name)  # fmt: skip
                value = value or c.choice(("2", "8", "-5"))
                argv = _with(argv, flag.name, value)
                invalid, why = True, f"{flag.name} {value} with --task {task} (does not apply)"
        elif kind == "not_applicable" and cmd == "train" and task not in ("lora", "qlora"):
            value = c.choice(("8", "-5", "0"))
            argv = _with(argv, "--lora-rank", value)
            invalid, why = True, f"--lora-rank {value} with --task {task} (does not apply)"
        elif kind == "offload" and cmd in ("memory", "train"):
            what = c.choice(("no_zero", "no_link", "inference") if cmd == "memory" else ("no_zero", "no_link"))
            argv = [a for a in argv if a not in ("--offload-optimizer", "--offload-activations", "--fsdp")]
            if what == "inference" or task == "inference":  # memory --task inference: offload is a training flag
                argv = [*_with(argv, "--task", "inference"), c.choice(("--offload-optimizer", "--offload-activations"))]
                argv = [a for a in argv if a not in ("--sequence-parallel",)]
                invalid, why = True, "offload flag with --task inference"
            elif what == "no_zero":  # ZeRO-Offload partitions the optimizer states: ZeRO >= 1
                argv = [*_with(argv, "--zero", "0"), "--offload-optimizer"]
                invalid, why = True, "--offload-optimizer with --zero 0"
            else:  # a part the catalog gives no PCIe host link (NVLink-C2C superchips, TPUs)
                gpu = c.choice(("gb200", "gh200", "tpu-v5p"))
                flag = c.choice(("--offload-optimizer", "--offload-activations"))
                argv = [*_with(_with(argv, "--gpu", gpu), "--zero", "1"), flag]
                invalid, why = True, f"{flag} on {gpu} (no host link in the catalog)"
        elif kind == "sp_tp1" and cmd in ("memory", "train") and task != "inference":
            argv = _with(_with(argv, "--tp", "1"), "--sequence-parallel", None)
            invalid, why = True, "--sequence-parallel with --tp 1"
        elif kind == "unknown_flag":
            flag = c.choice(("--bogus", "--gpu-count", "-x", "--json=maybe"))
            argv = [*argv, flag]
            invalid, why = True, f"unknown option {flag}"
        elif kind == "missing_required":
            i = argv.index("--model")
            argv = argv[:i] + argv[i + 2 :]
            invalid, why = True, "--model missing"
        elif kind == "extra_arg":
            argv = [*argv, c.choice(("extra", "8", "--"))]
            invalid, why = argv[-1] != "--", f"extra argument {argv[-1]!r}"
        elif kind == "path":
            what = c.choice(("long_model", "long_catalog", "long_calibration", "empty_catalog", "model_dir",
                             "model_is_dir", "model_fifo"))  # fmt: skip
            if what == "long_model":
                argv = _with(argv, "--model", "m" * 300 + ".json")
            elif what == "long_catalog":
                argv = _with(argv, "--catalog", "c" * 300)
            elif what == "long_calibration":
                argv = _with(argv, "--calibration", "k" * 300) if cmd != "memory" else [*argv, "--calibration", "k"]
            elif what == "empty_catalog":
                argv = _with(argv, "--catalog", "")
            elif what == "model_dir":
                files.append(("emptydir", DIR))
                argv = _with(argv, "--model", "emptydir")
            elif what == "model_fifo":
                files.append(("model.json", FIFO))
                argv = _with(argv, "--model", "model.json")
            else:
                files.append(("model.json", DIR))
                argv = _with(argv, "--model", "model.json")
            invalid, why = True, f"path: {what}"
        elif kind == "calibration_file" and cmd != "memory":
            key = c.choice((*CALIBRATION_FIELDS, "bogus"))
            v = c.choice(VALUES)
            text = to_json({"parameters": {key: v}}) + "\n"
            where = c.choice(("cal.json", ".xdg/scaleright/calibrations/mycal.json", "calfile"))
            if where == "calfile":  # the calibration directory is a file
                files.append((".xdg/scaleright/calibrations", "not a directory\n"))
                argv = _with(argv, "--calibration", "mycal")
                invalid, why = True, "calibration directory is a file"
            else:
                files.append((where, text))
                argv = _with(argv, "--calibration", "cal.json" if where == "cal.json" else "mycal")
                spec = Spec("float", 0, True, None, False)
                invalid = key == "bogus" or is_invalid(spec, v)
                why = f"calibration {key} = {v.label}"
        elif kind == "conflict":
            if cmd == "infer":
                argv = _with(_with(argv, "--batch", "4"), "--concurrency", "4")
                invalid, why = True, "--batch with --concurrency"
            elif cmd == "train":
                argv = _with(_with(argv, "--fsdp", None), "--zero", c.choice(("1", "2")))
                invalid, why = True, "--fsdp with --zero 1/2"
    if c.coin(80):
        argv.append("--json")
    return Case("cli", tuple(argv), tuple(files), invalid, why)


def _gen_runs(c: Chooser) -> Case:
    variant = c.choice(("ok", "ok", "ok", "bad_json", "big_int", "incomplete", "missing", "text", "dir", "empty",
                        "long"))  # fmt: skip
    if c.integer(0, 49) == 23:
        variant = "fifo"  # rare: a reader that opens it may block until the time limit
    files: list[tuple[str, FileContent]] = []
    db = "runs.sqlite"
    if variant in RUN_DB_VARIANTS:
        files.append((db, _runs_db(variant)))
    elif variant == "text":
        files.append((db, "this is not a database\n"))
    elif variant == "dir":
        files.append((db, DIR))
    elif variant == "empty":
        files.append((db, b""))
    elif variant == "fifo":
        files.append((db, FIFO))
    elif variant == "missing":
        db = "typo.sqlite"
    else:
        db = "r" * 300 + ".sqlite"
    sub = c.choice(("list", "show", "export"))
    invalid = variant in ("bad_json", "big_int", "missing", "text", "dir", "long", "fifo")
    why = f"--db {variant}"
    outputs: tuple[str, ...] = ()
    if sub == "list":
        argv = ["runs", "list", "--db", db]
        if c.coin(30):
            k = c.choice(("train", "infer", "bogus", ""))
            argv += ["--kind", k]
            if k == "infer" and variant in ("bad_json", "big_int"):
                invalid = False  # the broken rows are train runs: an infer listing never reads them
            invalid = invalid or k in ("bogus", "")
            why += f", --kind {k!r}"
        if c.coin(70):
            argv.append("--json")
    elif sub == "show":
        rid = c.choice(("1", "2", "999", "0", "-1", "9223372036854775808", "1" + "0" * 30, "abc", "1.5"))
        argv = ["runs", "show", rid, "--db", db]
        invalid = invalid or rid not in ("1", "2")
        why += f", run id {_elide(rid, 30)}"
    else:
        argv = ["runs", "export", "--db", db]
        if c.coin(50):
            f = c.choice(("csv", "json", "xml"))
            argv += ["--format", f]
            invalid = invalid or f == "xml"
            why += f", --format {f}"
        if c.coin(50):
            out = c.choice(("out.txt", "out.txt", db, "x" * 300 + ".csv", "nodir/out.csv", ".", "link.out"))
            if out == "link.out":
                files.append(("link.out", Link(db)))
            argv += ["--out", out]
            if out == "out.txt":
                outputs = ("out.txt",)
            else:
                invalid = True
            why += f", --out {_elide(out, 30)}"
    return Case("cli", tuple(argv), tuple(files), invalid, why, outputs)


def _gen_catalog_cli(c: Chooser) -> Case:
    sub = c.choice(("gpus", "prices", "models"))
    argv = ["catalog", sub]
    invalid, why = False, f"catalog {sub}"
    if sub == "prices" and c.coin(70):
        if c.coin(50):
            g = c.choice((*CLI_GPUS, "nope", "[/bold]", "x" * 300))
            argv += ["--gpu", g]
            invalid = g not in CLI_GPUS
            why += f" --gpu {_elide(g, 30)}"
        else:
            k = c.choice(("on-demand", "spot", "purchase", "bogus", ""))
            argv += ["--kind", k]
            invalid = k in ("bogus", "")
            why += f" --kind {k!r}"
    if c.coin(50):
        argv.append("--json")
    return Case("cli", tuple(argv), (), invalid, why)


def _gen_plan_paths(c: Chooser) -> Case:
    scen = {"name": "p", "model": "gpt2", "task": "pretrain", "training": {"tokens": 1e8, "global_batch": 16},
            "constraints": {"gpu_types": ["h100-sxm"], "max_gpus": 2}}  # fmt: skip
    files: list[tuple[str, FileContent]] = [("s.yaml", to_yaml(scen) + "\n")]
    what = c.choice(("ok", "missing", "dir", "long", "html_is_input", "html_long", "html_dir", "html_nodir",
                     "calibration_long", "catalog_empty", "link_to_scenario_html"))  # fmt: skip
    argv = ["plan", "s.yaml", "--json"]
    outputs: tuple[str, ...] = ()
    invalid = what != "ok"
    if what == "missing":
        argv[1] = "nope.yaml"
    elif what == "dir":
        files.append(("sdir", DIR))
        argv[1] = "sdir"
    elif what == "long":
        argv[1] = "s" * 300 + ".yaml"
    elif what == "html_is_input":
        argv += ["--html", "s.yaml"]
    elif what == "html_long":
        argv += ["--html", "h" * 300 + ".html"]
    elif what == "html_dir":
        argv += ["--html", "."]
    elif what == "html_nodir":
        argv += ["--html", "no/such/dir/r.html"]
    elif what == "calibration_long":
        argv += ["--calibration", "k" * 300]
    elif what == "catalog_empty":
        argv += ["--catalog", ""]
    elif what == "link_to_scenario_html":
        files.append(("alias.html", Link("s.yaml")))
        argv += ["--html", "alias.html"]
    else:
        argv += ["--html", "r.html"]
        outputs = ("r.html",)
    return Case("cli", tuple(argv), tuple(files), invalid, f"plan path: {what}", outputs)


def _gen_compare(c: Chooser) -> Case:
    """``compare``: predicted vs measured for stored runs, with a calibration profile."""
    variant = c.choice((*RUN_DB_VARIANTS, "missing"))
    files: list[tuple[str, FileContent]] = [] if variant == "missing" else [("runs.sqlite", _runs_db(variant))]
    argv = ["compare", "--gpu", c.choice(("h100-sxm", "nope")), "--db", "runs.sqlite"]
    invalid = variant != "ok" or argv[2] == "nope"
    why = f"compare --db {variant} --gpu {argv[2]}"
    cal = c.choice((None, "default", "missing", "k" * 300, "file"))
    if cal == "file":
        key = c.choice(CALIBRATION_FIELDS)
        v = c.choice(VALUES)
        files.append(("cal.json", to_json({"parameters": {key: v}}) + "\n"))
        argv += ["--calibration", "cal.json"]
        invalid = invalid or is_invalid(Spec("float", 0, True), v)
        why += f", calibration {key} = {v.label}"
    elif cal is not None:
        argv += ["--calibration", cal]
        invalid = invalid or cal != "default"
        why += f", --calibration {_elide(cal, 20)}"
    if c.coin(60):
        argv.append("--json")
    return Case("cli", tuple(argv), tuple(files), invalid, why)


def _gen_calibrate(c: Chooser) -> Case:
    if c.coin(50):
        return _gen_compare(c)
    name = c.choice(("my-h100", "my-h100", "n" * 300, "../evil", ".hidden", "", "a/b", "[/bold]"))
    variant = c.choice(("ok", "ok", *RUN_DB_VARIANTS))
    files: list[tuple[str, FileContent]] = [("runs.sqlite", _runs_db(variant))]
    argv = ["calibrate", "--name", name, "--gpu", "h100-sxm", "--db", "runs.sqlite"] + (
        ["--json"] if c.coin(50) else []
    )
    invalid = name not in ("my-h100", "[/bold]") or variant != "ok"
    return Case(
        "cli", tuple(argv), tuple(files), invalid, f"calibrate --name {_elide(name, 30)!r} --db {variant}", (".xdg/",)
    )


NPROC_LISTS = (("1", False), ("1,2,4", False), ("0", True), ("-1", True), ("1,,2", True), ("abc", True),
               ("", True), ("2000", True), ("9223372036854775808", True), ("1" + "0" * 5000, True), ("2,2", False),
               ("1.5", True), (" 2", False))  # fmt: skip
BENCH_TRAIN_FLAGS = (
    Flag("--micro-batch", _pos("micro_batch", **INT1)), Flag("--steps", _pos("steps", **INT1)),
    Flag("--warmup", _pos("steps", integer=True, low=0, low_open=False)), Flag("--layers", _pos("layers", **INT1)),
    Flag("--hidden", _pos("hidden|width", **INT1)), Flag("--heads", _pos("heads", **INT1)),
    Flag("--vocab", _pos("vocab", **INT1)), Flag("--seq-len", _pos("seq_len", **INT1)),
    Flag("--timeout-s", _pos("timeout_s")), Flag("--nnodes", _pos("nnodes", **INT1)),
    Flag("--strategy", CHOICE), Flag("--model", CHOICE), Flag("--precision", CHOICE), Flag("--device", CHOICE),
)  # fmt: skip
BENCH_COMM_FLAGS = (
    Flag("--warmup", _pos("steps", integer=True, low=0, low_open=False)), Flag("--iters", _pos("steps", **INT1)),
    Flag("--timeout-s", _pos("timeout_s")), Flag("--dtype", CHOICE), Flag("--ops", CHOICE),
)  # fmt: skip
SIZE_LISTS = (("1MB,64MB", False), ("1KB", False), ("0MB", True), ("-1MB", True), ("1XB", True), ("", True),
              ("1e400GB", True), ("MB", True), ("1,2", False), ("2000PB", True))  # fmt: skip


def _gen_bench(c: Chooser) -> Case:
    """``bench train|comm --dry-run`` (prints the torchrun command; runs nothing) and ``bench report``."""
    sub = c.choice(("train", "train", "comm", "report"))  # bench infer has no --dry-run: it would measure
    files: list[tuple[str, FileContent]] = []
    invalid, why = False, f"bench {sub}"
    outputs: tuple[str, ...] = ()
    if sub == "report":
        files.append(("runs.sqlite", _runs_db("ok")))
        argv = ["bench", "report", "--db", "runs.sqlite"]
        flag = c.choice(("--price-usd-per-gpu-hour", "--job-tokens", "--html", None))
        if flag == "--html":
            out = c.choice(("r.html", "runs.sqlite", "h" * 300 + ".html"))
            argv += ["--html", out]
            outputs = ("r.html",) if out == "r.html" else ()
            invalid, why = out != "r.html", f"bench report --html {_elide(out, 30)}"
        elif flag is not None:
            v = c.choice(CLI_VALUES)
            argv += [flag, v.cli or ""]
            spec = _pos("usd_per_hour", low_open=False) if flag.startswith("--price") else _pos("tokens")
            invalid, why = is_invalid(spec, v) or v.cli == "", f"bench report {flag} {v.label}"
        return Case("cli", tuple(argv + (["--json"] if c.coin(60) else [])), tuple(files), invalid, why, outputs)
    argv = ["bench", sub, "--dry-run"] + (["--model", "tiny", "--device", "cpu"] if sub == "train" else [])
    if c.coin(85):
        what = c.choice(("nproc", "nproc", "flag", "flag", "flag", "sizes" if sub == "comm" else "node_rank"))
        if what == "nproc":
            text, bad = c.choice(NPROC_LISTS)
            argv += ["--nproc", text]
            invalid, why = bad, f"bench {sub} --nproc {_elide(text, 30)!r}"
        elif what == "sizes":
            text, bad = c.choice(SIZE_LISTS)
            argv += ["--sizes", text]
            invalid, why = bad, f"bench comm --sizes {text!r}"
        elif what == "node_rank":
            rank = c.choice(("0", "1", "-1", "5"))
            argv += ["--nnodes", "2", "--node-rank", rank, "--rdzv-endpoint", "localhost:29500"]
            invalid, why = rank not in ("0", "1"), f"bench train --nnodes 2 --node-rank {rank}"
        else:
            flag = c.choice(BENCH_TRAIN_FLAGS if sub == "train" else BENCH_COMM_FLAGS)
            v = c.choice(CLI_VALUES)
            argv = _with(argv, flag.name, v.cli)
            invalid = is_invalid(flag.spec, v) or (v.cli == "" and flag.spec.kind != "str")
            why = f"bench {sub} {flag.name} {v.label}"
    if c.coin(60):
        argv.append("--json")
    return Case("cli", tuple(argv), tuple(files), invalid, why, outputs)


EXPORT_FORMATS = {"training": ("torchrun", "accelerate", "deepspeed", "megatron", "torchtitan", "skypilot", "slurm",
                                "k8s"), "inference": ("vllm", "sglang", "skypilot", "k8s")}  # fmt: skip
_PLAN_SCENARIOS = {
    "training": "name: t\nmodel: gpt2\ntask: pretrain\ntraining: {tokens: 1.0e8, global_batch: 16}\n"
    "constraints: {gpu_types: [h100-sxm], max_gpus: 2}\n",
    "inference": "name: i\nmodel: gpt2\ntask: inference\ninference: {requests_per_s: 1.0}\n"
    "constraints: {gpu_types: [h100-sxm], max_gpus: 2}\n",
}
EXPORT_RECOMMENDATION_FIELDS: dict[str, Spec] = {
    "gpus": _pos("gpus", integer=True, low=1, low_open=False), "layout": Spec("name"),
    "precision": CHOICE,
}  # fmt: skip


@functools.cache
def _plan_json(task: str) -> str:
    """``scaleright plan S --json`` of a small scenario (run once per task, in a subprocess: the input of export)."""
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "s.yaml").write_text(_PLAN_SCENARIOS[task])
        env = {k: v for k, v in os.environ.items() if k not in ("SCALERIGHT_CATALOG", "SCALERIGHT_CALIBRATION_DIR")}
        env["XDG_DATA_HOME"] = d
        run = subprocess.run([sys.executable, "-m", "scaleright.cli.main", "plan", "s.yaml", "--json"], cwd=d,
                             env=env, capture_output=True, text=True, check=True)  # fmt: skip
        return run.stdout


def _gen_export(c: Chooser) -> Case:
    """``export PLAN.json --to FORMAT [--out DIR]`` on a real plan, a mutated one, a bad path; ``plan --export``."""
    task = c.choice(("training", "inference"))
    fmt = c.choice(EXPORT_FORMATS[task])
    if c.coin(20):  # plan ... --export DIR
        where = c.choice(("out", "out", "nodir/out", "s.yaml", "x" * 300))
        argv = ["plan", "s.yaml", "--export", where] + (["--json"] if c.coin(50) else [])
        ok = where == "out"
        scen: tuple[tuple[str, FileContent], ...] = (("s.yaml", _PLAN_SCENARIOS[task]),)
        return Case("cli", tuple(argv), scen, not ok, f"plan --export {_elide(where, 20)}", ("out/",) if ok else ())
    plan = json.loads(_plan_json(task))
    invalid, why = False, f"export {task} plan --to {fmt}"
    text: str | bytes | None = None
    kind = c.choice(("valid", "valid", "format", "field", "field", "drop", "doc", "out"))
    argv = ["export", "plan.json", "--to", fmt]
    outputs: tuple[str, ...] = ()
    if kind == "format":
        bad = c.choice(("bogus", "", "TORCHRUN", *(EXPORT_FORMATS["inference" if task == "training" else "training"])))
        argv[3] = bad
        invalid = bad not in EXPORT_FORMATS[task]
        why = f"export {task} plan --to {bad!r}"
    elif kind == "field":
        key = c.choice((*EXPORT_RECOMMENDATION_FIELDS, "gpu"))
        v = c.choice(VALUES)
        plan["recommendation"][key] = v
        if key == "gpu":  # any id-shaped string may name a GPU of a user catalog
            gpu_id = r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}"
            invalid = "string" not in v.tags or not re.fullmatch(gpu_id, json.loads(v.json))
        else:
            invalid = is_invalid(EXPORT_RECOMMENDATION_FIELDS[key], v)
        why = f"export: recommendation.{key} = {v.label}"
    elif kind == "drop":
        key = c.choice(("recommendation", "scenario", "recommendation.layout", "recommendation.gpus"))
        if "." in key:
            del plan["recommendation"][key.split(".")[1]]
        else:
            del plan[key]
        invalid, why = True, f"export: plan without {key}"
    elif kind == "doc":
        docs: tuple[tuple[str | bytes, str], ...] = (("[]\n", "a list"), ("", "empty"), ("{}\n", "{}"),
                                                     (b"\xff\xfe{", "not UTF-8"),
                                                     ('{"recommendation": null}\n', "recommendation null"))  # fmt: skip
        text, why = c.choice(docs)
        invalid, why = True, f"export: plan file is {why}"
    elif kind == "out":
        where = c.choice(("out", "out", "nodir/out", "plan.json", "", "x" * 300))
        argv += ["--out", where]
        invalid = where != "out"
        outputs = ("out/",) if where == "out" else ()
        why = f"export --out {_elide(where, 20)!r}"
    files: tuple[tuple[str, FileContent], ...] = (("plan.json", to_json(plan) + "\n" if text is None else text),)
    return Case("cli", tuple(argv), files, invalid, why, outputs)


def _gen_dashboard(c: Chooser) -> Case:
    """``dashboard --host H --port P``; the harness replaces ``uvicorn.run`` so no server starts."""
    port, bad_port = c.choice((("8765", False), ("1", False), ("65535", False), ("0", True), ("65536", True),
                               ("-1", True), ("abc", True), ("", True), (str(2**63), True),
                               ("80.5", True)))  # fmt: skip
    host, bad_host = c.choice((("127.0.0.1", False), ("localhost", False), ("", True), ("a b", True),
                               ("h" * 300, True), ("x\ny", True), ("[/bold]", False)))  # fmt: skip
    argv = ["dashboard", "--port", port, "--host", host]
    return Case("cli", tuple(argv), (), bad_port or bad_host, f"dashboard --host {_elide(host, 20)!r} --port {port!r}")


SKYPILOT_HEADER = ("InstanceType", "AcceleratorName", "AcceleratorCount", "vCPUs", "MemoryGiB", "Price", "SpotPrice",
                   "Region", "GpuInfo")  # fmt: skip
_H100_INFO = "{'Gpus': [{'Name': 'H100', 'Count': 8, 'MemoryInfo': {'SizeInMiB': 81920}}]}"
SKYPILOT_ROWS = (("m6i.large", "", "", "2.0", "8.0", "0.096", "0.0409", "us-east-1", ""),
                 ("p5.48xlarge", "H100", "8.0", "192.0", "2048.0", "55.04", "", "us-east-1", _H100_INFO))  # fmt: skip
# the numeric cells of a vms.csv and what they allow (catalog.prices_import: a price is a finite number >= 0, an
# empty cell or "nan" meaning no offer; a GPU row's count is required)
SKYPILOT_CELLS: dict[str, Spec] = {"Price": Spec("float", 0, False, None, True),
                                   "SpotPrice": Spec("float", 0, False, None, True),
                                   "AcceleratorCount": Spec("float", 0, False)}  # fmt: skip


def _csv_text(rows: Sequence[Sequence[str]]) -> str:
    import csv
    import io

    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


def _gen_prices_import(c: Chooser) -> Case:
    """``prices import --from skypilot-catalog PATH --out DIR`` on a small AWS vms.csv (a cell, the header, the file,
    PATH, --provider, --date or --out mutated), and ``--from gpuhunt`` only with an input refused before any query
    (no fuzz case may reach the network)."""
    rows = [list(SKYPILOT_HEADER), *(list(r) for r in SKYPILOT_ROWS)]
    files: list[tuple[str, FileContent]] = [("cat", DIR), ("cat/aws", DIR)]
    path, content, invalid, why = "cat/aws/vms.csv", None, False, "prices import: valid"
    extra: list[str] = []
    out = "out"
    kind = c.choice(("valid", "cell", "cell", "cell", "file", "path", "option", "option", "gpuhunt"))
    if kind == "valid":
        path = c.choice(("cat", "cat/aws", "cat/aws/vms.csv"))
        why = f"prices import PATH={path}"
    elif kind == "cell":
        column = c.choice(tuple(SKYPILOT_CELLS))
        v = c.choice(CLI_VALUES)
        rows[2][SKYPILOT_HEADER.index(column)] = v.cli or ""
        no_offer = column != "AcceleratorCount" and (v.cli or "").strip().lower() in ("", "nan")
        invalid = not no_offer and (is_invalid(SKYPILOT_CELLS[column], v) or v.cli == "")
        why = f"vms.csv H100 row {column} = {v.label}"
    elif kind == "file":
        what = c.choice(("empty", "header_only", "missing_column", "binary", "not_csv_quote", "dir"))
        invalid, why = True, f"vms.csv: {what}"
        if what == "empty":
            content = ""
        elif what == "header_only":
            content = _csv_text(rows[:1])
        elif what == "missing_column":
            content = _csv_text([r[:5] + r[6:] for r in rows])  # no Price column
        elif what == "binary":
            content = b"\xff\xfe\x00InstanceType\n"
        elif what == "not_csv_quote":
            content = _csv_text(rows) + 'p5,"H100,8\n'
        else:
            content = DIR
    elif kind == "path":
        what = c.choice(("missing", "empty_dir", "not_a_cloud", "long", "empty_arg", "none"))
        invalid, why = True, f"prices import PATH: {what}"
        if what == "missing":
            path = "cat/nope/vms.csv"
        elif what == "empty_dir":
            files.append(("empty", DIR))
            path = "empty"
        elif what == "not_a_cloud":
            files = [("cat", DIR), ("cat/notacloud", DIR)]
            path = "cat/notacloud/vms.csv"
        elif what == "long":
            path = "p" * 300
        elif what == "empty_arg":
            path = ""
        else:
            path = None  # type: ignore[assignment]
    elif kind == "option":
        what = c.choice(("date", "date", "provider", "out", "from"))
        if what == "date":
            day, bad = c.choice((("2025-06-01", False), ("2026-13-01", True), ("yesterday", True), ("", True),
                                 ("2999-01-01", True), ("1" + "0" * 5000, True)))  # fmt: skip
            extra += ["--date", day]
            invalid, why = bad, f"prices import --date {_elide(day, 20)!r}"
        elif what == "provider":
            prov, bad = c.choice((("aws", False), ("aws,gcp", True), ("", True), (" , ", True)))
            extra += ["--provider", prov]
            invalid, why = bad, f"prices import --provider {prov!r}"
        elif what == "out":
            out, bad = c.choice((("out", False), ("cat/aws/vms.csv", True), ("nodir/out", True), ("o" * 300, True),
                                 ("", True)))  # fmt: skip
            invalid, why = bad, f"prices import --out {_elide(out, 20)!r}"
        else:
            src = c.choice(("bogus", "", "SkyPilot"))
            invalid, why = True, f"prices import --from {src!r}"
            argv = ["prices", "import", "--from", src, path, "--out", out]
    if kind == "gpuhunt":  # each refused before gpuhunt is imported or queried
        what = c.choice(("path", "date", "out", "provider"))
        argv = ["prices", "import", "--from", "gpuhunt", "--out", "out"]
        argv += {"path": ["cat"], "date": ["--date", "2999-01-01"], "out": ["--out", "nodir/out"],
                 "provider": ["--provider", ","]}[what]  # fmt: skip
        invalid, why = True, f"prices import --from gpuhunt with a bad {what} (refused before the query)"
    elif not (kind == "option" and why.startswith("prices import --from")):
        argv = ["prices", "import", "--from", "skypilot-catalog", *([path] if path is not None else []),
                "--out", out, *extra]  # fmt: skip
    if not (kind == "path" and why.endswith("not_a_cloud")):
        files.append(("cat/aws/vms.csv", content if content is not None else _csv_text(rows)))
    else:
        files.append(("cat/notacloud/vms.csv", _csv_text(rows)))
    return Case("cli", tuple(argv), tuple(files), invalid, why, ("out/",) if out == "out" else ())


SCHEMA_NAMES = (("memory", False), ("train", False), ("infer", False), ("plan", False), ("simulate", False),
                ("bogus", True), ("", True), ("../plan", True), ("[/bold]", True), ("x" * 300, True),
                ("PLAN", False))  # fmt: skip


def _gen_schema(c: Chooser) -> Case:
    """``schema NAME``: the JSON schema of a result (the output is JSON on success)."""
    name, bad = c.choice(SCHEMA_NAMES)
    argv = ["schema", name]
    if c.coin(10):
        argv.append(c.choice(("extra", "--json", "--bogus")))
        bad = True
    return Case("cli", tuple(argv), (), bad, f"schema {_elide(name, 20)!r}" + (" + extra" if len(argv) > 2 else ""))


CAL_DIR = ".xdg/scaleright/calibrations"


@functools.cache
def _profile_json(provenance: bool) -> str:
    """A calibration profile as ``scaleright calibrate`` saves it (with provenance), or a hand-written one."""
    from cli_helpers import sample_provenance
    from scaleright.estimate.calibration import DEFAULT_CALIBRATION, save_calibration

    prov = sample_provenance()
    with tempfile.TemporaryDirectory() as d:
        path = save_calibration("p", DEFAULT_CALIBRATION.replace(gemm_efficiency=0.5),
                                provenance=prov if provenance else None, directory=Path(d))  # fmt: skip
        return path.read_text()


def _gen_profiles(c: Chooser) -> Case:
    """``calibrate list|show|delete`` over a calibration directory holding a fitted profile and some that are not."""
    files: list[tuple[str, FileContent]] = [(f"{CAL_DIR}/mine.json", _profile_json(True))]
    extras = c.choice(((), ("broken",), ("noprov",), ("link",), ("broken", "noprov", "link")))
    if "broken" in extras:
        files.append((f"{CAL_DIR}/broken.json", "{not json"))
    if "noprov" in extras:
        files.append((f"{CAL_DIR}/noprov.json", _profile_json(False)))
    if "link" in extras:
        files.append((f"{CAL_DIR}/link.json", Link("mine.json")))
    sub = c.choice(("list", "show", "delete", "delete"))
    outputs: tuple[str, ...] = ()
    if sub == "list":
        argv = ["calibrate", "list"] + (["--json"] if c.coin(50) else [])
        return Case("cli", tuple(argv), tuple(files), False, f"calibrate list ({', '.join(extras) or 'one profile'})")
    names = ("mine", "nope", "", "../mine", "default", "a/b", "n" * 300, "[/bold]", *extras)
    name = c.choice(names)
    if sub == "show":
        argv = ["calibrate", "show", name] + (["--json"] if c.coin(50) else [])
        invalid = name in ("nope", "", "n" * 300, "[/bold]", "broken", "a/b", "../mine")
    else:
        argv = ["calibrate", "delete", name]
        invalid = name != "mine"  # only a regular file calibrate wrote, named (not a path)
        outputs = (f"{CAL_DIR}/mine.json",) if name == "mine" else ()
    return Case("cli", tuple(argv), tuple(files), invalid, f"calibrate {sub} {_elide(name, 20)!r} "
                f"({', '.join(extras) or 'one profile'})", outputs)  # fmt: skip


def _gen_serve_report(c: Chooser) -> Case:
    """``serve simulate --report PATH``: a short run of a small model, written as HTML (or refused)."""
    argv = ["serve", "simulate", "--model", "gpt2", "--gpu", "h100-sxm", "--input-len", "128", "--output-len", "16",
            "--requests", "40", "--rate", "2"]  # fmt: skip
    files: list[tuple[str, FileContent]] = []
    where, bad = c.choice((("r.html", False), ("r.html", False), ("old.html", False), ("nodir/r.html", True),
                           (".", True), ("x" * 300 + ".html", True), ("", True), ("in.csv", True)))  # fmt: skip
    outputs: tuple[str, ...] = (where,) if not bad else ()
    if where == "old.html":
        files.append(("old.html", "<html>an older report</html>\n"))
    if where == "in.csv":  # the report must not overwrite the trace it replays
        files.append(("in.csv", "arrival_time_s,input_tokens,output_tokens\n0.0,128,16\n0.5,128,16\n"))
        argv = [a for a in argv if a not in ("--requests", "40", "--rate", "2")] + ["--trace", "in.csv"]
    argv += ["--report", where]
    why = f"serve simulate --report {_elide(where, 20)!r}"
    if c.coin(25):
        v = c.choice(CLI_VALUES)
        argv = _with(argv, "--rate", v.cli) if "--rate" in argv else argv
        spec = _pos("requests_per_s")
        bad = bad or ("--rate" in argv and (is_invalid(spec, v) or v.cli == ""))
        why += f", --rate {v.label}"
        if bad:
            outputs = ()
    if c.coin(40):
        argv.append("--json")
    return Case("cli", tuple(argv), tuple(files), bad, why, outputs)


_NEW_GROUPS: dict[str, Callable[[Chooser], Case]] = {
    "prices": _gen_prices_import, "schema": _gen_schema, "profiles": _gen_profiles, "serve_report": _gen_serve_report,
}  # fmt: skip


# ---- entry points ----------------------------------------------------------------------------------------------

GENERATORS: dict[str, Callable[[Chooser], Case]] = {
    "scenario": gen_scenario, "config": gen_config, "catalog": gen_catalog, "cli": gen_cli,
}  # fmt: skip
FAMILIES = tuple(GENERATORS)


def generate(family: str, seed: int | str) -> Case:
    """The case of ``family`` for ``seed`` (deterministic: the benchmark's generator)."""
    return GENERATORS[family](RandomChooser(f"{family}:{seed}"))


def _strategy(gen: Callable[[Chooser], Case]) -> st.SearchStrategy[Case]:
    return st.composite(lambda draw: gen(HypothesisChooser(draw)))()


scenarios = _strategy(gen_scenario)
configs = _strategy(gen_config)
catalogs = _strategy(gen_catalog)
cli_args = _strategy(gen_cli)
any_case = st.one_of(scenarios, configs, catalogs, cli_args)
