"""Hostile runs: concurrent runs on one folder, signals, escaped processes, bad arguments. Each ends with
every row accounted for in a valid JUnit, no process left behind, and a documented exit code."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from junitparser.xunit2 import JUnitXml
from support.paths import REPO


def _tree(root: Path, body: str, name: str = "hostile") -> Path:
    (root / name).mkdir(parents=True)
    (root / name / "test_hostile.py").write_text(body)
    return root


def _ci(*args: str) -> list[str]:
    return [sys.executable, "-m", "ci", *args]


def _alive(marker: str) -> list[str]:
    """Command lines of live processes that run `sleep <marker>` (a sleep length no other process uses)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if f"sleep {marker}" in cmd and state != "Z" and "pytest" not in cmd:
            found.append(cmd)
    return found


def _cases(junit: Path) -> dict[str, tuple[str, str]]:
    out = {}
    for suite in JUnitXml.fromfile(str(junit)):
        for case in suite:
            status = case.result[0]._tag if case.result else "pass"
            message = case.result[0].message if case.result else ""
            out[case.name] = (status, message or "")
    return out


def _wait_for(predicate, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    pytest.fail("timed out waiting")


def _sleeper(tmp_path: Path, secs: str) -> Path:
    """A suites tree whose one test sleeps `secs` seconds in a child process."""
    return _tree(
        tmp_path / "suites", f"import subprocess\n\ndef test_slow():\n    subprocess.run(['sleep', '{secs}'])\n"
    )


def _secs() -> str:
    # a sleep length no other process uses, the marker: 3000-3999 s, and nine decimals from a UUID, so that a sleep
    # another test left behind cannot pass for this one
    n = uuid.uuid4().int
    return f"{3000 + n % 1000}.{n // 1000 % 10**9:09d}"


def test_a_second_run_on_the_same_folder_is_refused(tmp_path: Path) -> None:
    secs = _secs()
    tree = _sleeper(tmp_path, secs)
    out = tmp_path / "out"
    first = subprocess.Popen(_ci("run", "cpu", "hostile", "--host", "--suites-dir", str(tree), "--out", str(out)),
                             cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        _wait_for(lambda: bool(_alive(secs)))
        second = subprocess.run(_ci("run", "cpu", "hostile", "--host", "--suites-dir", str(tree), "--out", str(out)),
                                cwd=REPO, capture_output=True, text=True, timeout=60)  # fmt: skip
        assert second.returncode == 4
        assert f"{out} is in use by another `ci run` (pid {first.pid})" in second.stderr
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=60)
    assert first.returncode == 143 and _alive(secs) == []


@pytest.mark.parametrize(("how", "code"), [("SIGTERM to ci", 143), ("SIGINT to the group", 130), ("SIGHUP", 129)])
def test_a_signal_stops_the_row_in_flight_and_leaves_a_valid_junit(tmp_path: Path, how: str, code: int) -> None:
    secs = _secs()
    body = (f"import subprocess\n\ndef test_1():\n    pass\n\n"
            f"def test_2():\n    subprocess.run(['sleep', '{secs}'])\n\ndef test_3():\n    pass\n")  # fmt: skip
    tree = _tree(tmp_path / "suites", body)
    out = tmp_path / "out"
    argv = _ci("run", "cpu", "hostile", "--host", "--suites-dir", str(tree), "--out", str(out))
    proc = subprocess.Popen(
        argv, cwd=REPO, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _wait_for(lambda: bool(_alive(secs)))
    if how == "SIGINT to the group":
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: ci and the harness both get it
    else:
        proc.send_signal(signal.SIGHUP if how == "SIGHUP" else signal.SIGTERM)
    assert proc.wait(timeout=60) == code
    cases = _cases(out / "junit-cpu-hostile-0.xml")
    assert cases["test_1"] == ("pass", "")
    assert cases["test_2"][0] == "error" and "interrupted by SIG" in cases["test_2"][1]
    assert "test_3" not in cases  # never started: the report will say "not run"
    assert _alive(secs) == []


def test_a_killed_ci_takes_the_harness_with_it(tmp_path: Path) -> None:
    secs = _secs()
    tree = _sleeper(tmp_path, secs)
    out = tmp_path / "out"
    proc = subprocess.Popen(_ci("run", "cpu", "hostile", "--host", "--suites-dir", str(tree), "--out", str(out)),
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    _wait_for(lambda: bool(_alive(secs)))
    proc.kill()
    proc.wait()
    _wait_for(lambda: not _alive(secs), seconds=30)  # the parent-death signal reached the harness
    _wait_for(lambda: (out / "junit-cpu-hostile-0.xml").exists(), seconds=30)
    assert _cases(out / "junit-cpu-hostile-0.xml")["test_slow"][0] == "error"


@pytest.mark.parametrize("escape", ["setsid", "double fork"])
def test_a_row_that_leaves_a_process_behind_does_not_pass(tmp_path: Path, escape: str) -> None:
    secs = _secs()
    spawn = (f"subprocess.Popen(['setsid', 'sleep', '{secs}'])" if escape == "setsid"
             else f"subprocess.run(['sh', '-c', 'sleep {secs} &'])")  # fmt: skip
    body = f"import subprocess\n\ndef test_escapes():\n    {spawn}\n\ndef test_after():\n    pass\n"
    tree = _tree(tmp_path / "suites", body)
    argv = _ci("run", "cpu", "hostile", "--host", "--suites-dir", str(tree), "--out", str(tmp_path / "o"))
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    cases = _cases(tmp_path / "o" / "junit-cpu-hostile-0.xml")
    assert (
        cases["test_escapes"][0] == "error" and "left 1 process(es) running after the test" in cases["test_escapes"][1]
    )
    assert "sleep (pid" in cases["test_escapes"][1] and cases["test_after"] == ("pass", "")
    assert _alive(secs) == []


@pytest.mark.parametrize(("args", "says"), [
    (["--timeout", "0"], "positive, finite number of seconds"),
    (["--timeout", "-5"], "positive, finite number of seconds"),
    (["--timeout", "nan"], "positive, finite number of seconds"),
    (["--out", "{file}"], "is a file"),
])  # fmt: skip
def test_bad_run_arguments_exit_2(tmp_path: Path, args: list[str], says: str) -> None:
    (tmp_path / "f").write_text("")
    argv = [a.replace("{file}", str(tmp_path / "f")) for a in args]
    out = [] if "--out" in argv else ["--out", str(tmp_path / "o")]
    done = subprocess.run(
        _ci("run", "cpu", "selftest", "--host", *argv, *out), cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr


def test_an_unwritable_out_exits_2(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes anywhere")
    locked = tmp_path / "ro"
    locked.mkdir(mode=0o500)
    done = subprocess.run(_ci("run", "cpu", "selftest", "--host", "--out", str(locked / "x")), cwd=REPO,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 2 and "cannot write there" in done.stderr


def test_repro_refuses_malformed_input(tmp_path: Path) -> None:
    bad = tmp_path / "rows.json"
    bad.write_text('{"rows": [')
    done = subprocess.run(_ci("repro", "a.b.c.12345678", "--rows-json", str(bad)), cwd=REPO, capture_output=True,
                          text=True)  # fmt: skip
    assert done.returncode == 2 and "not a rows.json written by ci run" in done.stderr
    done = subprocess.run(_ci("repro", "../../etc/x.y", "--rows-json", str(bad)), cwd=REPO, capture_output=True,
                          text=True)  # fmt: skip
    assert done.returncode == 2 and "is not a row id" in done.stderr


def test_a_run_leaves_no_temporary_folder(tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"  # the run's own temporary root: other runs on this machine cannot blur it
    scratch.mkdir()
    tree = _tree(tmp_path / "suites", "def test_ok():\n    pass\n")
    argv = _ci("run", "cpu", "hostile", "--host", "--suites-dir", str(tree), "--out", str(tmp_path / "o"))
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TMPDIR": str(scratch)})  # fmt: skip
    assert done.returncode == 0
    assert not list(scratch.iterdir())
