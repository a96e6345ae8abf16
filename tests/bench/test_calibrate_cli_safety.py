"""`scaleright calibrate` and `compare` never lose or alter a user's file (issue #8 items 2, 3 and 4).

The profile name is checked before the fit, an existing profile is kept unless --force, a calibration directory
that is a file is one line, profiles are written atomically, and the run database is only read.
"""

from __future__ import annotations

import json
import os
import sqlite3

import pytest

from cli_helpers import file_state, one_error_line
from scaleright.bench import RunStore
from scaleright.errors import InputError
from scaleright.estimate.calibration import DEFAULT_CALIBRATION, load_calibration, save_calibration

RULE = ("a profile name is 1 to 100 letters, digits, '-' or '_', starting with a letter or digit (it is saved as "
        "<calibration dir>/<name>.json)")


@pytest.fixture
def cal_dir(tmp_path, monkeypatch, cpu_catalog):
    """The calibration directory (not created), and the user catalog describing the runs' CPU (``test-cpu``)."""
    d = tmp_path / "cals"
    monkeypatch.setenv("SCALERIGHT_CALIBRATION_DIR", str(d))
    monkeypatch.setenv("SCALERIGHT_CATALOG", str(cpu_catalog))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    return d


@pytest.fixture
def db(tmp_path, make_run):
    path = tmp_path / "runs.sqlite"
    store = RunStore(path)
    store.add(**make_run(0, world_size=1))
    store.add(**make_run(1, world_size=2, tokens_per_s=1800.0))
    return path


@pytest.fixture
def no_fit(monkeypatch):
    """Fail the test if the fit starts: refusals must come before it."""

    def fit(*args, **kwargs):
        pytest.fail("the fit ran before the input was refused")

    monkeypatch.setattr("scaleright.bench.calibrate.fit_calibration", fit)


@pytest.mark.parametrize("name, message", [
    ("../escape", f"--name='../escape': {RULE}"),
    ("a/b", f"--name='a/b': {RULE}"),
    ("v1.2", f"--name='v1.2': {RULE}"),  # --calibration v1.2 would be read as a file path: never loadable by name
    ("-x", f"--name='-x': {RULE}"),
    ("", f"--name='': {RULE}"),
    ("a b", f"--name='a b': {RULE}"),
    ("x" * 101, f"--name: 101 characters is too long; {RULE}"),
    ("x" * 300, f"--name: 300 characters is too long; {RULE}"),
    ("default", "--name='default': 'default' names the built-in calibration; choose another name"),
], ids=["dotdot", "slash", "dot", "dash-first", "empty", "space", "101", "300", "default"])
def test_a_bad_profile_name_is_refused_before_the_fit(run_cli, db, cal_dir, no_fit, name, message):
    code, _, err = run_cli("calibrate", "--name", name, "--gpu", "test-cpu", "--db", db)
    assert code == 2
    assert one_error_line(err) == f"error: {message}"
    assert not cal_dir.exists()


def test_an_existing_profile_is_kept_without_force_and_replaced_with_it(run_cli, db, cal_dir, no_fit, monkeypatch):
    cal_dir.mkdir()
    profile = cal_dir / "mine.json"
    profile.write_text('{"parameters": {"gemm_efficiency": 0.5}}')
    before = file_state(profile)
    code, _, err = run_cli("calibrate", "--name", "mine", "--gpu", "test-cpu", "--db", db)
    assert code == 2
    assert one_error_line(err) == (f"error: --name=mine: a calibration profile already exists at {profile}; pass "
                                   "--force to replace it")
    assert file_state(profile) == before
    monkeypatch.undo()  # the real fit, the same environment
    monkeypatch.setenv("SCALERIGHT_CALIBRATION_DIR", str(cal_dir))
    monkeypatch.setenv("SCALERIGHT_CATALOG", str(cal_dir.parent / "catalog"))
    code, out, err = run_cli("calibrate", "--name", "mine", "--gpu", "test-cpu", "--db", db, "--force", "--json")
    assert code == 0, err
    assert json.loads(out)["path"] == str(profile)
    assert load_calibration(str(profile)).as_dict() == json.loads(out)["parameters"]
    assert sorted(p.name for p in cal_dir.iterdir()) == ["mine.json"]  # no temporary left


