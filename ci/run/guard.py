"""What keeps a run's results its own: one run per results folder, and signals passed on, not lost.

A second `ci run` on the same `--out` stops at once instead of mixing its JUnit with the first's. A
SIGTERM, SIGINT or SIGHUP while rows run is passed on to the harness (the pytest parent on this host, or
the container's first process), which stops the row in flight, records it as an error, writes its JUnit
and ends; only then does `ci run` exit, 128 + the signal's number. The harness on this host also dies
with `ci run` (the kernel's parent-death signal), so a SIGKILLed `ci run` leaves no run behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
from collections.abc import Iterator
from pathlib import Path

from ci.errors import RunError, StackgateError

LOCK = ".stackgate-run.lock"


class Stopped(StackgateError):
    """The run was stopped by a signal; the JUnit holds every row that finished and the interrupted one."""

    def __init__(self, signum: int, junit: Path) -> None:
        name = signal.Signals(signum).name
        super().__init__(f"stopped by {name}: {junit} holds the rows that finished and the one interrupted")
        self.exit_code = 128 + signum


@contextlib.contextmanager
def exclusive(out: Path) -> Iterator[None]:
    """Hold the results folder for this run; another run on it is refused, naming the holder."""
    path = out / LOCK
    with path.open("a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            raise RunError(
                f"{out} is in use by another `ci run` ({holder})", hint="wait for it to finish, or pass another --out"
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()}\n")
        fh.flush()
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
