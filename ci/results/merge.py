"""Merge the JUnit of every target into one result per planned row, accounting for every input file.

A row's result is keyed by its row id (the `stackgate.row` property, else the pytest parameter id).
Nothing is merged silently: two cases of the same row and test are a duplicate, kept side by side; a
planned row with no case is "not run", or "incomplete" where a broken file may have held it; cases
naming no row are kept as well.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Literal

from ci.common.contract import NOT_RUN, change_of, junit_stem
from ci.results import junit, junit_read
from ci.results.junit import Case, FileRead
from ci.results.metrics import Metric
from ci.stack.plan import Plan, Row

_NAMED_MS = re.compile(r"\((\d+(?:\.\d+)?) ms\)$")  # a named part's time: harness.profile.describe_first_calls

RowStatus = Literal["pass", "failure", "error", "conflict", "skipped", "incomplete", "not run"]
# Worst first: a row's status is its worst test's status.
_SEVERITY: tuple[RowStatus, ...] = ("error", "failure", "conflict", "skipped", "pass")


def cold_warm_ratio(metric: Callable[[str], Metric | None]) -> Metric | None:
    """The first request over the warm median: the test's own `cold_warm_ratio`, else derived where it recorded
    `cold_first_request_ms` and `warm_request_ms` (`metric` looks a metric up by name, in a case or a row)."""
    ratio = metric("cold_warm_ratio")
    if ratio is None and (value := _derived_ratio(metric)) is not None:
        return Metric("cold_warm_ratio", value, "ratio", "none", 1, None)
    return ratio


def cold_warm_value(metric: Callable[[str], Metric | None]) -> float | None:
    """`cold_warm_ratio`'s value alone (a row's runs are ranked by it: no Metric made for each)."""
    ratio = metric("cold_warm_ratio")
    return ratio.value if ratio is not None else _derived_ratio(metric)


def _derived_ratio(metric: Callable[[str], Metric | None]) -> float | None:
    cold, warm = metric("cold_first_request_ms"), metric("warm_request_ms")
    return cold.value / warm.value if cold and warm and warm.value > 0 else None


def paid_once(case: Case) -> str:
    """A run's first request over its warm median, what the row named of that (`first_request_only`, parts written
    `what (N ms)`) and what it left unnamed; "" where the run recorded neither."""
    named = case.first_request_only or ""
    cold, warm = case.metric("cold_first_request_ms"), case.metric("warm_request_ms")
    if cold is None or warm is None:
        return f"paid once: {named}" if named else ""
    over = cold.value - warm.value
    known = sum(float(x.group(1)) for part in named.split("; ") if (x := _NAMED_MS.search(part)))
    text = f"{over:.0f} ms over warm" + (f"; paid once: {named}" if named else "")
    return text + (f"; not named: {over - known:.0f} ms" if over - known >= 1 else "")


@dataclass(frozen=True, kw_only=True)
class RowResult:
    id: str
    planned: Row | None  # None: a result for a row id the plan does not have
    change: str
    target: str
    suite: str
    status: RowStatus
    cases: tuple[Case, ...]  # every case of this row, duplicates included, in input order
    duplicates: tuple[str, ...]  # tests run more than once for this row
    note: str = ""  # why incomplete, or what disagrees

    @cached_property
    def ran(self) -> tuple[Case, ...]:
        """Cases that executed and so may carry measurements (not skipped, not crashed)."""
        return tuple(c for c in self.cases if c.status in ("pass", "failure"))

    @cached_property
    def runs_json(self) -> bytes:
        """The row's runs as report.json lists them: each case as it was encoded where it was read, joined."""
        return b"[" + b",".join([c.json for c in self.cases]) + b"]"

    @cached_property
    def seconds(self) -> float:
        """The row's testcases' time, added up."""
        return sum(c.time or 0.0 for c in self.cases)

    @cached_property
    def message(self) -> str:
        return next((c.message for c in self.cases if c.status != "pass" and c.message), "")

    @property
    def cold_warm_runs(self) -> list[tuple[float, Case]]:
        """Per run of the row (each case that ran), its first request over its warm median, worst first (what the
        worst paid once: `paid_once(case)`); a run that recorded neither the ratio nor both requests is left out."""
        runs = [(ratio, case) for case in self.ran if (ratio := cold_warm_value(case.metrics_by_name.get)) is not None]
        return sorted(runs, key=lambda run: -run[0])

    def metric(self, name: str) -> junit.Metric | None:
        """`metrics[name]`, without merging every metric of every case where only this one is asked for."""
        if "metrics" in self.__dict__ or name == "cold_warm_ratio":  # merged already, or derived in the merging
            return self.metrics.get(name)
        return next((m for case in self.cases if (m := case.metric(name)) is not None), None)

    @cached_property  # computed once: a frozen row's cases never change
    def metrics(self) -> dict[str, junit.Metric]:
        """Each metric once, the first case recording it winning; `cases` holds every run. The first request over
        the warm median (cold_warm_ratio) is derived where the test recorded both and not the ratio itself."""
        out: dict[str, junit.Metric] = {}
        for case in reversed(self.cases):  # an earlier case's metric overwrites a later one's
            out.update(case.metrics_by_name)
        if (ratio := cold_warm_ratio(out.get)) is not None:
            out["cold_warm_ratio"] = ratio
        return out


