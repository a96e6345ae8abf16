"""Running ``scaleright.cli.main.main`` in-process and checking the one-line-error promise (for the input tests);
the state of a file, to check a command left it alone; code run in a fresh interpreter."""

from __future__ import annotations

import ast
import hashlib
import re
import subprocess
import sys

import pytest

from scaleright.cli.main import main


def fresh_lines(code: str) -> list[str]:
    """The stdout lines of ``code`` run in a fresh interpreter: what a new process imports, not what this one has."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()


# the CLI's libraries and modules: the typed API and the dashboard run (with the same errors) without any of them
CLI_ONLY = ("typer", "rich", "click", "scaleright.cli")


def fresh_modules(code: str, prefixes: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """(the stdout lines of ``code`` run in a fresh interpreter, the modules whose names start with one of
    ``prefixes`` that the interpreter holds after it)."""
    lines = fresh_lines(f"{code}\nimport sys as _sys\n"
                        f"print(sorted(m for m in _sys.modules if m.startswith({prefixes!r})))")  # fmt: skip
    return lines[:-1], ast.literal_eval(lines[-1])


def run_main(
    args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    """``scaleright *args`` as the console script runs it: (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["scaleright", *args])
    with pytest.raises(SystemExit) as info:
        main()
    out = capsys.readouterr()
    return info.value.code or 0, out.out, out.err


def assert_one_line(code: int, out: str, err: str, pattern: str) -> None:
    """Exit 2, nothing on stdout, exactly one stderr line matching ``pattern``, no traceback."""
    assert code == 2, (code, err)
    assert out == "" and "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, lines
    assert re.search(pattern, lines[0]), (pattern, lines[0])


def one_error_line(err: str) -> str:
    """The only line of ``err``, which must start with ``error: `` (returned with it)."""
    [line] = err.strip().splitlines()
    assert line.startswith("error: "), line
    return line


def file_state(path) -> tuple[str, int]:
    """(SHA-256 of the bytes, mtime in ns) of a file: equal before and after when a command did not touch it."""
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


def sample_provenance(**changes) -> dict:
    """The provenance ``scaleright calibrate`` writes into a profile (``Profile.record``'s source), with made-up
    values: two runs of a CPU part, one fitted parameter off its bound, leave-one-run-out error."""
    p = {"schema": 1, "created_utc": "2026-12-01T12:00:00+00:00", "scaleright_version": "0.1.0", "gpu": "test-cpu",
         "fingerprint": "abc", "runs": [1, 2], "runs_sha256": "0" * 64, "forced": False,
         "parameters": {"gemm_efficiency": {"value": 0.5, "default": 0.589, "low": 0.01, "high": 0.95,
                                            "on_bound": None}},
         "error": {k: {"rows": 2, "median_abs_pct": 5.0, "p90_abs_pct": 6.0, "rms_log": 0.05}
                   for k in ("defaults", "in_sample", "cross_validated")}}  # fmt: skip
    p["error"]["cross_validated"] |= {"method": "leave-one-run-out", "folds": 2}
    return p | changes


PRICES_HEAD = "gpu_id,kind,usd,usd_low,usd_high,unit,provider,sku,date,source,notes\n"


def price_catalog(d, rows: list[tuple], *, only: bool = True):
    """A user catalog of price ``rows`` (each row's source is "src"); ``only``: they are its only prices
    (``catalog.yaml``: ``prices: only``), so a test's expected values are read off the rows it writes."""
    from scaleright.catalog import Catalog

    d.mkdir(parents=True, exist_ok=True)
    body = "".join(",".join(map(str, r)) + ",src,\n" for r in rows)
    (d / "prices.csv").write_text(PRICES_HEAD + body)
    if only:
        (d / "catalog.yaml").write_text("prices: only\n")
    return Catalog.load(d)
