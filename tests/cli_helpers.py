"""Running ``scaleright.cli.main.main`` in-process and checking the one-line-error promise (for the input tests);
the state of a file, to check a command left it alone."""

from __future__ import annotations

import hashlib
import re
import sys

import pytest

from scaleright.cli.main import main


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
