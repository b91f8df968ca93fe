"""The suites' pytest plugin: rows as parameters, one fresh process per item, JUnit written as items finish.

Load it with `-p harness.plugin` (what `python -m ci run` does) or from a conftest's `pytest_plugins`.
The same plugin plays two parts. In the parent session it collects, then runs each item as a child
`python -m pytest <nodeid>` and writes the JUnit file itself. In a child (`--stackgate-child FILE`)
it runs the one item normally and writes that item's reports to FILE before the process can exit.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from harness import jit_seen
from harness.child import Child
from harness.controller import Controller
from harness.items import ENV_REFUSE_JIT, ROWS_KEY, item_row, rows_doc
from harness.measure import Measurement
from harness.measure import record as _record
from harness.rows import ENV_ROWS, RowsFileError
from harness.rows import load as load_rows


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("stackgate")
    g.addoption("--stackgate-rows", help=f"rows.json to parametrize by (default: ${ENV_ROWS})")
    g.addoption("--stackgate-junit", help="write the run's JUnit XML here, rewritten after every item")
    g.addoption(
        "--stackgate-timeout",
        type=float,
        help="seconds per item (default: rows.json timeout_s)",
    )
    g.addoption("--stackgate-shard", default="0", help="shard index, part of the JUnit suite name")
    g.addoption(
        "--stackgate-row", action="append", default=[], help="only this row id (repeatable); other tests deselected"
    )
    g.addoption("--stackgate-inprocess", action="store_true", help="debugging only: run items in this process")
    g.addoption(
        "--stackgate-share",
        action="store_true",
        help="run the items in one child, one after another, sharing its imports and the engines its tests share; "
        "an item that crashes or hangs fails alone and the rest run each in its own process",
    )
    g.addoption("--stackgate-child", help=argparse.SUPPRESS)  # internal: the parent starts children with it


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "track(*ids): the tracks whose rows this test serves, one item per row")
    config.addinivalue_line("markers", f"jit_expected: this test compiles on purpose; ${ENV_REFUSE_JIT} spares it")
    path = config.getoption("stackgate_rows") or os.environ.get(ENV_ROWS)
    doc = None
    if path:
        try:
            doc = load_rows(path)
        except RowsFileError as exc:
            raise pytest.UsageError(str(exc)) from None
        os.environ[ENV_ROWS] = str(Path(path).resolve())  # children run from the rootdir
    config.stash[ROWS_KEY] = doc
    if config.getoption("stackgate_child"):
        child = Child(Path(config.getoption("stackgate_child")), share=config.getoption("stackgate_share"))
        config.pluginmanager.register(child, "stackgate-child")
    elif not config.getoption("stackgate_inprocess"):
        config.pluginmanager.register(Controller(config, doc), "stackgate-parent")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "row" not in metafunc.fixturenames:
        return
    doc = rows_doc(metafunc.config)
    if doc is None:
        raise RowsFileError(
            f"{metafunc.definition.nodeid} takes rows, but no rows file was given: "
            f"pass --stackgate-rows or set ${ENV_ROWS} (python -m ci run does)"
        )
    marker = metafunc.definition.get_closest_marker("track")
    tracks = set(marker.args) if marker else None
    only = set(metafunc.config.getoption("stackgate_row"))
    rows = [r for r in doc.rows if (tracks is None or r.track in tracks) and (not only or r.id in only)]
    metafunc.parametrize("row", rows, ids=[r.id for r in rows])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With --stackgate-row, a re-run of chosen rows: tests that serve no row are left out. A row test
    whose track has no row in this rows.json (pytest's empty-parameter item) is left out too: there is
    nothing for it to run, which is not a skip."""
    only_rows = bool(config.getoption("stackgate_row"))

    def drop(item: pytest.Item) -> bool:
        rowless = item_row(item) is None
        return rowless and (only_rows or "row" in getattr(item, "fixturenames", ()))

    dropped = [i for i in items if drop(i)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if not drop(i)]


@pytest.fixture
def record_measurement(request: pytest.FixtureRequest):
    """Attach a Measurement to this test's JUnit testcase (unit, phase, repeats, spread, samples)."""

    def _rec(m: Measurement) -> Measurement:
        return _record(request.node, m)

    return _rec


@pytest.fixture
def jit_window() -> jit_seen.Window:
    """Compiles in every process since this test started; `jit_seen.expect_aot(jit_window.seen())` checks them."""
    return jit_seen.Window()
