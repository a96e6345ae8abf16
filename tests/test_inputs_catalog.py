"""User catalog directories and calibration profiles that are not what they claim (issue #8): catalog files that are
directories or broken links, misnamed files that would be ignored, an empty ``--catalog``, impossible or future
price dates, over-long CSV fields, prices past every bound, a model entry whose family disagrees with its config,
deep nesting and huge integers in catalog and calibration files. Each is one line naming the file and the field.
"""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path

import pytest

from cli_helpers import assert_one_line, run_main
from scaleright.catalog import Catalog
from scaleright.errors import CatalogFileError, InputError
from scaleright.estimate.calibration import load_calibration

HEADER = "gpu_id,kind,usd,usd_low,usd_high,unit,provider,sku,date,source,notes\n"


def _prices(d: Path, *rows: str) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "prices.csv").write_text(HEADER + "".join(r + "\n" for r in rows))
    return d


def _row(usd="2.5", unit="usd_per_gpu_hour", date="2026-01-15", kind="on-demand", notes="") -> str:
    return f"h100-sxm,{kind},{usd},,,{unit},p,,{date},src,{notes}"


def _load_error(d: Path) -> str:
    with pytest.raises(CatalogFileError) as info:
        Catalog.load(d)
    msg = str(info.value)
    assert "\n" not in msg, msg
    return msg


# ---- the directory and its files ---------------------------------------------------------------------------------


def test_a_catalog_file_that_is_a_directory_is_an_error_not_skipped(tmp_path):
    (tmp_path / "gpus.yaml").mkdir()
    assert _load_error(tmp_path).endswith("gpus.yaml: is a directory, expected a file")


def test_a_catalog_file_that_is_a_broken_link_is_an_error_not_skipped(tmp_path):
    (tmp_path / "prices.csv").symlink_to(tmp_path / "gone.csv")
    assert _load_error(tmp_path).endswith("prices.csv: broken symbolic link (its target does not exist)")


@pytest.mark.parametrize(
    ("name", "right"),
    [("gpu.yaml", "gpus.yaml"), ("gpus.yml", "gpus.yaml"), ("price.csv", "prices.csv"), ("model.yaml", "models.yaml"),
     ("Prices.csv", "prices.csv"), ("prices.tsv", "prices.csv"), ("gpus.yaml.txt", "gpus.yaml"),
     ("modles.yaml", "models.yaml")],
)  # fmt: skip
def test_a_misnamed_catalog_file_is_refused_with_the_right_name(tmp_path, name, right):
    (tmp_path / name).write_text("")
    msg = _load_error(tmp_path)
    assert f"{name}: not a catalog file name; did you mean {right}?" in msg, msg


def test_unrelated_files_in_a_catalog_directory_are_fine(tmp_path):
    for name in ("README.md", "notes.txt", ".hidden.yaml", "inventory.yaml", "my-gpus.yaml", "prices-2024.csv"):
        (tmp_path / name).write_text("x")
    assert Catalog.load(tmp_path).gpu("h100-sxm").id == "h100-sxm"


def test_an_empty_catalog_path_is_refused_not_read_as_the_working_directory():
    with pytest.raises(InputError,
                       match=r"^catalog directory: empty path; give a directory \(--catalog DIR\), or none$"):
        Catalog.load("")


def test_a_missing_catalog_directory_says_where_it_was_set(tmp_path, monkeypatch):
    assert _load_error(tmp_path / "nope").endswith("nope: catalog directory not found (given as argument)")
    monkeypatch.setenv("SCALERIGHT_CATALOG", str(tmp_path / "gone"))
    assert _load_error(None).endswith("gone: catalog directory not found (from $SCALERIGHT_CATALOG)")


@pytest.mark.parametrize("kind", ["file", "loop", "missing", "long"])
def test_a_catalog_path_that_is_not_a_directory_says_what_it_is(tmp_path, kind):
    p = tmp_path / "c"
    if kind == "file":
        p.write_text("")
    elif kind == "loop":
        p.symlink_to(p)
    elif kind == "long":
        p = tmp_path / ("c" * 300)
    why = {"file": "not a directory", "loop": "too many levels of symbolic links",
           "missing": "catalog directory not found", "long": "file name too long"}[kind]  # fmt: skip
    assert why in _load_error(p)


