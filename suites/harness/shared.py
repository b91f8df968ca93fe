"""Several items in one child process, one after another, so that they share what the process has built: the imports
(17-24 s a process on the H200) and, where their tests ask for it, their engines (`engine.in_process.start(...,
share=True)`). Isolation holds for faults: the item a crash, hang or timeout ends fails with its cause, and the
items the child never reached are handed back, for the controller to run each in a process of its own.

The child writes, per item, a marker as the item starts (`current.json`: its index and start time, read for the
item's timeout) and its result file as it ends (`<index>.json`: pytest's reports, the JIT it saw). Each item's
output goes to its own log: the child points its stdout and stderr there as the item starts.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness import isolate, jit_seen, reaper
from harness.isolate import Outcome

CURRENT = "current.json"
ITEMS = "items.json"  # the node ids in the order the child runs them: an item's index names its files
POLL_S = 0.2
EXIT_GRACE_S = 30.0  # after its last result, the child's own teardown (engines, atexit) may take this long


@dataclass(frozen=True)
class Done:
    nodeid: str
    outcome: Outcome
    seen: jit_seen.Seen | None  # what the child's window saw during the item (None: the item never reported)


def result_file(folder: Path, index: int) -> Path:
    return folder / f"{index}.json"


def run_group(
    argv: Sequence[str],
    *,
    nodeids: Sequence[str],
    cwd: Path,
    results: Path,
    logs: Sequence[Path],
    group_log: Path,
    timeout_s: float | None,
    env: Mapping[str, str],
    on_done: Callable[[Done], None],
) -> list[str]:
    """Run `nodeids` in one child; `on_done` is called for each item as it ends (the crashed one included). Returns
    the node ids the child never finished nor crashed in: the caller runs them each in its own process."""
    results.mkdir(parents=True, exist_ok=True)
    reported: set[int] = set()
    with group_log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, *argv],
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(env),
            start_new_session=True,
        )
        try:
            ended, hung, last_result = None, None, None
            while ended is None and hung is None:
                time.sleep(POLL_S)
                if _collect(results, nodeids, logs, reported, on_done):
                    last_result = time.monotonic()
                ended, current, now = proc.poll(), _current(results), time.monotonic()
                if ended is None and current and current[0] not in reported and now - current[1] > (timeout_s or 1e18):
                    hung = current[0]
                if ended is None and len(reported) == len(nodeids) and now - (last_result or now) > EXIT_GRACE_S:
                    break  # every item reported: a teardown that does not end is not the items' failure
        except BaseException:  # a signal to the harness: the group goes with it; the caller marks the rest
            isolate.kill_group(proc.pid)
            proc.wait()
            _collect(results, nodeids, logs, reported, on_done)
            raise
        if hung is not None:
            isolate.dump_stacks(proc.pid)
        reaper.sweep()
        isolate.kill_group(proc.pid)
        rc = proc.wait()
    _collect(results, nodeids, logs, reported, on_done)
    current = _current(results)
    if current is not None and current[0] not in reported:  # the item the child ended in: its own failure
        i = current[0]
        reported.add(i)
        on_done(Done(nodeids[i], _crashed(rc, hung is not None, timeout_s, logs[i], current[1]), None))
        return [n for j, n in enumerate(nodeids) if j > i]
    return [n for j, n in enumerate(nodeids) if j not in reported]


def _collect(
    results: Path, nodeids: Sequence[str], logs: Sequence[Path], reported: set[int], on_done: Callable[[Done], None]
) -> bool:
    """Hand on every item that wrote its result since the last look; whether any did."""
    before = len(reported)
    for i in range(len(nodeids)):
        if i not in reported and (done := _finished(results, i, nodeids[i], logs[i])):
            reported.add(i)
            on_done(done)
    return len(reported) > before


def current_index(results: Path) -> int | None:
    """The index of the item the child is in, or last started."""
    found = _current(results)
    return found[0] if found else None


def _current(results: Path) -> tuple[int, float] | None:
    """The item the child is in (its index) and when it started (this host's monotonic clock)."""
    try:
        doc = json.loads((results / CURRENT).read_text())
        return int(doc["index"]), float(doc["started"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _finished(results: Path, index: int, nodeid: str, log: Path) -> Done | None:
    try:
        doc = json.loads(result_file(results, index).read_text())
    except (OSError, ValueError):
        return None
    outcome = isolate.outcome_from_reports(doc.get("reports", []))
    if outcome is None:
        return None
    return Done(nodeid, replace(outcome, log=str(log)), seen_of(doc.get("jit")))


def _crashed(rc: int, hung: bool, timeout_s: float | None, log: Path, started: float) -> Outcome:
    text = isolate.read_log(log)
    elapsed = time.monotonic() - started
    if hung:
        message = f"timeout after {timeout_s:g} s{isolate.where_it_hung(text)}"
    elif rc < 0:
        message = f"signal {-rc} ({isolate.signal_name(-rc)})"
    else:
        message = f"no result (process exited {rc} without reporting)"
    return Outcome(
        status="error",
        message=f"{message}, in a shared process",
        details=isolate.tail(log),
        duration_s=elapsed,
        log=str(log),
    )


def seen_to_json(seen: jit_seen.Seen) -> dict[str, Any]:
    return {
        "compiles": seen.compiles,
        "kernels": list(seen.kernels),
        "cache_new_files": list(seen.cache_new_files),
        "events": list(seen.events),
    }


def seen_of(doc: Any) -> jit_seen.Seen | None:
    if not isinstance(doc, dict):
        return None
    return jit_seen.Seen(
        compiles=doc.get("compiles"),
        kernels=tuple(doc.get("kernels") or ()),
        cache_new_files=tuple(doc.get("cache_new_files") or ()),
        events=tuple(doc.get("events") or ()),
    )


def by_engine(items: Sequence[Any], rows: Sequence[Any]) -> list[Any]:
    """`items` (their `rows`, None where an item serves no row) in the order that builds each engine once: the rows
    of one engine configuration one after another, the configurations in the order they first appear. A process keeps
    two engines at most (engine.in_process), so rows alternating between three backends would build one for every
    row."""
    first: dict[str, int] = {}
    for row in rows:
        first.setdefault(row.engine if row is not None else "", len(first))
    order = sorted(range(len(items)), key=lambda n: first[rows[n].engine if rows[n] is not None else ""])
    return [items[n] for n in order]
