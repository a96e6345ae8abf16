"""The run database: one SQLite file (Python's ``sqlite3``), one ``runs`` table, one row per measured run.

Every write is one transaction (``with conn:`` commits or rolls back) in WAL journal mode, so a writer killed at any
instant leaves the file consistent with all earlier commits (SQLite docs: "Atomic Commit In SQLite", "Write-Ahead
Logging"). Default location: ``platformdirs.user_data_dir("scaleright")/runs.sqlite``.

Columns: ``id`` (run id), ``time_utc`` (ISO 8601), ``kind`` (train | comm | infer | serve), ``fingerprint``
(short hardware hash, ``bench/fingerprint.py``; for serve runs, of the server as the user described it,
``bench/serve.py``), ``hardware_json``, ``software_json``, ``model_json``, ``layout_json``, ``metrics_json``,
``status`` (ok | failed), ``error``, ``sweep_id`` (runs launched by one command).

Two ways in (SQLite docs: "URI filenames", "PRAGMA application_id"):

- **read** (``list``, ``get``, ``export``, ``integrity``): ``mode=ro``, no journal-mode switch, no ``CREATE``; the
  database file's bytes are never changed, so a file the user cannot write can still be listed and exported. When
  nothing has the database open (no ``-wal``/``-shm`` beside it) it is read as a snapshot (``immutable=1``), which
  creates no file either, and the read is kept only if the file is unchanged afterwards; while a writer is active it
  is read with shared locks, and SQLite may then leave its usual ``-wal``/``-shm`` files of a WAL database.
- **write** (``add``): creates the schema only in a new file it creates itself (built under a temporary name and
  linked into place, so no half-made database is ever visible), or writes to a file that already carries the
  scaleright schema: ``PRAGMA application_id = APP_ID`` and ``PRAGMA user_version = SCHEMA_VERSION``, or, for files
  written before the id existed, a ``runs`` table with exactly these columns.

Serve runs came after the first schema: a database made before them has ``CHECK (kind IN ('train', 'comm',
'infer'))``. The first ``add`` of a serve run rebuilds its ``runs`` table with the wider check in one transaction
(create, copy every row with its id, drop, rename, re-index; the AUTOINCREMENT counter kept), so a writer killed
midway leaves the old table. The columns and their meaning do not change, so the schema version stays 1 and older
scaleright versions still read and write the file (they list a serve run like any other kind).

Anything else (an empty file, a file that is not SQLite, another application's SQLite database) is refused with one
line before anything is written; the file is identified from its 100-byte header without SQLite touching it.

A locked database is waited for ``BUSY_TIMEOUT_S`` seconds, then refused with a message naming the file. When a
finished measurement cannot be stored (locked, read-only, disk full, not a run database), ``add`` writes it
atomically to a recovery file next to the database (or in ``user_data_dir("scaleright")/unsaved`` when that
directory is not writable) and says where; ``scaleright runs import FILE`` stores it later (``import_unsaved``).

Exports are rendered by ``bench/export.py`` (no NaN in JSON, spreadsheet formulas neutralised in CSV).
"""

from __future__ import annotations

import builtins
import datetime as dt
import json
import os
import re
import sqlite3
import tempfile
import urllib.parse
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import platformdirs

from scaleright.bench.errors import RunNotFoundError, RunStoreError
from scaleright.bench.export import runs_to_csv, runs_to_json
from scaleright.errors import InputError
from scaleright.textfile import _short, check_output_path, path_problem, refuse_input_as_output, write_atomic

__all__ = ["RunStore", "default_db_path", "check_run_id", "KINDS", "APP_ID", "SCHEMA_VERSION", "BUSY_TIMEOUT_S",
           "MAX_RUN_ID"]

KINDS = ("train", "comm", "infer", "serve")
APP_ID = 0x53434C52  # PRAGMA application_id of a scaleright run database: "SCLR" in ASCII
SCHEMA_VERSION = 1  # PRAGMA user_version: the layout of the runs table below
BUSY_TIMEOUT_S = 10.0  # how long a locked database is waited for before the command gives up
MAX_RUN_ID = 2**63 - 1  # SQLite's largest INTEGER PRIMARY KEY
UNSAVED_FORMAT = "scaleright-unsaved-run"  # the "format" key of a recovery file