@dataclass(frozen=True, kw_only=True)
class Results:
    inputs: tuple[FileRead, ...]
    rows: tuple[RowResult, ...]  # planned rows in plan order, then result rows the plan lacks
    unkeyed: tuple[Case, ...]  # cases that name no row (tests outside the row matrix)

    def by_id(self) -> dict[str, RowResult]:
        return {r.id: r for r in self.rows}

    def problems(self) -> tuple[FileRead, ...]:
        return tuple(f for f in self.inputs if f.status != "ok")


def not_run_notes(paths: Iterable[Path]) -> tuple[dict[str, str], list[FileRead]]:
    """Row id -> why it did not run and the command that makes it possible, from every not-run.json below
    the results folders given, and the records that could not be read (input problems of the report: one bad
    record never withholds the rest). A record never turns a row with results into "not run"."""
    out: dict[str, str] = {}
    bad: list[FileRead] = []
    for path in paths:
        for rec in sorted(path.rglob(NOT_RUN)) if path.is_dir() else ():
            try:
                doc = json.loads(rec.read_text())
                if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list) or "reason" not in doc:
                    raise TypeError("an object with rows (a list) and reason")
                note = f"{doc['reason']}; fix: {doc['fix']}" if doc.get("fix") else str(doc["reason"])
                out.update(dict.fromkeys((str(r) for r in doc["rows"]), note))
            except (OSError, ValueError, TypeError, RecursionError) as exc:
                bad.append(
                    FileRead(
                        path=str(rec),
                        status="unreadable",
                        problem=f"not a not-run record "
                        f"({type(exc).__name__}: {exc}); remove it, or rerun the step that wrote it",
                    )
                )
    return out, bad


def collect(paths: Sequence[Path] | junit_read.Begun, plan: Plan) -> Results:
    """Every testcase under `paths` (or what `reading.begin` started reading) merged into the plan's rows."""
    begun = paths if isinstance(paths, junit_read.Begun) else junit_read.begin(paths)
    files = iter(begun.reads())
    reads = tuple(x if isinstance(x, FileRead) else next(files) for x in begun.given)
    notes, bad = not_run_notes(begun.paths)
    return merge((*reads, *bad), plan, notes)


