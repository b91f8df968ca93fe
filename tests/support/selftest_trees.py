"""Self-test suite trees that fail on purpose (test bodies a `ci run --suites-dir` tree holds), the cpu self-test
rows they serve, and the rows a JUnit holds: read by the host runs and the container runs alike."""

from __future__ import annotations

from pathlib import Path

from junitparser.xunit2 import JUnitXml

from ci.stack import loader, plan
from support.paths import REPO

PLANNED = plan.build(loader.load(REPO / "stack")).select(targets=["cpu"], suites=["selftest"]).rows
ROWS = [r.id for r in PLANNED]


def rows_in(junit: Path) -> list[str]:
    cases = [c for s in JUnitXml.fromfile(str(junit)) for c in s]
    return [p.value for c in cases for p in c.properties() if p.name == "stackgate.row"]


# serves every cpu self-test row; fails the two whose context is over 4096
FAILING_TEST = """\
import pytest


@pytest.mark.track("harness-selftest")
def test_context_fits(row):
    assert row.data["context"] <= 4096, f"context {row.data['context']} is over 4096"
"""


def failing_tree(root: Path) -> Path:
    (root / "selftest").mkdir(parents=True)
    (root / "selftest" / "test_fits.py").write_text(FAILING_TEST)
    return root


# the body of a self-test tree's test_rows.py (after `ROWS = [...]`): the first row's JIT log torn mid-line
TORN_LOG = """
import os
import pytest


@pytest.mark.track("harness-selftest")
def test_row(row):
    if row.id == ROWS[0]:  # a process killed mid-write leaves half a line, and the next event runs into it
        with open(os.environ["STACKGATE_JIT_LOG"], "a") as fh:
            fh.write('{"kernel": "torn", "cache_')
            fh.write('{"kernel": "whole_kernel", "cache_hit": false}\\n')
"""

# the body of a test_rows.py whose JUnit cannot be rewritten after the first row
CANNOT_WRITE_JUNIT = """
import os
import shutil
import pytest


@pytest.mark.track("harness-selftest")
def test_row(row):
    if row.id == ROWS[1]:  # from now on the JUnit cannot be rewritten (as on a full disk): its path is a folder
        junit = os.path.join(os.path.dirname(os.environ["STACKGATE_JIT_LOG"]), "junit-cpu-selftest-0.xml")
        os.unlink(junit)
        os.makedirs(os.path.join(junit, "blocked"))
"""
