"""A report.json from elsewhere (another agent, another user's PR, a download), read for what `ci repro` names from
it: a row's status, the tests that failed, the image and timeout its run recorded, the builds it ran on. Read as
data (`ci.common.untrusted`): a regular file within a report's size, strict JSON of bounded depth, these fields of their
types; each name is checked again where the re-run is made (`ci.run.rerun.lines`)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from ci.common import files, untrusted
from ci.common.errors import UsageError
from ci.common.escape import one_line
from ci.run.rerun import lines
from ci.run.rerun.rows_json_read import Image

KIND = untrusted.Kind(
    what="a report.json written by ci report",
    limit=files.REPORT_JSON_MAX,
    fix="point --report at the report.json of a report folder (python -m ci report RESULTS --out DIR writes one)",
    depth=32,
)
FAILING = ("failure", "error", "conflict", "incomplete")


class RanBlock(untrusted.Record):
    """The rows.json of the run that held the row, as the report carries it."""

    image: Image | None = None
    timeout_s: float | None = None
    suites_dir: str | None = None


class RunBlock(untrusted.Record):
    test: str = ""
    status: str | None = None
    vllm_version: str | None = None


class RowEntry(untrusted.Record):
    id: str
    status: str | None = None
    rows_json: RanBlock | None = None
    runs: list[RunBlock] = Field(default_factory=list)
    suites_dir: str | None = None


class TestEntry(untrusted.Record):
    test: str
    status: str | None = None
    target: str | None = None
    suite: str | None = None
    image: str | None = None


class Report(untrusted.Record):
    rows: list[RowEntry]
    unkeyed: list[TestEntry] = Field(default_factory=list)


def read(report: Path) -> Report:
    return untrusted.read(report, Report, KIND)


def row(report: Path, row_id: str) -> RowEntry:
    """The row's entry in report.json; a usage error names what is wrong with the file or the row."""
    rows = {r.id: r for r in read(report).rows}
    if row_id not in rows:
        failing = [i for i, r in rows.items() if r.status in FAILING]
        listed = ", ".join(failing[:5]) + (" …" if len(failing) > 5 else "") if failing else "none"
        raise UsageError(f"row {row_id!r} is not in {one_line(report)}", hint=f"its failing rows: {one_line(listed)}")
    return rows[row_id]


def test(report: Path, name: str) -> TestEntry:
    """A testcase outside the plan, as report.json's `unkeyed` names it (with the target and suite it ran in)."""
    tests = {t.test: t for t in read(report).unkeyed}
    entry = tests.get(name)
    if entry is None or not entry.target or not entry.suite:
        failing = [t for t, c in tests.items() if c.status in ("failure", "error")][:5]
        raise UsageError(
            f"{one_line(report)} has no re-runnable test {one_line(repr(name))} (one naming the target and suite it "
            "ran in)",
            hint=f"its failing tests outside the plan: {one_line(', '.join(failing)) or 'none'}",
        )
    return entry


def node_ids(entry: RowEntry, suite: str) -> tuple[str, ...]:
    """The pytest node ids (relative to the suites root) of the row's failing runs, else of all its runs; none
    where a run names no test module of the suite (then the suite's folder is run, narrowed to the row)."""
    bad = [r for r in entry.runs if r.status in ("failure", "error")] or entry.runs
    out: list[str] = []
    for run in bad:
        node = lines.node_id(run.test, suite)
        if node is None:
            return ()
        out.append(node)
    return tuple(dict.fromkeys(out))


def builds(entry: RowEntry) -> list[str]:
    """The vLLM versions the row's runs recorded (a report's own words: print them through `ci.common.escape`)."""
    return sorted({r.vllm_version for r in entry.runs if r.vllm_version})