def test_a_calibration_directory_that_is_a_file_is_one_line_and_the_file_is_kept(run_cli, db, tmp_path, no_fit,
                                                                                 monkeypatch):
    afile = tmp_path / "cals.txt"
    afile.write_text("my notes\n")
    monkeypatch.setenv("SCALERIGHT_CALIBRATION_DIR", str(afile))
    code, _, err = run_cli("calibrate", "--name", "mine", "--gpu", "test-cpu", "--db", db)
    assert code == 2
    assert one_error_line(err) == (f"error: calibration directory {afile} (from $SCALERIGHT_CALIBRATION_DIR): not a "
                                   "directory; profiles are saved in a directory")
    assert afile.read_text() == "my notes\n"


def test_a_missing_or_foreign_db_is_refused_before_the_fit_and_not_created(run_cli, tmp_path, cal_dir, no_fit):
    missing = tmp_path / "typo.sqlite"
    code, _, err = run_cli("calibrate", "--name", "mine", "--gpu", "test-cpu", "--db", missing)
    assert code == 2
    assert one_error_line(err).startswith(f"error: --db={missing}: file not found (no runs stored yet?")
    assert not missing.exists()
    foreign = tmp_path / "notes.sqlite"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    conn.close()
    before = file_state(foreign)
    for cmd in (["calibrate", "--name", "mine"], ["compare"]):
        code, _, err = run_cli(*cmd, "--gpu", "test-cpu", "--db", foreign)
        assert code == 2
        assert "not a scaleright run database" in one_error_line(err)
        assert file_state(foreign) == before


@pytest.mark.parametrize("cmd", [["calibrate", "--name", "ro"], ["compare"]], ids=["calibrate", "compare"])
def test_calibrate_and_compare_only_read_the_database(run_cli, db, cal_dir, cmd):
    os.chmod(db, 0o444)
    before = file_state(db)
    code, _, err = run_cli(*cmd, "--gpu", "test-cpu", "--db", db, "--json")
    assert code == 0, err
    assert file_state(db) == before


def test_a_damaged_or_incomplete_run_is_skipped_with_a_warning(run_cli, db, cal_dir, make_run):
    RunStore(db).add(**make_run(2, world_size=4))
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET metrics_json = '{broken' WHERE id = 2")
        conn.execute("UPDATE runs SET model_json = '{\"layers\": 2}' WHERE id = 3")
    conn.close()
    code, out, err = run_cli("compare", "--gpu", "test-cpu", "--db", db, "--json")
    assert code == 0, err
    assert {r["run_id"] for r in json.loads(out)["rows"]} == {1}
    warnings = err.strip().splitlines()
    assert len(warnings) == 2
    assert warnings[0].startswith(f"warning: --db={db}: run 2: column metrics_json is damaged")
    assert warnings[1] == "warning: run 3: field 'hidden' is missing; cannot be predicted or fitted; skipped"


def test_save_calibration_keeps_an_existing_profile_unless_asked_and_writes_atomically(tmp_path, monkeypatch):
    path = save_calibration("p1", DEFAULT_CALIBRATION, directory=tmp_path)
    before = path.read_text()
    with pytest.raises(InputError, match=r"calibration profile 'p1' already exists at .*p1\.json; pass --force"):
        save_calibration("p1", DEFAULT_CALIBRATION.replace(gemm_efficiency=0.5), directory=tmp_path)
    assert path.read_text() == before

    def broken_fsync(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(InputError, match=r"^calibration profile 'p1'=.*p1\.json: cannot write \(No space left"):
        save_calibration("p1", DEFAULT_CALIBRATION.replace(gemm_efficiency=0.5), directory=tmp_path, overwrite=True)
    assert path.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p1.json"]


def test_save_calibration_refuses_provenance_that_would_not_load(tmp_path):
    """What is saved loads: a NaN error (not JSON) or a provenance value that is not the profile's is refused."""
    from scaleright.errors import CatalogFileError

    with pytest.raises(CatalogFileError, match=r"^calibration profile 'p2': provenance must be a JSON object"):
        save_calibration("p2", DEFAULT_CALIBRATION, directory=tmp_path, provenance=[1])  # type: ignore[arg-type]
    with pytest.raises(CatalogFileError, match=r"^calibration profile 'p2': provenance lacks created_utc, error"):
        save_calibration("p2", DEFAULT_CALIBRATION, directory=tmp_path, provenance={"schema": 1})
    assert list(tmp_path.iterdir()) == []
