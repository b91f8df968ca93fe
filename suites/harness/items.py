"""What both of the harness's processes read from pytest: the rows.json a session runs (stashed on its config), the
row an item serves, and the environment switches between them."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from harness import boundary
from harness.rows import Row, RowsDoc

ENV_CHILD = "STACKGATE_CHILD"
ENV_CACHES_FROM = "STACKGATE_CACHES_FROM"
TRACED_AFTER_READY = "stackgate.jit.traced_after_ready"  # frames torch.compile traced during timed requests
FIRST_REQUEST_ONLY = "stackgate.first_request_only"  # once-per-process work inside timed requests (first_calls)
ENV_REFUSE_JIT = boundary.ENV_REFUSE_JIT  # "1": a row that compiles anything errors (the images set it)
ENV_SHARE = "STACKGATE_SHARE_ENGINES"  # "1" in a shared child: engines asked with share=True outlive their item
ENV_ITEM_LOGS = "STACKGATE_ITEM_LOGS"  # a shared child's folder for its items' logs (named by `log_name`)
ROWS_KEY = pytest.StashKey[RowsDoc | None]()


def log_name(nodeid: str) -> str:
    """An item's log file name: its node id with what a file name cannot hold replaced, the tail kept."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in nodeid)[-150:] + ".log"


def fresh_log(path: Path) -> int:
    """A write descriptor on a new file at `path` (an earlier run's log there removed first): O_EXCL and O_NOFOLLOW,
    so a symlink planted under a log's name, which is known in advance, is never written (or truncated) through."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)


def rows_doc(config: pytest.Config) -> RowsDoc | None:
    return config.stash.get(ROWS_KEY, None)


def item_row(item: pytest.Item) -> Row | None:
    params = getattr(item, "callspec", None)
    value = params.params.get("row") if params else None
    return value if isinstance(value, Row) else None
