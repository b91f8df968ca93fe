"""Nothing outlives its row, and a signal never loses a result.

The harness parent becomes a child subreaper (Linux `prctl`), so a process that escaped its item's process
group with `setsid` or a double fork is re-parented to the parent instead of init: after every item, every
descendant still alive is found in /proc, killed, reaped and named, and a row that left one behind does not
pass. A SIGTERM, SIGINT or SIGHUP to the parent raises `Interrupted` where it is waiting: the item in flight
is killed with its whole tree and recorded as an error, and the run ends with a valid JUnit.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from types import FrameType

_PR_SET_CHILD_SUBREAPER = 36
SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Interrupted(BaseException):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):  # not Linux: nothing adopts orphans, the sweep sees only direct children
        return False


def become_subreaper() -> bool:
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def install_handlers() -> None:
    def handler(signum: int, _frame: FrameType | None) -> None:
        for s in SIGNALS:  # the first signal wins; the clean-up it starts is not interrupted again
            signal.signal(s, signal.SIG_IGN)
        raise Interrupted(signum)

    for s in SIGNALS:
        signal.signal(s, handler)


def descendants(root: int | None = None) -> list[tuple[int, str]]:
    """(pid, command name) of every live process below `root` (default: this one), from /proc."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue  # gone meanwhile
        # pid (comm) state ppid ...: comm may hold spaces and parentheses, so split at the last ')'
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]
        if state != "Z":
            children.setdefault(int(ppid), []).append(int(entry))
            names[int(entry)] = comm
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out.append((pid, names[pid]))
        todo += children.get(pid, [])
    return sorted(out)


def sweep(grace_s: float = 2.0) -> list[str]:
    """Kill every descendant still alive and reap them; "name (pid)" of each one that was found."""
    found = descendants()
    for pid, _ in found:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and descendants():
        reap()
        time.sleep(0.02)
    reap()
    return [f"{name} (pid {pid})" for pid, name in found]


def reap() -> None:
    """Collect the exit status of every adopted child that has ended (zombies hold a pid until then)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
