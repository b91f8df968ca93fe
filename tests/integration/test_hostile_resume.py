"""`ci run --resume` counts only results made with the rows as they are now, and never loses one it cannot re-run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from lxml import etree
from support.paths import REPO

from ci.common import contract
from ci.run.schedule import dispatch

SCHEDULED = ("--gpus", "a", "--gpu-memory", "36")  # the scheduler, on a stand-in device: every row its own result


def _ci(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "ci", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)  # fmt: skip


def _outcomes(out: Path) -> dict[str, str]:
    return {r: said for f in out.glob("junit-*.xml") for r, said in dispatch.row_outcomes(f).items() if r}


def test_a_result_made_before_the_stack_tightened_a_tolerance_is_run_again(tmp_path: Path, stack_copy: Path, edit):
    """The case seen: the tolerance tightened, `--resume` said "4 rows have a result, 0 to run", 4 pass, exit 0,
    while a fresh run failed all 4."""
    out = tmp_path / "out"
    first = _ci("--stack", str(stack_copy), "run", "cpu", "selftest", "--host", *SCHEDULED, "--out", str(out))
    assert first.returncode in (0, 6), first.stdout + first.stderr
    assert len(_outcomes(out)) == 4
    same = _ci("--stack", str(stack_copy), "run", "cpu", "selftest", "--host", *SCHEDULED, "--out", str(out),
               "--resume")  # fmt: skip
    assert "--resume: 4 rows have a result" in same.stdout and "0 to run" in same.stdout, same.stdout
    edit(stack_copy / "changes" / "selftest.yaml", "max: 1.0e-6", "max: 1.0e-30")
    again = _ci("--stack", str(stack_copy), "run", "cpu", "selftest", "--host", *SCHEDULED, "--out", str(out),
                "--resume")  # fmt: skip
    assert "--resume: 0 rows have a result" in again.stdout and "4 to run" in again.stdout, again.stdout
    assert "4 of them ran as another row" in again.stdout
    assert "[4/4]" in again.stdout  # run again, under the stack as it is now
    recorded = {
        p.get("value")
        for f in out.glob("junit-*.xml")
        for p in etree.parse(str(f)).iter("property")
        if p.get("name") == contract.PREFIX + contract.ROW_CONTENT
    }
    assert len(recorded) == 4  # each row's result names the content it was made with


SUITE = """
import time


def test_1():
    pass


def test_2():
    pass


def test_3():
    pass


def test_4():
    pass


def test_5_slow():
    time.sleep(60)
"""


def test_a_stopped_run_of_tests_outside_the_plan_is_not_resumed_and_its_junit_is_kept(tmp_path: Path) -> None:
    """The case seen: a run of one's own suite, stopped by SIGTERM with 4 passed and 1 interrupted: `--resume` said
    "0 rows have a result, 0 to run", deleted that run's JUnit and exited 0."""
    suites = tmp_path / "suites"
    (suites / "mine").mkdir(parents=True)
    (suites / "mine" / "test_mine.py").write_text(SUITE)
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "ci", "run", "cpu", "mine", "--host", "--suites-dir", str(suites), "--out", str(out)]
    proc = subprocess.Popen(argv, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    junit = out / "junit-cpu-mine-0.xml"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if junit.is_file() and len(list(etree.parse(str(junit)).iter("testcase"))) == 4:
            break
        time.sleep(0.2)
    time.sleep(1.0)  # the fifth test under way
    proc.send_signal(signal.SIGTERM)
    said, _ = proc.communicate(timeout=120)
    assert proc.returncode == 143, said
    kept = junit.read_bytes()
    assert sorted(dispatch.row_outcomes(junit).values()) == ["interrupted"]  # four passed, one interrupted: no rows
    done = _ci("run", "cpu", "mine", "--host", "--suites-dir", str(suites), "--out", str(out), "--resume")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "interrupted tests outside the plan" in done.stderr and "without --resume" in done.stderr
    assert junit.read_bytes() == kept
