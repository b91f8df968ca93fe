"""A harness that dies is never a green run: `ci run` exits non-zero naming the cause, and every row is accounted for,
in the JUnit (what finished) or in not-run.json (the row in flight and every later one). A torn JIT-log line, the
trace of a row process killed mid-write, is one unreadable compile of its row, not the end of the run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from junitparser.xunit2 import JUnitXml
from support.paths import REPO
from support.selftest_trees import CANNOT_WRITE_JUNIT, PLANNED, ROWS, TORN_LOG, rows_in

from ci.common.errors import EXIT_CODES


def _run(tmp_path: Path, body: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    tree = tmp_path / "suites" / "selftest"
    tree.mkdir(parents=True)
    (tree / "test_rows.py").write_text(body)
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "ci", "run", "cpu", "selftest", "--host", "--suites-dir",
                           str(tmp_path / "suites"), "--out", str(out)], cwd=REPO, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    return done, out


KILLS_ITS_HARNESS = """
import os, signal
import pytest


@pytest.mark.track("harness-selftest")
def test_row(row):
    if row.id == ROWS[1]:  # the second row: the harness (this process's parent) dies, as under the OOM killer
        os.kill(os.getppid(), signal.SIGKILL)
"""


def test_a_harness_killed_mid_run_is_a_run_error_and_the_rows_it_never_finished_are_not_run(tmp_path: Path) -> None:
    done, out = _run(tmp_path, f"ROWS = {ROWS!r}\n" + KILLS_ITS_HARNESS)
    assert done.returncode == 4, done.stdout + done.stderr  # rows could not be run: never 0
    assert "the harness was killed by SIGKILL before it ran 3 of the 4 rows" in done.stderr
    written = rows_in(out / "junit-cpu-selftest-0.xml")
    left = json.loads((out / "not-run.json").read_text())["rows"]
    assert written == ROWS[:1] and left == ROWS[1:]  # the row in flight and every later one
    assert 4 in EXIT_CODES


def test_a_torn_jit_log_line_is_an_unreadable_compile_of_its_row_and_the_run_goes_on(tmp_path: Path) -> None:
    done, out = _run(tmp_path, f"ROWS = {ROWS!r}\n" + TORN_LOG)
    assert "INTERNALERROR" not in done.stdout + done.stderr
    junit = out / "junit-cpu-selftest-0.xml"
    assert sorted(rows_in(junit)) == sorted(ROWS)  # every row ran and has its result
    text = junit.read_text()
    assert "(an unreadable JIT-log line)" in text and "whole_kernel" in text
    # the row whose log was torn errors, naming it; the others pass; no run error
    failed = {c.name: c.result[0].message for s in JUnitXml.fromfile(str(junit)) for c in s if c.result}
    assert list(failed) == [f"test_row[{ROWS[0]}]"] and "1 unreadable JIT-log line(s)" in failed[f"test_row[{ROWS[0]}]"]
    assert done.returncode == 1, done.stdout + done.stderr


def test_a_junit_that_cannot_be_written_is_a_run_error_not_a_green_run(tmp_path: Path) -> None:
    done, out = _run(tmp_path, f"ROWS = {ROWS!r}\n" + CANNOT_WRITE_JUNIT)
    assert done.returncode == 4, done.stdout + done.stderr
    assert "unreadable JUnit" in done.stderr and "Traceback" not in done.stderr
    # the file the results were in is gone (its path is a folder now): every row is accounted for as not run
    assert json.loads((out / "not-run.json").read_text())["rows"] == ROWS


def test_an_internal_error_of_the_harness_after_some_rows_is_a_run_error_with_the_rest_not_run(tmp_path: Path) -> None:
    """What a JUnit rewrite failing on a full disk leaves: the file of the rows before it, and pytest's exit 3
    (INTERNALERROR)."""
    import pytest

    from ci.common.errors import RunError
    from ci.run.exit_status import verdict

    junit = tmp_path / "junit-cpu-selftest-0.xml"
    junit.write_text(
        '<testsuites><testsuite name="s"><testcase name="t" classname="c"><properties>'
        f'<property name="stackgate.row" value="{ROWS[0]}"/></properties></testcase></testsuite></testsuites>'
    )
    with pytest.raises(RunError, match=r"the harness exited 3 before it ran 3 of the 4 rows"):
        verdict(junit, 3, PLANNED)
    assert json.loads((tmp_path / "not-run.json").read_text())["rows"] == ROWS[1:]
    assert verdict(junit, 0, PLANNED[:1]) == 0  # every row there, pytest finished: the rows' own verdict
