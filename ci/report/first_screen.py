"""The report's first screen: what was judged, then per change its verdict, every distinct cause behind its failing
rows with how many rows say it (most rows first), and the next step as a command; warnings after, grouped by kind.
report.md, report.html and the Buildkite annotation open with it."""

from __future__ import annotations

import re
import shlex
import weakref
from collections import Counter
from dataclasses import dataclass

from ci.report import triage
from ci.report.json_doc import CRITERION_IDS
from ci.report.view import FAILING, Report, Table, banner
from ci.results.acceptance import Verdict

_SHOWN = 6  # causes named in one cell; the rest are counted
_LONG = 200  # characters of one cause shown on the first screen (the change's section gives it whole)


def judged(report: Report) -> str:
    """Which vLLM builds, which stack, which targets: the line above the verdicts."""
    cases = [c for r in report.results.rows for c in r.cases]
    builds = sorted({c.vllm_version for c in cases if c.vllm_version})
    ran = Counter(r.target for r in report.results.rows if r.cases)
    planned = Counter(r.target for r in report.results.rows if r.planned is not None)
    where = ", ".join(f"{t} ({ran[t]} of {planned[t]} rows ran)" for t in planned if ran[t]) or "no target: no row ran"
    vllm = "; ".join(builds) if builds else "not recorded"
    days = sorted({s.timestamp[:10] for f in report.results.inputs for s in f.scopes if s.timestamp[:10]})
    when = f" Run {days[0]}" + (f" to {days[-1]}" if days[-1] != days[0] else "") + "." if days else ""
    return f"Judged: vLLM {vllm}. Stack {report.stack.digest.removeprefix('sha256:')[:12]}. Targets: {where}.{when}"


def causes(report: Report, verdict: Verdict) -> list[tuple[str, int]]:
    """Every distinct cause behind the change's failing rows (each clause of each row's message), most rows first."""
    return triage.causes(report, verdict, limit=None)


def next_step(report: Report, verdict: Verdict) -> str:
    """One command that moves the change on: re-run a failing row of its commonest cause (as `causes` counts
    them); else run the rows a required target has not run; else nothing."""
    if verdict.ready:
        return "none: ready"
    failing = [r for r in report.results.rows if r.change == verdict.change.id and r.status in FAILING]
    if failing:
        keys = {r.id: triage.row_causes(r).keys() for r in failing}
        top = Counter(k for r in failing for k in keys[r.id]).most_common(1)
        says = (r for r in failing if top and top[0][0] in keys[r.id])
        return f"python -m ci repro {shlex.quote(next(says, failing[0]).id)}"
    missing = [r for r in report.results.rows if r.change == verdict.change.id and not r.cases and r.planned]
    if missing:
        target = report.stack.targets[missing[0].target]
        return f"nox -s {target.sessions[0]}_{missing[0].suite}   (on a {target.short} host)"
    blocked = ", ".join(c.name for c in verdict.blocking)
    return f"see the criteria of #{verdict.change.id}: {blocked}"


def _short(text: str) -> str:
    text = text.removeprefix("Failed: ")  # pytest.fail's prefix, on every failing row
    return text if len(text) <= _LONG else text[: _LONG - 1] + "…"


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One change on the first screen."""

    change: str  # "#48407"
    verdict: str  # "✅ ready" or "❌ not ready"
    ready: bool
    causes: tuple[tuple[str, int], ...]  # the first `_SHOWN` causes, shortened, with their row counts
    more: int  # how many causes more there are
    instead: str  # where there is no failing row: why the change is not ready ("no row ran (33 planned)"), or ""
    next_step: str


def entries(report: Report) -> list[Entry]:
    out = []
    for v in report.verdicts:
        found = causes(report, v)
        instead = ""
        if not found and not v.ready:
            mine = [r for r in report.results.rows if r.change == v.change.id and r.planned is not None]
            ran = sum(bool(r.cases) for r in mine)
            blocked = ", ".join(CRITERION_IDS.get(c.name, c.name) for c in v.blocking)
            instead = f"no row ran ({len(mine)} planned)" if not ran else f"no failing row; blocked by {blocked}"
        out.append(
            Entry(
                change=f"#{v.change.id}",
                verdict="✅ ready" if v.ready else "❌ not ready",
                ready=v.ready,
                causes=tuple((_short(text), n) for text, n in found[:_SHOWN]),
                more=max(0, len(found) - _SHOWN),
                instead=instead,
                next_step=next_step(report, v),
            )
        )
    return out


def table(report: Report) -> Table:
    rows = []
    for e in entries(report):
        said = "; ".join(f"{text} ({n} row{'s' * (n != 1)})" for text, n in e.causes)
        said += f"; and {e.more} more causes" if e.more else ""
        rows.append((e.change, e.verdict, said or e.instead or "none", e.next_step))
    return Table(headers=("Change", "Verdict", "Causes (rows)", "Next step"), rows=tuple(rows))


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
