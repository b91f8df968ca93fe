"""`python -m ci run --host`: faults become the right JUnit statuses; GPU rows without GPUs are skipped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from junitparser import Skipped
from junitparser.xunit2 import JUnitXml
from support import faults
from support.paths import REPO

from ci import cli
from ci.stack import loader as stack
from ci.stack import plan


def test_every_fault_is_recorded_and_later_tests_still_run(tmp_path: Path) -> None:
    tree = faults.write_tree(tmp_path / "suites")
    argv = ["run", "cpu", "faults", "--host", "--suites-dir", str(tree), "--timeout", str(faults.TIMEOUT_S)]
    rc = cli.main([*argv, "--out", str(tmp_path / "out")])
    assert rc == 1  # from the JUnit's failures, not from pytest's exit status
    faults.check(tmp_path / "out" / "junit-cpu-faults-0.xml")
    [hung] = (tmp_path / "out" / "logs").glob("*test_e_hang*.log")
    log = hung.read_text()
    assert "engine starting" in log  # what the row printed before it hung, though it never ended
    assert log.count("(most recent call first)") >= 2  # the row's process and its worker dumped their stacks


def test_gpu_rows_on_a_machine_without_the_gpu_are_skipped_with_the_reason(tmp_path: Path) -> None:
    if os.path.exists("/dev/nvidia0"):
        pytest.skip("this machine has an NVIDIA GPU")
    planned = plan.build(stack.load()).select(targets=["cuda-sm121a"], suites=["spec_decode"]).rows
    rc = cli.main(["run", "cuda-sm121a", "spec_decode", "--host", "--out", str(tmp_path)])
    assert rc == 6  # nothing could run here: a step on the wrong agent must not go green
    suite = next(iter(JUnitXml.fromfile(str(tmp_path / "junit-cuda-sm121a-spec_decode-0.xml"))))
    cases = list(suite)
    assert len(cases) == len(planned) > 0
    for case in cases:
        skips = [r for r in case.result if isinstance(r, Skipped)]
        assert skips and "hardware absent" in skips[0].message, f"{case.name} was not skipped for its hardware"
    rows = {p.value for c in cases for p in c.properties() if p.name == "stackgate.row"}
    assert rows == {r.id for r in planned}


def test_a_killed_run_leaves_a_valid_junit_with_the_items_it_finished(tmp_path: Path) -> None:
    tree = tmp_path / "suites"
    (tree / "slow").mkdir(parents=True)
    (tree / "slow" / "test_slow.py").write_text(
        "import time\n\ndef test_1():\n    pass\n\ndef test_2():\n    pass\n\ndef test_3():\n    time.sleep(60)\n"
    )
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "ci", "run", "cpu", "slow", "--host", "--suites-dir", str(tree), "--out", str(out)]
    proc = subprocess.Popen(cmd, cwd=REPO, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    junit = out / "junit-cpu-slow-0.xml"
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            if junit.exists() and len(list(next(iter(JUnitXml.fromfile(str(junit)))))) >= 2:
                break
            time.sleep(0.1)
        else:
            pytest.fail("the run never recorded two items")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the whole run: ci, the harness and the hanging child
        proc.wait()
    names = [c.name for c in next(iter(JUnitXml.fromfile(str(junit))))]
    assert names == ["test_1", "test_2"]
    assert not [p for p in out.iterdir() if p.name.startswith(".junit")], "a temporary file was left beside the JUnit"
