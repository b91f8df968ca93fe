"""A rows.json from elsewhere (a results folder, a report's inputs), read as data: a regular file within its bound,
strict JSON nested no deeper than a rows.json is, and the fields a re-run or the report reads, of their types. What
re-runs is still made from the stack's target (`ci.run.rerun.lines`): these fields name, they never choose flags."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from pydantic import Field

from ci.common import untrusted
from ci.common.errors import UsageError

KIND = untrusted.Kind(
    what="a rows.json written by ci run",
    limit=64 << 20,  # a rows.json of thousands of rows: a few MB
    fix="point --rows-json at the rows.json in a results folder (ci run writes one beside its JUnit)",
)


class Image(untrusted.Record):
    ref: str | None = None
    digest: str | None = None
    id: str | None = None


class TargetBlock(untrusted.Record):
    id: str
    env: dict[str, str] = Field(default_factory=dict)


class RowBlock(untrusted.Record):
    id: str


class RowsJson(untrusted.Record):
    suite: str
    target: TargetBlock
    timeout_s: float
    rows: list[RowBlock]
    image: Image | None = None
    suites_dir: str | None = None


@functools.lru_cache(maxsize=16)
def read(path: Path) -> tuple[RowsJson, dict[str, Any]]:
    """The rows.json at `path` (resolved), checked, and its document as written (what the report carries of a run):
    one parse per file, as the report asks for every failing row of a run. A BadInput (exit 2) where it is not one."""
    where = str(path)
    raw = untrusted.json_value(untrusted.read_bytes(path, KIND), KIND, where)
    return untrusted.validated(raw, RowsJson, KIND, where), raw


def row_document(rows_json: Path, row_id: str) -> dict[str, Any] | None:
    """The rows.json of a run narrowed to one row (what the report carries of the run, to read), or None where that
    rows.json is unusable or lacks the row."""
    try:
        _, doc = read(rows_json.resolve())
    except UsageError:
        return None
    rows = [r for r in doc["rows"] if r.get("id") == row_id]
    if not rows:
        return None
    return {**{k: v for k, v in doc.items() if k != "rows"}, "rows": rows}


def rows_by_id(rows_json: Path) -> dict[str, dict[str, Any]] | None:
    """The row documents of a rows.json, by id; None where there is none or it is not one."""
    try:
        _, doc = read(rows_json.resolve())
    except UsageError:
        return None
    return {r["id"]: r for r in doc["rows"]}
