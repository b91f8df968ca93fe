"""The report's second CPU (ci.common.second_cpu): a forked reader and renderer give what this process alone gives, and
a child that dies or raises costs time, never a result."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from support.paths import REPO
from support.report_helpers import PLAN, STACK, rows, write_rows

from ci.common import second_cpu
from ci.report import write
from ci.results import junit_read


@pytest.fixture
def junit_files(tmp_path: Path) -> list[Path]:
    """The plan's rows in several JUnit files, a third of them failing, one file cut short."""
    planned = rows()
    out: list[Path] = []
    for i in range(4):
        out += write_rows(
            tmp_path,
            planned[i::4],
            lambda r, c: replace(c, status="failure", message="no") if int(r.id[-2:], 16) % 3 else c,
            f"p{i}-",
        )
    out[3].write_text(out[3].read_text()[:-200])  # cut short: read by the salvaging parser
    return out


def _needs_fork() -> None:
    if not second_cpu.possible():
        pytest.skip("no second CPU or no fork here")


def test_a_forked_reader_reads_what_one_process_reads(junit_files: list[Path], monkeypatch, tmp_path: Path) -> None:
    _needs_fork()
    alone = list(junit_read.read_all(junit_files))
    monkeypatch.setattr(junit_read, "_FORK_BYTES", 1)
    who = tmp_path / "who"
    real = junit_read.read

    def spy(path: Path):
        with who.open("a") as fh:  # the child's calls are seen only through a file
            fh.write(f"{os.getpid()}\n")
        return real(path)

    monkeypatch.setattr(junit_read, "read", spy)
    shared = list(junit_read.read_all(junit_files))
    assert shared == alone  # same cases, in the same order, the cut file's salvage included
    assert [r.status for r in shared].count("truncated") == 1
    pids = who.read_text().split()
    assert len(pids) == len(junit_files) and len(set(pids)) <= 2  # each file read once, by this process or the child


def test_both_processes_take_items_as_they_get_free() -> None:
    """The child starts at once; this process joins in when it calls, and takes what is left: no item twice."""
    _needs_fork()

    def item(i: int) -> tuple[int, int]:
        time.sleep(0.05)
        return i, os.getpid()

    rest = second_cpu.share(item, 8)
    time.sleep(0.12)  # this process's own work first: the child has taken two or three items meanwhile
    got = rest()
    assert [i for i, _ in got] == list(range(8))
    pids = [pid for _, pid in got]
    assert pids[0] != os.getpid()  # the child took the first item before this process called
    assert os.getpid() in pids  # this process took items too, while the child was busy


def test_a_reader_that_dies_or_raises_costs_time_not_results(junit_files: list[Path], monkeypatch) -> None:
    _needs_fork()
    alone = list(junit_read.read_all(junit_files))
    monkeypatch.setattr(junit_read, "_FORK_BYTES", 1)
    parent = os.getpid()
    real = junit_read.read
    for fault in ("exit", "raise"):

        def faulty(path: Path, fault=fault):
            if os.getpid() != parent:
                if fault == "exit":
                    os._exit(9)  # killed, as by the OOM killer: no result, no message
                raise MemoryError("the child's share did not fit")
            return real(path)

        monkeypatch.setattr(junit_read, "read", faulty)
        assert list(junit_read.read_all(junit_files)) == alone, fault


def test_an_error_is_raised_here_as_it_would_be_without_a_fork() -> None:
    _needs_fork()

    def broken() -> int:
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input"):
        second_cpu.start(broken)()


def test_no_fork_while_another_thread_runs() -> None:
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert not second_cpu.possible()
        assert second_cpu.start(os.getpid)() == os.getpid()  # run here, not in a child
    finally:
        stop.set()
        t.join()


def test_a_report_rendered_with_a_forked_child_is_byte_identical(junit_files: list[Path], monkeypatch) -> None:
    _needs_fork()
    report = write.build(Path("stack"), junit_files, None, loaded=(STACK, PLAN))
    alone = write.render(report)
    monkeypatch.setattr(write, "_FORK_CASES", 0)
    assert write.render(report) == alone


def test_a_report_written_by_two_processes_is_the_one_rendered_here(junit_files, monkeypatch, tmp_path: Path) -> None:
    """`write`: the child writes report.md and report.json into their temporary files; where it dies doing so, this
    process writes them again. Either way the folder holds the report `render` gives, and no temporary file."""
    _needs_fork()
    report = write.build(Path("stack"), junit_files, None, loaded=(STACK, PLAN))
    alone = write.render(report)
    monkeypatch.setattr(write, "_FORK_CASES", 0)
    parent, real = os.getpid(), write._fill
    for fault in (False, True):

        def fill(tmp: str, data: bytes, fault=fault) -> None:
            real(tmp, data[: len(data) // 2])  # half written, as a child killed mid-write leaves it
            if fault and os.getpid() != parent:
                os._exit(9)
            real(tmp, data)

        monkeypatch.setattr(write, "_fill", fill)
        out = tmp_path / f"fault-{fault}"
        write.write(report, out)
        assert {p.name: p.read_bytes() for p in out.iterdir()} == alone, fault


def test_a_kept_graph_ends_the_process_at_once_with_its_output_and_code() -> None:
    """ci.common.teardown: a command that kept its report exits without Python's teardown; what it printed to a pipe
    (block buffered) still arrives, and the exit code is the command's."""
    import subprocess
    import sys

    script = "from ci.common import teardown\nteardown.keep([object()])\nprint('written', end='')\nteardown.end(3)\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO)
    assert (done.returncode, done.stdout) == (3, "written")


def test_a_library_caller_gets_the_kept_graph_back_under_the_collector() -> None:
    import gc

    from ci.common import teardown

    teardown.keep(["a report"])
    assert gc.get_freeze_count() > 0
    teardown.forget()
    assert gc.get_freeze_count() == 0
