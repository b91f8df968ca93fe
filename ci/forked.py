"""A second CPU for the report's two CPU-bound halves (reading JUnit into cases, rendering three formats): a child
forked from this process computes one part while this process computes the rest, and hands its result back pickled.

Forking copies everything this process holds, so the child needs nothing sent to it. It is used only where it is
safe and pays: a second CPU, no other thread running here (a fork copies a lock another thread may hold), and work
large enough that the fork and the pickling cost less than they save. Whatever goes wrong in the child (it dies, it
raises, its result does not unpickle), the work is done again here, so the result never depends on the fork."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import TypeVar

T = TypeVar("T")


def possible() -> bool:
    """A fork is safe and a second CPU would run it."""
    if threading.active_count() > 1 or "fork" not in multiprocessing.get_all_start_methods():
        return False
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
    return len(cpus) >= 2


def start(fn: Callable[[], T]) -> Callable[[], T]:
    """Start `fn` in a forked child; the callable returned waits for its result. Where a fork is not `possible()`,
    `fn` itself is returned: it runs here when the result is asked for."""
    if not possible():
        return fn
    ctx = multiprocessing.get_context("fork")
    theirs, mine = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(fn, mine), name="stackgate-forked", daemon=True)
    child.start()
    mine.close()

    def result() -> T:
        try:
            with theirs:
                data = theirs.recv_bytes()
            return pickle.loads(data)
        except (EOFError, OSError, pickle.UnpicklingError, AttributeError, ImportError):
            return fn()  # the child died or raised: it said nothing, so the work is done here
        finally:
            child.join()

    return result


def _child(fn: Callable[[], object], out: Connection) -> None:
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # the parent's handlers are not the child's job
        signal.signal(sig, signal.SIG_DFL)
    try:
        data = pickle.dumps(fn(), protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:
        os._exit(1)
    out.send_bytes(data)
    out.close()
