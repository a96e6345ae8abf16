"""The run store never loses or alters a user's file (issue #8 items 2, 3, 4 and 6).

Read-only commands open the database read-only and leave its bytes and mtime as they were; files that are not a
scaleright run database are refused before anything is written; a locked database is waited for a bounded time and
a finished run that cannot be stored goes to a recovery file; exports are atomic, never replace the database, carry
no NaN and neutralise spreadsheet formulas. Each reproducer of the issue is a test that failed on the old store.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from cli_helpers import file_state, one_error_line
from scaleright.bench import RunStore, RunStoreError
from scaleright.bench import db as dbmod
from scaleright.errors import InputError


@pytest.fixture(autouse=True)
def _private_data_dir(tmp_path, monkeypatch):
    """Recovery files that fall back to the user data directory land in the test's own directory."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))


@pytest.fixture
def db(tmp_path, make_run):
    """A run database with two train runs."""
    path = tmp_path / "runs.sqlite"
    store = RunStore(path)
    store.add(**make_run(0, world_size=1))
    store.add(**make_run(1, world_size=2, tokens_per_s=1800.0))
    return path


def _foreign(path):
    """Another program's SQLite database, in rollback-journal mode, with one table."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.execute("INSERT INTO notes VALUES ('keep me')")
    conn.commit()
    conn.close()
    return path


# ---- read-only commands change nothing -----------------------------------------------------------------------------
@pytest.mark.parametrize("args", [
    ["runs", "list"], ["runs", "list", "--json"], ["runs", "show", "1"], ["runs", "export", "--format", "csv"],
    ["bench", "report", "--json"],
], ids=["list", "list-json", "show", "export", "report"])
def test_read_only_commands_leave_a_read_only_database_byte_for_byte_unchanged(run_cli, db, args):
    os.chmod(db, 0o444)  # as root this does not stop writes, so the bytes and mtime are checked too
    before = file_state(db)
    time.sleep(0.01)
    code, out, err = run_cli(*args, "--db", db)
    assert code == 0, err
    assert out.strip()
    assert file_state(db) == before
    assert sorted(p.name for p in db.parent.iterdir()) == ["runs.sqlite"]  # not even SQLite's -wal and -shm


def test_listing_a_foreign_sqlite_file_refuses_it_and_does_not_switch_it_to_wal(run_cli, tmp_path):
    path = _foreign(tmp_path / "notes.sqlite")
    before = file_state(path)
    code, _, err = run_cli("runs", "list", "--db", path)
    assert code == 2
    assert one_error_line(err) == (f"error: --db={path}: a SQLite database without scaleright's runs table "
                                    "(tables: notes), not a scaleright run database")
    assert file_state(path) == before
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.sqlite", "xdg"] or \
        sorted(p.name for p in tmp_path.iterdir()) == ["notes.sqlite"]


@pytest.mark.parametrize("content, reason", [
    (b"", "an empty file, not a scaleright run database"),
    (b"name,value\n1,2\n", "not a SQLite file, so not a scaleright run database"),
], ids=["empty", "csv"])
def test_an_empty_or_non_sqlite_file_is_refused_and_stays_as_it_was(run_cli, tmp_path, content, reason):
    path = tmp_path / "runs.sqlite"
    path.write_bytes(content)
    code, _, err = run_cli("runs", "list", "--db", path)
    assert code == 2
    assert one_error_line(err) == f"error: --db={path}: {reason}"
    assert path.read_bytes() == content  # the old store turned an empty file into a database


def test_a_missing_db_is_an_error_not_a_new_empty_database(run_cli, tmp_path):
    path = tmp_path / "typo.sqlite"
    code, _, err = run_cli("runs", "list", "--db", path)
    assert code == 2
    assert one_error_line(err) == (f"error: --db={path}: file not found (no runs stored yet? run `scaleright bench "
                                    "train|comm|infer` with this --db first)")
    assert not path.exists()


def test_a_db_name_longer_than_255_characters_is_one_line(run_cli, tmp_path):
    path = tmp_path / ("r" * 300 + ".sqlite")
    code, _, err = run_cli("runs", "list", "--db", path)
    assert code == 2
    assert one_error_line(err).endswith(": cannot open the run database (file name too long)")
    with pytest.raises(RunStoreError, match=r": cannot open the run database \(file name too long\)$"):
        RunStore(path).check_writable()


# ---- writers refuse what is not theirs, before measuring -----------------------------------------------------------
def test_add_to_a_foreign_database_writes_nothing_to_it_and_keeps_the_run_in_a_recovery_file(tmp_path, make_run):
    path = _foreign(tmp_path / "notes.sqlite")
    before = file_state(path)
    store = RunStore(path)
    with pytest.raises(RunStoreError, match="refusing to write to it") as info:
        store.check_writable()
    with pytest.raises(RunStoreError) as info:
        store.add(**make_run(tokens_per_s=4321.0))
    assert file_state(path) == before
    [saved] = tmp_path.glob("notes.sqlite.unsaved-train-*.json")
    assert f"it is saved in {saved}" in str(info.value)
    assert f"scaleright runs import {saved} --db {path}" in str(info.value)
    assert json.loads(saved.read_text())["run"]["metrics"]["tokens_per_s"] == 4321.0


def test_bench_infer_refuses_a_foreign_database_before_measuring(cli, tmp_path):
    path = _foreign(tmp_path / "notes.sqlite")
    before = file_state(path)
    proc = cli("bench", "infer", "--device", "cpu", "--batch-sizes", "1", "--db", path, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert one_error_line(proc.stderr) == (
        f"error: --db={path}: a SQLite database without scaleright's runs table (tables: notes), not a scaleright "
        "run database; refusing to write to it (give a new path or an existing scaleright run database)")
    assert file_state(path) == before
    assert not list(tmp_path.glob("*.unsaved-*"))  # refused before anything was measured


def test_a_new_database_carries_the_scaleright_application_id_and_schema_version(tmp_path, make_run):
    path = tmp_path / "new" / "runs.sqlite"
    store = RunStore(path)
    store.check_writable()
    assert not path.exists() and not path.parent.exists()  # the check writes nothing
    store.add(**make_run())
    assert [p.name for p in path.parent.iterdir()] == ["runs.sqlite"]  # no temporary file left
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA application_id").fetchone()[0] == dbmod.APP_ID
        assert conn.execute("PRAGMA user_version").fetchone()[0] == dbmod.SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


OLD_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, time_utc TEXT NOT NULL, kind TEXT NOT NULL, fingerprint TEXT NOT NULL,
    hardware_json TEXT NOT NULL, software_json TEXT NOT NULL, model_json TEXT NOT NULL, layout_json TEXT NOT NULL,
    metrics_json TEXT NOT NULL, status TEXT NOT NULL, error TEXT, sweep_id TEXT);
"""


