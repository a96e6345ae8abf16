"""The run database: one SQLite file (Python's ``sqlite3``), one ``runs`` table, one row per measured run.

Every write is one transaction (``with conn:`` commits or rolls back) in WAL journal mode, so a writer killed at any
instant leaves the file consistent with all earlier commits (SQLite docs: "Atomic Commit In SQLite", "Write-Ahead
Logging"). Default location: ``platformdirs.user_data_dir("scaleright")/runs.sqlite``.

Columns: ``id`` (run id), ``time_utc`` (ISO 8601), ``kind`` (train | comm | infer), ``fingerprint`` (short
hardware hash, ``bench/fingerprint.py``), ``hardware_json``, ``software_json``, ``model_json``, ``layout_json``,
``metrics_json``, ``status`` (ok | failed), ``error``, ``sweep_id`` (runs launched by one command).
``RunStore`` opens a connection per call and creates nothing until the first ``add``.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, cast

import platformdirs

from scaleright.bench.errors import RunNotFoundError, RunStoreError
from scaleright.errors import InputError

__all__ = ["RunStore", "default_db_path", "KINDS"]

KINDS = ("train", "comm", "infer")
_JSON = ("hardware", "software", "model", "layout", "metrics")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
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
CREATE INDEX IF NOT EXISTS runs_kind ON runs (kind, fingerprint);
"""


def default_db_path() -> Path:
    """``user_data_dir("scaleright")/runs.sqlite``."""
    return Path(platformdirs.user_data_dir("scaleright")) / "runs.sqlite"


def _row_to_run(row: sqlite3.Row) -> dict[str, Any]:
    run = {k: row[k] for k in ("id", "time_utc", "kind", "status", "error", "fingerprint", "sweep_id")}
    run.update({k: json.loads(row[f"{k}_json"]) for k in _JSON})
    return run


class RunStore:
    """Add, list, get and export runs in the SQLite file at ``path``."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else default_db_path()

    @contextmanager
    def _connect(self, *, create: bool) -> Iterator[sqlite3.Connection]:
        if self.path.is_dir():
            raise RunStoreError(f"{self.path} is a directory; a run database is a file, "
                                f"e.g. {self.path / 'runs.sqlite'}")
        if not create and not self.path.exists():
            raise FileNotFoundError(self.path)
        try:
            if create:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=30)
        except (OSError, sqlite3.Error) as exc:
            raise RunStoreError(f"{self.path}: cannot open the run database ({exc})") from None
        conn.row_factory = sqlite3.Row
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            if create:
                with conn:
                    conn.executescript(_SCHEMA)
            yield conn
        except sqlite3.DatabaseError as exc:
            raise RunStoreError(f"{self.path} is not a usable scaleright run database: {exc}") from None
        finally:
            conn.close()

    def add(self, *, kind: str, model: dict, layout: dict, metrics: dict, hardware: dict, software: dict,
            status: Literal["ok", "failed"] = "ok", error: str | None = None, sweep_id: str | None = None,
            time_utc: str | None = None) -> int:
        """Store one run in one transaction; return its id. ``hardware`` must carry its ``fingerprint``."""
        if kind not in KINDS:
            raise InputError(f"kind must be one of {', '.join(KINDS)}; got '{kind}'")
        if status not in ("ok", "failed"):
            raise InputError(f"status must be ok or failed; got '{status}'")
        when = time_utc or dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        values = (when, kind, hardware.get("fingerprint", ""), *(json.dumps(v, sort_keys=True) for v in
                  (hardware, software, model, layout, metrics)), status, error, sweep_id)
        with self._connect(create=True) as conn, conn:
            cur = conn.execute(
                "INSERT INTO runs (time_utc, kind, fingerprint, hardware_json, software_json, model_json, "
                "layout_json, metrics_json, status, error, sweep_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", values)
            return int(cast(int, cur.lastrowid))  # set by the INSERT

    def list(self, kind: str | None = None, *, status: str | None = None,
             fingerprint: str | None = None) -> list[dict[str, Any]]:
        """Runs (oldest first), optionally filtered; failed runs are included unless ``status="ok"``."""
        if kind is not None and kind not in KINDS:
            raise InputError(f"kind must be one of {', '.join(KINDS)}; got '{kind}'")
        where, args = [], []
        for col, val in (("kind", kind), ("status", status), ("fingerprint", fingerprint)):
            if val is not None:
                where.append(f"{col} = ?")
                args.append(val)
        sql = "SELECT * FROM runs" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id"
        try:
            with self._connect(create=False) as conn:
                return [_row_to_run(r) for r in conn.execute(sql, args)]
        except FileNotFoundError:
            return []

    def get(self, run_id: int) -> dict[str, Any]:
        """One run by id; ``RunNotFoundError`` if absent."""
        try:
            with self._connect(create=False) as conn:
                row = conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        except FileNotFoundError:
            row = None
        if row is None:
            raise RunNotFoundError(f"no run with id {run_id} in {self.path}")
        return _row_to_run(row)

    def export(self, fmt: Literal["csv", "json"] = "json", out: str | Path | None = None,
               kind: str | None = None) -> str:
        """All runs as JSON (a list) or CSV (model., layout., metrics. fields flattened); also written to ``out``."""
        runs = self.list(kind)
        if fmt == "json":
            text = json.dumps(runs, indent=2) + "\n"
        elif fmt == "csv":
            text = _to_csv(runs)
        else:
            raise InputError(f"export format must be csv or json; got '{fmt}'")
        if out is not None:
            try:
                Path(out).write_text(text, encoding="utf-8")
            except OSError as exc:
                raise InputError(f"{out}: cannot write the export ({exc.strerror or exc})") from None
        return text

    def integrity(self) -> str:
        """``PRAGMA integrity_check`` result ("ok" when the file is sound)."""
        try:
            with self._connect(create=False) as conn:
                return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
        except FileNotFoundError:
            raise RunStoreError(f"no run database at {self.path}") from None


def _flat(run: dict[str, Any]) -> dict[str, Any]:
    row = {k: run[k] for k in ("id", "time_utc", "kind", "status", "error", "fingerprint", "sweep_id")}
    for part in ("model", "layout", "metrics", "hardware", "software"):
        for key, val in run[part].items():
            row[f"{part}.{key}"] = json.dumps(val) if isinstance(val, (list, dict)) else val
    return row


def _to_csv(runs: list[dict[str, Any]]) -> str:
    rows = [_flat(r) for r in runs]
    fixed = ["id", "time_utc", "kind", "status", "error", "fingerprint", "sweep_id"]
    extra = sorted({k for r in rows for k in r} - set(fixed))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=fixed + extra, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()