def test_cli_catalog_path_problems_are_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert_one_line(*run_main(["catalog", "gpus", "--catalog", str(loop)], monkeypatch, capsys), r"symlink loop")
    assert_one_line(*run_main(["catalog", "gpus", "--catalog", "c" * 300], monkeypatch, capsys), r"file name too long")
    (tmp_path / "gpu.yaml").write_text("")
    code, out, err = run_main(["catalog", "gpus", "--catalog", str(tmp_path)], monkeypatch, capsys)
    assert_one_line(code, out, err, r"did you mean gpus\.yaml")


# ---- prices --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("date", "pattern"),
    [
        ("9999-99-99", r"'9999-99-99' is not a calendar date \(month must be in 1\.\.12\)"),
        ("2026-02-30", r"'2026-02-30' is not a calendar date \(day is out of range for month\)"),
        ("2026-13", r"'2026-13' is not a calendar date"),
        ("1980", r"'1980' is before 1999, when the first GPU shipped"),
        ("2999-01-01", r"'2999-01-01' is in the future \(today is \d{4}-\d\d-\d\d\)"),
        ("2999", r"'2999' is in the future"),
    ],
)
def test_a_price_date_must_be_a_real_date_and_not_in_the_future(tmp_path, date, pattern):
    import re

    msg = _load_error(_prices(tmp_path, _row(date=date)))
    assert re.search(r"prices\.csv: row 2\.date: " + pattern, msg), msg


def test_today_and_a_bare_current_year_are_fine(tmp_path):
    today = datetime.datetime.now(datetime.UTC).date()
    d = _prices(tmp_path, _row(date=today.isoformat()), _row(date=str(today.year), kind="spot"))
    assert Catalog.load(d).prices


def test_an_impossible_date_no_longer_wins_as_the_newest_price(tmp_path):
    _load_error(_prices(tmp_path, _row(usd="1.0", date="2026-01-01"), _row(usd="99.0", date="9999-99-99")))


@pytest.mark.parametrize(
    ("row", "pattern"),
    [
        (_row(usd="1e308"), r"row 2\.usd: must be <= 1e\+15 \(10\*\*15 US dollars.*\); got 1e\+308$"),
        (_row(usd="5e6"), r"row 2: usd must be <= 1,000,000 for unit usd_per_gpu_hour \(10\*\*6 US dollars per hour"),
        (_row(usd="1e308", unit="usd_per_gpu", kind="purchase"), r"row 2\.usd: must be <= 1e\+15"),
        ("h100-sxm,spot,,0.1,1e300,usd_per_gpu_hour,p,,2026-01-01,src,", r"row 2\.usd_high: must be <= 1e\+15"),
        (_row(usd="inf"), r"row 2\.usd: Input should be a finite number \(got 'inf'\)$"),
    ],
)
def test_a_price_is_finite_and_bounded_naming_the_column(tmp_path, row, pattern):
    import re

    msg = _load_error(_prices(tmp_path, row))
    assert re.search(r"prices\.csv: " + pattern, msg), msg


def test_a_csv_field_over_the_limit_is_one_line_with_its_line_number(tmp_path):
    d = _prices(tmp_path, _row(), _row(kind="spot", notes="n" * 140_000))
    assert _load_error(d).endswith("prices.csv: line 3: a field is longer than 131,072 characters")


def test_cli_price_of_1e308_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    d = _prices(tmp_path, _row(usd="1e308"))
    code, out, err = run_main(["catalog", "prices", "--catalog", str(d)], monkeypatch, capsys)
    assert_one_line(code, out, err, r"row 2\.usd: must be <= 1e\+15")


# ---- gpus.yaml and models.yaml -------------------------------------------------------------------------------------


