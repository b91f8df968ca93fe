"""The report's first screen: what was judged, then per change its verdict, every distinct cause behind its failing
rows with how many rows say it (most rows first), and the next step as a command; warnings after, grouped by kind.
report.md, report.html and the Buildkite annotation open with it."""

from __future__ import annotations

import re
import weakref
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from ci.common import tables
from ci.common.tables import Markdown, counted, md_cell
from ci.report import rerun_hints
from ci.report.sections import across_view, at_target, in_fork, port_step, triage
from ci.report.view import FAILING, Report, Table, banner
from ci.results.acceptance import Verdict

_SHOWN = 6  # causes named in one cell; the rest are counted
CAUSES = "Causes of failing tests (rows)"  # a criterion failing on rows that passed theirs is said per target
_LONG = 200  # characters of one cause shown on the first screen (the change's section gives it whole)


def judged(report: Report) -> str:
    """What was judged (the fork, or the stock release), which vLLM builds ran, which stack, which targets: the
    report's first line."""
    cases = [c for r in report.results.rows for c in r.cases]
    builds = sorted({c.vllm_version for c in cases if c.vllm_version})
    ran = Counter(r.target for r in report.results.rows if r.cases)
    planned = Counter(r.target for r in report.results.rows if r.planned is not None)
    where = ", ".join(f"{t} ({ran[t]} of {planned[t]} rows ran)" for t in planned if ran[t]) or "no target: no row ran"
    vllm = f" vLLM builds run: {'; '.join(builds)}." if builds else ""
    days = sorted({s.timestamp[:10] for f in report.results.inputs for s in f.scopes if s.timestamp[:10]})
    when = f" Run {days[0]}" + (f" to {days[-1]}" if days[-1] != days[0] else "") + "." if days else ""
    stack = report.stack.digest.removeprefix("sha256:")[:12]
    return f"Judged: {in_fork.judged(report)}.{vllm} Stack {stack}. Targets: {where}.{when}"


def causes(report: Report, verdict: Verdict) -> list[tuple[str, int]]:
    """Every distinct cause behind the change's rows that failed their tests (each clause of each row's message), most
    rows first. A criterion failing on rows whose tests passed is said per target ("H100 fails: cold/warm ...")."""
    return triage.causes(report, verdict, limit=None)


def next_step(report: Report, verdict: Verdict) -> tuple[str, str]:
    """One command that moves the change on, and where it runs (plain text): for a change tried as a port that held,
    the command that makes the port for real; for a change the fork lacks (not tried), its port
    (ci.report.sections.port_step); else re-run a failing row of its commonest cause (as `causes` counts them; one not
    quarantined as flaky, where there is one); else run the rows a required target has not run (its lock first, where
    it has none); else what the change as a whole lacks (a baseline); else nothing."""
    if tried := port_step.tried_step(report, verdict):  # a port tried that held: make it for real
        return tried
    if verdict.ready:
        return "", "none: ready"
    # a change the fork lacks: its port (its verdict where the fork state carries one), not rows to run; one tried as
    # a port that did not hold: what failed on it
    untried = port_step.tried(report, verdict.change.id) is None
    if untried and (port := port_step.step(report, verdict.change.id) or in_fork.next_step(report, verdict)):
        return port
    failing = [r for r in report.results.rows if r.change == verdict.change.id and r.status in FAILING]
    held = set(report.history.quarantined) if report.history else set()
    failing = [r for r in failing if r.id not in held] or failing  # a row that broke before one that is flaky
    if failing:
        keys = {r.id: triage.row_causes(r).keys() for r in failing}
        top = Counter(k for r in failing for k in keys[r.id]).most_common(1)
        says = (r for r in failing if top and top[0][0] in keys[r.id])
        return rerun_hints.repro(next(says, failing[0]).id), ""
    for a in at_target.verdicts(report, verdict):
        if a.command:
            return a.command, a.where
    for w in at_target.whole(report, verdict):
        if w.command:
            return w.command, ""
    return "", "see the change's criteria below"


