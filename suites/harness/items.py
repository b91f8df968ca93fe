"""What both of the harness's processes read from pytest: the rows.json a session runs (stashed on its config), the
row an item serves, and the environment switches between them."""

from __future__ import annotations

import pytest

from harness.rows import Row, RowsDoc

ENV_CHILD = "STACKGATE_CHILD"
ENV_CACHES_FROM = "STACKGATE_CACHES_FROM"
TRACED_AFTER_READY = "stackgate.jit.traced_after_ready"  # frames torch.compile traced during timed requests
FIRST_REQUEST_ONLY = "stackgate.first_request_only"  # once-per-process work inside timed requests (first_calls)
ENV_REFUSE_JIT = "STACKGATE_REFUSE_JIT"  # "1": a row that compiles anything errors (the images set it)
ROWS_KEY = pytest.StashKey[RowsDoc | None]()


def rows_doc(config: pytest.Config) -> RowsDoc | None:
    return config.stash.get(ROWS_KEY, None)


def item_row(item: pytest.Item) -> Row | None:
    params = getattr(item, "callspec", None)
    value = params.params.get("row") if params else None
    return value if isinstance(value, Row) else None
