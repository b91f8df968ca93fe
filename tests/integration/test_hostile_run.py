"""A run ends in words, never a traceback: a full disk, a signal at any moment, a session killed from outside, a
number that is no number of GiB; and a disk that fills mid-run loses no result written before it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from lxml import etree
from support.paths import REPO

from ci.run import guard


def _interruptible() -> None:
    """SIGINT as a terminal gives it: a test run started in the background (`cmd &`) ignores SIGINT, and a child
    inherits that, so `ci` would never see the Ctrl-C these tests send."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _ci(*args: str, **kw) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), **kw.pop("env", {})}
    return subprocess.Popen([sys.executable, "-m", "ci", *args], cwd=REPO, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, preexec_fn=_interruptible, **kw)  # fmt: skip


def _finish(proc: subprocess.Popen[str], timeout: float = 240) -> tuple[int, str]:
    said, _ = proc.communicate(timeout=timeout)
    return proc.returncode, said


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of 1 MiB, mounted for the test: a disk that really fills."""
    where = tmp_path / "disk"
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.parametrize("value", ["nan", "-1", "0", "inf"])
def test_gpu_memory_that_is_no_positive_number_is_refused(value: str, tmp_path: Path) -> None:
    code, said = _finish(_ci("run", "cpu", "selftest", "--host", "--gpu-memory", value, "--out", str(tmp_path / "o")))
    assert code == 2 and "give a positive, finite number of GiB" in said, said
    assert not (tmp_path / "o").exists()


def test_a_host_bake_that_cannot_import_triton_says_so_in_one_line(tmp_path: Path) -> None:
    """The case seen: `ci run --host` on the cpu target printed a `ModuleNotFoundError: No module named 'triton'`
    traceback from the host AOT bake before "rows run unbaked". Here a triton that fails to import stands in for a
    host without one, whatever this host has installed."""
    broken = tmp_path / "broken"
    (broken / "triton").mkdir(parents=True)
    (broken / "triton" / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'triton'\")\n")
    env = {"PYTHONPATH": f"{broken}:{REPO}", "STACKGATE_RUNTIME_CACHES": str(tmp_path / "caches")}
    code, said = _finish(_ci("run", "cpu", "selftest", "--host", "--out", str(tmp_path / "o"), env=env))
    assert code in (0, 6), said
    assert "Traceback" not in said
    [line] = [line for line in said.splitlines() if "host AOT bake of cpu" in line]
    assert "No module named 'triton'" in line and "rows run unbaked" in line


def test_a_host_without_triton_does_not_try_the_bake(monkeypatch, capsys) -> None:
    import importlib.util

    from ci.run.artefact import host_aot
    from ci.stack import loader

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "triton" else real(name, *a))
    assert host_aot.bake(loader.load().targets["cpu"], {}, REPO / "suites") == {}
    assert (
        capsys.readouterr().out.strip()
        == f"host AOT bake of cpu not run: no triton in {sys.executable}; rows run unbaked"
    )


def _pids() -> Iterator[tuple[int, bytes, int]]:
    """(pid, command line, parent pid) of every live process, from /proc."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        yield int(pid), argv, int(stat.rsplit(")", 1)[1].split()[1])


def _catches_sigterm(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(caught, 16) >> (signal.SIGTERM - 1) & 1)


def test_a_rows_session_killed_from_outside_is_recorded_without_a_traceback(tmp_path: Path) -> None:
    """The kill lands while a row is in flight, whatever the machine's speed: the row's own process is frozen
    (SIGSTOP) before its session gets SIGTERM, so the row cannot finish first (a selftest row takes about 1 s)."""
    out = tmp_path / "o"
    proc = _ci("run", "cpu", "selftest", "--host", "--gpus", "a", "--gpu-memory", "36", "--isolate", "--out", str(out))
    deadline = time.monotonic() + 120
    victim = item = None
    while item is None and time.monotonic() < deadline:  # the first row's own session, once it runs an item
        procs = list(_pids())
        if victim is None:
            mine = (p for p, argv, _ in procs if b"--stackgate-junit" in argv and str(out).encode() in argv)
            victim = next(mine, None)
        if victim is not None and _catches_sigterm(victim):  # its handlers are in: it is in its test loop
            item = next((p for p, _, parent in procs if parent == victim), None)
        time.sleep(0.02)
    assert victim is not None and item is not None, "no row session ran an item"
    os.kill(item, signal.SIGSTOP)
    try:
        os.kill(victim, signal.SIGTERM)
        code, said = _finish(proc)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(item, signal.SIGCONT)
    assert "Traceback" not in said and "TypeError" not in said, said
    assert code == 1, said
    assert "stopped by a signal from outside this run" in said


