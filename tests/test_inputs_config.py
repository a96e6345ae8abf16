"""Model configs (``config.json``) and ``--model`` paths that are not what they claim (issue #8): a ``model_type``
that is not a string, contradictory synonym keys, a width the heads do not divide, dimensions past their bound,
deep nesting and huge integer literals, and ``--model`` paths that are directories, FIFOs, loops or too long.
Each is one line naming the file and the field, exit 2 at the command line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cli_helpers import assert_one_line, run_main
from scaleright.catalog import Catalog, load_model_config
from scaleright.errors import CatalogFileError
from scaleright.workload import load_model
from scaleright.workload.spec import from_hf_config

LLAMA = {
    "model_type": "llama", "hidden_size": 512, "num_attention_heads": 8, "num_key_value_heads": 8,
    "num_hidden_layers": 4, "intermediate_size": 1376, "vocab_size": 1000,
}  # fmt: skip
GPT2 = {"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 2, "vocab_size": 50257}


def _error(cfg: dict) -> str:
    with pytest.raises(CatalogFileError) as info:
        from_hf_config(cfg, source="c.json")
    msg = str(info.value)
    assert "\n" not in msg, msg
    return msg


# ---- model_type ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "shown"), [(["llama"], r"a list \(\['llama'\]\)"), ({"a": 1}, r"a dict"),
                                              (7, r"a number \(7\)"), (True, r"a boolean \(True\)")])  # fmt: skip
def test_model_type_must_be_a_string(value, shown):
    msg = _error({**LLAMA, "model_type": value})
    assert msg.startswith("c.json: field 'model_type' must be a string, one of llama, "), msg
    import re

    assert re.search(r"; got " + shown, msg), msg


# ---- contradictory synonyms ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "pattern"),
    [
        ({"hidden_size": 1024}, r"hidden_size=1024 and n_embd=768 name the same quantity with different values"),
        ({"num_hidden_layers": 12}, r"num_hidden_layers=12 and n_layer=2 name the same quantity"),
        ({"num_attention_heads": 16}, r"num_attention_heads=16 and n_head=12 name the same quantity"),
    ],
)
def test_synonym_keys_with_different_values_are_an_error_naming_both(extra, pattern):
    assert pattern in _error({**GPT2, **extra}).replace("\\", "")


def test_synonym_keys_that_agree_are_fine():
    assert from_hf_config({**GPT2, "hidden_size": 768, "num_hidden_layers": 2}).hidden == 768


def test_a_synonym_the_family_does_not_read_still_may_not_contradict():
    msg = _error({**LLAMA, "n_embd": 4096})
    assert "hidden_size=512 and n_embd=4096 name the same quantity" in msg, msg


# ---- divisibility ---------------------------------------------------------------------------------------------


def test_hidden_not_divisible_by_heads_is_an_error_with_the_operands():
    assert _error({**LLAMA, "hidden_size": 500}) == (
        "c.json: hidden_size=500 is not divisible by num_attention_heads=8 (500 / 8 = 62.5); give head_dim "
        "explicitly, or a width that is a multiple of the heads"
    )
    assert "n_embd=770 is not divisible by n_head=12" in _error({**GPT2, "n_embd": 770})


def test_an_explicit_head_dim_allows_any_width():
    assert from_hf_config({**LLAMA, "hidden_size": 500, "head_dim": 64}).head_dim == 64


# ---- bounds ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "pattern"),
    [
        ("num_hidden_layers", 2**21,
         r"'num_hidden_layers' must be an integer from 1 to 1,048,576, got 2097152 \(2\*\*20 blocks"),
        ("vocab_size", 2**27, r"'vocab_size' must be an integer from 1 to 67,108,864, got 134217728 \(2\*\*26 tokens"),
        ("hidden_size", 10**60, r"'hidden_size' must be an integer from 1 to 10,000,000, got an integer of 61 digits"),
        ("num_key_value_heads", True, r"'num_key_value_heads' must be an integer from 1 to 10,000,000, got True$"),
        ("max_position_embeddings", 10**12, r"'max_position_embeddings' must be an integer from 0 to 1,000,000,000"),
    ],
)  # fmt: skip
def test_every_dimension_is_a_bounded_positive_integer_and_not_a_boolean(field, value, pattern):
    import re

    msg = _error({**LLAMA, field: value})
    assert re.search(pattern, msg), msg


def test_a_bounded_default_says_it_was_not_given():
    msg = _error({**GPT2, "n_embd": 3_000_000, "n_head": 1})
    assert "field 'n_inner' (not given, so its default) must be an integer from 1 to 10,000,000" in msg, msg


def test_experts_are_bounded():
    cfg = {**LLAMA, "model_type": "mixtral", "num_local_experts": 10**6, "num_experts_per_tok": 2}
    assert "'num_local_experts' must be an integer from 1 to 65,536, got 1000000 (2**16 experts" in _error(cfg)


# ---- the file itself --------------------------------------------------------------------------------------------


def test_deeply_nested_config_json_is_one_line(tmp_path):
    p = tmp_path / "config.json"
    p.write_text('{"model_type": "llama", "x": ' + "[" * 10000 + "]" * 10000 + "}")
    with pytest.raises(CatalogFileError, match=r"config\.json: nested deeper than 64 levels$"):
        load_model_config(p)


def test_an_integer_literal_of_5000_digits_is_one_line(tmp_path):
    p = tmp_path / "config.json"
    p.write_text('{"model_type": "llama", "hidden_size": ' + "9" * 5000 + "}")
    with pytest.raises(CatalogFileError, match=r"config\.json: an integer literal has more than \d+ digits$"):
        load_model_config(p)


def test_nan_in_a_config_is_refused(tmp_path):
    p = tmp_path / "config.json"
    p.write_text('{"model_type": "llama", "attention_dropout": NaN}')
    with pytest.raises(CatalogFileError, match=r"config\.json: line 1: NaN is not a JSON number$"):
        load_model_config(p)


# ---- --model paths ------------------------------------------------------------------------------------------------


def test_a_directory_without_config_json_is_a_directory_not_an_unknown_model(tmp_path):
    with pytest.raises(CatalogFileError,
                       match=r"is a directory, expected a config\.json file or a directory containing one$"):
        load_model(str(tmp_path))


def test_a_directory_named_like_a_catalog_model_does_not_hide_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gpt2").mkdir()
    assert load_model("gpt2").family == "gpt2"


def test_a_fifo_a_loop_a_device_and_a_long_path_are_named_truthfully(tmp_path):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    cases = [
        (str(fifo), r"is a named pipe \(FIFO\), expected a regular file$"),
        (str(tmp_path), r"config\.json': is a named pipe \(FIFO\)"),  # a directory whose config.json is a FIFO
        (str(loop), r"too many levels of symbolic links \(a symlink loop\)$"),
        ("/dev/null", r"^model '/dev/null': is a device, expected a regular file$"),
        (str(tmp_path / ("m" * 300)), r"file name too long$"),
        ("m" * 300, r"file name too long$"),
    ]
    for arg, pattern in cases:
        with pytest.raises(CatalogFileError, match=pattern):
            load_model(arg)


def test_a_broken_link_named_config_json_is_a_broken_link(tmp_path):
    (tmp_path / "config.json").symlink_to(tmp_path / "gone.json")
    with pytest.raises(CatalogFileError, match=r"broken symbolic link"):
        load_model(str(tmp_path))


def test_an_empty_model_name_is_refused():
    from scaleright.errors import InputError

    with pytest.raises(InputError, match=r"^model: empty name; give a catalog model name or a path to a config\.json$"):
        load_model("")


def test_cli_model_path_problems_are_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    base = ["estimate", "memory", "--task", "inference", "--gpu", "h100-sxm", "--model"]
    assert_one_line(*run_main([*base, str(tmp_path)], monkeypatch, capsys), r"is a directory, expected a config\.json")
    assert_one_line(*run_main([*base, "x" * 300], monkeypatch, capsys), r"file name too long")
    bad = tmp_path / "c.json"
    bad.write_text(json.dumps({**LLAMA, "model_type": ["llama"]}))
    assert_one_line(*run_main([*base, str(bad)], monkeypatch, capsys), r"field 'model_type' must be a string")


def test_cli_long_model_path_through_the_real_entry_point():
    r = subprocess.run([sys.executable, "-m", "scaleright", "estimate", "memory", "--task", "inference", "--gpu",
                        "h100-sxm", "--model", "/tmp/" + "x" * 300], capture_output=True, text=True, timeout=120,
                       check=False)  # fmt: skip
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.splitlines()) == 1 and "file name too long" in r.stderr


# ---- the catalog's own entries ----------------------------------------------------------------------------------


def test_every_builtin_entry_family_matches_its_config():
    cat = Catalog.load()
    for name, entry in cat.models.items():
        mt = cat.model_configs[name]["model_type"]
        assert entry.family == from_hf_config(dict(cat.model_configs[name])).family or entry.family == mt, name


# ---- the issue-9 families' own fields ----------------------------------------------------------------------------


def test_a_llama4_text_config_of_another_model_type_is_refused():
    cfg = {"model_type": "llama4", "text_config": {"model_type": "llama", "hidden_size": 64}}
    msg = _error(cfg)
    assert "c.json: field 'text_config.model_type' must be 'llama4_text'" in msg and "'llama'" in msg


def test_a_llama4_config_without_its_text_model_is_refused():
    assert "model_type 'llama4' needs a 'text_config' object" in _error({"model_type": "llama4", "text_config": 3})
