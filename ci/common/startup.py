"""The command line's first moments: a Ctrl-C (SIGINT) while its modules import is held, not raised, and taken up once
they have. Raised there, it lands wherever the interpreter was: in a class body's __set_name__ (pydantic defining its
models) Python 3.11 turns it into a RuntimeError and a traceback; in an import lock's weakref callback Python prints
"Exception ignored ... KeyboardInterrupt" and the command runs on as if no Ctrl-C had come.

Only `signal` is imported here: `python -m ci` holds SIGINT before it imports anything else."""

from __future__ import annotations

import signal
from types import FrameType


class Held:
    """SIGINT noted, not raised, from here until `release`. A SIGINT already ignored (a background job's) or handled by
    a program that embeds the command line is left as it is, as it is off the main thread, where no handler can be
    set."""

    def __init__(self) -> None:
        self.count = 0
        self._previous = signal.getsignal(signal.SIGINT)
        self._holding = False
        if self._previous is signal.default_int_handler:
            try:
                signal.signal(signal.SIGINT, self._note)
                self._holding = True
            except ValueError:  # not the main thread
                pass

    def _note(self, _signum: int, _frame: FrameType | None) -> None:
        self.count += 1

    def release(self) -> bool:
        """SIGINT raised again as it comes; whether one came while it was held."""
        if self._holding:
            signal.signal(signal.SIGINT, self._previous)
            self._holding = False
        return self.count > 0
