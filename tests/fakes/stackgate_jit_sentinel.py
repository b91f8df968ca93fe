"""A test double of the JIT sentinel's documented API (the real one is built with the images).

It reads and writes the same JSON-lines log, so a test can "compile" from any process by appending
an event, exactly as the real sentinel's Triton listener would.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def install() -> None:
    """The real sentinel registers a Triton listener here; the double has nothing to hook."""


def log_path() -> str | None:
    return os.environ.get("STACKGATE_JIT_LOG")


def record(kernel: str, cache_hit: bool = False, target: str = "cuda:90") -> None:
    """Append one event as the real listener does after a compile (test-double only)."""
    event = {"pid": os.getpid(), "kernel": kernel, "target": target, "hash": "0" * 8, "cache_hit": cache_hit,
             "time_s": 0.01, "wall": 0.0, "row": os.environ.get("STACKGATE_ROW_ID", "")}  # fmt: skip
    with open(os.environ["STACKGATE_JIT_LOG"], "a") as f:
        f.write(json.dumps(event) + "\n")


def read_events(path: str | None = None, offset: int = 0) -> tuple[list[dict], int]:
    p = Path(path or log_path() or "")
    if not p.is_file():
        return [], offset
    with p.open("rb") as f:
        f.seek(offset)
        data = f.read()
    return [json.loads(line) for line in data.decode().splitlines() if line.strip()], offset + len(data)


def compiles(events: list[dict]) -> list[dict]:
    return [e for e in events if not e.get("cache_hit")]


def snapshot(dirs: list) -> set[str]:
    return {str(p) for d in map(Path, dirs) if d.is_dir() for p in d.rglob("*") if p.is_file()}


def new_files(before: set[str], dirs: list) -> list[str]:
    return sorted(snapshot(dirs) - before)
