"""The report's second CPU (ci.forked): a forked reader and renderer give what this process alone gives, and a
child that dies or raises costs time, never a result."""

from __future__ import annotations

import os
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from report_helpers import PLAN, STACK, rows, write_rows

from ci import forked
from ci.report import write
from ci.results import reading


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
    if not forked.possible():
        pytest.skip("no second CPU or no fork here")


def test_a_forked_reader_reads_what_one_process_reads(junit_files: list[Path], monkeypatch) -> None:
    _needs_fork()
    alone = list(reading.read_all(junit_files))
    monkeypatch.setattr(reading, "_FORK_BYTES", 1)
    at = reading._share_from(junit_files)
    assert 0 < at < len(junit_files)
    parent = os.getpid()
    pids = []
    real = reading._read_here

    def spy(paths):
        pids.append(os.getpid())
        return real(paths)

    monkeypatch.setattr(reading, "_read_here", spy)
    shared = list(reading.read_all(junit_files))
    assert shared == alone  # same cases, in the same order, the cut file's salvage included
    assert [r.status for r in shared].count("truncated") == 1
    assert pids == [parent]  # the child's call happened in the child: only this process's call is seen here


def test_a_reader_that_dies_or_raises_costs_time_not_results(junit_files: list[Path], monkeypatch) -> None:
    _needs_fork()
    alone = list(reading.read_all(junit_files))
    monkeypatch.setattr(reading, "_FORK_BYTES", 1)
    parent = os.getpid()
    real = reading._read_here
    for fault in ("exit", "raise"):

        def faulty(paths, fault=fault):
            if os.getpid() != parent:
                if fault == "exit":
                    os._exit(9)  # killed, as by the OOM killer: no result, no message
                raise MemoryError("the child's share did not fit")
            return real(paths)

        monkeypatch.setattr(reading, "_read_here", faulty)
        assert list(reading.read_all(junit_files)) == alone, fault


def test_an_error_is_raised_here_as_it_would_be_without_a_fork() -> None:
    _needs_fork()

    def broken() -> int:
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input"):
        forked.start(broken)()


def test_no_fork_while_another_thread_runs() -> None:
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert not forked.possible()
        assert forked.start(os.getpid)() == os.getpid()  # run here, not in a child
    finally:
        stop.set()
        t.join()


def test_a_report_rendered_with_a_forked_child_is_byte_identical(junit_files: list[Path], monkeypatch) -> None:
    _needs_fork()
    report = write.build(Path("stack"), junit_files, None, loaded=(STACK, PLAN))
    alone = write.render(report)
    monkeypatch.setattr(write, "_FORK_CASES", 0)
    assert write.render(report) == alone
