"""Running ``scaleright.cli.main.main`` in-process and checking the one-line-error promise (for the input tests)."""

from __future__ import annotations

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