def test_a_database_from_before_the_application_id_is_read_unchanged_and_stamped_on_the_next_write(tmp_path,
                                                                                                   make_run):
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(OLD_SCHEMA)
    conn.close()
    before = file_state(path)
    store = RunStore(path)
    assert store.list() == []
    assert file_state(path) == before
    store.add(**make_run())
    assert [r["id"] for r in store.list()] == [1]
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA application_id").fetchone()[0] == dbmod.APP_ID


def test_another_applications_database_and_a_newer_schema_are_refused(tmp_path, make_run):
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.executescript("PRAGMA application_id = 1234; " + OLD_SCHEMA)
    with pytest.raises(RunStoreError, match=r"another application \(application_id 0x000004d2\), not a scaleright"):
        RunStore(other).list()
    newer = tmp_path / "newer.sqlite"
    RunStore(newer).add(**make_run())
    with sqlite3.connect(newer) as conn:  # left open: the new version is in the WAL, not yet in the file header
        conn.execute("PRAGMA user_version = 99")
    with pytest.raises(RunStoreError, match=r"written by a newer scaleright \(schema version 99; this version knows 1"):
        RunStore(newer).list()


# ---- run ids and damaged rows --------------------------------------------------------------------------------------
@pytest.mark.parametrize("run_id, shown", [("9223372036854775808", "9223372036854775808"), ("0", "0"),
                                           ("1" + "0" * 30, "an integer of 31 digits")])
def test_runs_show_bounds_the_id(run_cli, db, run_id, shown):
    code, _, err = run_cli("runs", "show", run_id, "--db", db)
    assert code == 2
    assert one_error_line(err) == f"error: ID={shown}: a run id is a whole number from 1 to 9223372036854775807"


def test_get_bounds_the_id_in_the_api(db):
    with pytest.raises(InputError, match=r"^run_id=9223372036854775808: a run id is a whole number from 1 to "
                                         r"9223372036854775807$"):
        RunStore(db).get(2**63)