def _gpu_yaml(**changes) -> str:
    base = {
        "id": "my-gpu", "name": "My GPU", "vendor": "me", "architecture": "x", "memory_gb": 80, "memory_type": "HBM",
        "hbm_bandwidth_tb_per_s": 3,
        "dense_tflops": {p: 100 for p in ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")},
        "intra_node_link": "nvlink", "intra_node_gb_per_s_per_gpu": 450, "gpus_per_node": 8, "nic_gbps_per_gpu": 400,
        "form_factor": "sxm", "source": "test",
    }  # fmt: skip
    return json.dumps([{**base, **changes}])  # JSON is YAML


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        ({"memory_gb": 1e308}, r"my-gpu\.memory_gb: must be <= 1,000,000 \(10\*\*6 GB"),
        ({"gpus_per_node": 2**40}, r"my-gpu\.gpus_per_node: must be <= 65,536"),
        ({"gpus_per_node": True}, r"my-gpu\.gpus_per_node: must be a number, not a boolean"),
        ({"nic_gbps_per_gpu": 1e300}, r"my-gpu\.nic_gbps_per_gpu: must be <= 10,000,000"),
    ],
)
def test_a_user_gpu_is_bounded(tmp_path, change, pattern):
    import re

    (tmp_path / "gpus.yaml").write_text(_gpu_yaml(**change))
    msg = _load_error(tmp_path)
    assert re.search(r"gpus\.yaml: " + pattern, msg), msg


def test_deep_nesting_and_a_duplicate_key_in_gpus_yaml_are_one_line(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "gpus.yaml").write_text("[" * 5000 + "]" * 5000)
    assert _load_error(tmp_path / "a").endswith("gpus.yaml: nested deeper than 64 levels")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "gpus.yaml").write_text("- id: x\n  id: y\n")
    assert "gpus.yaml: not valid YAML (line 2: key 'id' given twice" in _load_error(tmp_path / "b")


def _user_model(d: Path, family: str, model_type: str) -> Path:
    (d / "models").mkdir(parents=True)
    (d / "models.yaml").write_text(
        f"- name: my-model\n  family: {family}\n  file: my.json\n  source: test\n  fidelity: constructed\n"
        "  published_params_source: not read\n"
    )
    (d / "models" / "my.json").write_text(json.dumps({
        "model_type": model_type, "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
        "intermediate_size": 128, "vocab_size": 100,
    }))  # fmt: skip
    return d


def test_a_model_family_that_disagrees_with_model_type_is_an_error(tmp_path):
    msg = _load_error(_user_model(tmp_path, "mistral", "llama"))
    assert msg.endswith("models.yaml: my-model.family: 'mistral' disagrees with model_type 'llama' in models/my.json")


def test_a_family_matching_an_aliased_model_type_is_fine(tmp_path):
    cat = Catalog.load(_user_model(tmp_path, "falcon", "RefinedWebModel"))
    assert cat.model_entry("my-model").family == "falcon"


def test_a_published_parameter_count_is_bounded_and_not_a_boolean(tmp_path):
    d = _user_model(tmp_path, "llama", "llama")
    text = (d / "models.yaml").read_text()
    (d / "models.yaml").write_text(text + "  published_params_total_b: 1.0e+308\n")
    assert "my-model.published_params_total_b: must be <= 1,000,000,000 (10**18 parameters" in _load_error(d)
    (d / "models.yaml").write_text(text + "  published_params_total_b: yes\n")
    assert "my-model.published_params_total_b: must be a number, not a boolean (got true)" in _load_error(d)


def test_a_model_config_with_a_huge_integer_literal_is_one_line(tmp_path):
    d = _user_model(tmp_path, "llama", "llama")
    (d / "models" / "my.json").write_text('{"model_type": "llama", "hidden_size": ' + "1" * 5000 + "}")
    assert "my.json: an integer literal has more than" in _load_error(d)


# ---- calibration profiles ------------------------------------------------------------------------------------------


def test_a_calibration_with_a_huge_integer_is_one_line(tmp_path):
    p = tmp_path / "cal.json"
    p.write_text('{"parameters": {"gemm_efficiency": 1' + "0" * 400 + "}}")
    with pytest.raises(CatalogFileError, match=r"cal\.json: calibration gemm_efficiency must be a finite number, got "
                                               r"an integer of about 401 digits$"):  # fmt: skip
        load_calibration(str(p))


