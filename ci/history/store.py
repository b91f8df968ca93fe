"""The history file: every build appended in one transaction, read back for the report, merged from another file.

SQLite through the standard library, one file the user names; no server. Each write is one `BEGIN IMMEDIATE`
transaction: a write killed half way (SIGKILL, a lost agent) leaves the history as it was before it, SQLite's journal
rolled back by the next reader, and two writers at once take turns (the second waits up to `WAIT_S` for the first),
so neither loses its build. A file is data from elsewhere (a Buildkite artifact of another build): one that is not a
stackgate history, or holds a trigger or view, or is newer than this code, is refused, never written over."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ci.common.errors import ReportError, UsageError
from ci.history import sql_schema
from ci.history.record import STATUSES, Build

WAIT_S = 120.0  # how long a writer waits for another to finish its build
_TABLES = {"build", "row_name", "metric_name", "run", "verdict", "ident"}


def _refused(path: Path, why: str) -> UsageError:
    return UsageError(
        f"{path}: {why}",
        hint="name another file with --history PATH (a new one is made), or leave the history out with --no-history",
    )


@contextmanager
def _connected(path: Path, *, write: bool) -> Iterator[sqlite3.Connection]:
    """`path` opened, checked to be a history, brought to the current schema (where writing), closed after."""
    if not write and not path.exists():
        raise _refused(path, "no such file")
    try:
        if write:
            path.parent.mkdir(parents=True, exist_ok=True)
        # a reader opens read-write where it may: a write killed half way left a journal only a writer can roll back
        mode = "rwc" if write else "rw" if os.access(path, os.W_OK) else "ro"
        uri = f"{path.resolve().as_uri()}?mode={mode}"
        conn = sqlite3.connect(uri, uri=True, timeout=WAIT_S, isolation_level=None)
    except (OSError, sqlite3.Error) as exc:
        raise _failed(path, exc, write) from None
    try:
        conn.execute("PRAGMA trusted_schema = OFF")  # nothing in the file runs as a function of ours
        conn.execute("PRAGMA foreign_keys = ON")
        _check(conn, path)
        yield conn
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError) and write:
            raise _failed(path, exc, write) from None
        raise _refused(path, f"not a readable stackgate history ({exc})") from None
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        if write:
            raise
        raise _refused(path, f"holds a value no stackgate history holds ({type(exc).__name__}: {exc})") from None
    finally:
        conn.close()


def _failed(path: Path, exc: Exception, write: bool) -> ReportError:
    what = "write" if write else "read"
    return ReportError(
        f"{path}: cannot {what} the history ({exc}); it is as it was before this report",
        hint="check that the folder is writable and has room, then run the report again; --no-history leaves it out",
    )


def _check(conn: sqlite3.Connection, path: Path) -> None:
    app, version = conn.execute("PRAGMA application_id").fetchone()[0], conn.execute("PRAGMA user_version").fetchone()
    objects = conn.execute("SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'").fetchall()
    if app == 0 and version[0] == 0 and not objects:
        return  # a new, empty file: made a history by the first write
    if app != sql_schema.APPLICATION_ID:
        raise _refused(path, "not a stackgate history (another application's SQLite file, or not SQLite)")
    if version[0] > sql_schema.VERSION:
        raise _refused(path, f"a history of schema {version[0]}, newer than this stackgate's ({sql_schema.VERSION})")
    odd = [f"{kind} {name}" for kind, name in objects if kind not in ("table", "index")]
    odd += [f"table {name}" for kind, name in objects if kind == "table" and name not in _TABLES]
    if odd:
        raise _refused(path, f"holds what no stackgate history holds: {', '.join(sorted(odd))}")


def _current(conn: sqlite3.Connection) -> None:
    """The file at sql_schema.VERSION, in the caller's transaction: made where new, migrated where older."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version == 0:
        sql_schema.create(conn)
        return
    for v in range(version, sql_schema.VERSION):
        sql_schema.MIGRATIONS[v](conn)
    conn.execute(f"PRAGMA user_version = {sql_schema.VERSION}")


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE")  # the write lock now, not at the first write: writers queue here
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def migrate(path: Path) -> int:
    """`path` brought to the current schema (in one transaction); its version before."""
    with _connected(path, write=True) as conn, _transaction(conn):
        before = int(conn.execute("PRAGMA user_version").fetchone()[0])
        _current(conn)
    return before


