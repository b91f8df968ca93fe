"""The names the harness writes that the host side reads back: a row id's shape, the <testsuite> name, the property
prefix. Standard library only; `ci/common/contract.py` is the host side's copy, and `tests/unit/test_contract.py`
holds the two equal (the suites never import `ci/`)."""

from __future__ import annotations

import re

PREFIX = "stackgate."
# the environment the host gives the harness, and the harness's own warm-up gives its children
ENV_ROWS = "STACKGATE_ROWS"  # the rows.json a session runs
ENV_JIT_LOG = "STACKGATE_JIT_LOG"  # where the JIT sentinel writes each compile it saw
ENV_REFUSE_JIT = "STACKGATE_REFUSE_JIT"  # "0": compiles allowed; else a row that compiles anything errors
# rows.json fields a row's requests vary (its workload); the rest make its engine, which rows equal there share
WORKLOAD = ("id", "context", "batch")
ROW_CONTENT = "content"  # a row's rows.json field: the digest of what its result depends on (recorded on its cases)
ROW_MEANING = "meaning"  # a row's rows.json field: the digest of what the row means (recorded on its cases)
# a row's own fields: its workload and its digests (each row's differs); every other field makes its engine
OWN = (*WORKLOAD, ROW_CONTENT, ROW_MEANING)
METRIC = PREFIX + "metric."
CARD = PREFIX + "card"  # the cards a row ran on, in words (model, memory, driver): a target's label is not a card
_PART = r"[A-Za-z0-9][A-Za-z0-9_\-]*"
ROW_ID = re.compile(rf"({_PART})\.({_PART})\.([A-Za-z0-9._\-]+)\.([0-9a-f]{{8}})")


def suite_name(target: str, suite: str, shard: int | str) -> str:
    return f"{PREFIX}{target}.{suite}.{shard}"
