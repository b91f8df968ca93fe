"""Signals while rows run: passed on to whatever runs them, never lost, and no runner left orphaned."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from types import FrameType

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_PR_SET_PDEATHSIG = 1


@contextlib.contextmanager
def forwarding(to: Callable[[int], None]) -> Iterator[list[int]]:
    """While the block runs, the first SIGTERM/SIGINT/SIGHUP is passed to `to` (the runner then ends on its
    own); the list yielded holds the signal received, if any."""
    received: list[int] = []

    def handler(signum: int, _frame: FrameType | None) -> None:
        if not received:
            received.append(signum)
            to(signum)

    old = {s: signal.signal(s, handler) for s in SIGNALS}
    try:
        yield received
    finally:
        for s, h in old.items():
            signal.signal(s, h)


class Stopped(BaseException):
    """A stop signal, raised where the program was (`raising`): a BaseException, as KeyboardInterrupt is, so that no
    `except Exception` swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


@contextlib.contextmanager
def raising() -> Iterator[None]:
    """While the block runs, SIGTERM, SIGINT and SIGHUP raise `Stopped` where it is: its `finally` clauses run (a
    temporary file is removed) and the caller says what was done, where SIGTERM's default would end the process
    at once, leaving both undone."""

    def handler(signum: int, _frame: FrameType | None) -> None:
        raise Stopped(signum)

    old = {s: signal.signal(s, handler) for s in SIGNALS}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """While the block runs, SIGTERM, SIGINT and SIGHUP wait (blocked), then arrive as they would have: a step that
    must not be cut in half (a ref moved, a lock held by a child) ends first, and the stop is taken after it."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def die_with_parent() -> None:
    """preexec_fn of the harness on this host: SIGTERM to it when `ci run` dies, however it dies; and a process group
    of its own, so that a terminal's Ctrl-C (SIGINT to the foreground group) reaches `ci run` alone, which passes it
    on (`pass_on`): sent straight to a harness still starting, it printed the traceback of whatever it imported."""
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def pass_on(proc: subprocess.Popen, signum: int) -> None:
    """Pass `signum` to the harness `proc`. One still starting (Python importing pytest and the plugin: it does not
    catch SIGTERM yet) gets SIGTERM instead, which ends it without a word; SIGINT there would print a
    KeyboardInterrupt traceback from whatever module it was importing. Its stop is reported as `signum` all the same."""
    chosen = signum if _catches(proc.pid, signal.SIGTERM) else signal.SIGTERM
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(chosen)


def _catches(pid: int, signum: int) -> bool:
    """Whether process `pid` has a handler of its own for `signum` (Linux: SigCgt in /proc/PID/status); True where
    that cannot be read, so the signal asked for is sent."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            caught = next(line.split()[1] for line in fh if line.startswith("SigCgt:"))
    except (OSError, StopIteration, IndexError):
        return True
    return bool(int(caught, 16) >> (signum - 1) & 1)
