"""``serve simulate``'s outputs never replace its inputs: ``--report`` or ``--trace-out`` naming the ``--trace`` it
replays (or a lengths file) is one line and exit 2, with the input left as it was (found by benchmarks/fuzz.py)."""

from __future__ import annotations

import pytest

from tests.cli_helpers import assert_one_line, file_state, run_main

TRACE = "arrival_time_s,input_tokens,output_tokens\n0.0,128,16\n0.5,128,16\n"


@pytest.mark.parametrize("out_flag", ["--report", "--trace-out"])
def test_an_output_naming_the_trace_it_replays_is_refused_and_the_trace_kept(out_flag, tmp_path, monkeypatch,
                                                                              capsys):  # fmt: skip
    trace = tmp_path / "in.csv"
    trace.write_text(TRACE)
    before = file_state(trace)
    code, out, err = run_main(["serve", "simulate", "--model", "gpt2", "--gpu", "h100-sxm", "--trace", str(trace),
                               out_flag, str(trace)], monkeypatch, capsys)  # fmt: skip
    assert_one_line(code, out, err, rf"{out_flag}=.*is one of this command's inputs")
    assert file_state(trace) == before