_JSON = ("hardware", "software", "model", "layout", "metrics")
_PLAIN = ("id", "time_utc", "kind", "status", "error", "fingerprint", "sweep_id")
_COLUMNS = frozenset(("id", "time_utc", "kind", "fingerprint", "status", "error", "sweep_id",
                      *(f"{k}_json" for k in _JSON)))
_SQLITE_MAGIC = b"SQLite format 3\x00"
_KINDS_SQL = ", ".join(f"'{k}'" for k in KINDS)
_TABLE = """
CREATE TABLE {name} (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    time_utc      TEXT NOT NULL,
    kind          TEXT NOT NULL CHECK (kind IN ({kinds})),
    fingerprint   TEXT NOT NULL,
    hardware_json TEXT NOT NULL,
    software_json TEXT NOT NULL,
    model_json    TEXT NOT NULL,
    layout_json   TEXT NOT NULL,
    metrics_json  TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    error         TEXT,
    sweep_id      TEXT
);"""
_INDEX = "CREATE INDEX runs_kind ON runs (kind, fingerprint);"
_SCHEMA = f"""{_TABLE.format(name="runs", kinds=_KINDS_SQL)}
{_INDEX}
PRAGMA application_id = {APP_ID};
PRAGMA user_version = {SCHEMA_VERSION};
"""
_RUN_KEYS = frozenset(("kind", "model", "layout", "metrics", "hardware", "software", "status", "error", "sweep_id",
                       "time_utc"))


def default_db_path() -> Path:
    """``user_data_dir("scaleright")/runs.sqlite``."""
    return Path(platformdirs.user_data_dir("scaleright")) / "runs.sqlite"


def _uri(path: Path, **params: str) -> str:
    quoted = urllib.parse.quote(os.fsencode(path.absolute()))
    return f"file:{quoted}?" + "&".join(f"{k}={v}" for k, v in params.items())


def _parse_json(text: Any) -> Any:
    """A stored JSON column (NaN allowed: runs have always been stored with Python's ``json.dumps``)."""
    if not isinstance(text, (str, bytes)):
        raise ValueError(f"holds {type(text).__name__}, not JSON text")
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"not UTF-8 text: byte {text[exc.start]:#04x} at position {exc.start}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise ValueError("not valid JSON: nested too deeply") from None


def _text(value: Any) -> Any:
    """A plain column read as bytes (``text_factory=bytes``): text, with undecodable bytes shown as U+FFFD."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _row_to_run(row: sqlite3.Row, where: str) -> dict[str, Any]:
    run = {k: _text(row[k]) for k in _PLAIN}
    for k in _JSON:
        try:
            value = _parse_json(row[f"{k}_json"])
        except ValueError as exc:
            raise RunStoreError(f"{where}: run {row['id']}: column {k}_json is damaged ({exc})") from None
        if not isinstance(value, dict):
            raise RunStoreError(f"{where}: run {row['id']}: column {k}_json is damaged (a JSON "
                                f"{type(value).__name__}, expected an object)")
        run[k] = value
    return run


_KIND_CHECK = re.compile(r"CHECK\s*\(\s*kind\s+IN\s*\(([^)]*)\)\s*\)", re.IGNORECASE)
_COLUMN_ORDER = ("id", "time_utc", "kind", "fingerprint", "hardware_json", "software_json", "model_json", "layout_json",
                 "metrics_json", "status", "error", "sweep_id")


def _table_kinds(conn: sqlite3.Connection) -> set[str] | None:
    """The kinds the ``runs`` table's CHECK admits; None when it has no such check (a table from before it)."""
    row = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'runs'").fetchone()
    match = _KIND_CHECK.search(row[0] or "") if row is not None else None
    if match is None:
        return None
    return {part.strip().strip("'\"") for part in match.group(1).split(",")}


def _allows_kind(conn: sqlite3.Connection, kind: str) -> bool:
    kinds = _table_kinds(conn)
    return kinds is None or kind in kinds