def _short(text: str) -> str:
    text = text.removeprefix("Failed: ")  # pytest.fail's prefix, on every failing row
    return text if len(text) <= _LONG else text[: _LONG - 1] + "…"


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One change on the first screen."""

    change: str  # "#48407"
    fork: str  # the change in the fork judged ("converged", "absent in the fork; …"), "" where none was
    verdict: str  # "ready" or "not ready", in words (a mark beside it is the renderer's)
    ready: bool
    causes: tuple[tuple[str, int], ...]  # the first `_SHOWN` causes, shortened, with their row counts
    more: int  # how many causes more there are
    targets: tuple[at_target.AtTarget, ...]  # its verdict on each target it must hold on
    lacks: tuple[at_target.Whole, ...]  # what the change as a whole lacks (a baseline, its focused test)
    command: str  # the next step: a command, or ""
    note: str  # where it runs, or the next step in words where there is no command
    history: tuple[str, ...] = ()  # its rows quarantined as flaky per target, its verdict under the other gate setting


def entries(report: Report) -> list[Entry]:
    """One entry per change, those with failing rows first, then the other changes not ready, then the ready ones
    (the stack's order within each): what fails is what a reader opens the report for."""
    out = []
    for v in report.verdicts:
        found = causes(report, v)
        command, note = next_step(report, v)
        lacks = tuple(at_target.whole(report, v))
        if command and any(w.command == command for w in lacks):
            command, note = "", "the baseline line below the table"
        out.append(
            Entry(
                change=f"#{v.change.id}",
                fork=port_step.as_tried(t)
                if (t := port_step.tried(report, v.change.id))
                else in_fork.words(report, v.change.id),
                verdict="ready" if v.ready else "not ready",
                ready=v.ready,
                causes=tuple((_short(text), n) for text, n in found[:_SHOWN]),
                more=max(0, len(found) - _SHOWN),
                targets=tuple(at_target.verdicts(report, v)),
                lacks=lacks,
                command=command,
                note=note,
                history=tuple(across_view.per_change(report, v.change.id)),
            )
        )
    return sorted(out, key=lambda e: 0 if e.causes else 1 if not e.ready else 2)


def baseline(first: list[Entry]) -> str:
    """The one command that gives every change its baseline ("" where none lacks one): said once, below the table."""
    return next((w.command for e in first for w in e.lacks if w.command), "")


def where(e: Entry, text: Callable[[str], str]) -> str:
    """The change's verdict per target, and what it lacks as a whole, in a line of words (`text` writes them); the
    baseline's command is said once, below the table."""
    parts = [text(f"{a.short} {at_target.said(a)}") for a in e.targets]
    parts += [text(w.text) for w in e.lacks]
    parts += [text(h) for h in e.history]
    return "; ".join(parts)


def table(report: Report) -> Table:
    """The first screen as Markdown cells: commands in code spans, pasteable as the raw file reads."""
    rows = []
    first = entries(report)
    forked = any(e.fork for e in first)
    for e in first:
        said = "; ".join(f"{text} ({counted(n, 'row')})" for text, n in e.causes)
        said += f"; and {e.more} more causes" if e.more else ""
        step = " ".join(x for x in (tables.code(e.command) if e.command else "", md_cell(e.note)) if x)
        rows.append(
            (
                e.change,
                *((e.fork or "—",) if forked else ()),
                mark(e.ready) + " " + e.verdict,
                Markdown(where(e, md_cell) or "—"),
                said or "—",
                Markdown(step),
            )
        )
    fork = ("In the fork",) if forked else ()
    return Table(headers=("Change", *fork, "Verdict", "Per target", CAUSES, "Next step"), rows=tuple(rows))


def mark(ready: bool) -> str:
    """A status mark the common text fonts carry (DejaVu, Liberation); an emoji mark (U+2705, U+274C) is a box where
    no emoji font is installed: Debian's chromium, many CI log viewers."""
    return "✔" if ready else "✘"


_last: tuple[weakref.ref[Report], list[str]] | None = None  # the last report's warnings


def warnings(report: Report) -> list[str]:
    """The banner's lines grouped by kind: one line with a count and the first example for lines of one kind. Made
    once per report: the HTML, the Markdown and `ci report`'s summary each ask."""
    global _last
    if _last is not None and _last[0]() is report:
        return list(_last[1])
    said = _warnings(report)
    _last = (weakref.ref(report), said)
    return list(said)


def _warnings(report: Report) -> list[str]:
    groups: dict[str, list[str]] = {}
    for line in banner(report):
        kind = re.sub(r"^input \S+", "input", line)
        kind = re.sub(r"\S*/\S*", "…", kind)  # paths differ within one kind
        groups.setdefault(kind, []).append(line)
    out = []
    for lines in groups.values():
        out.append(lines[0] if len(lines) == 1 else f"{len(lines)} alike, e.g.: {lines[0]}")
    return out


def outside(report: Report) -> tuple[int, int]:
    """Testcases outside the plan (result rows the plan lacks, tests naming no row): how many, how many failed."""
    res = report.results
    cases = [c for r in res.rows if r.planned is None for c in r.cases] + list(res.unkeyed)
    return len(cases), sum(c.status in ("failure", "error") for c in cases)


def outside_line(report: Report) -> str:
    """The headline's count of failing testcases outside the plan ("" where none failed): never hidden below it."""
    n, bad = outside(report)
    if not bad:
        return ""
    said = "informational: " if "--outside-informational" in report.made_with else ""
    return f"{said}{bad} of {counted(n, 'testcase')} outside the plan failed or errored"
