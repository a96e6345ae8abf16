"""What a user sees when the input is wrong, odd or huge: one line on stderr and exit 2, text shown as text.

Issue #8 reproducers for ``estimate``, ``plan`` and ``catalog``: usage errors of the argument parser, over-long
paths, counts beyond their bounds, options that do not apply, an output path that is an input, truthful path
messages, rich markup and control characters in user strings, JSON without Infinity/NaN, and the planner at the
largest allowed values. "One line, no box" is checked on ``python -m scaleright`` as a subprocess (what a user
sees); the property tests run ``main()`` in-process for speed.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleright.cli.main import main

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
LONG = "a" * 300  # one path component over the 255-byte limit of every common file system
LORA_EXAMPLE = EXAMPLES / "lora-7b-one-gpu.yaml"


def _cli(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m scaleright ARGS`` with this checkout's code, as a user runs it."""
    e = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    e.pop("SCALERIGHT_CATALOG", None)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "scaleright", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env=e, check=False)  # fmt: skip


def _one_line(p: subprocess.CompletedProcess, pattern: str) -> str:
    """Assert exit 2, nothing on stdout and exactly one ``error: ...`` line on stderr matching ``pattern``."""
    assert p.returncode == 2, f"exit {p.returncode}; stderr: {p.stderr!r}"
    assert p.stdout == ""
    assert "Traceback" not in p.stderr and "╭" not in p.stderr, p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {lines!r}"
    assert lines[0].startswith("error: ")
    assert re.search(pattern, lines[0]), f"{pattern!r} not in {lines[0]!r}"
    assert "\x1b" not in p.stderr and "\r" not in p.stderr
    return lines[0]


# ---------------------------------------------------------------------------------------------------------------
# Usage errors of the argument parser: one line with a hint, not a five-line box
# ---------------------------------------------------------------------------------------------------------------

