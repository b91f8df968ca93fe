"""What a report reads of its history: every build listed, and the runs of its rows that the rules and the trends
need: the recent builds', with their metrics, and a failing row's back to its last pass."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ci.history import schema, store
from ci.history.record import STATUSES, Seen


@dataclass(frozen=True, kw_only=True)
class Entry:
    """A build as the history lists it (its runs apart)."""

    id: int  # its number in the history
    key: str
    at: datetime
    branch: str
    commit: str
    number: int | None  # its Buildkite build number
    url: str

    @property
    def called(self) -> str:
        return f"build {self.number}" if self.number is not None else f"build #{self.id}"


@dataclass(frozen=True, kw_only=True)
class Past:
    """Every build (oldest first), and the runs of the rows asked for (each row's oldest first)."""

    builds: tuple[Entry, ...] = ()
    runs: Mapping[str, tuple[Seen, ...]] = field(default_factory=dict)
    units: Mapping[str, str] = field(default_factory=dict)  # metric -> its unit


def read(
    path: Path,
    *,
    since: datetime,
    last: int,
    failing: Collection[str] = (),
    branch: str = "",
    leave_out: str = "",
) -> Past:
    """Every build; every row's runs in the builds from `since` on and among the `last` builds, with their metrics;
    and each row of `failing`, its runs on `branch` back to its last pass there (that pass included). The build keyed
    `leave_out` (the one being reported again) is left out. No history yet reads as an empty one."""
    with store.reading(path) as conn:
        return _read(conn, since, last, failing, branch, leave_out) if conn else Past()


def _read(
    conn: sqlite3.Connection, since: datetime, last: int, failing: Collection[str], branch: str, leave_out: str
) -> Past:
    builds = tuple(
        Entry(id=i, key=k, at=datetime.fromisoformat(a), branch=b, commit=c, number=n, url=u)
        for i, k, a, b, c, n, u in conn.execute(
            "SELECT id, key, at, branch, fork_commit, number, url FROM build ORDER BY at, id"
        )
        if k != leave_out
    )
    by_id = {b.id: b for b in builds}
    recent = {b.id for b in builds if b.at >= since} | ({b.id for b in builds[-last:]} if last else set())
    names = dict(conn.execute("SELECT id, name FROM row_name"))
    metric = dict(conn.execute("SELECT id, name FROM metric_name"))
    ident = dict(conn.execute("SELECT id, text FROM ident"))
    runs: dict[str, dict[int, Seen]] = {}

    def seen(build: int, status: int, image: int, commit: int, blob: bytes = b"") -> Seen:
        b = by_id[build]
        values = tuple((metric[m], v) for m, v in schema.unpack(blob)) if blob else ()
        return Seen(build=build, number=b.number, at=b.at, branch=b.branch, status=STATUSES[status],
                    image=ident[image], commit=ident[commit], metrics=values)  # fmt: skip

    if recent:
        for build, row, status, blob, image, commit in conn.execute(
            "SELECT build, row, status, metrics, image, fork_commit FROM run WHERE build >= ?", (min(recent),)
        ):
            if build in recent:
                runs.setdefault(names[row], {})[build] = seen(build, status, image, commit, blob)
    ids = {n: i for i, n in names.items()}
    on_branch = {b.id for b in builds if b.branch == branch}
    for name in (n for n in failing if n in ids):
        back = conn.execute(
            "SELECT run.build, status, image, run.fork_commit FROM run JOIN build ON build.id = run.build "
            "WHERE row = ? ORDER BY build.at DESC, build.id DESC",
            (ids[name],),
        )
        for build, status, image, commit in back:
            if build in on_branch:
                runs.setdefault(name, {}).setdefault(build, seen(build, status, image, commit))
                if STATUSES[status] == "pass":
                    break
    order = {b.id: i for i, b in enumerate(builds)}
    return Past(
        builds=builds,
        runs={row: tuple(sorted(found.values(), key=lambda s: order[s.build])) for row, found in runs.items()},
        units=dict(conn.execute("SELECT name, unit FROM metric_name")),
    )
