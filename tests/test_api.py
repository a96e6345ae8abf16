"""The top-level Python API: every public name resolves to scaleright's own object, ``import scaleright`` stays
light, docs/api.md's examples run as written, and an API error is the CLI's message."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import scaleright
from tests.cli_helpers import run_main

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def test_every_public_name_resolves_to_a_scaleright_object():
    for name in scaleright.__all__:
        obj = getattr(scaleright, name)
        if name != "__version__":
            assert getattr(obj, "__module__", "").startswith("scaleright."), name
    with pytest.raises(AttributeError):
        _ = scaleright.no_such_name


def test_import_scaleright_loads_no_model_code():
    out = subprocess.run([sys.executable, "-c", "import sys, scaleright; print(sorted(m for m in sys.modules if "
                          "m.startswith(('numpy', 'scaleright.estimate', 'scaleright.plan'))))"],
                         capture_output=True, text=True, check=True)  # fmt: skip
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("block", re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S),
                         ids=lambda b: b.splitlines()[2][:40] if len(b.splitlines()) > 2 else b[:40])
def test_the_docs_examples_run(block, capsys):
    exec(compile(block, str(DOC), "exec"), {})
    assert capsys.readouterr().out.strip()  # each example prints its answer


def test_an_api_error_is_the_clis_message(monkeypatch, capsys):
    with pytest.raises(scaleright.InputError) as err:
        scaleright.get_gpu("h100-sxn")
    code, _, cli_err = run_main(["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100-sxn"], monkeypatch,
                                capsys)  # fmt: skip
    assert code == 2 and cli_err.strip() == f"error: {err.value}"
