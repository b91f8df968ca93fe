"""The names the host side and the container side both spell: a row's id, a run's results layout and its JUnit names.

Standard library only. The harness keeps its own copy of what it writes (`suites/harness/boundary.py`: the suites
never import `ci/`), and `tests/unit/test_contract.py` holds the two equal. Nothing else makes or parses these names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ci.common import files

# A row id is <change>.<target>.<model>.<8 hex>: the hash covers the row's backend and every axis value that differs
# from its default, so an id is the same on every run. pytest puts it in a test's name as the parameter id.
_PART = r"[A-Za-z0-9][A-Za-z0-9_\-]*"
ROW_ID = re.compile(rf"({_PART})\.({_PART})\.([A-Za-z0-9._\-]+)\.([0-9a-f]{{8}})")
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)+\Z")  # no '/' and no '..': it may name a folder


@dataclass(frozen=True)
class RowId:
    change: str
    target: str
    model: str
    digest: str  # 8 hex digits

    def __str__(self) -> str:
        return f"{self.change}.{self.target}.{self.model}.{self.digest}"

    @classmethod
    def parse(cls, text: str) -> RowId | None:
        """The row id `text` is, or None where it is not one."""
        m = ROW_ID.fullmatch(text)
        return cls(*m.groups()) if m else None

    @classmethod
    def find(cls, text: str) -> RowId | None:
        """The first row id inside `text` (a test name's parameter id), or None."""
        m = ROW_ID.search(text)
        return cls(*m.groups()) if m else None


def change_of(row_id: str) -> str:
    """The change a row id names: its first part (also for an id that is not wholly a row id)."""
    return row_id.split(".", 1)[0]


# --- a run's results folder (ci run --out): rows.json in, JUnit out ------------------------------------------------

ROWS_JSON = "rows.json"
NOT_RUN = "not-run.json"  # the rows a run did not reach, why, and what runs them (docs/boundary.md)
LOGS = "logs"  # one log per test item; a scheduled row's harness session log too
# rows.json fields a row's requests vary (its workload); the rest make its engine, which rows equal there share
WORKLOAD = ("id", "context", "batch")
# a row's rows.json field: the digest of what its result depends on (the row, its target, the image it runs in);
# the harness records it on the row's testcases as stackgate.<ROW_CONTENT>, and --resume counts only a result of it
ROW_CONTENT = "content"
# a row's rows.json field: the digest of what the row means as the stack defines it (ci.stack.meaning), recorded on
# its testcases as stackgate.<ROW_MEANING>: a report tells a result of today's row from one of a row defined otherwise
ROW_MEANING = "meaning"


def results_folder(target: str, suite: str, shard: int = 0) -> str:
    """The folder one `ci run` writes into, the same under `ci main`'s --out and a pipeline's results/."""
    return f"{target}-{suite}-{shard}"


@dataclass(frozen=True)
class ResultsDir:
    """The files of one `ci run` into `path`, for one target, suite and shard."""

    path: Path
    target: str
    suite: str
    shard: int = 0

    def junit(self, row: str | None = None) -> Path:
        """The run's JUnit; with `row`, that row's own (the scheduler gives each row its session and file)."""
        return self.path / f"{junit_stem(self.target, self.suite, self.shard)}{_row_tail(row)}.xml"

    def jit_log(self, row: str | None = None) -> Path:
        return self.path / f"jit-events{_row_tail(row)}.jsonl"

    @property
    def rows_json(self) -> Path:
        return self.path / ROWS_JSON

    @property
    def not_run(self) -> Path:
        return self.path / NOT_RUN


def _row_tail(row: str | None) -> str:
    """What a row's own file adds to the run's name: its id's hash (the whole text where it is no row id)."""
    if not row:
        return ""
    parsed = RowId.parse(row)
    return f".{parsed.digest if parsed else row}"


def junit_stem(target: str, suite: str, shard: int) -> str:
    return f"junit-{target}-{suite}-{shard}"


def junit_glob(target: str, suite: str, shard: int | str = "*") -> str:
    """What a step uploads: the run's JUnit and every row's own."""
    return f"junit-{target}-{suite}-{shard}*.xml"


# --- JUnit: the <testsuite> name and the properties every row's testcase carries ----------------------------------

# the environment the host gives the harness, and the harness's own warm-up gives its children
ENV_ROWS = "STACKGATE_ROWS"  # the rows.json a session runs
ENV_JIT_LOG = "STACKGATE_JIT_LOG"  # where the JIT sentinel writes each compile it saw
ENV_REFUSE_JIT = "STACKGATE_REFUSE_JIT"  # "0": compiles allowed; else a row that compiles anything errors
PREFIX = "stackgate."
METRIC = PREFIX + "metric."
CARD = PREFIX + "card"  # the cards a row ran on, in words (model, memory, driver): a target's label is not a card


def suite_name(target: str, suite: str, shard: int | str) -> str:
    return f"{PREFIX}{target}.{suite}.{shard}"


def parse_suite_name(name: str) -> tuple[str, str, str] | None:
    """(target, suite, shard) of a <testsuite> name the harness wrote, or None."""
    if not name.startswith(PREFIX) or name.count(".") < 3:
        return None
    head, suite, shard = name.rsplit(".", 2)
    return head[len(PREFIX) :], suite, shard


def record_not_run(folder: Path, target: str, suite: str, rows: Sequence[str], reason: str, fix: str) -> Path:
    """not-run.json in a results folder (docs/boundary.md): the rows a run did not reach, why, and what runs them."""
    doc = {"schema": 1, "target": target, "suite": suite, "rows": list(rows), "reason": reason, "fix": fix}
    return files.replace(folder / NOT_RUN, json.dumps(doc, indent=2) + "\n")