USAGE = {
    "unknown option": (["estimate", "memory", "--model", "gpt2", "--bogus"],
                       r"^error: No such option: --bogus .*; try 'scaleright estimate memory --help'$"),
    "missing option": (["estimate", "memory"],
                       r"^error: Missing option '--model'; try 'scaleright estimate memory --help'$"),
    "int option given text": (["estimate", "train", "--model", "gpt2", "--gpus", "abc"],
                              r"^error: Invalid value for '--gpus': .*; try 'scaleright estimate train --help'$"),
    "float option given text": (["estimate", "train", "--model", "gpt2", "--tokens", "lots"],
                                r"^error: Invalid value for '--tokens'"),
    "missing argument": (["plan"], r"^error: Missing argument 'scenario'; try 'scaleright plan --help'$"),
    "unknown command": (["frobnicate"], r"^error: No such command 'frobnicate'; try 'scaleright --help'$"),
    "unknown subcommand": (["catalog", "cpus"], r"^error: No such command 'cpus'"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(USAGE), ids=list(USAGE))
def test_a_usage_error_is_one_line_with_a_help_hint_and_exit_2(case):
    args, pattern = USAGE[case]
    _one_line(_cli(args), pattern)


def test_version_and_help_still_exit_zero():
    p = _cli(["--version"])
    assert p.returncode == 0 and p.stdout.strip() and p.stderr == ""
    p = _cli(["estimate", "train", "--help"])
    assert p.returncode == 0 and "--micro-batch" in p.stdout


# ---------------------------------------------------------------------------------------------------------------
# Over-long paths and truthful path messages
# ---------------------------------------------------------------------------------------------------------------


def test_an_over_long_catalog_path_is_one_line():
    _one_line(_cli(["catalog", "gpus", "--catalog", f"/tmp/{LONG}"]),
              r"^error: --catalog=/tmp/a+…a+: file name too long$")


def test_an_over_long_scaleright_catalog_variable_is_one_line_naming_the_variable():
    p = _cli(["catalog", "gpus"], env={"SCALERIGHT_CATALOG": f"/tmp/{LONG}"})
    _one_line(p, r"^error: \$SCALERIGHT_CATALOG=/tmp/a+…a+: file name too long$")


def test_an_over_long_calibration_path_is_one_line():
    p = _cli(["estimate", "train", "--model", "gpt2", "--calibration", f"/tmp/{LONG}.json"])
    _one_line(p, r"^error: --calibration=/tmp/a+…a+\.json: file name too long$")


def test_an_over_long_calibration_profile_name_is_one_line():
    p = _cli(["estimate", "infer", "--model", "gpt2", "--input-len", "8", "--output-len", "8", "--calibration", LONG])
    _one_line(p, r"^error: --calibration: profile name too long \(300 bytes; at most 250\)$")


def test_an_over_long_html_path_is_one_line():
    _one_line(_cli(["plan", str(LORA_EXAMPLE), "--html", f"/tmp/{LONG}.html"]),
              r"^error: --html=.*: file name too long")


def test_a_catalog_that_is_a_file_is_not_a_directory(tmp_path):
    f = tmp_path / "gpus.yaml"
    f.write_text("[]\n")
    _one_line(_cli(["catalog", "gpus", "--catalog", str(f)]), r"--catalog=.*gpus\.yaml: not a directory$")


def test_a_catalog_symlink_loop_says_so(tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    _one_line(_cli(["catalog", "models", "--catalog", str(loop)]),
              r"--catalog=.*loop: too many levels of symbolic links")


def test_a_calibration_symlink_loop_is_not_reported_as_not_found(tmp_path):
    loop = tmp_path / "cal.json"
    loop.symlink_to(loop)
    p = _cli(["estimate", "train", "--model", "gpt2", "--calibration", str(loop)])
    line = _one_line(p, r"--calibration=.*cal\.json: too many levels of symbolic links")
    assert "not found" not in line


def test_a_calibration_directory_is_a_directory(tmp_path):
    d = tmp_path / "cal.json"
    d.mkdir()
    _one_line(_cli(["estimate", "train", "--model", "gpt2", "--calibration", str(d)]),
              r"--calibration=.*cal\.json: is a directory, expected a file$")  # fmt: skip


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_calibration_fifo_is_a_named_pipe_and_nothing_blocks(tmp_path):
    fifo = tmp_path / "cal.json"
    os.mkfifo(fifo)
    _one_line(_cli(["plan", str(LORA_EXAMPLE), "--calibration", str(fifo)]),
              r"--calibration=.*: is a named pipe \(FIFO\)")


# ---------------------------------------------------------------------------------------------------------------
# Bounds on every count and size, checked before the model is loaded
# ---------------------------------------------------------------------------------------------------------------

TRAIN = ["estimate", "train", "--model", "gpt2"]
MEMORY = ["estimate", "memory", "--model", "gpt2"]
INFER = ["estimate", "infer", "--model", "gpt2", "--input-len", "8", "--output-len", "8"]

BOUNDS = {
    # micro-batch 2**63 used to report a 4.1e18 s step
    "micro-batch 2**63": ([*TRAIN, "--micro-batch", str(2**63)],
                          r"^error: --micro-batch must be <= 65,536 \(2\*\*16 sequences per GPU per micro-step\); got "
                          + str(2**63) + "$"),
    "global-batch 2**63": ([*TRAIN, "--global-batch", str(2**63)], r"^error: --global-batch must be <= 16,777,216 \("),
    "gpus 2**64": ([*MEMORY, "--gpus", str(2**64)],
                   r"^error: --gpus must be <= 1,048,576 .*got an integer of about 20"),
    "tp 2**21": ([*TRAIN, "--tp", str(2**21)], r"^error: --tp must be <= 1,048,576 \(a parallel degree"),
    "dp 2**62": ([*TRAIN, "--dp", str(2**62)], r"^error: --dp must be <= 1,048,576"),
    "virtual stages 2**40": ([*TRAIN, "--virtual-stages", str(2**40)],
                             r"^error: --virtual-stages must be <= 1,048,576"),
    "seq-len 2**24 + 1": ([*MEMORY, "--seq-len", str(2**24 + 1)], r"^error: --seq-len must be <= 16,777,216"),
    "tokens 1e308": ([*TRAIN, "--tokens", "1e308"], r"^error: --tokens must be <= 1e\+17 \(10\*\*17 tokens"),
    "lora-rank 2**16 + 1": ([*TRAIN, "--task", "lora", "--lora-rank", str(2**16 + 1)],
                            r"^error: --lora-rank must be <= 65,536"),
    "gpus-per-node 1025": ([*TRAIN, "--gpus-per-node", "1025"],
                           r"^error: --gpus-per-node must be <= 1,024 \(the largest"),
    "gpus-per-node 0 (infer)": ([*INFER, "--gpus-per-node", "0"],
                                r"^error: --gpus-per-node=0 must be a positive integer$"),
    "input-len 2**24 + 1": (["estimate", "infer", "--model", "gpt2", "--input-len", str(2**24 + 1),
                             "--output-len", "1"],
                            r"^error: --input-len must be <= 16,777,216"),
    "batch 2**20 + 1 (infer)": ([*INFER, "--batch", str(2**20 + 1)], r"^error: --batch must be <= 1,048,576"),
    "batch 2**20 + 1 (memory)": ([*MEMORY, "--task", "inference", "--batch", str(2**20 + 1)],
                                 r"^error: --batch must be <= 1,048,576"),
    "concurrency 2**63": ([*INFER, "--concurrency", str(2**63)], r"^error: --concurrency must be <= 1,048,576"),
    "inter-node bandwidth 1e-300": ([*TRAIN, "--inter-node-gbps-per-gpu", "1e-300"],
                                    r"^error: --inter-node-gbps-per-gpu=1e-300 must be at least 0\.01 Gb/s"),
    "inter-node bandwidth 1e308": ([*TRAIN, "--inter-node-gbps-per-gpu", "1e308"],
                                   r"^error: --inter-node-gbps-per-gpu must be <= 100,000"),
    "zero 5": ([*TRAIN, "--zero", "5"], r"^error: --zero=5 not allowed; allowed: 0, 1, 2, 3$"),
    # checked before the model is looked up: the flag's error, not the model's
    "flags before the model": (["estimate", "train", "--model", "no-such-model", "--micro-batch", "0"],
                               r"^error: --micro-batch=0 must be a positive integer$"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BOUNDS), ids=list(BOUNDS))
def test_a_count_beyond_its_bound_is_one_line_naming_the_flag_and_why(case):
    args, pattern = BOUNDS[case]
    _one_line(_cli(args), pattern)


# ---------------------------------------------------------------------------------------------------------------
# Options that do not apply are refused, as --batch already was
# ---------------------------------------------------------------------------------------------------------------

NOT_APPLICABLE = {
    "lora-rank -5 with pretrain (train)": ([*TRAIN, "--lora-rank", "-5"],
                                           r"^error: --lora-rank=-5 must be a positive integer$"),
    "lora-rank -5 with pretrain (memory)": ([*MEMORY, "--lora-rank", "-5"],
                                            r"^error: --lora-rank=-5 must be a positive integer$"),
    "lora-rank 0 with lora": ([*MEMORY, "--task", "lora", "--lora-rank", "0"],
                              r"^error: --lora-rank=0 must be a positive"),
    "lora-rank 8 with pretrain": ([*TRAIN, "--lora-rank", "8"],
                                  r"^error: --lora-rank=8 applies to --task lora or qlora; "
                                  r"--task pretrain does not use it"),
    "lora-targets with full-finetune": ([*MEMORY, "--task", "full-finetune", "--lora-targets", "q,v"],
                                        r"^error: --lora-targets=q,v applies to --task lora or qlora; "
                                        r"--task full-finetune"),
    "lora-rank with inference": ([*MEMORY, "--task", "inference", "--lora-rank", "4"],
                                 r"^error: --lora-rank=4 applies to --task lora or qlora; --task inference"),
    "sequence-parallel with tp 1 (train)": ([*TRAIN, "--sequence-parallel"],
                                            r"^error: --sequence-parallel .* needs --tp > 1 \(got --tp 1\)$"),
    "sequence-parallel with tp 1 (memory)": ([*MEMORY, "--gpus", "2", "--sequence-parallel"],
                                             r"^error: --sequence-parallel .* needs --tp > 1"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(NOT_APPLICABLE), ids=list(NOT_APPLICABLE))
def test_an_option_that_does_not_apply_is_refused(case):
    args, pattern = NOT_APPLICABLE[case]
    _one_line(_cli(args), pattern)


def test_sequence_parallel_with_tensor_parallelism_still_runs():
    p = _cli([*TRAIN, "--gpus", "2", "--tp", "2", "--sequence-parallel", "--json"])
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["layout"]["sequence_parallel"] is True


# ---------------------------------------------------------------------------------------------------------------
# An output path that is one of the inputs is refused, and the input is left untouched
# ---------------------------------------------------------------------------------------------------------------


def _copy(src: Path, dst: Path) -> Path:
    dst.write_bytes(src.read_bytes())
    return dst


def test_plan_html_onto_the_scenario_is_refused_and_the_scenario_is_unchanged(tmp_path):
    s = _copy(LORA_EXAMPLE, tmp_path / "S.yaml")
    before = s.read_bytes()
    _one_line(_cli(["plan", str(s), "--html", str(s)]),
              r"^error: --html=.*S\.yaml: is one of this command's inputs; give another output path$")  # fmt: skip
    assert s.read_bytes() == before


def test_plan_html_onto_the_scenario_by_another_name_is_refused(tmp_path, monkeypatch):
    s = _copy(LORA_EXAMPLE, tmp_path / "S.yaml")
    (tmp_path / "link.html").symlink_to(s)
    before = s.read_bytes()
    _one_line(_cli(["plan", str(s), "--html", str(tmp_path / "link.html")]), r"is one of this command's inputs")
    assert s.read_bytes() == before


def test_plan_html_onto_the_model_config_is_refused(tmp_path):
    cfg = _copy(REPO / "src/scaleright/catalog/data/models/gpt2.json", tmp_path / "config.json")
    s = tmp_path / "s.yaml"
    s.write_text(f"model: {cfg}\ntask: lora\ntraining: {{tokens: 1.0e8}}\nconstraints: {{gpu_types: [h100-sxm]}}\n")
    before = cfg.read_bytes()
    _one_line(_cli(["plan", str(s), "--html", str(cfg)]), r"--html=.*config\.json: is one of this command's inputs")
    assert cfg.read_bytes() == before


def test_plan_html_onto_a_catalog_file_or_the_calibration_is_refused(tmp_path):
    cat = tmp_path / "cat"
    cat.mkdir()
    gpus = _copy(REPO / "src/scaleright/catalog/data/gpus.yaml", cat / "gpus.yaml")
    _one_line(_cli(["plan", str(LORA_EXAMPLE), "--catalog", str(cat), "--html", str(gpus)]),
              r"gpus\.yaml: is one of this command's inputs")  # fmt: skip
    _one_line(_cli(["plan", str(LORA_EXAMPLE), "--html", str(gpus)], env={"SCALERIGHT_CATALOG": str(cat)}),
              r"gpus\.yaml: is one of this command's inputs")  # fmt: skip
    cal = tmp_path / "cal.json"
    cal.write_text("{}")
    _one_line(_cli(["plan", str(LORA_EXAMPLE), "--calibration", str(cal), "--html", str(cal)]),
              r"cal\.json: is one of this command's inputs")  # fmt: skip
    assert cal.read_text() == "{}"


def test_plan_html_onto_a_named_calibration_profile_is_refused(tmp_path):
    (tmp_path / "mine.json").write_text("{}")
    p = _cli(["plan", str(LORA_EXAMPLE), "--calibration", "mine", "--html", str(tmp_path / "mine.json")],
             env={"SCALERIGHT_CALIBRATION_DIR": str(tmp_path)})  # fmt: skip
    _one_line(p, r"mine\.json: is one of this command's inputs")
    assert (tmp_path / "mine.json").read_text() == "{}"


def test_plan_html_elsewhere_still_writes_the_report(tmp_path):
    out = tmp_path / "r.html"
    p = _cli(["plan", str(LORA_EXAMPLE), "--html", str(out)])
    assert p.returncode == 0, p.stderr
    assert out.read_text().startswith("<!DOCTYPE html>")


# ---------------------------------------------------------------------------------------------------------------
# Terminal safety: user strings are printed as text, never as markup or raw escape sequences
# ---------------------------------------------------------------------------------------------------------------

ESCAPES = "\x1b[31mred\x1b[0m\rover\x07"


@pytest.fixture
def odd_model(tmp_path) -> Path:
    """A copy of gpt2's config.json at a path with rich markup in it ("[/red]" closes a tag never opened)."""
    d = tmp_path / "a["
    d.mkdir()
    return _copy(REPO / "src/scaleright/catalog/data/models/gpt2.json", d / "red]b.json")


def test_markup_and_escapes_in_a_scenario_name_and_model_path_print_as_text(tmp_path, odd_model):
    assert "[/red]" in str(odd_model)
    s = tmp_path / "s.yaml"
    body = {"model": str(odd_model), "task": "lora", "training": {"tokens": 1e8},
            "constraints": {"gpu_types": ["h100-sxm"]}}  # fmt: skip
    s.write_text(json.dumps({"name": "[/bold] [link=http://x]", **body}))
    p = _cli(["plan", str(s)])
    assert p.returncode == 0, p.stderr  # was rich.errors.MarkupError: closing tag '[/bold]' ...
    first = p.stdout.splitlines()[0]
    assert first.startswith("[/bold] [link=http://x]: ")
    assert str(odd_model) in p.stdout.replace("\n", "")
    # raw escape sequences in a name are refused at the boundary (one line, shown escaped), never printed
    s.write_text(json.dumps({"name": f"x{ESCAPES}", **body}))
    p = _cli(["plan", str(s)])
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and "name: must not contain control characters" in p.stderr
    for raw in ("\x1b", "\r", "\x07"):
        assert raw not in p.stderr


def test_markup_in_a_model_path_prints_as_text_in_estimate_tables(odd_model):
    p = _cli(["estimate", "train", "--model", str(odd_model)])
    assert p.returncode == 0, p.stderr  # was rich.errors.MarkupError: closing tag '[/red]' ...
    assert p.stdout.startswith(f"{odd_model} pretrain on 1 x h100-sxm")
    p = _cli(["estimate", "memory", "--model", str(odd_model), "--task", "inference"])
    assert p.returncode == 0, p.stderr
    assert str(odd_model) in p.stdout.replace("\n", "")


def test_markup_and_escapes_in_a_user_price_row_print_as_text_in_the_table(tmp_path):
    import csv

    cat = tmp_path / "cat"
    cat.mkdir()
    with (cat / "prices.csv").open("w", newline="") as f:
        csv.writer(f).writerows([
            ["gpu_id", "kind", "usd", "usd_low", "usd_high", "unit", "provider", "sku", "date", "source", "notes"],
            ["h100-sxm", "spot", "1.5", "", "", "usd_per_gpu_hour", "[/b]acme\x1b[2J", "", "2026",
             "[red]a test[/red]", ""],
        ])  # fmt: skip
    p = _cli(["catalog", "prices", "--gpu", "h100-sxm", "--kind", "spot", "--catalog", str(cat)])
    assert p.returncode == 0, p.stderr  # was rich.errors.MarkupError: closing tag '[/b]' at position 0 ...
    assert r"[/b]acme\x1b[2J" in p.stdout and "[red]a test[/red]" in p.stdout
    assert "\x1b" not in p.stdout


def test_escapes_in_an_error_message_are_made_visible_on_one_line():
    p = _cli(["estimate", "memory", "--model", f"x{ESCAPES}\nsecond line"])
    line = _one_line(p, r"^error: ")
    assert r"\x1b[31mred" in line and r"\n" in line


def test_a_usage_error_quoting_the_user_shows_escapes():
    p = _cli(["estimate", "memory", "--model", "gpt2", f"--x{ESCAPES}"])
    assert r"\x1b[31m" in _one_line(p, r"^error: No such option")


def test_visible_and_esc_show_every_control_character():
    from scaleright.cli.common import esc, visible

    assert visible("a\x1b[31m\r\n\tb\x00\x7f\x9b\u202e") == r"a\x1b[31m\r\n\tb\x00\x7f\x9b\u202e"
    assert visible("plain ünïcode → ok") == "plain ünïcode → ok"
    assert esc("[/bold]\x1b") == r"\[/bold]\x1b"


# ---------------------------------------------------------------------------------------------------------------
# JSON never contains Infinity or NaN
# ---------------------------------------------------------------------------------------------------------------


def _strict_json(text: str):
    """``json.loads`` that refuses Infinity, -Infinity and NaN (Python's parser accepts them by default)."""

    def refuse(name: str):
        raise AssertionError(f"JSON output contains {name}")

    return json.loads(text, parse_constant=refuse)


def test_emit_json_turns_numpy_and_python_non_finite_numbers_into_null(capsys):
    from scaleright.cli.common import emit_json

    emit_json({"a": math.inf, "b": np.float32("nan"), "c": np.array([1.0, -np.inf]), "d": np.int64(3),
               "e": (np.float64(2.5), np.bool_(True)), 7: [{"f": float("-inf")}]})  # fmt: skip
    assert _strict_json(capsys.readouterr().out) == {"a": None, "b": None, "c": [1.0, None], "d": 3,
                                                     "e": [2.5, True], "7": [{"f": None}]}  # fmt: skip


def test_a_non_finite_number_that_slips_past_cleaning_is_a_loud_error():
    from scaleright.cli import common

    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        common.json.dumps({"x": math.nan}, allow_nan=False)
    assert "allow_nan=False" in Path(common.__file__).read_text()


def _run_main(args: list[str]) -> tuple[int, str, str]:
    """``main()`` in-process with ``sys.argv`` set; (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = ["scaleright", *args]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main()
                code = 0
            except SystemExit as exc:
                code = 0 if exc.code is None else exc.code
    finally:
        sys.argv = argv
    return code, out.getvalue(), err.getvalue()


# Keys that are null by design: no token budget given, no fitting base layout to compare with, a reason only when
# the layout does not fit, a global batch only when given, the provenance of a calibration that has none (defaults).
NULL_OK = {"train_time_h", "gpu_hours", "base_gpus", "scaling_efficiency", "reason", "global_batch", "tokens",
           "provenance", "scaling_note"}  # scaling_note: a text, null where the efficiency is at most 1


def _nulls(o, path: str = "") -> list[str]:
    if o is None:
        return [path]
    if isinstance(o, dict):
        return [p for k, v in o.items() for p in _nulls(v, f"{path}.{k}" if path else k)]
    if isinstance(o, list):
        return [p for i, v in enumerate(o) for p in _nulls(v, f"{path}[{i}]")]
    return []


def _check_result(args: list[str]) -> None:
    code, out, err = _run_main(args)
    if code == 2:
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, err)
        assert out == ""
        return
    assert code == 0, (args, code, err)
    d = _strict_json(out)
    unexpected = [p for p in _nulls(d) if p.split(".")[-1].split("[")[0] not in NULL_OK]
    assert not unexpected, f"non-finite (null) numbers at {unexpected} for {' '.join(args)}"


def _bounded(hi: int) -> st.SearchStrategy[int]:
    """Counts up to ``hi``: small ones, powers of two and the bound itself are the likely trouble spots."""
    return st.one_of(st.integers(1, 8), st.sampled_from([2**k for k in range(hi.bit_length())] + [hi]),
                     st.integers(1, hi))  # fmt: skip


@st.composite
def _train_args(draw, command: str) -> list[str]:
    model = draw(st.sampled_from(["gpt2", "llama-3.1-8b", "mixtral-8x7b", "deepseek-v3"]))
    tp, pp, cp = draw(st.sampled_from([1, 2, 8])), draw(st.sampled_from([1, 2, 4])), draw(st.sampled_from([1, 2]))
    dp = draw(st.one_of(st.sampled_from([1, 2, 64]), st.just(2**20 // (tp * pp * cp))))
    mb = draw(_bounded(2**16))
    args = ["estimate", command, "--model", model, "--gpus", str(tp * pp * cp * dp), "--tp", str(tp), "--pp",
            str(pp), "--cp", str(cp), "--micro-batch", str(mb), "--seq-len", str(draw(_bounded(2**24))),
            "--zero", str(draw(st.integers(0, 3))), "--recompute", draw(st.sampled_from(["none", "selective", "full"]))]
    if draw(st.booleans()):
        args += ["--global-batch", str(min(mb * dp * draw(_bounded(2**24)), 2**24))]
    if tp > 1 and draw(st.booleans()):
        args.append("--sequence-parallel")
    task = draw(st.sampled_from(["pretrain", "full-finetune", "lora", "qlora"]))
    args += ["--task", task]
    if task in ("lora", "qlora"):
        args += ["--lora-rank", str(draw(_bounded(2**16)))]
    if command == "train":
        if draw(st.booleans()):
            args += ["--tokens", repr(draw(st.floats(1.0, 1e17)))]
        if draw(st.booleans()):
            args += ["--gpus-per-node", str(draw(_bounded(1024)))]
        if draw(st.booleans()):
            args += ["--inter-node-gbps-per-gpu", repr(draw(st.floats(0.01, 1e5)))]
    return [*args, "--json"]


# flag -> LIMITS kind, for values drawn independently of each other (most such layouts are refused: one line)
_FREE_FLAGS = {"--gpus": "gpus", "--tp": "parallel_degree", "--pp": "parallel_degree", "--cp": "parallel_degree",
               "--ep": "parallel_degree", "--micro-batch": "micro_batch", "--global-batch": "global_batch",
               "--seq-len": "seq_len", "--lora-rank": "lora_rank"}  # fmt: skip


@st.composite
def _free_args(draw, command: str) -> list[str]:
    from scaleright.limits import LIMITS

    args = ["estimate", command, "--model", draw(st.sampled_from(["gpt2", "mixtral-8x7b"])),
            "--task", draw(st.sampled_from(["pretrain", "lora", "qlora", "full-finetune"]))]  # fmt: skip
    for flag, kind in _FREE_FLAGS.items():
        if draw(st.booleans()):
            args += [flag, str(draw(_bounded(int(LIMITS[kind].high))))]
    if command == "train":
        if draw(st.booleans()):
            args += ["--dp", str(draw(_bounded(int(LIMITS["parallel_degree"].high))))]
        if draw(st.booleans()):
            args += ["--tokens", repr(draw(st.floats(1e-3, LIMITS["tokens"].high)))]
    return [*args, "--json"]


@settings(max_examples=120, deadline=None)
@given(args=st.one_of(_train_args("train"), _free_args("train")))
def test_property_estimate_train_json_is_finite_or_one_line_exit_2(args):
    _check_result(args)


@settings(max_examples=120, deadline=None)
@given(args=st.one_of(_train_args("memory"), _free_args("memory")))
def test_property_estimate_memory_json_is_finite_or_one_line_exit_2(args):
    _check_result(args)


@settings(max_examples=30, deadline=None)
@given(batch=_bounded(2**20), input_len=_bounded(2**24), output_len=_bounded(2**24), tp=st.sampled_from([1, 2, 8]),
       replicas=_bounded(1024), per_node=_bounded(1024))  # fmt: skip
def test_property_estimate_infer_json_is_finite_or_one_line_exit_2(batch, input_len, output_len, tp, replicas,
                                                                   per_node):  # fmt: skip
    _check_result(["estimate", "infer", "--model", "llama-3.1-8b", "--gpus", str(tp * replicas), "--tp", str(tp),
                   "--input-len", str(input_len), "--output-len", str(output_len), "--batch", str(batch),
                   "--gpus-per-node", str(per_node), "--json"])  # fmt: skip


# ---------------------------------------------------------------------------------------------------------------
# The planner at the largest allowed values: finite output or one line, never OverflowError or a numpy warning
# ---------------------------------------------------------------------------------------------------------------


def _scenario(base: dict, **sections):
    """A valid scenario from ``base``, then ``sections`` set without validation: the planner's own robustness is
    under test here, whatever bounds the scenario file's validation adds."""
    from scaleright.plan.scenario import parse_scenario

    scn = parse_scenario(base)
    return scn.model_copy(update={k: getattr(scn, k).model_copy(update=v) for k, v in sections.items()})


def _plan_json(scn) -> dict:
    from scaleright.cli.common import _clean
    from scaleright.plan.planner import plan

    return _strict_json(json.dumps(_clean(plan(scn).as_dict()), allow_nan=False))


def test_plan_training_at_the_largest_allowed_counts_is_finite():
    from scaleright.limits import LIMITS

    hi = {k: int(LIMITS[k].high) for k in ("global_batch", "seq_len", "gpus", "gpus_per_node", "lora_rank")}
    base = {"model": "gpt2", "task": "lora", "training": {"tokens": 1e9}, "constraints": {"gpu_types": ["h100-sxm"]}}
    for seq_len in (1, 1024, hi["seq_len"]):
        scn = _scenario(base, training={"tokens": LIMITS["tokens"].high, "seq_len": seq_len,
                                        "global_batch": hi["global_batch"], "lora_rank": hi["lora_rank"]},
                        constraints={"max_gpus": hi["gpus"], "gpus_per_node": hi["gpus_per_node"],
                                     "deadline_h": LIMITS["hours"].high, "budget_usd": LIMITS["usd"].high})  # fmt: skip
        d = _plan_json(scn)
        assert d["recommendation"] is not None or d["infeasible"]["message"]


def test_plan_owned_hardware_used_almost_never_skips_the_gpu_instead_of_a_wrong_price_error():
    base = {"model": "gpt2", "task": "pretrain", "training": {"tokens": 1e9, "global_batch": 8},
            "constraints": {"gpu_types": ["h100-sxm"], "max_gpus": 8},
            "pricing": {"mode": "own", "purchase_usd_per_gpu": {"h100-sxm": 30000}}}  # fmt: skip
    scn = _scenario(base, pricing={"hours_per_day": 1e-300, "horizon_months": 1e-300})  # used GPU-hours underflow to 0
    d = _plan_json(scn)  # was: InputError "price_usd_per_gpu_hour must be >= 0 (got inf)"
    assert d["recommendation"] is None
    assert d["infeasible"]["binding"] == "price"
    assert "owned cost per GPU-hour is not finite (pricing.hours_per_day=1e-300" in d["infeasible"]["message"]


def test_plan_inference_rate_that_overflows_is_one_line_not_overflow_error():
    from scaleright.errors import InputError
    from scaleright.plan.planner import plan

    base = {"model": "gpt2", "task": "inference", "inference": {"requests_per_day": 1e6},
            "constraints": {"gpu_types": ["h100-sxm"]}}  # fmt: skip
    scn = _scenario(base, inference={"requests_per_day": 1e12}, pricing={"hours_per_day": 1e-300})
    with pytest.raises(InputError, match=r"^inference\.requests_per_day=1e\+12 in pricing\.hours_per_day=1e-300 h "
                                         r"is not a finite request rate"):  # fmt: skip
        plan(scn)  # was: OverflowError: cannot convert float infinity to integer


def test_evaluate_inference_with_an_infinite_rate_does_not_fit_rather_than_overflow():
    from scaleright.catalog import Catalog
    from scaleright.estimate.comm import Cluster
    from scaleright.plan.search import evaluate_inference
    from scaleright.workload import load_model

    g = Catalog.load().gpu("h100-sxm")
    c = evaluate_inference(load_model("gpt2"), gpu=g, cluster=Cluster.for_gpu(g), tp=1, rate_rps=math.inf,
                           input_len=8, output_len=8, precision="bf16", kv_precision="bf16", ttft_slo_s=None,
                           tpot_slo_s=None, max_gpus=2**20)  # fmt: skip
    assert not c.fits
    assert "needs more replicas than max_gpus 1048576 allows" in c.reason


def test_plan_inference_at_the_largest_allowed_rate_and_lengths_is_finite():
    from scaleright.limits import LIMITS

    base = {"model": "gpt2", "task": "inference", "inference": {"requests_per_s": 1.0},
            "constraints": {"gpu_types": ["h100-sxm", "rtx-4090"]}}  # fmt: skip
    for i_len, o_len in ((1, 1), (int(LIMITS["tokens_per_request"].high),) * 2):
        scn = _scenario(base, inference={"requests_per_s": LIMITS["requests_per_s"].high, "input_len": i_len,
                                         "output_len": o_len, "api_usd_per_1m_output_tokens": LIMITS["usd"].high},
                        constraints={"max_gpus": int(LIMITS["gpus"].high), "budget_usd": LIMITS["usd"].high})
        d = _plan_json(scn)
        assert d["recommendation"] is not None or d["infeasible"]["message"]


def test_an_unknown_gpu_in_a_price_override_is_refused_before_the_search(tmp_path):
    s = tmp_path / "s.yaml"
    s.write_text("model: gpt2\ntask: inference\ninference: {requests_per_s: 1, ttft_slo_s: 1.0e-9}\n"
                 "constraints: {gpu_types: [h100-sxm]}\npricing: {price_usd_per_gpu_hour: {h100-fooo: 2}}\n")
    # was: silently ignored when no option needed a price (here the SLO rules every option out)
    _one_line(_cli(["plan", str(s)]), r"^error: pricing\.price_usd_per_gpu_hour: unknown GPU 'h100-fooo'; closest: ")


_TRAIN_BASE = {"model": "gpt2", "task": "pretrain", "training": {"tokens": 1e9},
               "constraints": {"gpu_types": ["h100-sxm", "rtx-4090"]}}  # fmt: skip
_INFER_BASE = {"model": "llama-3.1-8b", "task": "inference", "inference": {"requests_per_s": 1.0},
               "constraints": {"gpu_types": ["h100-sxm", "rtx-4090"]}}  # fmt: skip


@settings(max_examples=25, deadline=None)
@given(model=st.sampled_from(["gpt2", "mixtral-8x7b", "deepseek-v3"]),
       task=st.sampled_from(["pretrain", "full-finetune", "lora", "qlora"]), tokens=st.floats(1.0, 1e17),
       seq_len=_bounded(2**24), global_batch=_bounded(2**24), lora_rank=_bounded(2**16), max_gpus=_bounded(2**20),
       gpus_per_node=st.one_of(st.none(), _bounded(1024)), mode=st.sampled_from(["on-demand", "own"]),
       hours_per_day=st.floats(1e-3, 24.0), deadline_h=st.one_of(st.none(), st.floats(1e-3, 1e7)))  # fmt: skip
def test_property_plan_training_is_finite_for_in_bound_values(model, task, tokens, seq_len, global_batch, lora_rank,
                                                             max_gpus, gpus_per_node, mode, hours_per_day,
                                                             deadline_h):  # fmt: skip
    scn = _scenario(_TRAIN_BASE | {"model": model},
                    training={"tokens": tokens, "seq_len": seq_len, "global_batch": global_batch,
                              "lora_rank": lora_rank},
                    constraints={"max_gpus": max_gpus, "gpus_per_node": gpus_per_node, "deadline_h": deadline_h},
                    pricing={"mode": mode, "hours_per_day": hours_per_day})  # fmt: skip
    scn = scn.model_copy(update={"task": task})
    d = _plan_json(scn)  # numpy warnings are errors in the test run: an overflow fails here
    assert (d["recommendation"] is None) == (d["infeasible"] is not None)


@settings(max_examples=25, deadline=None)
@given(rate=st.floats(1e-6, 1e7), input_len=_bounded(2**24), output_len=_bounded(2**24), max_gpus=_bounded(2**20),
       ttft=st.one_of(st.none(), st.floats(1e-6, 1e4)), tpot=st.one_of(st.none(), st.floats(1e-6, 1e4)),
       precision=st.sampled_from(["bf16", "fp8", "int4"]), mode=st.sampled_from(["on-demand", "own"]))  # fmt: skip
def test_property_plan_inference_is_finite_for_in_bound_values(rate, input_len, output_len, max_gpus, ttft, tpot,
                                                              precision, mode):  # fmt: skip
    scn = _scenario(_INFER_BASE, inference={"requests_per_s": rate, "input_len": input_len, "output_len": output_len,
                                            "ttft_slo_s": ttft, "tpot_slo_s": tpot, "precision": precision,
                                            "api_usd_per_1m_output_tokens": 1.0},
                    constraints={"max_gpus": max_gpus}, pricing={"mode": mode})  # fmt: skip
    d = _plan_json(scn)
    assert (d["recommendation"] is None) == (d["infeasible"] is not None)


def test_table_cells_show_numpy_scalars_nan_and_huge_numbers_readably():
    from scaleright.cli.common import fmt

    assert [fmt(v) for v in (np.bool_(False), np.float32(0.5), math.nan, -math.inf, 2.6e301, 12345.6)] == [
        "no", "0.5", "—", "-∞", "2.6e+301", "12,346"]  # fmt: skip


@pytest.mark.parametrize(("argv", "flag"), [
    (["catalog", "gpus", "--catalog", ""], "--catalog"),
    (["catalog", "gpus", "--catalog="], "--catalog"),
    (["serve", "simulate", "--model", "gpt2", "--input-len", "8", "--output-len", "8", "--rate", "1",
      "--trace-out", ""], "--trace-out"),
])  # fmt: skip
def test_an_empty_path_is_refused_not_read_as_the_working_directory(tmp_path, argv, flag):
    # the parser turns '' into Path('.'): the working directory was read as the user catalog
    (tmp_path / "gpus.yaml").write_text("- not: a gpu\n")  # would fail differently if the cwd were read
    p = subprocess.run([sys.executable, "-m", "scaleright", *argv], capture_output=True, text=True, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": str(REPO / "src")})  # fmt: skip
    assert (p.returncode, p.stdout, p.stderr) == (2, "", f"error: {flag}: empty value; give a path\n")


def test_an_empty_calibration_is_refused_not_read_as_the_defaults():
    p = _cli(["estimate", "train", "--model", "gpt2", "--calibration", ""])
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr == (
        "error: --calibration: empty value; give a profile name or a JSON file path (omit it for the defaults)\n"
    )