@pytest.mark.parametrize("column, text, why", [
    ("metrics_json", "{not json", r"not valid JSON: Expecting property name enclosed in double quotes at line 1"),
    ("layout_json", "[1, 2]", r"a JSON list, expected an object"),
    ("model_json", "[" * 100_000 + "]" * 100_000, r"not valid JSON: nested too deeply"),
    ("hardware_json", b"{\xff}", r"not UTF-8 text: byte 0xff at position 1"),
], ids=["not-json", "not-an-object", "too-deep", "not-utf8"])
def test_a_damaged_row_is_named_by_show_and_skipped_with_a_warning_by_list_and_export(run_cli, db, column, text, why):
    conn = sqlite3.connect(db)
    with conn:
        if isinstance(text, bytes):  # text that is not UTF-8, as another program may store it
            conn.execute(f"UPDATE runs SET {column} = CAST(? AS TEXT) WHERE id = 2", (text,))
        else:
            conn.execute(f"UPDATE runs SET {column} = ? WHERE id = 2", (text,))
    conn.close()
    code, _, err = run_cli("runs", "show", "2", "--db", db)
    assert code == 2
    line = one_error_line(err)
    assert line.startswith(f"error: --db={db}: run 2: column {column} is damaged (")
    assert re.search(why, line)
    code, out, err = run_cli("runs", "list", "--json", "--db", db)
    assert code == 0
    assert [r["id"] for r in json.loads(out)] == [1]
    [warning] = err.strip().splitlines()
    assert warning.startswith(f"warning: --db={db}: run 2: column {column} is damaged") and warning.endswith("skipped")
    code, out, err = run_cli("runs", "export", "--db", db)
    assert code == 0 and [r["id"] for r in json.loads(out)] == [1] and "run 2" in err
    code, out, err = run_cli("bench", "report", "--json", "--db", db)
    assert code == 0 and "run 2" in err


def test_a_stored_run_missing_a_metric_is_left_out_of_the_report_with_a_warning(run_cli, db):
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET metrics_json = '{}' WHERE id = 2")
    code, out, err = run_cli("bench", "report", "--json", "--db", db)
    assert code == 0, err
    assert [r["world_size"] for r in json.loads(out)[0]["rows"]] == [1]
    assert err.strip() == ("warning: run 2: metrics.tokens_per_s=None is not a finite positive number; not in the "
                           "report")
    code, out, err = run_cli("runs", "list", "--db", db)
    assert code == 0, err  # the table tolerates the missing field


# ---- export: never the database, atomic, no NaN, no formulas ------------------------------------------------------
def test_export_out_that_is_the_database_is_refused_and_the_database_kept(run_cli, db, tmp_path):
    before = file_state(db)
    link = tmp_path / "link.json"
    link.symlink_to(db)
    for out in (db, link):
        code, _, err = run_cli("runs", "export", "--db", db, "--out", out)
        assert code == 2
        assert one_error_line(err) == f"error: --out={out}: is one of this command's inputs; give another output path"
    assert file_state(db) == before
    assert len(RunStore(db).list()) == 2
    code, _, err = run_cli("bench", "report", "--db", db, "--html", db)
    assert code == 2 and "--html=" in err and "is one of this command's inputs" in err
    assert file_state(db) == before


def test_a_failed_export_write_keeps_the_previous_file_and_leaves_no_temporary(db, tmp_path, monkeypatch):
    out = tmp_path / "runs.json"
    out.write_text("previous export\n")

    def broken_fsync(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(InputError, match=rf"^--out={out}: cannot write \(No space left on device\)$"):
        RunStore(db).export("json", out)
    assert out.read_text() == "previous export\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "xdg") == ["runs.json", "runs.sqlite"]


KILLED_EXPORT = textwrap.dedent(
    """
    import os, sys, time
    def stall(fd):  # the export's bytes are in the temporary file; die here
        print("writing", flush=True)
        time.sleep(120)
    os.fsync = stall
    sys.argv = ["scaleright", "runs", "export", "--db", sys.argv[1], "--out", sys.argv[2]]
    from scaleright.cli.main import main
    main()
    """
)


def test_a_runs_export_killed_mid_write_leaves_the_previous_file_intact(db, tmp_path):
    out = tmp_path / "runs.json"
    out.write_text("previous export\n")
    proc = subprocess.Popen([sys.executable, "-c", KILLED_EXPORT, str(db), str(out)], stdout=subprocess.PIPE,
                            text=True)
    try:
        line = proc.stdout.readline()  # the old store wrote in place and never called fsync: it ends instead
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
        proc.stdout.close()
    assert line == "writing\n"
    assert out.read_text() == "previous export\n"
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".runs.json.")]
    assert all(name.endswith(".tmp") for name in leftovers)  # at most the hidden temporary, never a partial target


