"""A second CPU for the report's two CPU-bound halves (reading JUnit into cases, rendering three formats): a child
forked from this process computes one part while this process computes the rest, and hands its result back pickled.
`start` gives the child one whole job; `share` lets both processes take items from one list as each gets free, so
the child starts at once and this process joins in when it has done what it had to do first.

Forking copies everything this process holds, so the child needs nothing sent to it. It is used only where it is
safe and pays: a second CPU, no other thread running here (a fork copies a lock another thread may hold), and work
large enough that the fork and the pickling cost less than they save. Whatever goes wrong in the child (it dies, it
raises, its result does not unpickle), the work is done again here, so the result never depends on the fork."""

from __future__ import annotations

import contextlib
import fcntl
import multiprocessing
import os
import pickle
import signal
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, TypeVar

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
    theirs, mine = _pipe(ctx)
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


def _pipe(ctx: Any) -> tuple[Connection, Connection]:
    """A one-way pipe with the largest buffer the kernel allows (Linux: 1 MiB, not 64 KiB): a result of many
    megabytes then crosses in a few writes, not hundreds of switches between the two processes."""
    theirs, mine = ctx.Pipe(duplex=False)
    with contextlib.suppress(OSError, AttributeError):  # not Linux, or over the limit: the default buffer
        fcntl.fcntl(mine.fileno(), fcntl.F_SETPIPE_SZ, 1 << 20)
    return theirs, mine


def _default_signals() -> None:
    """In a forked child: the parent's signal handlers are not the child's job."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def _child(fn: Callable[[], object], out: Connection) -> None:
    _default_signals()
    try:
        data = pickle.dumps(fn(), protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:
        os._exit(1)
    out.send_bytes(data)
    out.close()


def share(fn: Callable[[int], T], n: int) -> Callable[[], list[T]]:
    """`fn(0)` .. `fn(n - 1)`, computed by a forked child from now on and by this process once it calls the callable
    returned: each takes the next index not yet taken, so neither waits while the other has work left. The child
    sends each result as it has it (a thread here receives them), and the callable returns all n in index order.
    Items the child took and never sent (it died or raised) are computed here; where a fork is not `possible()`,
    everything is."""
    if n < 2 or not possible():
        return lambda: [fn(i) for i in range(n)]
    ctx = multiprocessing.get_context("fork")
    taken = ctx.Value("q", 0)  # the next index to take, under its own lock
    theirs, mine = _pipe(ctx)
    child = ctx.Process(target=_taker, args=(fn, n, taken, mine), name="stackgate-shared", daemon=True)
    child.start()
    mine.close()
    received: dict[int, T] = {}
    drain = threading.Thread(target=_drain, args=(theirs, received), name="stackgate-shared-recv", daemon=True)
    drain.start()

    def result() -> list[T]:
        out: dict[int, T] = {}
        while (i := _take(taken, n)) is not None:
            out[i] = fn(i)
        drain.join()
        child.join()
        out.update(received)
        return [out[i] if i in out else fn(i) for i in range(n)]

    return result


def _take(taken: Any, n: int) -> int | None:
    with taken.get_lock():
        i = taken.value
        if i >= n:
            return None
        taken.value = i + 1
    return i


def _taker(fn: Callable[[int], object], n: int, taken: Any, out: Connection) -> None:
    _default_signals()
    try:
        while (i := _take(taken, n)) is not None:
            out.send_bytes(pickle.dumps((i, fn(i)), protocol=pickle.HIGHEST_PROTOCOL))
    except BaseException:
        os._exit(1)  # what it took and did not send is computed by the parent
    out.close()


def _drain(conn: Connection, into: dict[int, Any]) -> None:
    """Receive and unpickle the child's results as they come, until it closes its end: the child never waits on a
    full pipe, and the unpickling is done while both processes still have items to take, not after."""
    with conn:
        while True:
            try:
                data = conn.recv_bytes()
            except (EOFError, OSError):
                return
            try:
                i, value = pickle.loads(data)
            except (pickle.UnpicklingError, AttributeError, ImportError, EOFError, ValueError):
                continue  # computed by the parent, as if never sent
            into[i] = value
