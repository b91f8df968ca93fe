"""The history file's tables, version by version, and the migrations between them.

A history is a SQLite file (`PRAGMA application_id` = APPLICATION_ID: a file made by anything else is refused, not
overwritten) whose `PRAGMA user_version` is its schema version. `current(conn)` brings one up to VERSION inside one
transaction: a migration that stops half way leaves the file as it was. A file newer than this code is refused, naming
both versions.

Sizes: 1,000 builds of 832 rows keep each row's run as one record, its metrics packed into one blob (`pack`: a
little-endian u16 metric id and a float32 per metric); a record per metric held 5.8 million records and outgrew the
100 MB a history is held to, and so did float64 values (ci/bench/history_bench.py measures it)."""

from __future__ import annotations

import sqlite3
import struct
from collections.abc import Callable, Sequence

APPLICATION_ID = 0x53474849  # "SGHI": a stackgate history
VERSION = 2

# Version 1: builds, each row's run (status and metrics) and each criterion's verdict per change and target.
V1 = """
CREATE TABLE build (
    id INTEGER PRIMARY KEY,            -- its number in the history: the order builds were first written
    key TEXT NOT NULL UNIQUE,          -- buildkite:<build id>, else results:<sha256 of its results>
    at TEXT NOT NULL,                  -- when its rows ran, ISO 8601 in UTC
    branch TEXT NOT NULL,
    fork_commit TEXT NOT NULL,         -- the fork commit judged, '' for a stock vLLM
    stack TEXT NOT NULL,               -- the stack digest
    vllm TEXT NOT NULL,                -- the vLLM builds its rows recorded, a JSON array
    images TEXT NOT NULL,              -- [[target, image digest], ...], JSON
    number INTEGER,                    -- its Buildkite build number
    url TEXT NOT NULL
);
CREATE INDEX build_branch_at ON build (branch, at);
CREATE TABLE row_name (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, change TEXT NOT NULL, target TEXT NOT NULL);
CREATE TABLE metric_name (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, unit TEXT NOT NULL);
CREATE TABLE run (
    build INTEGER NOT NULL REFERENCES build (id) ON DELETE CASCADE,
    row INTEGER NOT NULL REFERENCES row_name (id),
    status INTEGER NOT NULL,           -- its index in ci.history.record.STATUSES
    metrics BLOB NOT NULL,             -- schema.pack
    PRIMARY KEY (build, row)
) WITHOUT ROWID;
CREATE TABLE verdict (
    build INTEGER NOT NULL REFERENCES build (id) ON DELETE CASCADE,
    change TEXT NOT NULL,
    target TEXT NOT NULL,              -- '' for a criterion judged on the change as a whole
    criterion TEXT NOT NULL,
    status TEXT NOT NULL,
    PRIMARY KEY (build, change, target, criterion)
) WITHOUT ROWID;
"""

# Version 2: each run's own build ids (its image and fork commit), which tell a flaky row (passed and failed on one
# build's ids) from a broken one; interned, as most runs of a build share them. And each row's runs by row, for the
# walk back from a failing row to its last pass.
V1_TO_V2 = """
CREATE TABLE ident (id INTEGER PRIMARY KEY, text TEXT NOT NULL UNIQUE);
INSERT INTO ident (id, text) VALUES (0, '');
ALTER TABLE run ADD COLUMN image INTEGER NOT NULL DEFAULT 0;        -- an ident id (no REFERENCES: it has a default)
ALTER TABLE run ADD COLUMN fork_commit INTEGER NOT NULL DEFAULT 0;  -- an ident id
CREATE INDEX run_row ON run (row, build);
"""