def test_csv_export_neutralises_formulas_but_keeps_numbers(db, tmp_path, make_run):
    run = make_run(2)
    run["error"] = "=HYPERLINK(\"http://evil\",\"x\")"
    run["sweep_id"] = "+1+cmd"
    run["metrics"].update(note="@SUM(A1:A2)", minus="-2+3", tab="\tx", delta=-0.5, count=-3, nan=float("nan"))
    RunStore(db).add(**run)
    text = RunStore(db).export("csv")
    row = list(csv.DictReader(io.StringIO(text)))[-1]
    assert row["error"] == "'=HYPERLINK(\"http://evil\",\"x\")"
    assert row["sweep_id"] == "'+1+cmd"
    assert row["metrics.note"] == "'@SUM(A1:A2)"
    assert row["metrics.minus"] == "'-2+3"
    assert row["metrics.tab"] == "'\tx"
    assert row["metrics.delta"] == "-0.5" and row["metrics.count"] == "-3"  # numbers stay numbers
    assert row["metrics.nan"] == ""


def test_json_export_and_show_have_no_nan_or_infinity(run_cli, db, make_run, tmp_path):
    run = make_run(2)
    run["metrics"].update(peak_memory_gb=float("nan"), ratio=float("inf"))
    RunStore(db).add(**run)

    def strict(text):
        return json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in JSON output"))

    exported = strict(RunStore(db).export("json", tmp_path / "out.json"))
    assert exported[-1]["metrics"]["peak_memory_gb"] is None and exported[-1]["metrics"]["ratio"] is None
    assert strict((tmp_path / "out.json").read_text()) == exported
    for args in (["runs", "show", "3"], ["runs", "list", "--json"]):
        code, out, err = run_cli(*args, "--db", db)
        assert code == 0, err
        strict(out)


# ---- locks and recovery --------------------------------------------------------------------------------------------
def test_a_locked_database_is_waited_for_a_bounded_time_and_the_run_is_kept(run_cli, db, make_run, monkeypatch):
    monkeypatch.setattr(dbmod, "BUSY_TIMEOUT_S", 0.2)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock
    try:
        started = time.monotonic()
        with pytest.raises(RunStoreError) as info:
            RunStore(db).add(**make_run(7, tokens_per_s=777.0))
        assert time.monotonic() - started < 5
        [saved] = db.parent.glob("runs.sqlite.unsaved-train-*.json")
        code, _, err = run_cli("runs", "import", saved, "--db", db)  # still locked: no second recovery file
        assert code == 2 and one_error_line(err).endswith(f"; the run is still only in {saved}")
        assert list(db.parent.glob("runs.sqlite.unsaved-*")) == [saved]
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    message = str(info.value)
    assert message.startswith(f"--db={db}: the run database is locked by another process; gave up after waiting "
                              "0.2 s")
    [saved] = db.parent.glob("runs.sqlite.unsaved-train-*.json")
    assert f"the finished train run was not stored; it is saved in {saved}" in message
    code, out, err = run_cli("runs", "import", saved, "--db", db)
    assert code == 0, err
    assert out.startswith(f"stored the run from {saved} as run id 3 in {db}")
    stored = RunStore(db).get(3)
    assert stored["metrics"]["tokens_per_s"] == 777.0 and stored["model"]["i"] == 7


def test_when_the_database_directory_is_unusable_the_recovery_file_goes_to_the_user_data_dir(tmp_path, make_run):
    (tmp_path / "afile").write_text("")
    with pytest.raises(RunStoreError, match="cannot open the run database") as info:
        RunStore(tmp_path / "afile" / "runs.sqlite").add(**make_run())
    [saved] = (tmp_path / "xdg" / "scaleright" / "unsaved").glob("runs.sqlite.unsaved-train-*.json")
    assert f"it is saved in {saved}" in str(info.value)
    assert (tmp_path / "afile").read_text() == ""


def test_runs_import_refuses_a_file_that_is_not_a_recovery_file(run_cli, db, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"run": {}}')
    code, _, err = run_cli("runs", "import", bad, "--db", db)
    assert code == 2
    assert one_error_line(err).startswith(f"error: FILE={bad}: not a scaleright recovery file")
    assert len(RunStore(db).list()) == 2


