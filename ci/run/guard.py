"""What keeps a run's results its own: one run per results folder, and signals passed on, not lost.

A second `ci run` on the same `--out` stops at once instead of mixing its JUnit with the first's. A
SIGTERM, SIGINT or SIGHUP while rows run is passed on to the harness (the pytest parent on this host, or
the container's first process), which stops the row in flight, records it as an error, writes its JUnit
and ends; only then does `ci run` exit, 128 + the signal's number. The harness on this host also dies
with `ci run` (the kernel's parent-death signal), so a SIGKILLed `ci run` leaves no run behind.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ci.common.errors import RunError, StackgateError, UsageError

LOCK = ".stackgate-run.lock"


class Stopped(StackgateError):
    """The run was stopped by a signal; the JUnit holds every row that finished and the interrupted one."""

    def __init__(self, signum: int, junit: Path) -> None:
        name = signal.Signals(signum).name
        super().__init__(f"stopped by {name}: {junit} holds the rows that finished and the one interrupted")
        self.exit_code = 128 + signum


def usable_folder(out: Path) -> None:
    """`out` made where missing, and a byte written there: a file, a folder not ours, or a full disk, said at once."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file", hint="name a folder for the results")
    probe = ""
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=out, prefix=".stackgate-write-test.")
        with os.fdopen(fd, "wb") as fh:  # a byte, not an empty file: a full disk still makes inodes
            fh.write(b"\n")
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        with contextlib.suppress(OSError):
            if probe:
                os.unlink(probe)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise RunError(
                f"--out {out}: no space left there ({errno.errorcode[exc.errno]})",
                hint="free space, or pass another --out",
            ) from None
        raise UsageError(
            f"--out {out}: cannot write there ({exc.strerror or exc})", hint="name a folder you can write to"
        ) from None
    os.unlink(probe)


@contextlib.contextmanager
def exclusive(out: Path) -> Iterator[None]:
    """Hold the results folder for this run; another run on it is refused, naming the holder."""
    path = out / LOCK
    made = not os.path.lexists(path)
    try:  # O_NOFOLLOW: a symlink planted at the lock's name would have this run truncate the file it points at
        fh = os.fdopen(os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644), "r+")
    except OSError as exc:
        raise _cannot_write(out, exc) from None
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            raise RunError(
                f"{out} is in use by another `ci run` ({holder})", hint="wait for it to finish, or pass another --out"
            ) from None
        try:
            fh.seek(0)
            fh.truncate()
            fh.write(f"pid {os.getpid()}\n")
            fh.flush()
        except OSError as exc:  # a full disk: nothing can run here, and the lock this run made goes with it
            if made:
                path.unlink(missing_ok=True)
            fcntl.flock(fh, fcntl.LOCK_UN)
            raise _cannot_write(out, exc) from None
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _cannot_write(out: Path, exc: OSError) -> RunError:
    code = errno.errorcode.get(exc.errno or 0, "")
    if exc.errno == errno.ELOOP:
        return RunError(f"--out {out}: {LOCK} there is a symlink", hint=f"remove {out / LOCK}: a run makes its own")
    return RunError(
        f"--out {out}: cannot write there ({exc.strerror or exc}{f', {code}' if code else ''})",
        hint="free space there, or pass another --out",
    )
