"""What a report reads of its history: every build listed, and the runs of its rows that the rules and the trends
need: the recent builds', with their metrics, and a failing row's back to its last pass."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ci.history import sql_schema, store
from ci.history.record import STATUSES, Seen

_ASKED = 500  # rows asked for in one statement (SQLite's limit on a statement's parameters is higher)


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
    metrics: Collection[str] | None = None,
) -> Past:
    """Every build; every row's runs in the builds from `since` on and among the `last` builds, with their metrics;
    and each row of `failing`, its runs on `branch` back to its last pass there (that pass included). The build keyed
    `leave_out` (the one being reported again) is left out; `metrics`: only these of each run (all where None). No
    history yet reads as an empty one."""
    with store.reading(path) as conn:
        return _read(conn, since, last, failing, branch, leave_out, metrics) if conn else Past()


def _read(
    conn: sqlite3.Connection,
    since: datetime,
    last: int,
    failing: Collection[str],
    branch: str,
    leave_out: str,
    wanted: Collection[str] | None,
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
    metric = {i: n for i, n in conn.execute("SELECT id, name FROM metric_name") if wanted is None or n in wanted}
    ident = dict(conn.execute("SELECT id, text FROM ident"))
    runs: dict[str, dict[int, Seen]] = {}

    def seen(build: int, status: int, image: int, commit: int, blob: bytes = b"") -> Seen:
        if not 0 <= status < len(STATUSES):
            raise ValueError(f"a run's status {status!r} (0 to {len(STATUSES) - 1})")
        b = by_id[build]
        values = tuple((metric[m], v) for m, v in sql_schema.unpack(blob) if m in metric) if blob else ()
        return Seen(
            build=build,
            number=b.number,
            at=b.at,
            branch=b.branch,
            status=STATUSES[status],
            image=ident[image],
            commit=ident[commit],
            metrics=values,
        )

    if recent:
        for build, row, status, blob, image, commit in conn.execute(
            "SELECT build, row, status, metrics, image, fork_commit FROM run WHERE build >= ?", (min(recent),)
        ):
            if build in recent:
                runs.setdefault(names[row], {})[build] = seen(build, status, image, commit, blob)
    # Each failing row back to its last pass on the branch: the branch's builds newest first, asking each only for
    # the rows still open (a row's streak costs its length, not the history's).
    ids = {n: i for i, n in names.items()}
    still = {ids[n]: n for n in failing if n in ids}
    for b in reversed(builds):
        if not still:
            break
        if b.branch != branch:
            continue
        asked = list(still)
        for at in range(0, len(asked), _ASKED):
            part = asked[at : at + _ASKED]
            for row, status, image, commit in conn.execute(
                "SELECT row, status, image, fork_commit FROM run WHERE build = ? AND row IN "
                f"({', '.join('?' * len(part))})",
                (b.id, *part),
            ):
                runs.setdefault(still[row], {}).setdefault(b.id, seen(b.id, status, image, commit))
                if STATUSES[status] == "pass":
                    del still[row]
    order = {b.id: i for i, b in enumerate(builds)}
    return Past(
        builds=builds,
        runs={row: tuple(sorted(found.values(), key=lambda s: order[s.build])) for row, found in runs.items()},
        units=dict(conn.execute("SELECT name, unit FROM metric_name")),
    )
