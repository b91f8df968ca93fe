"""One exception family; each kind has its own exit code so scripts can tell them apart."""

from __future__ import annotations

import errno
from pathlib import Path

# Every exit code of `python -m ci`, as README.md and each verb's --help list them.
EXIT_CODES = {
    0: "success: every row that ran passed or was skipped; a report, where one was asked for, was written",
    1: "rows ran and at least one failed or errored (the report says which)",
    2: "bad input: an unknown target, suite, change or row, a bad option, malformed stack data, "
    "or a compared side holding one row under two vLLM versions",
    3: "an image could not be built, baked or verified",
    4: "rows could not be started (no engine, no JUnit written)",
    5: "the report, or its build in the history, could not be written (the previous one stays in place)",
    6: "nothing could run here: the target's image cannot be built or its hardware is absent (report written)",
    7: "--strict report: an input was missing, empty or unreadable (report written)",
    8: "gate: a change the stack marks as gating is not ready (report.json's verdicts name it)",
    9: "ci run --deadline: rows were left unstarted or stopped in flight (each row that ran has its JUnit; --resume "
    "runs the rest)",
    130: "stopped by SIGINT (128 + 2): the JUnit holds the rows that finished and the one interrupted",
    143: "stopped by SIGTERM (128 + 15; SIGHUP gives 129): the JUnit holds the rows finished and the one interrupted",
}
NOTHING_RAN = 6
STRICT_INPUTS = 7
GATE_CLOSED = 8


def os_said(exc: OSError) -> str:
    """An OSError in words, with its errno's name: "No space left on device (ENOSPC)"."""
    return f"{exc.strerror or exc} ({errno.errorcode.get(exc.errno or 0, 'no errno')})"


class StackgateError(Exception):
    """Base of every error the command line reports instead of a traceback."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  fix: {self.hint}" if self.hint else self.message


class StackError(StackgateError):
    """The stack data is malformed or inconsistent. Nothing is planned from it."""

    exit_code = 2

    def __init__(self, path: Path | str, line: int | None, key: str, message: str, *, hint: str = "") -> None:
        where = f"{path}:{line}" if line else str(path)
        subject = f" [{key}]" if key else ""
        super().__init__(f"{where}:{subject} {message}", hint=hint)
        self.path = Path(path)
        self.line = line
        self.key = key


class UsageError(StackgateError):
    """The command line asked for something that does not exist (an unknown target, row, suite)."""

    exit_code = 2


class ResultsError(StackgateError):
    """Results that cannot be used as given (a side of a comparison holding one row under two vLLM builds)."""

    exit_code = 2


class BuildError(StackgateError):
    """An image could not be built, baked or verified."""

    exit_code = 3


class RunError(StackgateError):
    """Rows could not be started (not: rows that ran and failed; those are results)."""

    exit_code = 4


class ReportError(StackgateError):
    """A report could not be produced; the previous report stays in place."""

    exit_code = 5


class StoppedError(StackgateError):
    """A stop signal (SIGTERM, SIGINT, SIGHUP) ended the command where it left nothing half-done: exit 128 + its
    number, as a process the signal ended, with what is kept said."""

    def __init__(self, signum: int, message: str) -> None:
        super().__init__(message)
        self.exit_code = 128 + signum


class NotHere(StackgateError):
    """This host cannot do it (no lock, no emulation, no base, no hardware); the hint names the command that can."""

    exit_code = NOTHING_RAN
