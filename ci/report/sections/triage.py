"""What a maintainer needs first, per imported change: the cause behind its failing rows, each failing row
with its full message, log, duration and the line that re-runs it, and cold beside warm of the same
quantity, per row. report.html is drawn from these; report.md from the tables in `view`."""

from __future__ import annotations

import functools
import os
import re
from collections import Counter
from dataclasses import dataclass

from ci.report.rerun_hints import Rerun, log_file, rerun, shown
from ci.report.view import FAILING, Report
from ci.results.acceptance import Verdict
from ci.results.junit import Metric
from ci.results.merge import RowResult

_NUMBER = re.compile(r"\d[\d.]*(?:e[+-]?\d+)?")
# A count and the names it counts ("14 Triton compile(s) after engine ready: _a_kernel, _b_kernel"): each row lists
# its own names, so they are no part of the cause.
_NAMES = 3  # names shown of a listed cause that rows list differently
_LISTED = re.compile(r"^(?P<head>\d+ [^:]+): (?P<items>[\w.]+(?:, [\w.]+)*)$")
# A cause that ends in a bracketed record of what was seen ("read all -1 top-k rows [{'read': 1, ...}]"): each row
# records its own, so the record is no part of the cause either.
_RECORD = re.compile(r"^(?P<head>[^\[{]+?) (?P<record>[\[{].*)$")


@dataclass(frozen=True, kw_only=True)
class Failing:
    row: RowResult
    message: str  # the whole first failure message
    details: str  # the whole failure text (traceback, log tail)
    log: str  # the row's log file, where the harness named one: relative to the working folder where it was found
    log_href: str = ""  # the same file relative to the report's folder ("" where it is not beside the JUnit)
    seconds: float  # the row's testcases, added up
    how: Rerun


def clauses(message: str) -> list[str]:
    """The causes one failure message gives: the harness joins a row's missed criteria with "; " (pytest.fail's
    "Failed: " before the first is no part of it)."""
    return [c.strip() for c in message.removeprefix("Failed: ").split("; ") if c.strip()]


def cause_key(text: str) -> str:
    """One cause whatever its numbers and the names it lists: "max_abs_err 4.7e-09 exceeds" on every row is one
    cause, and so is "N Triton compile(s) after engine ready: <kernels>" whatever the kernels."""
    listed = _LISTED.match(text) or _RECORD.match(text)
    return _NUMBER.sub("#", listed["head"] + ": …" if listed else text)


def said_once(texts: list[str]) -> str:
    """One cause as several rows word it: the first row's words, each number that differs as the range the rows
    span ("3–14 Triton compile(s)"), and of the names the rows list, the most listed with how many rows list them."""
    first = texts[0]
    if len(set(texts)) == 1:
        return first
    recorded = _RECORD.match(first)
    if recorded and all(_RECORD.match(t) and not _LISTED.match(t) for t in texts):  # the first row's, as an example
        return f"{recorded['head']}, e.g. {recorded['record']}"
    heads = [(m["head"] if (m := _LISTED.match(t)) else t) for t in texts]
    numbers = [[_number(n) for n in _NUMBER.findall(h)] for h in heads]
    spans = iter(
        (min(col), max(col)) if None not in col and len(set(col)) > 1 else None  # type: ignore[type-var]
        for col in zip(*numbers, strict=False)
    )

    def ranged(m: re.Match[str]) -> str:
        span = next(spans, None)
        return f"{span[0]:g}–{span[1]:g}" if span else m.group(0)

    head = _NUMBER.sub(ranged, heads[0])
    if not _LISTED.match(first):
        return head
    listed = Counter(k for t in texts if (m := _LISTED.match(t)) for k in dict.fromkeys(m["items"].split(", ")))
    top = [f"{k} ({n} rows)" if n > 1 else k for k, n in listed.most_common(_NAMES)]
    return f"{head}: {', '.join(top)}" + (", …" if len(listed) > _NAMES else "")


def _number(text: str) -> float | None:
    """A number as a cause says it; None for what only looks like one ("12.8.93", a version)."""
    try:
        return float(text)
    except ValueError:
        return None


def causes(report: Report, verdict: Verdict, limit: int | None = 3) -> list[tuple[str, int]]:
    """The change's failure causes with how many rows say each, most rows first: every clause of each row's message
    (a row absent *and* crashing says both), numbers folded, so one cause behind many rows is said once."""
    texts: dict[str, list[str]] = {}
    said: Counter[str] = Counter()
    for r in report.results.rows:
        if r.change == verdict.change.id and r.status in FAILING:
            for key, text in row_causes(r).items():
                texts.setdefault(key, []).append(text)
                said[key] += 1
    return [(said_once(texts[key]), n) for key, n in said.most_common(limit)]


def row_causes(r: RowResult) -> dict[str, str]:
    """A row's causes, each once: its `cause_key` -> the row's words for it, in the order its message gives them."""
    return dict(_causes(r.message or r.note))


@functools.lru_cache(maxsize=4096)
def _causes(message: str) -> tuple[tuple[str, str], ...]:
    """One message's causes, worked out once: rows failing alike say the same words, and each section of the report
    that counts causes asks again for every failing row (a regular expression or two per clause)."""
    out: dict[str, str] = {}
    for text in clauses(message):
        out.setdefault(cause_key(text), text)
    return tuple(out.items())


def failing(report: Report, verdict: Verdict) -> list[Failing]:
    out = []
    for r in report.results.rows:
        if r.change != verdict.change.id or r.status not in FAILING:
            continue
        bad = next((c for c in r.cases if c.status != "pass"), r.cases[0] if r.cases else None)
        details = bad.details if bad else ""
        found = log_file(bad) if bad else None
        log = shown(found) if found else (bad.log if bad else "")
        href = os.path.relpath(found, report.out) if found and report.out else ""
        out.append(
            Failing(
                row=r,
                message=r.message or r.note,
                details=details,
                log=log,
                log_href=href,
                seconds=r.seconds,
                how=rerun(r, report.stack),
            )
        )
    return out


@dataclass(frozen=True, kw_only=True)
class Pair:
    """One quantity measured cold and warm on one row: the same thing, first time and steady state."""

    row: str
    target: str
    quantity: str
    cold: Metric
    warm: Metric


def quantity(name: str) -> str:
    """cold_first_request_ms and warm_request_ms are both request_ms: pairs are made by this name alone."""
    for prefix in ("cold_", "warm_", "first_"):
        name = name.removeprefix(prefix)
    return name


def pairs(report: Report, verdict: Verdict) -> list[Pair]:
    want = verdict.change.acceptance.measurements
    out = []
    for r in report.results.rows:
        if r.change != verdict.change.id or not r.ran:
            continue
        warm = {quantity(n): m for n in want.warm if (m := r.metric(n))}
        for name in want.cold:
            q = quantity(name)
            if (cold := r.metric(name)) and q in warm and cold.unit == warm[q].unit:
                out.append(Pair(row=r.id, target=r.target, quantity=q, cold=cold, warm=warm[q]))
    return out