def merge(reads: Sequence[FileRead], plan: Plan, not_run: dict[str, str] | None = None) -> Results:
    by_row: dict[str, list[Case]] = {}
    unkeyed: list[Case] = []
    for read in reads:
        for case in read.cases:
            if case.row:
                by_row.setdefault(case.row, []).append(case)
            else:
                unkeyed.append(case)
    known_scopes = {(r.target, r.suite) for r in plan.rows}
    broken = _broken_scopes(reads, known_scopes)
    cut = {row: read.path for read in reads for row in read.cut_rows}

    rows = [_planned(r, by_row.pop(r.id, []), broken, cut, (not_run or {}).get(r.id, "")) for r in plan.rows]
    for row_id, cases in by_row.items():  # result rows the plan does not list, in input order
        first = cases[0]
        rows.append(
            _result(
                row_id,
                None,
                first.change or change_of(row_id),
                first.target or "?",
                first.suite or "?",
                cases,
                cut,
            )
        )
    for row_id, path in cut.items():
        if row_id not in {r.id for r in rows}:
            rows.append(
                RowResult(
                    id=row_id,
                    planned=None,
                    change=change_of(row_id),
                    target="?",
                    suite="?",
                    status="incomplete",
                    cases=(),
                    duplicates=(),
                    note=f"{path} ends inside it",
                )
            )
    return Results(inputs=tuple(reads), rows=tuple(rows), unkeyed=tuple(unkeyed))


def _broken_scopes(reads: Sequence[FileRead], known: set[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """(target, suite) pairs that an unreadable file may have held, with the file's path.

    A broken file names its scope in its suites; an unreadable one only where its file name holds
    a known target and suite (docs/boundary.md: junit-<target>-<suite>-<shard>.xml as `ci run` writes
    it, or stackgate.<target>.<suite>.<shard>.xml).
    """
    out: dict[tuple[str, str], str] = {}
    for read in reads:
        if read.status == "ok":
            continue
        pairs = {(s.target, s.suite) for s in read.scopes} | {(c.target, c.suite) for c in read.cases}
        if not pairs:
            name = Path(read.path).name
            parts = set(name.split("."))
            pairs = {(t, s) for t, s in known if (t in parts and s in parts) or _harness_name(name, t, s)}
        for t, s in pairs:
            if t and s:
                out.setdefault((t, s), read.path)
    return out


def _harness_name(name: str, target: str, suite: str) -> bool:
    """The name `ci run` gives its JUnit file: junit-<target>-<suite>-<shard>.xml."""
    head = junit_stem(target, suite, 0)[:-1]
    return name.startswith(head) and name.endswith(".xml") and name[len(head) : -len(".xml")].isdigit()


def _planned(
    row: Row, cases: list[Case], broken: dict[tuple[str, str], str], cut: dict[str, str], why_not: str
) -> RowResult:
    if cases:
        return _result(row.id, row, row.change, row.target, row.suite, cases, cut)
    where = broken.get((row.target, row.suite))
    if row.id in cut:
        status, note = "incomplete", f"{cut[row.id]} ends inside this row's testcase"
    elif where:
        status, note = "incomplete", f"no result; {where} could not be read whole and may have held it"
    else:
        status, note = "not run", why_not
    return RowResult(
        id=row.id,
        planned=row,
        change=row.change,
        target=row.target,
        suite=row.suite,
        status=status,
        cases=(),
        duplicates=(),
        note=note,
    )


def _result(
    row_id: str, row: Row | None, change: str, target: str, suite: str, cases: list[Case], cut: dict[str, str]
) -> RowResult:
    by_test: dict[str, list[Case]] = {}
    for case in cases:
        by_test.setdefault(case.test, []).append(case)
    statuses: list[RowStatus] = []
    notes: list[str] = []
    duplicates = []
    for test, runs in by_test.items():
        seen = {c.status for c in runs}
        if len(runs) > 1:
            duplicates.append(test)
            where = ", ".join(f"{c.file} ({c.status})" for c in runs)
            notes.append(f"{test} ran {len(runs)} times: {where}")
        statuses.append("conflict" if len(seen) > 1 else runs[0].status)
    status = min(statuses, key=_SEVERITY.index)
    if row_id in cut:
        notes.append(f"{cut[row_id]} ends inside another run of it")
    if row is None:
        notes.insert(0, "not in the plan")
    return RowResult(
        id=row_id,
        planned=row,
        change=change,
        target=target,
        suite=suite,
        status=status,
        cases=tuple(cases),
        duplicates=tuple(duplicates),
        note="; ".join(notes),
    )
