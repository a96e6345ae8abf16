"""The run store takes serving runs: a new database admits kind 'serve'; one made before serve runs existed (its
CHECK lists train, comm, infer) is widened on the first serve run, in one transaction, keeping rows and ids."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest

from scaleright.bench import db as dbmod
from scaleright.bench.db import RunStore

# the runs table exactly as scaleright created it before serve runs (schema version 1)
V1_SCHEMA = f"""
CREATE TABLE runs (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    time_utc      TEXT NOT NULL,
    kind          TEXT NOT NULL CHECK (kind IN ('train', 'comm', 'infer')),
    fingerprint   TEXT NOT NULL,
    hardware_json TEXT NOT NULL,
    software_json TEXT NOT NULL,
    model_json    TEXT NOT NULL,
    layout_json   TEXT NOT NULL,
    metrics_json  TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    error         TEXT,
    sweep_id      TEXT
);
CREATE INDEX runs_kind ON runs (kind, fingerprint);
PRAGMA application_id = {dbmod.APP_ID};
PRAGMA user_version = 1;
"""


def _serve_run() -> dict:
    return {"kind": "serve", "model": {"name": "m"}, "layout": {"requests": 3}, "metrics": {"ttft_ms": {"mean": 1.0}},
            "hardware": {"fingerprint": "srv"}, "software": {"engine": "fake"}}


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _v1_db(path, make_run, n: int) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(V1_SCHEMA)
    conn.close()
    store = RunStore(path)
    for i in range(n):
        store.add(**make_run(i))


def test_the_old_check_refuses_serve_runs_so_widening_is_needed(tmp_path, make_run):
    path = tmp_path / "v1.sqlite"
    _v1_db(path, make_run, 1)
    with sqlite3.connect(path) as conn, pytest.raises(sqlite3.IntegrityError, match="CHECK"):
        conn.execute("INSERT INTO runs (time_utc, kind, fingerprint, hardware_json, software_json, model_json, "
                     "layout_json, metrics_json, status) VALUES ('t', 'serve', '', '{}', '{}', '{}', '{}', '{}', 'ok')")


def test_a_v1_database_takes_a_serve_run_and_keeps_its_rows_ids_and_counter(tmp_path, make_run):
    path = tmp_path / "v1.sqlite"
    _v1_db(path, make_run, 3)
    with sqlite3.connect(path) as conn:  # a deleted last row: AUTOINCREMENT must not hand out id 3 again
        conn.execute("DELETE FROM runs WHERE id = 3")
    store = RunStore(path)
    before = store.list()
    assert store.add(**_serve_run()) == 4
    after = store.list()
    assert after[:2] == before
    assert [(r["id"], r["kind"]) for r in after] == [(1, "train"), (2, "train"), (4, "serve")]
    assert store.add(**make_run(9)) == 5  # train runs still go in after the rebuild
    assert [r["id"] for r in store.list(kind="serve")] == [4]
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 1  # columns unchanged: still schema 1
        assert conn.execute("PRAGMA application_id").fetchone()[0] == dbmod.APP_ID
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        tables = sorted(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table','index')"))
    assert tables == ["runs", "runs_kind", "sqlite_sequence"]


def test_a_new_database_admits_serve_and_reading_it_changes_nothing(tmp_path):
    path = tmp_path / "runs.sqlite"
    store = RunStore(path)
    assert store.add(**_serve_run()) == 1
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    (tmp_path / "runs.sqlite-wal").unlink(missing_ok=True)
    (tmp_path / "runs.sqlite-shm").unlink(missing_ok=True)
    digest = _digest(path)
    assert [r["kind"] for r in RunStore(path).list(kind="serve")] == ["serve"]
    assert _digest(path) == digest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.sqlite"]


def test_a_failed_widening_leaves_the_old_table(tmp_path, make_run, monkeypatch):
    path = tmp_path / "v1.sqlite"
    _v1_db(path, make_run, 2)
    monkeypatch.setattr(dbmod, "_INDEX", "CREATE INDEX runs_kind ON no_such_table (kind)")
    with pytest.raises(dbmod.RunStoreError, match="was not stored; it is saved in"):
        RunStore(path).add(**_serve_run())
    with sqlite3.connect(path) as conn:
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'runs'").fetchone()[0]
        assert "'serve'" not in sql
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 2
        assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'runs_widened'").fetchone() is None