def _v1_to_v2(conn: sqlite3.Connection) -> None:
    """A version-1 run's build ids, from its build: the image its target's rows ran in where the build records one
    for the target, and the build's fork commit (a stock build's runs keep '': version 1 kept no vLLM build per run)."""
    import json

    for statement in _statements(V1_TO_V2):
        conn.execute(statement)
    builds = conn.execute("SELECT id, fork_commit, images FROM build").fetchall()
    for build, commit, images in builds:
        per_target: dict[str, set[str]] = {}
        for target, digest in json.loads(images):
            per_target.setdefault(target, set()).add(digest)
        one = {t: next(iter(d)) for t, d in per_target.items() if len(d) == 1}
        commit_id = intern(conn, commit)
        conn.execute("UPDATE run SET fork_commit = ? WHERE build = ?", (commit_id, build))
        for target, digest in one.items():
            conn.execute(
                "UPDATE run SET image = ? WHERE build = ? AND row IN (SELECT id FROM row_name WHERE target = ?)",
                (intern(conn, digest), build, target),
            )


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _v1_to_v2}  # from version N to N + 1


def _statements(script: str) -> list[str]:
    """A script's statements, one by one: `executescript` commits first, which would end the migration's
    transaction."""
    out, part = [], ""
    for line in script.splitlines():
        part += line.split("--", 1)[0] + "\n"
        if sqlite3.complete_statement(part):
            out.append(part.strip())
            part = ""
    return out


def create(conn: sqlite3.Connection, version: int = VERSION) -> None:
    """A new history's tables at `version` (VERSION; an older one for the migrations' tests), in the open
    transaction."""
    for statement in _statements(V1):
        conn.execute(statement)
    for v in range(1, version):
        MIGRATIONS[v](conn)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {version}")


def intern(conn: sqlite3.Connection, text: str) -> int:
    """`text`'s id in `ident`, added where new."""
    found = conn.execute("SELECT id FROM ident WHERE text = ?", (text,)).fetchone()
    if found:
        return int(found[0])
    return int(conn.execute("INSERT INTO ident (text) VALUES (?)", (text,)).lastrowid or 0)


_F32, _F64, _WIDE = struct.Struct("<Hf"), struct.Struct("<Hd"), 0x8000  # an id with _WIDE set: a float64 follows
_F32_MAX, _F32_TINY = 3.4e38, 1.2e-38


def pack(values: Sequence[tuple[int, float]]) -> bytes:
    """(metric id, value) pairs as the `run.metrics` blob: a little-endian u16 id and a float32 per metric (7
    significant digits, ample for numbers measured to 4), a float64 with the id's top bit set where a float32 cannot
    hold the value (out of its range)."""
    out = bytearray()
    for metric, value in values:
        if metric >= _WIDE:
            raise ValueError(f"metric id {metric}: a history holds at most {_WIDE} metric names")
        narrow = value == 0 or _F32_TINY <= abs(value) <= _F32_MAX
        out += _F32.pack(metric, value) if narrow else _F64.pack(metric | _WIDE, value)
    return bytes(out)


def unpack(blob: bytes) -> list[tuple[int, float]]:
    """The pairs of a `run.metrics` blob, as stored (a float32 as the float it is: `shown` gives its 7 digits)."""
    if len(blob) % _F32.size == 0:  # float32s alone, the usual blob: unpacked at once, then checked for a wide one
        pairs = list(_F32.iter_unpack(blob))
        if all(metric < _WIDE for metric, _ in pairs):
            return pairs
    out, at = [], 0
    while at < len(blob):
        if len(blob) - at < _F32.size:
            raise ValueError(f"a metrics blob of {len(blob)} bytes ends inside a value")
        (metric,) = struct.unpack_from("<H", blob, at)
        if metric & _WIDE:
            if len(blob) - at < _F64.size:
                raise ValueError(f"a metrics blob of {len(blob)} bytes ends inside a value")
            out.append((metric & ~_WIDE, _F64.unpack_from(blob, at)[1]))
            at += _F64.size
        else:
            out.append(_F32.unpack_from(blob, at))
            at += _F32.size
    return out


def shown(value: float) -> float:
    """A value as the 7 significant digits a float32 holds (1537.2, not 1537.199951171875)."""
    return float(f"{value:.7g}")
