"""The history file (ci/history/store.py): one transaction per build, so a write killed half way leaves the earlier
builds whole and two writers at once both land; a build reported again replaced, not counted twice; histories that
went apart joined again; an older schema migrated (version 1 to 2) and read without being written; anything that is
not a stackgate history refused, never written over."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from support.history_builds import T0, build
from support.paths import REPO, TESTS

from ci.common.errors import UsageError
from ci.history import join, past, sql_schema, store


def keys(path: Path) -> list[str]:
    return [b.key for b in past.read(path, since=T0, last=0).builds]


# A child that appends a build of many rows, and stops still inside its transaction, once SQLite has begun writing it
# into the file (a small page cache spills the pages early): it writes a mark, then sleeps until it is killed.
_HELD = """
import sqlite3, sys, time
from pathlib import Path
from ci.history import store
from support.history_builds import build

path, mark, hold = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
connect = sqlite3.connect

def held(*args, **kwargs):
    conn = connect(*args, **kwargs)
    conn.execute("PRAGMA cache_size = 8")  # pages spill to the file before the commit
    calls = [0]
    def progress():
        calls[0] += 1
        if conn.in_transaction and calls[0] == 400:
            mark.write_text("inside")
            time.sleep(hold)
        return 0
    conn.set_progress_handler(progress, 50)
    return conn

sqlite3.connect = held
store.append(path, build(int(sys.argv[4]), rows=int(sys.argv[5])))
"""


def _child(tmp_path: Path, history: Path, mark: Path, hold: float, n: int, rows: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{TESTS}"}
    argv = [sys.executable, "-c", _HELD, str(history), str(mark), str(hold), str(n), str(rows)]
    return subprocess.Popen(argv, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)


def _wait_for(mark: Path, child: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while not mark.exists():
        assert child.poll() is None, child.stderr.read() if child.stderr else ""
        assert time.monotonic() < deadline, "the writer never reached its transaction"
        time.sleep(0.02)


def test_a_write_killed_half_way_leaves_the_history_readable_with_the_earlier_builds(tmp_path: Path) -> None:
    history = tmp_path / "history.sqlite"
    for n in (1, 2):
        store.append(history, build(n))
    before = history.stat().st_size
    child = _child(tmp_path, history, tmp_path / "mark", 600, 3, 3000)
    _wait_for(tmp_path / "mark", child)
    assert history.stat().st_size > before or Path(f"{history}-journal").exists()  # the write was under way
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert Path(f"{history}-journal").exists()  # a hot journal: SQLite rolls the half write back on the next open
    assert keys(history) == ["results:1", "results:2"]
    conn = sqlite3.connect(history)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert conn.execute("SELECT count(*) FROM run").fetchone() == (6,)
    conn.close()
    store.append(history, build(4))  # and it takes the next build
    assert keys(history) == ["results:1", "results:2", "results:4"]


def test_two_writers_at_once_both_land(tmp_path: Path) -> None:
    history = tmp_path / "history.sqlite"
    store.append(history, build(1))
    first = _child(tmp_path, history, tmp_path / "first", 2, 2, 500)  # holds the write lock 2 s inside its write
    _wait_for(tmp_path / "first", first)
    second = _child(tmp_path, history, tmp_path / "second", 0, 3, 500)  # must wait its turn, then write
    assert first.wait(timeout=120) == 0, first.stderr.read() if first.stderr else ""
    assert second.wait(timeout=120) == 0, second.stderr.read() if second.stderr else ""
    assert keys(history) == ["results:1", "results:2", "results:3"]
    runs = past.read(history, since=T0, last=10).runs
    assert sum(len(v) for v in runs.values()) == 3 + 500 + 500


def test_a_build_reported_again_is_replaced_keeping_its_number(tmp_path: Path) -> None:
    history = tmp_path / "history.sqlite"
    assert store.append(history, build(1)) == 1
    assert store.append(history, build(2)) == 2
    assert store.append(history, build(1, status="failure")) == 1
    got = past.read(history, since=T0, last=10)
    assert [b.id for b in got.builds] == [1, 2]
    assert [s.status for s in got.runs["48407.cuda-sm90.m0.00000000"]] == ["failure", "pass"]


def test_what_a_build_recorded_reads_back_as_written(tmp_path: Path) -> None:
    history = tmp_path / "history.sqlite"
    store.append(history, build(5))
    with store.reading(history) as conn:
        assert list(join.builds(conn)) == [build(5)]


def test_two_histories_that_went_apart_join_again(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours.sqlite", tmp_path / "theirs.sqlite"
    for n in (1, 2):
        store.append(ours, build(n))
        store.append(theirs, build(n))
    store.append(ours, build(3))
    store.append(theirs, build(4, commit="bbbbbbb2"))
    assert join.merge(ours, theirs) == 1
    assert join.merge(ours, theirs) == 0
    assert keys(ours) == ["results:1", "results:2", "results:3", "results:4"]


def _version_1(path: Path) -> None:
    """A history as version 1 wrote it: builds and runs, no build ids per run."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    sql_schema.create(conn, version=1)
    for n, commit in ((1, "aaaaaaa1"), (2, "bbbbbbb2")):
        conn.execute(
            "INSERT INTO build (key, at, branch, fork_commit, stack, vllm, images, number, url) "
            "VALUES (?, ?, 'main', ?, 'sha256:s', '[]', ?, NULL, '')",
            (f"results:{n}", (T0 + timedelta(days=n)).isoformat(), commit, f'[["cuda-sm90", "sha256:img{n}"]]'),
        )
    conn.execute("INSERT INTO row_name (name, change, target) VALUES ('48407.cuda-sm90.m0.00000000', '48407', "
                 "'cuda-sm90'), ('selftest.cpu.x.00000000', 'selftest', 'cpu')")  # fmt: skip
    conn.execute("INSERT INTO metric_name (name, unit) VALUES ('warm_request_ms', 'ms')")
    for n in (1, 2):
        conn.execute("INSERT INTO run (build, row, status, metrics) VALUES (?, 1, ?, ?)",
                     (n, n - 1, sql_schema.pack([(1, 40.0 + n)])))  # fmt: skip
        conn.execute("INSERT INTO run (build, row, status, metrics) VALUES (?, 2, 0, ?)", (n, b""))
    conn.execute("COMMIT")
    conn.close()