@pytest.mark.parametrize("delay", [0.2, 0.3, 0.45, 0.8, 1.2])  # from after the interpreter's own start
def test_sigint_at_any_moment_of_a_host_run_ends_it_without_a_traceback(delay: float, tmp_path: Path) -> None:
    proc = _ci("run", "cpu", "selftest", "--host", "--out", str(tmp_path / "o"))
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    code, said = _finish(proc)
    assert "Traceback" not in said and "KeyboardInterrupt" not in said, said
    # 130 where ci exits itself; -2 where the interpreter re-raises SIGINT as it ends (a shell shows both as 130)
    assert code in (130, -signal.SIGINT), said


def test_a_full_out_is_said_in_one_line_and_leaves_no_lock(small_disk: Path) -> None:
    with (small_disk / "filler").open("wb") as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError:
            pass
    out = small_disk / "out"
    code, said = _finish(_ci("run", "cpu", "selftest", "--host", "--out", str(out)))
    assert code == 4 and "Traceback" not in said, said
    assert "no space left" in said.lower() and "ENOSPC" in said
    assert not (out / guard.LOCK).exists()


SUITE = """
import sys


def test_a_first():
    print("first")


def test_b_fills_the_disk():
    for _ in range(100):
        sys.stdout.write("x" * 65536 + "\\n")
    sys.stdout.flush()


def test_c_after():
    print("after")
"""


def test_a_disk_that_fills_while_a_row_writes_its_log_keeps_the_rows_before_and_records_those_after(
    small_disk: Path, tmp_path: Path
) -> None:
    suites = tmp_path / "suites"
    (suites / "mine").mkdir(parents=True)
    (suites / "mine" / "test_fill.py").write_text(SUITE)
    out = small_disk / "out"
    code, said = _finish(_ci("run", "cpu", "mine", "--host", "--suites-dir", str(suites), "--out", str(out)))
    assert "INTERNALERROR" not in said and code == 1, said[-3000:]
    cases = {tc.get("name"): tc for tc in etree.parse(str(out / "junit-cpu-mine-0.xml")).iter("testcase")}
    assert list(cases) == ["test_a_first", "test_b_fills_the_disk", "test_c_after"]
    assert cases["test_a_first"].find("error") is None and cases["test_a_first"].find("failure") is None
    for name in ("test_b_fills_the_disk", "test_c_after"):
        assert "ENOSPC" in cases[name].find("error").get("message"), name
    assert cases["test_c_after"].find("error").get("message").startswith("not run")


def test_a_host_bake_whose_rows_all_skip_says_so_with_a_reason(tmp_path: Path) -> None:
    """The case seen: `ci bake cpu --host` on a host without triton ran every row, each skipped its baked-kernel
    check, and the bake said "did not run every row (0 without a result, e.g. none; exit 6)"."""
    broken = tmp_path / "broken"
    (broken / "triton").mkdir(parents=True)
    (broken / "triton" / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'triton'\")\n")
    env = {"PYTHONPATH": f"{broken}:{REPO}", "STACKGATE_RUNTIME_CACHES": str(tmp_path / "caches")}
    code, said = _finish(_ci("bake", "cpu", "--host", "--out", str(tmp_path / "art"), env=env))
    assert code == 3, said
    assert "warmed nothing: every row was skipped" in said and "nothing was baked" in said, said
    assert "0 without a result" not in said
    assert not list((tmp_path / "art").glob("caches-*.tar.gz"))
