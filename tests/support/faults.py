"""A suites tree of plain pytest tests, one per way a row can end, for the isolation tests."""

from __future__ import annotations

from pathlib import Path

FAULTS = """\
import os
import signal
import subprocess
import sys
import time


def test_a_pass():
    pass


def test_b_fail():
    assert 1 + 1 == 3


def test_c_segfault():
    os.kill(os.getpid(), signal.SIGSEGV)


def test_d_abort():
    os.abort()


def _stuck_in_a_barrier(worker):
    worker.wait()


def test_e_hang():
    print("engine starting", flush=True)  # in the row's log although the row never ends
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])  # a vLLM worker's kind
    _stuck_in_a_barrier(worker)


def test_f_exit0_before_finishing():
    os._exit(0)


def test_g_after_the_crashes():
    pass
"""

# what each test must be in the JUnit file: (status, message prefix)
EXPECTED = {
    "test_a_pass": ("passed", ""),
    "test_b_fail": ("failure", "assert"),
    "test_c_segfault": ("error", "signal 11 (SIGSEGV)"),
    "test_d_abort": ("error", "signal 6 (SIGABRT)"),
    "test_e_hang": ("error", "timeout after 4 s: hung in "),
    "test_f_exit0_before_finishing": ("error", "no result"),
    "test_g_after_the_crashes": ("passed", ""),
}
TIMEOUT_S = 4


def write_tree(root: Path) -> Path:
    (root / "faults").mkdir(parents=True)
    (root / "faults" / "test_faults.py").write_text(FAULTS)
    return root


def statuses(junit_path: Path) -> tuple[str, dict[str, tuple[str, str]]]:
    """(suite name, {test name: (status, message)}) read with junitparser, as the report reads it."""
    from junitparser import Error, Failure, JUnitXml, Skipped

    xml = JUnitXml.fromfile(str(junit_path))
    suites = list(xml)
    assert len(suites) == 1, f"one testsuite per run, got {len(suites)}"
    out = {}
    for case in suites[0]:
        kind = "passed"
        message = ""
        for r in case.result:
            kind = {Failure: "failure", Error: "error", Skipped: "skipped"}[type(r)]
            message = r.message or ""
        out[case.name] = (kind, message)
    return suites[0].name, out


def check(junit_path: Path, target: str = "cpu") -> None:
    name, got = statuses(junit_path)
    assert name == f"stackgate.{target}.faults.0"
    assert set(got) == set(EXPECTED), f"tests missing or extra in the JUnit: {sorted(set(got) ^ set(EXPECTED))}"
    for test, (status, prefix) in EXPECTED.items():
        assert got[test][0] == status, f"{test}: {got[test]} (expected {status})"
        assert got[test][1].startswith(prefix), f"{test}: message {got[test][1]!r} (expected {prefix!r}...)"
    assert "test_faults.py:" in got["test_e_hang"][1] and "_stuck_in_a_barrier" in got["test_e_hang"][1], got
    assert "<string>" not in got["test_e_hang"][1], "the worker, idle in code without a file, is no site"