def append(path: Path, build: Build) -> int:
    """`build` written into the history at `path` (made where absent), in one transaction; a build of the same key
    is replaced, keeping its number. Its number in the history."""
    with _connected(path, write=True) as conn:
        try:
            with _transaction(conn):
                _current(conn)
                return _write(conn, build)
        except sqlite3.OperationalError as exc:  # locked past WAIT_S, disk full, read-only
            raise _failed(path, exc, True) from None


def _write(conn: sqlite3.Connection, build: Build) -> int:
    fields = (
        build.at.isoformat(),
        build.branch,
        build.commit,
        build.stack,
        json.dumps(list(build.vllm)),
        json.dumps([list(pair) for pair in build.images]),
        build.number,
        build.url,
    )
    found = conn.execute("SELECT id FROM build WHERE key = ?", (build.key,)).fetchone()
    if found:
        number = int(found[0])
        conn.execute("DELETE FROM run WHERE build = ?", (number,))
        conn.execute("DELETE FROM verdict WHERE build = ?", (number,))
        conn.execute(
            "UPDATE build SET at = ?, branch = ?, fork_commit = ?, stack = ?, vllm = ?, images = ?, number = ?, "
            "url = ? WHERE id = ?",
            (*fields, number),
        )
    else:
        number = int(
            conn.execute(
                "INSERT INTO build (key, at, branch, fork_commit, stack, vllm, images, number, url) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (build.key, *fields),
            ).lastrowid
            or 0
        )
    conn.executemany(
        "INSERT OR IGNORE INTO row_name (name, change, target) VALUES (?, ?, ?)",
        ((r.row, r.change, r.target) for r in build.runs),
    )
    rows = dict(conn.execute("SELECT name, id FROM row_name"))
    units = {name: unit for r in build.runs for name, _, unit in r.metrics}
    conn.executemany("INSERT OR IGNORE INTO metric_name (name, unit) VALUES (?, ?)", units.items())
    metric = dict(conn.execute("SELECT name, id FROM metric_name"))
    ident = {text: sql_schema.intern(conn, text) for text in {t for r in build.runs for t in r.ids}}
    status = {s: i for i, s in enumerate(STATUSES)}
    conn.executemany(
        "INSERT INTO run (build, row, status, metrics, image, fork_commit) VALUES (?, ?, ?, ?, ?, ?)",
        (
            (
                number,
                rows[r.row],
                status[r.status],
                sql_schema.pack([(metric[n], v) for n, v, _ in r.metrics]),
                ident[r.image],
                ident[r.commit],
            )
            for r in build.runs
        ),
    )
    conn.executemany(
        "INSERT INTO verdict (build, change, target, criterion, status) VALUES (?, ?, ?, ?, ?)",
        ((number, j.change, j.target, j.criterion, j.status) for j in build.verdicts),
    )
    return number


@contextmanager
def reading(path: Path) -> Iterator[sqlite3.Connection | None]:
    """A connection to read the history at `path` in the current schema, inside one snapshot (a writer appending
    meanwhile is not half seen); None where there is no history yet. An older file is read through a migrated copy:
    reading never writes the user's file."""
    if not path.exists():
        yield None
        return
    with _connected(path, write=False) as conn:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == sql_schema.VERSION:
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")
            return
    if version == 0:
        yield None
        return
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="stackgate-history-") as tmp:
        copy = Path(tmp) / path.name
        shutil.copyfile(path, copy)
        migrate(copy)
        with reading(copy) as conn:
            yield conn
