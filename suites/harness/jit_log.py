"""Reading what the JIT sentinel (`harness.jit_sentinel`) leaves: its JSON-lines log, torn lines included, and the
cache folders it watches. The harness reads; only the sentinel itself is installed in the images, so this side
can change without rebuilding one."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable

from harness.jit_sentinel import CACHE_ENV, log_path


def read_events(path: str | None = None, offset: int = 0) -> tuple[list[dict], int]:
    """Events appended since byte `offset`, and the offset to pass next time. A torn last line waits."""
    path = path or log_path()
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except FileNotFoundError:
        return [], offset
    end = data.rfind(b"\n") + 1  # a line still being written is read on the next call
    return [e for line in data[:end].splitlines() if line.strip() for e in _events(line)], offset + end


UNREADABLE = "(an unreadable JIT-log line)"  # the kernel name of a torn line's event


def _events(line: bytes) -> list[dict]:
    """One log line as its event. A line torn by a process killed mid-write (or a short write on a full disk) runs
    into the next one: the whole event at its end is kept, and the torn part counts as a compile that could not be
    read, so that a torn log never passes a row that must not compile, nor stops the run."""

    try:
        return [json.loads(line)]
    except ValueError:
        pass
    start = line.rfind(b'{"')
    torn = line[:start] if start > 0 else line
    unreadable = {"kernel": UNREADABLE, "torn": torn[:200].decode(errors="replace")}
    if start > 0:
        try:
            return [unreadable, json.loads(line[start:])]
        except ValueError:
            pass
    return [unreadable]


def compiles(events: Iterable[dict]) -> list[dict]:
    """The real compiles among `events` (cache hits are never logged, but filter in case)."""
    return [e for e in events if not e.get("cache_hit")]


def cache_dirs() -> list[str]:
    """The cache directories a run is watched over (env value, else the tool's default)."""
    try:  # torch names its default inductor cache after getpass.getuser()
        import getpass

        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return [os.path.expanduser(os.environ.get(k) or v.format(user=user)) for k, v in CACHE_ENV.items()]


def snapshot(dirs: Iterable[str] | None = None) -> frozenset[str]:
    """Every file under `dirs` (default: `cache_dirs()`) now."""
    found: set[str] = set()
    for top in cache_dirs() if dirs is None else dirs:
        for root, _, files in os.walk(top):
            found.update(os.path.join(root, f) for f in files)
    return frozenset(found)


def new_files(before: frozenset[str], dirs: Iterable[str] | None = None) -> list[str]:
    """Files under `dirs` that were not there at `snapshot` time, sorted."""
    return sorted(snapshot(dirs) - before)