def _widen_kinds(conn: sqlite3.Connection) -> None:
    """Rebuild the ``runs`` table with a CHECK admitting every kind in ``KINDS``, in one transaction: rows and ids
    copied, index rebuilt, the AUTOINCREMENT counter kept (see the module docstring)."""
    conn.execute("BEGIN IMMEDIATE")  # the write lock first: another writer may be widening the same file
    try:
        kinds = _table_kinds(conn)
        if kinds is None or kinds >= set(KINDS):
            conn.rollback()
            return
        seq = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'runs'").fetchone()
        cols = ", ".join(_COLUMN_ORDER)
        conn.execute(_TABLE.format(name="runs_widened", kinds=_KINDS_SQL))
        conn.execute(f"INSERT INTO runs_widened ({cols}) SELECT {cols} FROM runs ORDER BY id")
        conn.execute("DROP TABLE runs")
        conn.execute("ALTER TABLE runs_widened RENAME TO runs")
        conn.execute(_INDEX)
        if seq is not None:
            cur = conn.execute("UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = 'runs'", (seq[0],))
            if cur.rowcount == 0:
                conn.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('runs', ?)", (seq[0],))
        conn.commit()
    except BaseException:
        conn.rollback()
        raise


def check_run_id(run_id: object, *, flag: str = "run_id") -> int:
    """``run_id`` when it is an integer from 1 to ``MAX_RUN_ID`` (SQLite's rowid range); else ``InputError``."""
    if isinstance(run_id, bool) or not isinstance(run_id, int) or not 1 <= run_id <= MAX_RUN_ID:
        shown = (f"an integer of {len(str(abs(run_id)))} digits" if isinstance(run_id, int) and
                 not isinstance(run_id, bool) and run_id.bit_length() > 64 else repr(run_id))
        raise InputError(f"{flag}={shown}: a run id is a whole number from 1 to {MAX_RUN_ID}")
    return run_id


