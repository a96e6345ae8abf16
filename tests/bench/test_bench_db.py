"""The SQLite run store: add, list, get, export, errors, and integrity after a writer is killed mid-loop."""

from __future__ import annotations

import csv
import io
import json
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from scaleright.bench import RunNotFoundError, RunStore, RunStoreError
from scaleright.errors import InputError


@pytest.fixture
def store(tmp_path):
    return RunStore(tmp_path / "sub" / "runs.sqlite")


def test_constructor_creates_nothing_and_a_missing_store_is_an_error_not_an_empty_list(store):
    with pytest.raises(RunStoreError, match=r"file not found .no runs stored yet"):
        store.list()
    assert not store.path.exists()


def test_added_run_round_trips_with_its_columns(store, make_run):
    run_id = store.add(**make_run(world_size=2, tokens_per_s=1234.5), sweep_id="s1")
    run = store.get(run_id)
    assert run["kind"] == "train" and run["status"] == "ok" and run["fingerprint"] == "abc"
    assert run["layout"]["world_size"] == 2 and run["metrics"]["tokens_per_s"] == 1234.5
    assert run["sweep_id"] == "s1" and run["time_utc"].endswith("+00:00")
    assert {"hardware", "software", "model", "layout", "metrics", "error"} <= set(run)


def test_store_uses_wal_journal(store, make_run):
    store.add(**make_run())
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_list_filters_by_kind_and_status(store, make_run):
    store.add(**make_run(0))
    store.add(**make_run(1, status="failed"))
    store.add(**{**make_run(2), "kind": "infer"})
    assert [r["id"] for r in store.list("train")] == [1, 2]
    assert [r["id"] for r in store.list("train", status="ok")] == [1]
    assert [r["kind"] for r in store.list()] == ["train", "train", "infer"]


def test_missing_run_id_names_the_id_and_file(store, make_run):
    store.add(**make_run())
    with pytest.raises(RunNotFoundError, match=r"no run with id 7 in .*runs\.sqlite"):
        store.get(7)


def test_bad_kind_is_an_input_error(store, make_run):
    with pytest.raises(InputError, match="kind must be one of train, comm, infer, serve; got 'bogus'"):
        store.add(**{**make_run(), "kind": "bogus"})


def test_a_file_that_is_not_sqlite_is_a_store_error(tmp_path):
    path = tmp_path / "junk.sqlite"
    path.write_text("not a database at all " * 100)
    with pytest.raises(RunStoreError, match="not a SQLite file, so not a scaleright run database"):
        RunStore(path).list()


@pytest.mark.parametrize("method", ["list", "add", "integrity"])
def test_a_directory_as_database_is_a_store_error_naming_it(tmp_path, make_run, method, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))  # where add saves the unstored run
    store = RunStore(tmp_path)
    call = {"list": store.list, "add": lambda: store.add(**make_run()), "integrity": store.integrity}[method]
    with pytest.raises(RunStoreError, match=rf"^--db={tmp_path} is a directory; a run database is a file"):
        call()


def test_a_database_under_a_file_is_a_store_error(tmp_path, make_run, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))  # where add saves the unstored run
    (tmp_path / "afile").write_text("")
    with pytest.raises(RunStoreError, match=r"afile/runs\.sqlite: cannot open the run database"):
        RunStore(tmp_path / "afile" / "runs.sqlite").add(**make_run())


def test_export_to_an_unwritable_path_is_an_input_error(store, make_run, tmp_path):
    store.add(**make_run())
    with pytest.raises(InputError, match=r"absent/out\.json: directory .* does not exist"):
        store.export("json", tmp_path / "absent" / "out.json")


def test_export_json_and_flattened_csv(store, make_run, tmp_path):
    store.add(**make_run(0, world_size=1))
    store.add(**make_run(1, world_size=2))
    runs = json.loads(store.export("json"))
    assert [r["layout"]["world_size"] for r in runs] == [1, 2]
    out = tmp_path / "runs.csv"
    text = store.export("csv", out)
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert text == out.read_text()
    assert [r["layout.world_size"] for r in rows] == ["1", "2"]
    assert json.loads(rows[1]["metrics.peak_memory_gb_per_rank"]) == [0.1, 0.1]


WRITER = textwrap.dedent(
    """
    import json, sys
    from scaleright.bench import RunStore
    store, record = RunStore(sys.argv[1]), json.loads(sys.argv[2])
    for i in range(1_000_000):
        record["model"]["i"], record["metrics"]["tokens_per_s"] = i, float(i + 1)
        store.add(**record)
        print(i, flush=True)
    """
)


def test_killed_writer_leaves_a_sound_database_with_earlier_rows_intact(tmp_path, make_run):
    path = tmp_path / "runs.sqlite"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), json.dumps(make_run())],
                            stdout=subprocess.PIPE, text=True)
    committed = -1
    deadline = time.monotonic() + 60
    while committed < 40 and time.monotonic() < deadline:
        committed = int(proc.stdout.readline())
    proc.send_signal(signal.SIGKILL)  # mid-loop, most likely inside a transaction
    proc.wait()
    proc.stdout.close()
    assert committed >= 40
    store = RunStore(path)
    assert store.integrity() == "ok"
    runs = store.list()
    assert len(runs) >= committed + 1  # every printed (committed) row survived
    for run in runs:
        assert run["model"]["i"] == run["id"] - 1
        assert run["metrics"]["tokens_per_s"] == float(run["id"])
    store.add(**json.loads(json.dumps({k: runs[0][k] for k in ("kind", "model", "layout", "metrics", "hardware",
                                                                  "software", "status")})))
    assert store.integrity() == "ok"
