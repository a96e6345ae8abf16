"""Run one CLI invocation in-process and say how it ended: the promise every input is held to.

``run_cli(argv, files)`` creates ``files`` in a fresh directory, makes it the working directory and the user data
directory (``XDG_DATA_HOME``: the run database and calibration profiles live there), runs
``scaleright.cli.main.main`` itself with ``sys.argv`` set (so its error handling is the one under test: a
``ScalerightError`` becomes one line and exit 2; anything else escapes and is a traceback), with stdout and stderr
captured separately by typer's ``CliRunner.isolation`` and a SIGALRM time limit (``dashboard``: with
``uvicorn.run`` a no-op, so a valid host and port return instead of serving). Every file, directory and link
under the directory is snapshotted (bytes, mode, mtime, link target) before and after; anything changed, created
or removed that is not a declared output is ``file_changed``.

Outcomes: ``ok`` (exit 0; with ``--json`` or a JSON-only command, stdout parses and every number is finite; a
known-invalid input accepted with a warning on stderr counts as ok: the user was told),
``rejected`` (exit 2, exactly one non-empty line on stderr, no traceback), ``traceback``, ``timeout``,
``file_changed``, ``silently_accepted`` (exit 0 on a known-invalid input), ``bad_output`` (exit 0 but unparseable
JSON, NaN / Infinity, or a negative memory figure), ``bad_exit`` (any other exit code, or exit 2 without exactly
one line).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import signal
import stat
import sys
import tempfile
import time
import traceback
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from fuzz.strategies import HTML_PROBE, Case, Dir, Fifo, FileContent, Link

__all__ = ["Outcome", "OUTCOMES", "run_cli", "run_case", "TIME_LIMIT_S"]

TIME_LIMIT_S = 20
OUTCOMES = ("ok", "rejected", "traceback", "timeout", "file_changed", "silently_accepted", "bad_output", "bad_exit")
_JSON_ONLY = (("runs", "show"), ("runs", "export"))  # commands whose only output is JSON (export: unless csv)
_RUNNER = CliRunner()


class _Timeout(BaseException):
    """Raised by SIGALRM inside the command (a BaseException, so product code cannot swallow it)."""


@dataclass(frozen=True)
class Outcome:
    kind: str  # one of OUTCOMES
    exit_code: int | None
    stdout: str
    stderr: str
    detail: str = ""  # the exception, the changed files, or what was wrong with the output
    where: str = ""  # innermost scaleright frame of a traceback (file:line function)
    seconds: float = 0.0

    def signature(self, why: str = "") -> str:
        """What groups outcomes into one failure class (``why``: the case's mutation, for silent acceptance)."""
        if self.kind == "silently_accepted":
            return f"silently_accepted: {_generic(why)}"
        if self.kind == "traceback":
            return f"traceback {self.detail.split(':')[0]} at {self.where}"
        if self.kind in ("bad_exit", "rejected"):
            first = (self.stderr.strip().splitlines() or [""])[0]
            return f"{self.kind} exit={self.exit_code} {first[:60]}"
        return f"{self.kind} {self.detail[:80]}"


def _generic(why: str) -> str:
    """A mutation description without its numbers and model names, so like mutations group together."""
    why = re.sub(r"^[a-z0-9.\-]+: (config )", r"\1", why)  # "llama-2-13b: config ..." -> "config ..."
    return re.sub(r"(?<![\w*])\d+(?![\w*])", "N", why)


# ---- files ---------------------------------------------------------------------------------------------------


def _make(root: Path, files: Iterable[tuple[str, FileContent]]) -> None:
    for rel, content in files:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Dir):
            p.mkdir(parents=True, exist_ok=True)
        elif isinstance(content, Link):
            os.symlink(content.target, p)
        elif isinstance(content, Fifo):
            os.mkfifo(p)
        elif isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_bytes(content.encode("utf-8", "surrogateescape"))


