"""Scenario files that are not what they claim (issue #8): booleans for numbers, numbers past every sane bound,
control characters in names, and paths that are not regular files. Each case is one line naming the scenario field
(or the file) and what is allowed, exit 2 at the command line, and never reaches the planner.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from cli_helpers import assert_one_line, run_main
from scaleright.errors import CatalogFileError, InputError
from scaleright.plan.scenario import load_scenario, parse_scenario


def _training(**training) -> dict:
    return {"model": "llama-3.1-8b", "task": "lora", "training": {"tokens": 1.0e8, **training}}


def _inference(**inference) -> dict:
    return {"model": "llama-3.1-8b", "task": "inference", "inference": {"requests_per_s": 2.0, **inference}}


def _error(data: dict) -> str:
    with pytest.raises(CatalogFileError) as info:
        parse_scenario(data, source="s.yaml")
    msg = str(info.value)
    assert "\n" not in msg, msg
    return msg


# ---- booleans are not numbers ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({**_training(), "constraints": {"max_gpus": True}}, "constraints.max_gpus"),
        (_training(epochs=True), "training.epochs"),
        (_training(global_batch=False), "training.global_batch"),
        (_inference(requests_per_s=True), "inference.requests_per_s"),
        ({**_training(), "pricing": {"pue": True}}, "pricing.pue"),
        ({**_training(), "pricing": {"price_usd_per_gpu_hour": {"h100-sxm": True}}},
         r"pricing.price_usd_per_gpu_hour.h100-sxm"),
    ],
)
def test_a_yaml_boolean_is_not_a_number(data, field):
    msg = _error(data)
    import re

    assert re.fullmatch(rf"s\.yaml: {re.escape(field)}: must be a number, not a boolean \(got (true|false)\)", msg), msg


def test_yes_in_a_scenario_file_is_refused_not_read_as_one(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("model: llama-3.1-8b\ntask: lora\ntraining: {tokens: 1.0e+8}\nconstraints: {max_gpus: yes}\n")
    with pytest.raises(CatalogFileError, match=r"s\.yaml: constraints\.max_gpus: must be a number, not a boolean"):
        load_scenario(p)


def test_an_int_for_a_float_field_is_fine():
    assert parse_scenario(_training(epochs=2, tokens=10**9)).training.total_tokens == 10**9


# ---- upper bounds, with their reason ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "pattern"),
    [
        (_training(global_batch=2**63),
         r"training\.global_batch: must be <= 16,777,216 \(2\*\*24 sequences per step.*\); got 9223372036854775808$"),
        ({**_training(), "constraints": {"max_gpus": 2**62}},
         r"constraints\.max_gpus: must be <= 1,048,576 \(2\*\*20; .*\); got 4611686018427387904$"),
        ({**_training(), "constraints": {"gpus_per_node": 10**5}}, r"constraints\.gpus_per_node: must be <= 65,536 "),
        (_training(seq_len=1e30), r"training\.seq_len: must be <= 16,777,216 .*got 1e\+30$"),
        (_training(tokens=10**400), r"training\.tokens: must be <= 1e\+17 .*got an integer of about 401 digits$"),
        (_training(tokens=-(10**400)), r"training\.tokens: must not be negative; got an integer of about 401 digits"),
        (_training(lora_rank=10**6), r"training\.lora_rank: must be <= 65,536"),
        (_inference(requests_per_s=1e308), r"inference\.requests_per_s: must be <= 10,000,000 .*got 1e\+308$"),
        (_inference(output_len=2**40), r"inference\.output_len: must be <= 16,777,216"),
        (_inference(ttft_slo_s=1e300), r"inference\.ttft_slo_s: must be <= 86,400 \(one day"),
        ({**_training(), "constraints": {"deadline_h": 1e300}}, r"constraints\.deadline_h: must be <= 10,000,000"),
        ({**_training(), "constraints": {"budget_usd": 1e308}}, r"constraints\.budget_usd: must be <= 1e\+15"),
        ({**_training(), "pricing": {"price_usd_per_gpu_hour": {"h100-sxm": 1e308}}},
         r"pricing\.price_usd_per_gpu_hour\.h100-sxm: must be <= 1,000,000 \(10\*\*6 US dollars per hour"),
        ({**_training(), "pricing": {"purchase_usd_per_gpu": {"h100-sxm": 1e308}}},
         r"pricing\.purchase_usd_per_gpu\.h100-sxm: must be <= 1e\+15"),
        ({**_training(), "pricing": {"horizon_months": 1e9}}, r"pricing\.horizon_months: must be <= 1,200 \(100 years"),
        ({**_training(), "pricing": {"depreciation_years": 1000}}, r"pricing\.depreciation_years: must be <= 100"),
        ({**_training(), "pricing": {"electricity_usd_per_kwh": 1e308}},
         r"pricing\.electricity_usd_per_kwh: must be <="),
        ({**_training(), "pricing": {"pue": 1e6}}, r"pricing\.pue: must be <= 10 "),
        ({**_training(), "pricing": {"grid_kg_co2e_per_kwh": 1e6}}, r"pricing\.grid_kg_co2e_per_kwh: must be <= 10 "),
        ({**_training(), "pricing": {"resale_fraction": 2}}, r"pricing\.resale_fraction: must be <= 1 \(a fraction"),
    ],
)
def test_every_count_size_rate_and_price_has_an_upper_bound_that_says_why(data, pattern):
    msg = _error(data)
    assert msg.startswith("s.yaml: "), msg
    import re

    assert re.search(pattern, msg), msg


def test_dataset_tokens_times_epochs_is_bounded_like_tokens():
    msg = _error({"model": "llama-3.1-8b", "task": "lora", "training": {"dataset_tokens": 1e16, "epochs": 1e3}})
    assert msg == ("s.yaml: training: training.dataset_tokens x training.epochs = 1e+19 tokens must be <= 1e+17 "
                   "(10**17 tokens; the largest published training runs use ~10**13)"), msg


def test_the_largest_allowed_scenario_still_plans_without_overflow():
    """Every bound at once is still a finite plan question (nothing in the planner overflows)."""
    from scaleright.plan.planner import plan

    scn = parse_scenario({
        "model": "llama-3.1-8b", "task": "pretrain",
        "training": {"tokens": 1e17, "seq_len": 2**24, "global_batch": 2**24},
        "constraints": {"max_gpus": 2**20, "gpus_per_node": 2**16, "gpu_types": ["h100-sxm"]},
    })  # fmt: skip
    plan(scn)  # no exception, no numpy overflow


# ---- names are plain, bounded text -------------------------------------------------------------------------


def test_a_scenario_name_is_stored_as_written_including_rich_markup():
    assert parse_scenario({**_training(), "name": "[/bold] 70B [red]run"}).name == "[/bold] 70B [red]run"


def test_a_scenario_name_is_bounded_and_has_no_control_characters():
    assert "name: must be at most 200 characters" in _error({**_training(), "name": "n" * 201})
    assert _error({**_training(), "name": "a\x1b[2Jb"}) == (
        "s.yaml: name: must not contain control characters (got '\\x1b')"
    )
    assert "name: must not contain control characters (got '\\n')" in _error({**_training(), "name": "a\nb"})


def test_a_model_path_is_bounded():
    assert "model: must be at most 4,096 characters" in _error({**_training(), "model": "/x" * 3000})


def test_an_empty_model_is_refused_in_the_scenario():
    assert _error({**_training(), "model": ""}) == "s.yaml: model: String should have at least 1 character"


def test_an_over_long_price_key_is_shortened_in_the_message():
    msg = _error({**_training(), "pricing": {"price_usd_per_gpu_hour": {"h" * 300: 1.0}}})
    assert msg.startswith("s.yaml: pricing.price_usd_per_gpu_hour.hhhhhhhhhhhhhhhhhhhh…hhhhhhhhhhhhhhhhhhhh (a key): "
                          "must be at most 200 characters"), msg
    assert len(msg) < 200


def test_gpu_types_entries_are_plain_names():
    assert "constraints.gpu_types.0: must be at most 200 characters" in _error(
        {**_training(), "constraints": {"gpu_types": ["h" * 300]}}
    )


# ---- the scenario path tells the truth -------------------------------------------------------------------------


def test_dev_null_is_a_device_not_a_missing_file():
    with pytest.raises(InputError, match=r"^scenario file '/dev/null': is a device, expected a regular file$"):
        load_scenario("/dev/null")


def test_a_fifo_is_a_fifo_and_is_never_opened(tmp_path):
    p = tmp_path / "s.yaml"
    os.mkfifo(p)  # opening it for reading would block forever
    with pytest.raises(InputError, match=r"s\.yaml': is a named pipe \(FIFO\), expected a regular file$"):
        load_scenario(p)


def test_a_symlink_loop_is_a_loop(tmp_path):
    p = tmp_path / "loop.yaml"
    p.symlink_to(p)
    with pytest.raises(InputError, match=r"loop\.yaml': too many levels of symbolic links \(a symlink loop\)$"):
        load_scenario(p)


def test_a_broken_link_is_a_broken_link(tmp_path):
    p = tmp_path / "s.yaml"
    p.symlink_to(tmp_path / "gone.yaml")
    with pytest.raises(InputError, match=r"s\.yaml': broken symbolic link"):
        load_scenario(p)


def test_a_path_too_long_is_one_line_not_an_oserror(tmp_path):
    with pytest.raises(InputError, match=r"^scenario file '.*….*': file name too long$"):
        load_scenario(tmp_path / ("s" * 300 + ".yaml"))


def test_deep_nesting_and_huge_integer_literals_are_one_line(tmp_path):
    deep = tmp_path / "deep.yaml"
    deep.write_text("model: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(CatalogFileError, match=r"deep\.yaml: nested deeper than 64 levels"):
        load_scenario(deep)
    big = tmp_path / "big.yaml"
    big.write_text("model: llama-3.1-8b\ntask: lora\ntraining:\n  tokens: " + "9" * 5000 + "\n")
    with pytest.raises(CatalogFileError, match=r"big\.yaml: an integer literal has more than \d+ digits"):
        load_scenario(big)


def test_a_duplicate_key_in_a_scenario_is_refused(tmp_path):
    p = tmp_path / "dup.yaml"
    p.write_text("model: llama-3.1-8b\ntask: lora\ntraining: {tokens: 1.0e+8}\ntask: pretrain\n")
    with pytest.raises(CatalogFileError, match=r"dup\.yaml: not valid YAML \(line 4: key 'task' given twice"):
        load_scenario(p)


# ---- at the command line ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("constraints: {max_gpus: yes}\n", r"constraints\.max_gpus: must be a number, not a boolean"),
        ("constraints: {max_gpus: 4611686018427387904}\n", r"constraints\.max_gpus: must be <= 1,048,576"),
        ("training: {tokens: 1.0e+8, global_batch: 9223372036854775808}\n", r"training\.global_batch: must be <="),
    ],
)
def test_plan_with_an_out_of_bounds_field_is_one_line_and_exit_2(text, pattern, tmp_path, monkeypatch, capsys):
    p = tmp_path / "s.yaml"
    base = "model: llama-3.1-8b\ntask: lora\n"
    p.write_text(base + (text if text.startswith("training") else "training: {tokens: 1.0e+8}\n" + text))
    assert_one_line(*run_main(["plan", str(p)], monkeypatch, capsys), r"^error: .*s\.yaml: " + pattern)


def test_plan_rate_of_1e308_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    p = tmp_path / "s.yaml"
    p.write_text("model: llama-3.1-8b\ntask: inference\ninference: {requests_per_s: 1.0e+308}\n")
    code, out, err = run_main(["plan", str(p)], monkeypatch, capsys)
    assert_one_line(code, out, err, r"inference\.requests_per_s: must be <= 10,000,000")


def test_plan_dev_null_and_a_long_path_through_the_real_entry_point(tmp_path):
    for arg, pattern in (("/dev/null", "is a device"), (str(tmp_path / ("s" * 300)), "file name too long")):
        r = subprocess.run([sys.executable, "-m", "scaleright", "plan", arg], capture_output=True, text=True,
                           check=False, timeout=120)  # fmt: skip
        assert r.returncode == 2, r.stderr
        assert r.stdout == ""
        assert len(r.stderr.splitlines()) == 1 and pattern in r.stderr and "Traceback" not in r.stderr, r.stderr
