"""``scaleright.cli.coercion`` converts option values as typer's own pydantic adapters do.

The reference is typer itself: for each kind of option the CLI has, the same raw value goes through typer's
``build_runtime_param`` (a pydantic ``TypeAdapter``) and through the direct conversion; both must give the same value
of the same type, or both the same error.
"""

from __future__ import annotations

import subprocess
import sys
from enum import Enum
from pathlib import Path

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st

coercion_api = pytest.importorskip("typer._coercion", reason="typer without pydantic coercion (older than 0.2x)")

from scaleright.cli import coercion  # noqa: E402
from scaleright.cli.main import make_app  # noqa: E402


def _params() -> list:
    out = []

    def walk(cmd: object) -> None:
        out.extend(getattr(cmd, "params", []))
        for sub in getattr(cmd, "commands", {}).values():
            walk(sub)

    walk(typer.main.get_command(make_app()))
    return out


PARAMS = _params()


def _one(annotation: type) -> object:
    return next(p for p in PARAMS if p.type_descriptor.annotation is annotation and coercion._kind(p) is not None)


def _outcome(fn, value):
    try:
        out = fn(value)
    except Exception as exc:  # the error itself is compared
        return ("error", type(exc).__name__, str(exc))
    return ("value", type(out), repr(out))  # repr: nan equals nan


def _both(param, value):
    ref = coercion_api.build_runtime_param(param.type_descriptor)
    param._runtime_param = None
    direct = param.get_runtime_param()
    assert type(direct).__name__ == "Direct" and isinstance(direct, coercion_api.RuntimeParam)
    return (_outcome(lambda v: ref.coerce(v, param=param, ctx=None), value),
            _outcome(lambda v: direct.coerce(v, param=param, ctx=None), value))


def test_every_option_of_the_cli_is_converted_directly():
    """The module's claim: no option of this CLI needs typer's adapter for a well-formed value."""
    left = sorted({(p.name, repr(p.type_descriptor.annotation)) for p in PARAMS if coercion._kind(p) is None})
    assert left == []


NUMBER_TEXTS = ["8", "+8", "-0", "007", "1_000", " 8", "8 ", "8.0", "8.", ".5", "-.5", "1e10", "1E-3", "2.5e+3", "inf",
                "-inf", "nan", "", "0x10", "١٢", "1e", "e5", "--1", "9" * 30, "1.5e400", "abc"]


@pytest.mark.parametrize("annotation", [int, float, str])
@pytest.mark.parametrize("text", NUMBER_TEXTS)
def test_numbers_and_text_as_typer_reads_them(annotation, text):
    ref, direct = _both(_one(annotation), text)
    assert direct == ref


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.sampled_from("0123456789+-._eE xinf"), max_size=12))
def test_number_like_text_as_typer_reads_it(text):
    for annotation in (int, float):
        ref, direct = _both(_one(annotation), text)
        assert direct == ref


@pytest.mark.parametrize("value", [8, 0, -3, 2.5, 1e10, True, False])
def test_python_defaults_as_typer_reads_them(value):
    for annotation in (int, float, str):
        ref, direct = _both(_one(annotation), value)
        assert direct == ref


def test_paths_as_typer_reads_them(tmp_path):
    (tmp_path / "f.yaml").write_text("a: 1\n")
    values = [str(tmp_path / "f.yaml"), str(tmp_path), str(tmp_path / "missing.json"), "relative/x.json", "-",
              "", Path(tmp_path / "f.yaml")]
    for param in [p for p in PARAMS if p.type_descriptor.annotation is Path and coercion._kind(p) is not None][:12]:
        for value in values:
            ref, direct = _both(param, value)
            assert direct == ref, (param.name, value)


def test_choices_as_typer_reads_them():
    params = [p for p in PARAMS if isinstance(p.type_descriptor.annotation, type)
              and issubclass(p.type_descriptor.annotation, Enum)]  # fmt: skip
    assert params
    for param in params:
        enum = param.type_descriptor.annotation
        values = [m.value for m in enum] + [m.value.upper() for m in enum if isinstance(m.value, str)] + \
            list(enum) + ["nope", ""]  # fmt: skip
        for value in values:
            ref, direct = _both(param, value)
            assert direct == ref, (param.name, value)


def test_bool_values_as_typer_reads_them():
    param = _one(bool)
    for value in [True, False, "true", "no", "1", "maybe", ""]:
        ref, direct = _both(param, value)
        assert direct == ref, value


def test_an_estimate_builds_no_adapter():
    """The point of the module: ``estimate train`` as the program converts its options without typer's adapters."""
    code = ("import sys; sys.argv = ['scaleright', 'estimate', 'train', '--model', 'llama-2-7b', '--gpu', 'h100-sxm',"
            " '--gpus', '8', '--zero', '3', '--json']\n"
            "from scaleright.cli.main import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('typer._adapters' in sys.modules, file=sys.stderr)")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stderr.strip().splitlines()[-1] == "False", done.stderr
