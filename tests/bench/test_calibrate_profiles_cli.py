"""``scaleright calibrate list|show|delete`` (issue #12 item 6): the saved profiles, one of them, and deleting one.
Delete removes only a profile file ``scaleright calibrate`` wrote (in the calibration directory, a regular file that
loads with provenance); anything else, and an unknown name, is one line and exit 2 with every file left as it was.
``calibrate`` with the fit options alone still fits (its other tests: ``test_calibrate*.py``)."""

from __future__ import annotations

import json

import pytest

from cli_helpers import assert_one_line, file_state, run_main, sample_provenance
from scaleright.estimate.calibration import DEFAULT_CALIBRATION, save_calibration


def _provenance() -> dict:
    p = sample_provenance()
    p["error"]["cross_validated"]["median_abs_pct"] = 4.25
    return p


@pytest.fixture
def cal_dir(tmp_path, monkeypatch):
    d = tmp_path / "cals"
    monkeypatch.setenv("SCALERIGHT_CALIBRATION_DIR", str(d))
    return d


@pytest.fixture
def fitted(cal_dir):
    """A profile as ``scaleright calibrate`` saves it."""
    return save_calibration("mine", DEFAULT_CALIBRATION.replace(gemm_efficiency=0.5), provenance=_provenance())


def test_list_shows_each_profile_and_one_that_does_not_load(cal_dir, fitted, monkeypatch, capsys):
    (cal_dir / "broken.json").write_text("{not json")
    code, out, err = run_main(["calibrate", "list", "--json"], monkeypatch, capsys)
    assert code == 0, err
    data = json.loads(out)
    assert data["directory"] == str(cal_dir)
    by_name = {p["name"]: p for p in data["profiles"]}
    assert set(by_name) == {"mine", "broken"}
    assert by_name["mine"]["ok"] and by_name["mine"]["provenance"]["runs"] == 2
    assert by_name["mine"]["provenance"]["cross_validated_median_abs_pct"] == 4.25
    assert not by_name["broken"]["ok"] and "broken.json" in by_name["broken"]["error"]
    code, out, err = run_main(["calibrate", "list"], monkeypatch, capsys)
    assert code == 0 and "mine" in out and "4.2" in out and "does not load" in out, out


def test_list_of_an_empty_directory_says_where_it_looked(cal_dir, monkeypatch, capsys):
    code, out, _ = run_main(["calibrate", "list"], monkeypatch, capsys)
    assert code == 0 and "no calibration profiles" in out and str(cal_dir) in out.replace("\n", "")


def test_show_gives_the_parameters_against_the_defaults(fitted, monkeypatch, capsys):
    code, out, err = run_main(["calibrate", "show", "mine", "--json"], monkeypatch, capsys)
    assert code == 0, err
    data = json.loads(out)
    assert data["parameters"]["gemm_efficiency"] == 0.5  # what was saved above
    assert data["defaults"]["gemm_efficiency"] == DEFAULT_CALIBRATION.gemm_efficiency
    assert data["provenance"]["runs"] == [1, 2]


def test_show_of_an_unknown_name_is_one_line(cal_dir, fitted, monkeypatch, capsys):
    assert_one_line(*run_main(["calibrate", "show", "nope"], monkeypatch, capsys), r"'nope' not found; known: mine")


def test_delete_removes_the_profile_and_says_which_file(fitted, monkeypatch, capsys):
    code, out, err = run_main(["calibrate", "delete", "mine"], monkeypatch, capsys)
    assert code == 0, err
    assert not fitted.exists()
    assert str(fitted) in out.replace("\n", "")


@pytest.mark.parametrize("name, pattern", [
    ("nope", r"^error: NAME=nope: no calibration profile of that name in .*; known: mine$"),
    ("../mine", r"^error: NAME='\.\./mine': a profile name is"),
    ("default", r"'default' names the built-in calibration"),
])  # fmt: skip
def test_delete_refuses_an_unknown_or_unsafe_name(fitted, monkeypatch, capsys, name, pattern):
    before = file_state(fitted)
    assert_one_line(*run_main(["calibrate", "delete", name], monkeypatch, capsys), pattern)
    assert file_state(fitted) == before


def test_delete_refuses_a_file_calibrate_did_not_write(cal_dir, monkeypatch, capsys):
    cal_dir.mkdir()
    hand = cal_dir / "hand.json"
    hand.write_text(json.dumps({"gemm_efficiency": 0.5}))  # loads, but has no provenance
    other = cal_dir / "notes.json"
    other.write_text("my notes")
    for name, f in (("hand", hand), ("notes", other)):
        before = file_state(f)
        assert_one_line(*run_main(["calibrate", "delete", name], monkeypatch, capsys),
                        rf"{name}.json is not a profile scaleright calibrate wrote .*; not deleted$")
        assert file_state(f) == before


def test_delete_refuses_a_link_and_leaves_its_target(cal_dir, fitted, tmp_path, monkeypatch, capsys):
    elsewhere = tmp_path / "precious.json"
    elsewhere.write_bytes(fitted.read_bytes())  # a valid profile, outside the directory
    (cal_dir / "link.json").symlink_to(elsewhere)
    assert_one_line(*run_main(["calibrate", "delete", "link"], monkeypatch, capsys), r"is not a regular file")
    assert elsewhere.exists() and (cal_dir / "link.json").is_symlink()


def test_fit_options_with_a_subcommand_are_refused(fitted, monkeypatch, capsys):
    assert_one_line(*run_main(["calibrate", "--gpu", "h100-sxm", "list"], monkeypatch, capsys),
                    r"--gpu: a fit option; not with 'calibrate list'")


@pytest.mark.parametrize("args, flag", [(["--json", "list"], "--json"),
                                        (["--run-ids", "3", "show", "mine"], "--run-ids"),
                                        (["--serving", "delete", "mine"], "--serving")])  # fmt: skip
def test_each_fit_option_before_a_subcommand_is_refused_by_its_flag(fitted, monkeypatch, capsys, args, flag):
    sub = next(a for a in args if a in ("list", "show", "delete"))
    assert_one_line(*run_main(["calibrate", *args], monkeypatch, capsys),
                    rf"^error: {flag}: a fit option; not with 'calibrate {sub}'")
    assert fitted.exists()


def test_calibrate_alone_still_asks_for_the_fit_options(cal_dir, monkeypatch, capsys):
    assert_one_line(*run_main(["calibrate"], monkeypatch, capsys), r"--name is required for train runs")