def test_a_calibration_with_a_boolean_or_a_string_is_one_line(tmp_path):
    p = tmp_path / "cal.json"
    p.write_text('{"gemm_efficiency": true}')
    with pytest.raises(CatalogFileError, match=r"calibration gemm_efficiency must be a number, got True$"):
        load_calibration(str(p))


def test_a_deeply_nested_or_over_long_calibration_is_one_line(tmp_path):
    p = tmp_path / "cal.json"
    p.write_text("[" * 10000 + "]" * 10000)
    with pytest.raises(CatalogFileError, match=r"cal\.json: nested deeper than 64 levels$"):
        load_calibration(str(p))
    p.write_text('{"gemm_efficiency": ' + "9" * 5000 + "}")
    with pytest.raises(CatalogFileError, match=r"cal\.json: an integer literal has more than \d+ digits$"):
        load_calibration(str(p))


def test_a_calibration_directory_that_is_a_file_says_so(tmp_path):
    f = tmp_path / "cals"
    f.write_text("")
    with pytest.raises(InputError, match=r"calibration directory '.*cals' \(given\): not a directory$"):
        load_calibration("mine", directory=f)


def test_a_calibration_directory_from_the_environment_that_is_a_file_says_so(tmp_path, monkeypatch, capsys):
    f = tmp_path / "cals"
    f.write_text("")
    monkeypatch.setenv("SCALERIGHT_CALIBRATION_DIR", str(f))
    args = ["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "8", "--calibration", "mine"]
    assert_one_line(*run_main(args, monkeypatch, capsys),
              r"calibration directory '.*cals' \(from \$SCALERIGHT_CALIBRATION_DIR\): not a directory$")


def test_a_calibration_path_that_is_not_a_file_says_what_it_is(tmp_path):
    fifo = tmp_path / "cal.json"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match=r"cal\.json': is a named pipe \(FIFO\), expected a regular file$"):
        load_calibration(str(fifo))
    with pytest.raises(InputError, match=r"^calibration '/dev/null': is a device, expected a regular file$"):
        load_calibration("/dev/null")
    with pytest.raises(InputError, match=r"': is a directory, expected a file$"):
        load_calibration(str(tmp_path))
    with pytest.raises(InputError, match=r"file name too long$"):
        load_calibration(str(tmp_path / ("c" * 300 + ".json")))


def test_a_missing_named_calibration_still_lists_the_known_ones(tmp_path):
    (tmp_path / "mine.json").write_text("{}")
    with pytest.raises(InputError, match=r"calibration 'nope' not found; known: mine \(in "):
        load_calibration("nope", directory=tmp_path)
    assert load_calibration("mine", directory=tmp_path) == load_calibration(None)


def test_cli_calibration_problems_are_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    p = tmp_path / "cal.json"
    p.write_text('{"gemm_efficiency": 1' + "0" * 400 + "}")
    args = ["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "8", "--calibration"]
    assert_one_line(*run_main([*args, str(p)], monkeypatch, capsys), r"gemm_efficiency must be a finite number")
    assert_one_line(*run_main([*args, "/dev/null"], monkeypatch, capsys), r"is a device")


def test_the_future_check_is_for_user_files_and_uses_the_given_day():
    """Built-in rows never depend on the machine's clock; a user's row is checked against the day it is loaded."""
    from pydantic import ValidationError

    from scaleright.catalog.prices import PriceRow

    row = {"gpu_id": "h100-sxm", "kind": "spot", "usd": 1, "unit": "usd_per_gpu_hour", "source": "s", "date": "2026-03"}
    assert PriceRow.model_validate(row).date == "2026-03"
    assert PriceRow.model_validate(row, context={"today": datetime.date(2026, 3, 1)}).date == "2026-03"
    with pytest.raises(ValidationError, match=r"'2026-03' is in the future \(today is 2026-02-27\)"):
        PriceRow.model_validate(row, context={"today": datetime.date(2026, 2, 27)})


def test_a_calibration_built_with_a_huge_integer_is_an_input_error_not_an_overflow():
    from scaleright.estimate.calibration import Calibration

    with pytest.raises(InputError, match=r"^calibration gemm_efficiency=an integer of about 401 digits "
                                         r"must be a finite non-negative number$"):
        Calibration(gemm_efficiency=10**400)