def _snapshot(root: Path) -> dict[str, tuple[Any, ...]]:
    """Every entry under ``root``: (type, mode, mtime_ns, bytes or link target)."""
    out: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", st.st_mode)
            elif not stat.S_ISREG(st.st_mode):  # a FIFO: reading it would block
                out[rel] = ("special", st.st_mode, st.st_mtime_ns)
            else:
                out[rel] = ("file", st.st_mode, st.st_mtime_ns, p.read_bytes())
    return out


def _changes(before: Mapping[str, Any], after: Mapping[str, Any], outputs: Iterable[str]) -> list[str]:
    outs = tuple(outputs)

    def is_output(rel: str) -> bool:
        return any(rel == o or (o.endswith("/") and (rel + "/").startswith(o)) for o in outs)

    changed = []
    for rel in sorted(set(before) | set(after)):
        if is_output(rel) or before.get(rel) == after.get(rel):
            continue
        state = "created" if rel not in before else "removed" if rel not in after else "modified"
        changed.append(f"{_short(rel)} {state}")
    return changed


def _short(s: str, n: int = 60) -> str:
    return s if len(s) <= n else f"{s[:30]}...({len(s)} chars)"


# ---- output checks -------------------------------------------------------------------------------------------


class _NonFinite(ValueError):
    pass


def _no_constant(name: str) -> float:
    raise _NonFinite(f"JSON output holds {name}")


