"""The run's JUnit file, written by the harness itself and replaced atomically after every item.

A run killed at any moment leaves the previous complete file: every finished item is in it, and the
file always parses. The suite is named `stackgate.<target>.<suite>.<shard>` so merging runs never
folds two of them together (junitparser merges suites that compare equal).
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from junitparser import Error, Failure, Skipped
from junitparser.xunit2 import JUnitXml, TestCase, TestSuite

from harness import boundary
from harness.isolate import Outcome

DETAILS_LIMIT = 20_000  # characters of traceback/log kept per testcase


@dataclass(frozen=True, kw_only=True)
class Case:
    nodeid: str
    outcome: Outcome
    properties: tuple[tuple[str, str], ...]  # the harness's (row, JIT) then the test's own


suite_name = boundary.suite_name  # stackgate.<target>.<suite>.<shard>


def _names(nodeid: str) -> tuple[str, str]:
    """pytest's convention: classname is the dotted module path (and class), name the function[param]."""
    path, _, rest = nodeid.partition("::")
    parts = rest.split("::")
    module = path[:-3] if path.endswith(".py") else path
    classname = ".".join([module.replace("/", "."), *parts[:-1]])
    return classname, parts[-1] if parts else nodeid


def _case(c: Case, folder: Path) -> TestCase:
    classname, name = _names(c.nodeid)
    tc = TestCase(name, classname, round(c.outcome.duration_s, 3))
    for key, value in c.properties:
        tc.add_property(key, value)
    o = c.outcome
    details = o.details[-DETAILS_LIMIT:]
    if o.status == "failed":
        tc.result = [_with_text(Failure(o.message), details)]
    elif o.status == "error":
        tc.result = [_with_text(Error(o.message), details)]
    elif o.status == "skipped":
        tc.result = [Skipped(o.message)]
    if o.log and o.status in ("failed", "error"):
        tc.system_out = f"full log: {_beside(Path(o.log), folder)}"
    return tc


def _beside(log: Path, folder: Path) -> str:
    """The log's path relative to the JUnit file's folder where it lies below it: results folders travel (an
    artifact, a copy under evidence/), and the path of the machine that ran them would not."""
    try:
        return str(log.resolve().relative_to(folder.resolve()))
    except ValueError:
        return str(log)


def _with_text(result: Failure | Error, text: str) -> Failure | Error:
    if text:
        result.text = text
    return result


def write(
    path: Path, name: str, properties: Mapping[str, str], cases: list[Case], owner: tuple[int, int] | None = None
) -> None:
    suite = TestSuite(name)
    suite.hostname = socket.gethostname()
    suite.timestamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    for key, value in properties.items():
        suite.add_property(key, value)
    for c in cases:
        suite.add_testcase(_case(c, path.parent))
    suite.update_statistics()
    xml = JUnitXml()
    xml.add_testsuite(suite)
    xml.update_statistics()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        xml.write(tmp, pretty=True)
        if owner is not None:
            os.chown(tmp, *owner)  # root in a container writes for the host user
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