class RunStore:
    """Add, list, get and export runs in the SQLite file at ``path``; ``flag`` names it in messages."""

    def __init__(self, path: str | Path | None = None, *, flag: str = "--db"):
        self.path = Path(path) if path is not None else default_db_path()
        self.flag = flag
        self._given = path is not None

    # ---- identity -------------------------------------------------------------------------------------------
    @property
    def _where(self) -> str:
        return f"{self.flag}={_short(self.path)}"

    def _file_problem(self, *, missing_ok: bool) -> str | None:
        """Why ``path`` is not a file to open; None when it is (or when it is absent and ``missing_ok``)."""
        why = path_problem(self.path)
        if why is None:
            return None
        if why == "is a directory, expected a file":
            raise RunStoreError(f"{self._where} is a directory; a run database is a file, "
                                f"e.g. {_short(self.path / 'runs.sqlite')}")
        if why == "file not found":
            if missing_ok:
                return why
            raise RunStoreError(f"{self._where}: file not found (no runs stored yet? run `scaleright bench "
                                f"train|comm|infer`{' with this --db' if self._given else ''} first)")
        raise RunStoreError(f"{self._where}: cannot open the run database ({why})")

    def _identity_problem(self) -> str | None:
        """Why the existing file is not a scaleright run database, from its header (and, for a SQLite file
        without an application id, its tables); None when it is one. Never writes."""
        try:
            with open(self.path, "rb") as fh:
                head = fh.read(100)
        except OSError as exc:
            return f"cannot read ({exc.strerror or exc})"
        if not head:
            return "an empty file, not a scaleright run database"
        if not head.startswith(_SQLITE_MAGIC):
            return "not a SQLite file, so not a scaleright run database"
        if len(head) < 100:
            return "a truncated SQLite file, not a scaleright run database"
        app_id = int.from_bytes(head[68:72], "big")
        version = int.from_bytes(head[60:64], "big", signed=True)
        if app_id == APP_ID:
            if version > SCHEMA_VERSION:
                return (f"written by a newer scaleright (schema version {version}; this version knows "
                        f"{SCHEMA_VERSION}); upgrade scaleright")
            return None
        if app_id != 0:
            return f"a SQLite database of another application (application_id {app_id:#010x}), not a scaleright " \
                   "run database"
        return self._legacy_problem()

    def _legacy_problem(self) -> str | None:
        """A SQLite file without an application id is a run database of scaleright before ids existed only when it
        has a ``runs`` table with exactly our columns."""
        try:
            names, info = self._fetch([("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                                        "'sqlite_%'", ()), ("PRAGMA table_info(runs)", ())])
        except (sqlite3.Error, OSError) as exc:
            return f"not a usable SQLite database ({exc}), so not a scaleright run database"
        tables = sorted(r[0] for r in names)
        if {r[1] for r in info} == _COLUMNS:
            return None
        if not tables:
            return "a SQLite database with no tables, not a scaleright run database"
        shown = ", ".join(tables[:8]) + (", ..." if len(tables) > 8 else "")
        return f"a SQLite database without scaleright's runs table (tables: {shown}), not a scaleright run database"

    # ---- connections ----------------------------------------------------------------------------------------
    def _quiet(self) -> tuple[int, int, int, int] | None:
        """The main file's identity and times when no ``-wal`` or ``-shm`` file exists (no connection is open and
        every commit is in the main file); None otherwise."""
        if Path(f"{self.path}-wal").exists() or Path(f"{self.path}-shm").exists():
            return None
        st = self.path.stat()
        return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns

    def _fetch(self, statements: list[tuple[str, tuple]], *, check: bool = False,
               raw_text: bool = False) -> list[list[sqlite3.Row]]:
        """Run read-only ``statements``; return each one's rows. Creates no file and changes none.

        When nothing has the database open (no ``-wal``/``-shm``), the main file is read as a snapshot
        (``immutable=1``: no locks, no companion files) and the read is kept only if the file and its companions
        are unchanged afterwards; otherwise, or when a writer is active, it is read with SQLite's shared locks
        (``mode=ro``), which may leave SQLite's usual ``-wal``/``-shm`` files of a WAL database behind."""
        before = self._quiet()
        for snapshot in ((True, False) if before is not None else (False,)):
            params = {"mode": "ro", "immutable": "1"} if snapshot else {"mode": "ro"}
            conn = sqlite3.connect(_uri(self.path, **params), uri=True, timeout=BUSY_TIMEOUT_S)
            conn.row_factory = sqlite3.Row
            if raw_text:  # text as bytes: a column that is not UTF-8 is one damaged row, not a failed query
                conn.text_factory = bytes
            try:
                conn.execute("PRAGMA query_only = 1")
                if check:
                    self._check_pragmas(conn)
                results = [conn.execute(sql, args).fetchall() for sql, args in statements]
            except sqlite3.Error:
                if snapshot and self._quiet() != before:
                    continue  # a writer changed the file under the snapshot: read again with locks
                raise
            finally:
                conn.close()
            if not snapshot or self._quiet() == before:
                return results
        raise AssertionError("unreachable: the locked read returns or raises")

    def _db_error(self, exc: sqlite3.Error) -> RunStoreError:
        text = str(exc)
        if "locked" in text or "busy" in text:
            return RunStoreError(f"{self._where}: the run database is locked by another process; gave up after "
                                 f"waiting {BUSY_TIMEOUT_S:g} s (another `scaleright bench` or a SQLite browser may "
                                 "hold it; try again when it is done)")
        if "readonly" in text or "read-only" in text:
            return RunStoreError(f"{self._where}: the run database is not writable ({text})")
        if isinstance(exc, sqlite3.OperationalError):
            return RunStoreError(f"{self._where}: cannot use the run database ({text})")
        return RunStoreError(f"{self._where} is not a usable scaleright run database ({text})")

    def _query(self, sql: str, args: tuple = ()) -> list[sqlite3.Row]:
        """Rows of one read-only query, after checking that the file is a scaleright run database."""
        self._file_problem(missing_ok=False)
        why = self._identity_problem()
        if why is not None:
            raise RunStoreError(f"{self._where}: {why}")
        try:
            [rows] = self._fetch([(sql, args)], check=True, raw_text=True)
        except sqlite3.Error as exc:
            raise self._db_error(exc) from None
        except OSError as exc:
            raise RunStoreError(f"{self._where}: cannot read ({exc.strerror or exc})") from None
        return rows

    def _check_pragmas(self, conn: sqlite3.Connection, suffix: str = "") -> None:
        """The identity as SQLite sees it, WAL included (the file header can lag behind an open writer's WAL)."""
        app_id = conn.execute("PRAGMA application_id").fetchone()[0] & 0xFFFFFFFF
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if app_id not in (0, APP_ID):
            raise RunStoreError(f"{self._where}: a SQLite database of another application (application_id "
                                f"{app_id:#010x}), not a scaleright run database{suffix}")
        if version > SCHEMA_VERSION:
            raise RunStoreError(f"{self._where}: written by a newer scaleright (schema version {version}; this "
                                f"version knows {SCHEMA_VERSION}); upgrade scaleright")

    def check_writable(self) -> None:
        """Raise ``RunStoreError`` unless ``add`` can store runs here: an existing scaleright run database we may
        write, or a new path whose directory exists or can be made. Writes nothing (call it before measuring)."""
        if self._file_problem(missing_ok=True) is None:
            why = self._identity_problem()
            if why is not None:
                raise RunStoreError(f"{self._where}: {why}; refusing to write to it (give a new path or an "
                                    "existing scaleright run database)")
            if not os.access(self.path, os.W_OK):
                raise RunStoreError(f"{self._where}: the run database is not writable (permission denied)")
            if not os.access(self.path.parent, os.W_OK | os.X_OK):
                raise RunStoreError(f"{self._where}: its directory is not writable (SQLite creates its -wal and -shm "
                                    "files there while writing)")
            return
        if len(self.path.name.encode()) > 255:
            raise RunStoreError(f"{self._where}: file name too long (at most 255 bytes)")
        ancestor = self.path.parent
        while path_problem(ancestor, want="dir") == "directory not found" and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        why = path_problem(ancestor, want="dir")
        if why is not None:
            raise RunStoreError(f"{self._where}: cannot open the run database ({_short(ancestor)}: {why})")
        if not os.access(ancestor, os.W_OK | os.X_OK):
            raise RunStoreError(f"{self._where}: cannot create the run database (directory {_short(ancestor)} is "
                                "not writable)")

    def _create(self) -> None:
        """Make a new database at ``path``: built under a temporary name, then linked into place (never over an
        existing file), so no half-made database is ever visible."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunStoreError(f"{self._where}: cannot open the run database (cannot create directory "
                                f"{_short(self.path.parent)}: {exc.strerror or exc})") from None
        tmp: Path | None = None
        try:
            fd, name = tempfile.mkstemp(prefix=f".{self.path.name[:200]}.", suffix=".new", dir=self.path.parent)
            os.close(fd)
            tmp = Path(name)
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
            conn = sqlite3.connect(tmp)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.executescript(_SCHEMA)
            finally:
                conn.close()
            try:
                os.link(tmp, self.path)
            except FileExistsError:
                pass  # another process created it meanwhile; it is identified like any existing file
            except OSError:  # a file system without hard links
                if not self.path.exists():
                    os.replace(tmp, self.path)
                    tmp = None
        except (OSError, sqlite3.Error) as exc:
            raise RunStoreError(f"{self._where}: cannot create the run database ({exc})") from None
        finally:
            if tmp is not None:
                for p in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
                    try:
                        p.unlink()
                    except OSError:
                        pass

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        if self._file_problem(missing_ok=True) is not None:
            self._create()
        why = self._identity_problem()
        if why is not None:
            raise RunStoreError(f"{self._where}: {why}; refusing to write to it (give a new path or an existing "
                                "scaleright run database)")
        try:
            conn = sqlite3.connect(_uri(self.path, mode="rw"), uri=True, timeout=BUSY_TIMEOUT_S)
        except sqlite3.Error as exc:
            raise self._db_error(exc) from None
        conn.row_factory = sqlite3.Row
        try:
            self._check_pragmas(conn, "; refusing to write to it")
            if conn.execute("PRAGMA application_id").fetchone()[0] != APP_ID:  # written before ids existed
                with conn:
                    conn.execute(f"PRAGMA application_id = {APP_ID}")
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            yield conn
        except sqlite3.Error as exc:
            raise self._db_error(exc) from None
        finally:
            conn.close()

    # ---- runs ---------------------------------------------------------------------------------------------------
    def add(self, *, kind: str, model: dict, layout: dict, metrics: dict, hardware: dict, software: dict,
            status: Literal["ok", "failed"] = "ok", error: str | None = None, sweep_id: str | None = None,
            time_utc: str | None = None) -> int:
        """Store one run in one transaction; return its id. ``hardware`` must carry its ``fingerprint``.

        When the run cannot be stored, it is written to a recovery file and ``RunStoreError`` says where."""
        when = time_utc or dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        record = {"kind": kind, "model": model, "layout": layout, "metrics": metrics, "hardware": hardware,
                  "software": software, "status": status, "error": error, "sweep_id": sweep_id, "time_utc": when}
        try:
            return self._insert(record)
        except RunStoreError as exc:
            raise RunStoreError(f"{exc}; {self._save_unsaved(record, str(exc))}") from None

    def _insert(self, record: dict[str, Any]) -> int:
        if record["kind"] not in KINDS:
            raise InputError(f"kind must be one of {', '.join(KINDS)}; got '{record['kind']}'")
        if record["status"] not in ("ok", "failed"):
            raise InputError(f"status must be ok or failed; got '{record['status']}'")
        values = (record["time_utc"], record["kind"], record["hardware"].get("fingerprint", ""),
                  *(json.dumps(record[k], sort_keys=True) for k in ("hardware", "software", "model", "layout",
                                                                    "metrics")),
                  record["status"], record["error"], record["sweep_id"])
        with self._write() as conn:
            if not _allows_kind(conn, record["kind"]):
                _widen_kinds(conn)
            with conn:
                cur = conn.execute(
                    "INSERT INTO runs (time_utc, kind, fingerprint, hardware_json, software_json, model_json, "
                    "layout_json, metrics_json, status, error, sweep_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    values)
            assert cur.lastrowid is not None  # an INSERT into a rowid table always sets it
            return int(cur.lastrowid)

    def _save_unsaved(self, record: dict[str, Any], reason: str) -> str:
        """Write ``record`` to a recovery file (next to the database, else in the user data dir); return the
        sentence for the error message saying where it is and how to store it."""
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        name = f"{self.path.name[:150]}.unsaved-{record['kind']}-{stamp}-{uuid.uuid4().hex[:8]}.json"
        text = json.dumps({"format": UNSAVED_FORMAT, "version": SCHEMA_VERSION, "db": str(self.path),
                           "reason": reason, "run": record}, indent=2, sort_keys=True) + "\n"
        problems = []
        dirs = [Path(platformdirs.user_data_dir("scaleright")) / "unsaved"]
        if path_problem(self.path.parent, want="dir") is None and path_problem(self.path) in (None, "file not found"):
            dirs.insert(0, self.path.parent)  # next to the database when it is (or would be) a file there
        for d in dirs:
            try:
                d.mkdir(parents=True, exist_ok=True)
                saved = write_atomic("recovery file", d / name, text)
            except (OSError, InputError) as exc:
                problems.append(str(exc))
                continue
            return (f"the finished {record['kind']} run was not stored; it is saved in {saved} (store it with "
                    f"`scaleright runs import {saved} --db {self.path}` once the database is usable)")
        return (f"the finished {record['kind']} run was not stored and no recovery file could be written "
                f"({'; '.join(problems)}); the run as JSON: {json.dumps(record, sort_keys=True)}")

    def import_unsaved(self, path: str | Path, *, flag: str = "FILE") -> int:
        """Store the run in a recovery file written by ``add``; return its new id."""
        from scaleright.textfile import check_input_file, read_text

        p = check_input_file(flag, path)
        text = read_text(p)
        try:
            data = _parse_json(text)
        except ValueError as exc:
            raise InputError(f"{flag}={_short(p)}: not a scaleright recovery file ({exc})") from None
        if not isinstance(data, dict) or data.get("format") != UNSAVED_FORMAT or not isinstance(data.get("run"), dict):
            raise InputError(f"{flag}={_short(p)}: not a scaleright recovery file (expected a JSON object with "
                             f"\"format\": \"{UNSAVED_FORMAT}\" and a \"run\" object)")
        run = data["run"]
        unknown = sorted(set(run) - _RUN_KEYS)
        missing = sorted({"kind", "model", "layout", "metrics", "hardware", "software"} - set(run))
        if unknown or missing:
            raise InputError(f"{flag}={_short(p)}: the run has " + "; ".join(
                part for part in (f"unknown keys {unknown}" if unknown else "",
                                  f"missing keys {missing}" if missing else "") if part))
        for k in _JSON:
            if not isinstance(run[k], dict):
                raise InputError(f"{flag}={_short(p)}: run.{k} must be a JSON object")
        record = {"status": "ok", "error": None, "sweep_id": None, "time_utc": None, **run}
        record["time_utc"] = record["time_utc"] or dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        try:
            return self._insert(record)
        except RunStoreError as exc:
            raise RunStoreError(f"{exc}; the run is still only in {_short(p)}") from None

    def list(self, kind: str | None = None, *, status: str | None = None, fingerprint: str | None = None,
             damaged: list[str] | None = None) -> list[dict[str, Any]]:
        """Runs (oldest first), optionally filtered; failed runs are included unless ``status="ok"``.

        A row whose JSON columns do not parse raises ``RunStoreError`` naming the run and column, unless
        ``damaged`` is a list: then the row is skipped and that message appended to it."""
        if kind is not None and kind not in KINDS:
            raise InputError(f"kind must be one of {', '.join(KINDS)}; got '{kind}'")
        if status is not None and status not in ("ok", "failed"):
            raise InputError(f"status must be ok or failed; got '{status}'")
        where, args = [], []
        for col, val in (("kind", kind), ("status", status), ("fingerprint", fingerprint)):
            if val is not None:
                where.append(f"{col} = ?")
                args.append(val)
        sql = "SELECT * FROM runs" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id"
        rows = self._query(sql, tuple(args))
        out = []
        for row in rows:
            try:
                out.append(_row_to_run(row, self._where))
            except RunStoreError as exc:
                if damaged is None:
                    raise
                damaged.append(str(exc))
        return out

    def get(self, run_id: int) -> dict[str, Any]:
        """One run by id; ``RunNotFoundError`` if absent, ``InputError`` for an id outside 1..2**63-1."""
        check_run_id(run_id)
        rows = self._query("SELECT * FROM runs WHERE id = ?", (run_id,))
        row = rows[0] if rows else None
        if row is None:
            raise RunNotFoundError(f"no run with id {run_id} in {self.path}")
        return _row_to_run(row, self._where)

    def export(self, fmt: Literal["csv", "json"] = "json", out: str | Path | None = None,
               kind: str | None = None, *, damaged: builtins.list[str] | None = None) -> str:
        """All runs as JSON (a list, NaN as null) or CSV (model., layout., metrics. fields flattened, formula
        cells neutralised); also written atomically to ``out``, which may not be the database itself."""
        if fmt not in ("csv", "json"):
            raise InputError(f"export format must be csv or json; got '{fmt}'")
        if out is not None:
            check_output_path("--out", out)
            refuse_input_as_output("--out", out, [self.path, f"{self.path}-wal", f"{self.path}-shm"])
        runs = self.list(kind, damaged=damaged)
        text = runs_to_json(runs) if fmt == "json" else runs_to_csv(runs)
        if out is not None:
            write_atomic("--out", out, text)
        return text

    def integrity(self) -> str:
        """``PRAGMA integrity_check`` result ("ok" when the file is sound)."""
        return str(_text(self._query("PRAGMA integrity_check")[0][0]))