def _check_json(text: str) -> str:
    """Why the JSON ``text`` breaks the promise ('' when it keeps it)."""
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except _NonFinite as exc:
        return str(exc)
    except ValueError as exc:
        return f"stdout is not JSON ({str(exc)[:80]})"
    stack = [("", data)]
    while stack:
        path, v = stack.pop()
        if isinstance(v, dict):
            stack.extend((f"{path}.{k}", x) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((f"{path}[{i}]", x) for i, x in enumerate(v))
        elif isinstance(v, float) and not math.isfinite(v):
            return f"non-finite number at {path}"
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0 and _is_memory(path):
            return f"negative memory {v!r} at {path}"
    return ""


def _is_memory(path: str) -> bool:
    last = path.rsplit(".", 1)[-1]
    return (
        "memory_breakdown_gb" in path or last in ("total_gb", "memory_gb_per_gpu", "gpu_memory_gb")
    ) and "headroom" not in last


def _wants_json(argv: tuple[str, ...]) -> bool:
    if "--json" in argv:
        return True
    if tuple(argv[:2]) == ("runs", "show"):
        return True
    if tuple(argv[:2]) == ("runs", "export"):
        return "csv" not in argv and "--out" not in argv
    return False


def _innermost(tb: Any) -> str:
    frames = traceback.extract_tb(tb)
    ours = [f for f in frames if "scaleright" in f.filename and "/tests/" not in f.filename]
    f = (ours or frames)[-1]
    name = f.filename.split("src/", 1)[-1]
    return f"{name}:{f.lineno} {f.name}"


# ---- running -------------------------------------------------------------------------------------------------


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def run_cli(
    argv: Iterable[str],
    files: Iterable[tuple[str, FileContent]] = (),
    *,
    known_invalid: bool = False,
    outputs: Iterable[str] = (),
    time_limit_s: float = TIME_LIMIT_S,
    workdir: Path | None = None,
) -> Outcome:
    """Run ``scaleright *argv`` in a fresh directory holding ``files``; classify how it ended."""
    argv = tuple(argv)
    outputs = tuple(outputs)
    root = Path(tempfile.mkdtemp(prefix="fz", dir=workdir))
    try:
        _make(root, files)
        (root / ".xdg").mkdir(exist_ok=True)
        before = _snapshot(root)
        out = _invoke(argv, root, time_limit_s)
        after = _snapshot(root)
        changed = _changes(before, after, outputs)
        leaked = [
            rel
            for rel, entry in after.items()
            if rel.endswith(".html") and entry[0] == "file" and HTML_PROBE.encode() in entry[-1]
        ]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    kind, code, stdout, stderr, detail, where, secs = out
    if kind in ("traceback", "timeout"):
        return Outcome(kind, code, stdout, stderr, detail, where, secs)
    if changed:
        return Outcome("file_changed", code, stdout, stderr, "; ".join(changed[:4]), "", secs)
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    if code == 0:
        warned = any(ln.lower().startswith(("warning", "error")) for ln in lines)
        if known_invalid and not warned:
            return Outcome("silently_accepted", code, stdout, stderr, "", "", secs)
        why = _check_json(stdout) if _wants_json(argv) else ""
        if leaked:
            why = f"{leaked[0]} holds the input's <script> tag unescaped"
        if why:
            return Outcome("bad_output", code, stdout, stderr, why, "", secs)
        return Outcome("ok", code, stdout, stderr, "", "", secs)
    if code == 2 and len(lines) == 1:
        return Outcome("rejected", code, stdout, stderr, "", "", secs)
    what = f"exit {code}, {len(lines)} stderr lines" + (f", first: {lines[0][:80]}" if lines else "")
    return Outcome("bad_exit", code, stdout, stderr, what, "", secs)


def _invoke(argv: tuple[str, ...], root: Path, time_limit_s: float) -> tuple[Any, ...]:
    from scaleright.cli import main as cli_main

    env = {"XDG_DATA_HOME": str(root / ".xdg"), "SCALERIGHT_CATALOG": None, "SCALERIGHT_CALIBRATION_DIR": None,
           "COLUMNS": "160", "NO_COLOR": "1", "TERM": "dumb"}  # fmt: skip
    old_cwd, old_argv = os.getcwd(), sys.argv
    old_handler = signal.signal(signal.SIGALRM, _on_alarm)
    kind, code, detail, where = "done", None, "", ""
    t0 = time.perf_counter()
    serve = _no_server() if argv[:1] == ("dashboard",) else contextlib.nullcontext()
    with serve, _RUNNER.isolation(env=env) as (out, err, _):
        try:
            os.chdir(root)
            sys.argv = ["scaleright", *argv]
            signal.setitimer(signal.ITIMER_REAL, time_limit_s)
            try:
                cli_main.main()
                code = 0
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if not isinstance(exc.code, (int, type(None))):
                sys.stderr.write(f"{exc.code}\n")
        except _Timeout:
            kind, detail = "timeout", f"no result within {time_limit_s:g} s"
        except BaseException as exc:
            kind = "traceback"
            detail = f"{type(exc).__name__}: {str(exc)[:200]}"
            where = _innermost(exc.__traceback__)
        finally:
            os.chdir(old_cwd)
            sys.argv = old_argv
            signal.signal(signal.SIGALRM, old_handler)
            sys.stdout.flush()
            sys.stderr.flush()
            stdout = out.getvalue().decode("utf-8", "replace")
            stderr = err.getvalue().decode("utf-8", "replace")
    secs = time.perf_counter() - t0
    if kind == "done" and "Traceback (most recent call last)" in stdout + stderr:
        kind, detail = "traceback", "a traceback was printed"
        tail = [ln for ln in (stdout + stderr).splitlines() if ln.strip()]
        detail = tail[-1][:200] if tail else detail
    return kind, code, stdout, stderr, detail, where, secs


@contextlib.contextmanager
def _no_server() -> Iterator[None]:
    """``uvicorn.run`` replaced by a no-op: a dashboard whose flags pass validation returns instead of serving."""
    try:
        import uvicorn
    except ImportError:  # the command then rejects the missing extra itself
        yield
        return
    real = uvicorn.run
    uvicorn.run = lambda *a, **k: None
    try:
        yield
    finally:
        uvicorn.run = real


def run_case(case: Case, *, time_limit_s: float = TIME_LIMIT_S, workdir: Path | None = None) -> Outcome:
    """``run_cli`` for a generated ``Case``."""
    return run_cli(case.argv, case.files, known_invalid=case.known_invalid, outputs=case.outputs,
                   time_limit_s=time_limit_s, workdir=workdir)  # fmt: skip