def test_a_version_1_history_migrates_to_version_2_with_each_runs_build_ids(tmp_path: Path) -> None:
    history = tmp_path / "history.sqlite"
    _version_1(history)
    raw = history.read_bytes()
    got = past.read(history, since=T0, last=10)  # read through a migrated copy: the file is not written
    assert history.read_bytes() == raw
    row = got.runs["48407.cuda-sm90.m0.00000000"]
    assert [(s.status, s.image, s.commit, s.metrics) for s in row] == [
        ("pass", "sha256:img1", "aaaaaaa1", (("warm_request_ms", 41.0),)),
        ("failure", "sha256:img2", "bbbbbbb2", (("warm_request_ms", 42.0),)),
    ]
    assert [s.image for s in got.runs["selftest.cpu.x.00000000"]] == ["", ""]  # no image recorded for its target
    assert store.migrate(history) == 1
    conn = sqlite3.connect(history)
    assert conn.execute("PRAGMA user_version").fetchone() == (sql_schema.VERSION,)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
    store.append(history, build(3))
    assert keys(history) == ["results:1", "results:2", "results:3"]


def test_a_migration_that_fails_leaves_the_file_at_its_version(tmp_path: Path, monkeypatch) -> None:
    history = tmp_path / "history.sqlite"
    _version_1(history)

    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE ident (id INTEGER PRIMARY KEY, text TEXT)")
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setitem(sql_schema.MIGRATIONS, 1, broken)
    with pytest.raises(Exception, match="cannot write the history"):
        store.append(history, build(3))
    conn = sqlite3.connect(history)
    assert conn.execute("PRAGMA user_version").fetchone() == (1,)
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'ident'").fetchone() == (0,)
    conn.close()


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda p: p.write_text("not a database at all " * 100), "not a readable stackgate history"),
        (lambda p: sqlite3.connect(p).execute("CREATE TABLE t (x)"), "not a stackgate history"),
        (lambda p: _newer(p), "newer than this stackgate's"),
        (lambda p: _with_trigger(p), "holds what no stackgate history holds: trigger"),
    ],
    ids=["not-sqlite", "another-application", "newer-schema", "a-trigger"],
)
def test_a_file_that_is_no_history_of_ours_is_refused_and_left_as_it_was(tmp_path: Path, make, said: str) -> None:
    path = tmp_path / "history.sqlite"
    make(path)
    raw = path.read_bytes()
    for attempt in (lambda: store.append(path, build(1)), lambda: past.read(path, since=T0, last=1)):
        with pytest.raises(UsageError, match=said) as exc:
            attempt()
        assert "--no-history" in exc.value.hint
    assert path.read_bytes() == raw


def _newer(path: Path) -> None:
    store.append(path, build(1))
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {sql_schema.VERSION + 1}")
    conn.commit()
    conn.close()


def _with_trigger(path: Path) -> None:
    store.append(path, build(1))
    conn = sqlite3.connect(path)
    conn.execute("CREATE TRIGGER t AFTER INSERT ON build BEGIN DELETE FROM run; END")
    conn.commit()
    conn.close()


def test_a_runs_metrics_keep_7_significant_digits_and_a_value_past_float32_whole() -> None:
    values = [(0, 1537.2), (1, 0.0), (2, 4.2e-9), (3, 1e300), (4, -2.5e-40), (5, 123456789.0)]
    blob = sql_schema.pack(values)
    assert len(blob) == 4 * 6 + 2 * 10  # a float32 each, a float64 for the two out of its range
    back = [(m, sql_schema.shown(v)) for m, v in sql_schema.unpack(blob)]
    assert back == [(0, 1537.2), (1, 0.0), (2, 4.2e-9), (3, 1e300), (4, -2.5e-40), (5, 123456800.0)]
    assert sql_schema.pack(sql_schema.unpack(blob)) == blob  # read back and written again: the same bytes
    with pytest.raises(ValueError, match="ends inside a value"):
        sql_schema.unpack(blob[:-1])


def test_a_history_joined_into_none_yet_becomes_its_checked_copy_at_the_current_schema(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs.sqlite"
    _version_1(theirs)
    into = tmp_path / "history" / "history.sqlite"
    assert join.merge(into, theirs) == 2
    assert keys(into) == ["results:1", "results:2"]
    conn = sqlite3.connect(into)
    assert conn.execute("PRAGMA user_version").fetchone() == (sql_schema.VERSION,)
    conn.close()
    (tmp_path / "garbage.sqlite").write_text("garbage " * 64)
    with pytest.raises(UsageError, match="not a readable stackgate history"):
        join.merge(tmp_path / "other" / "history.sqlite", tmp_path / "garbage.sqlite")
    assert not (tmp_path / "other" / "history.sqlite").exists()