@pytest.mark.parametrize("cmd", [["runs", "list"], ["runs", "export"]], ids=["list", "export"])
def test_an_unknown_kind_names_the_flag(run_cli, db, cmd):
    code, _, err = run_cli(*cmd, "--kind", "bogus", "--db", db)
    assert code == 2
    assert one_error_line(err) == "error: --kind='bogus' not allowed; allowed: train, comm, infer, serve"


def test_a_database_held_exclusively_is_a_bounded_wait_for_readers_too(run_cli, db, monkeypatch):
    monkeypatch.setattr(dbmod, "BUSY_TIMEOUT_S", 0.2)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")  # what a SQLite browser may do
    holder.execute("BEGIN EXCLUSIVE")
    try:
        code, _, err = run_cli("runs", "list", "--db", db)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert code == 2
    assert one_error_line(err) == (f"error: --db={db}: the run database is locked by another process; gave up after "
                                    "waiting 0.2 s (another `scaleright bench` or a SQLite browser may hold it; try "
                                    "again when it is done)")


def test_a_read_while_another_connection_has_the_database_open_uses_shared_locks(db, monkeypatch):
    uris = []
    connect = sqlite3.connect
    monkeypatch.setattr(dbmod.sqlite3, "connect", lambda to, **kw: uris.append(str(to)) or connect(to, **kw))
    other = connect(db)
    other.execute("SELECT count(*) FROM runs").fetchone()  # an open WAL reader: -shm exists
    try:
        assert [r["id"] for r in RunStore(db).list()] == [1, 2]
    finally:
        other.close()
    assert uris and all(u.endswith("?mode=ro") for u in uris)


def test_a_snapshot_read_that_a_writer_changed_is_read_again_with_locks(db, monkeypatch):
    uris = []
    connect = sqlite3.connect
    monkeypatch.setattr(dbmod.sqlite3, "connect", lambda to, **kw: uris.append(str(to)) or connect(to, **kw))
    quiet = RunStore._quiet
    calls = iter(range(100))

    def changing(self):  # the file looks different after the snapshot read, as if a writer checkpointed
        state = quiet(self)
        return None if state is None else (*state[:2], next(calls), 0)

    monkeypatch.setattr(RunStore, "_quiet", changing)
    store = RunStore(db)
    monkeypatch.setattr(store, "_identity_problem", lambda: None)  # count only the reads of list() itself
    assert [r["id"] for r in store.list()] == [1, 2]
    assert [u.split("?", 1)[1] for u in uris] == ["mode=ro&immutable=1", "mode=ro"]


READER_WRITER = textwrap.dedent(
    """
    import json, sys
    from scaleright.bench import RunStore
    store, record = RunStore(sys.argv[1]), json.loads(sys.argv[2])
    for i in range(1_000_000):
        record["model"]["i"] = i
        store.add(**record)
    """
)


def test_reads_during_a_stream_of_writes_see_whole_committed_prefixes(db, make_run):
    proc = subprocess.Popen([sys.executable, "-c", READER_WRITER, str(db), json.dumps(make_run())])
    try:
        seen = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            ids = [r["id"] for r in RunStore(db).list()]
            assert ids == list(range(1, len(ids) + 1))
            seen.append(len(ids))
    finally:
        proc.kill()
        proc.wait()
    assert seen == sorted(seen) and seen[-1] > seen[0]  # the writer made progress while we read


def test_a_plain_column_that_is_not_utf8_is_shown_with_replacement_characters(run_cli, db):
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE runs SET error = CAST(? AS TEXT) WHERE id = 1", (b"\xffA",))
    conn.close()
    code, out, err = run_cli("runs", "show", "1", "--db", db)
    assert code == 0, err
    assert json.loads(out)["error"] == "\ufffdA"


def test_the_default_database_missing_says_so_without_naming_a_flag_value_the_user_did_not_give(run_cli, tmp_path):
    code, _, err = run_cli("runs", "list")  # XDG_DATA_HOME is this test's directory
    assert code == 2
    default = tmp_path / "xdg" / "scaleright" / "runs.sqlite"
    assert one_error_line(err) == (f"error: --db={default}: file not found (no runs stored yet? run `scaleright "
                                    "bench train|comm|infer` first)")
    assert not default.exists()
