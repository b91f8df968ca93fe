"""Histories joined: every build of one that another lacks, added (`merge`), and every build of a history as the
record it was written from (`builds`). Two builds of one branch that ran at once each appended to the history they
were given; the next build joins both (`ci history pull`, `ci history merge`)."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Collection, Iterator
from datetime import datetime
from pathlib import Path

from ci.history import sql_schema, store
from ci.history.record import STATUSES, Build, Judged, Run


def merge(into: Path, other: Path) -> int:
    """Every build of the history `other` that `into` lacks (by key), written into `into` in one transaction: two
    histories that went apart (two builds of a branch at once, each appending to the history it was given) join again.
    Where `into` is not there yet, it becomes a checked copy of `other` (brought to the current schema) at once, not
    build by build. How many builds were added."""
    if not into.exists():
        return _copied(into, other)
    with store.reading(other) as theirs, store._connected(into, write=True) as conn:
        try:
            with store._transaction(conn):
                store._current(conn)
                have = {k for (k,) in conn.execute("SELECT key FROM build")}
                added = [store._write(conn, b) for b in builds(theirs, leave_out=have)] if theirs else []
        except sqlite3.OperationalError as exc:
            raise store._failed(into, exc, True) from None
    return len(added)


def _copied(into: Path, other: Path) -> int:
    """`other`, checked whole (a stackgate history, every page readable), copied beside `into`, brought to the current
    schema there, then renamed to `into`: a copy that fails half way is never seen."""
    import shutil
    import tempfile

    with store.reading(other) as theirs:
        if theirs is None:
            return 0
        problem = theirs.execute("PRAGMA quick_check").fetchone()[0]
        if problem != "ok":
            raise store._refused(other, f"not a readable stackgate history (quick_check: {problem})")
        count = int(theirs.execute("SELECT count(*) FROM build").fetchone()[0])
    into.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=into.parent, prefix=f".{into.name}.", suffix=".tmp")
    os.close(fd)
    try:
        shutil.copyfile(other, tmp)
        store.migrate(Path(tmp))
        os.replace(tmp, into)
    except OSError as exc:
        raise store._failed(into, exc, True) from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return count


def builds(conn: sqlite3.Connection, leave_out: Collection[str] = ()) -> Iterator[Build]:
    """Every build of a history (`store.reading`) as the record it was written from, oldest first; those keyed in
    `leave_out` left out (their runs never read)."""
    rows = {i: (n, c, t) for i, n, c, t in conn.execute("SELECT id, name, change, target FROM row_name")}
    metric = {i: (n, u) for i, n, u in conn.execute("SELECT id, name, unit FROM metric_name")}
    ident = dict(conn.execute("SELECT id, text FROM ident"))
    listed = conn.execute(
        "SELECT id, key, at, branch, fork_commit, stack, vllm, images, number, url FROM build ORDER BY at, id"
    ).fetchall()
    for number, key, at, branch, commit, stack, vllm, images, bk, url in listed:
        if key in leave_out:
            continue
        runs = tuple(
            Run(
                row=rows[row][0],
                change=rows[row][1],
                target=rows[row][2],
                status=STATUSES[status],
                image=ident[image],
                commit=ident[fork],
                metrics=tuple((metric[m][0], v, metric[m][1]) for m, v in sql_schema.unpack(blob)),
            )
            for row, status, blob, image, fork in conn.execute(
                "SELECT row, status, metrics, image, fork_commit FROM run WHERE build = ?", (number,)
            )
        )
        verdicts = tuple(
            Judged(change=c, target=t, criterion=k, status=s)
            for c, t, k, s in conn.execute(
                "SELECT change, target, criterion, status FROM verdict WHERE build = ?", (number,)
            )
        )
        yield Build(
            key=key,
            at=datetime.fromisoformat(at),
            branch=branch,
            commit=commit,
            stack=stack,
            vllm=tuple(json.loads(vllm)),
            images=tuple((t, d) for t, d in json.loads(images)),
            number=bk,
            url=url,
            runs=runs,
            verdicts=verdicts,
        )
