"""A disk that fills under the results folder while a row runs (its log, most often, grows until it does).

The JUnit of the rows before stays as it was written. The row's own logs are cut to their last part, in place (no
new file: there is no room for one), so that the JUnit can be written again with that row in it; every item after
it is recorded as an error naming ENOSPC instead of being started on a full disk. The session then ends as usual,
never with pytest's INTERNALERROR, which would lose the whole file's worth of results.
"""

from __future__ import annotations

import errno
from dataclasses import replace
from pathlib import Path

from harness.isolate import Outcome

FULL = (errno.ENOSPC, errno.EDQUOT)
KEEP = 64 << 10  # bytes of a cut log kept: its end, where a failure says what it was


def full(exc: OSError) -> bool:
    return exc.errno in FULL


def said(exc: OSError, folder: Path) -> str:
    """What the disk's state is, in the words every later record uses."""
    code = errno.errorcode.get(exc.errno or 0, "ENOSPC")
    return f"no space left on the disk under {folder} ({code})"


def cut(log: Path, keep: int = KEEP) -> bool:
    """`log` reduced to its last `keep` bytes, rewritten over its own first blocks; False where it was small already
    or cannot be cut."""
    try:
        size = log.stat().st_size
        if size <= keep:
            return False
        with log.open("r+b") as fh:
            fh.seek(size - keep)
            tail = fh.read(keep)
            head = f"[stackgate: the first {size - keep} bytes of this log were cut: the disk filled]\n".encode()
            fh.seek(0)
            fh.write(head + tail[len(head) :])
            fh.truncate(keep)
    except OSError:
        return False
    return True


def noted(outcome: Outcome, why: str) -> Outcome:
    """The row that filled the disk: its outcome as it was, its message saying that its log was cut and why."""
    return replace(outcome, message=f"{outcome.message} ({why}: its log was cut to its last {KEEP >> 10} KiB)")


def not_run(why: str) -> Outcome:
    return Outcome(status="error", message=f"not run: {why}; free space there and run it again")
