"""How a command's process ends. A verb that built a large graph of objects (a report of 10,000 testcases holds
millions) hands it over with `keep` instead of freeing it; `ci.cli.run`, the command line's entry, then ends the
process once its output is flushed, without Python's teardown: freeing every object one by one took 45 ms of a
one-second report, and the kernel takes the whole memory back at once. Called as a library (`ci.cli.main`), nothing
changes but that the last kept graph lives until the next command."""

from __future__ import annotations

import gc
import os
import sys

_kept: list[object] = []


def keep(graph: object) -> None:
    """Hold `graph` to the end of the process; `end` then skips the teardown. What exists now is frozen out of the
    cyclic collector's passes (gc.freeze): the first pass after a command that had it off would walk all of it."""
    _kept.append(graph)
    gc.freeze()


def forget() -> None:
    """Drop what an earlier command kept (a library caller runs many in one process), back under the collector."""
    if _kept:
        _kept.clear()
        gc.unfreeze()


def end(code: int) -> None:
    """Exit with `code`: at once, output flushed, where a command kept a graph; else by the usual teardown."""
    if _kept:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
