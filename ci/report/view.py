"""What the report shows, as tables of plain (unescaped) text; the renderers escape every cell.

Both report.md and report.html are drawn from these tables, so the two never disagree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ci.common import tables
from ci.report import cards, defined
from ci.report.across import Across
from ci.report.rerun_hints import hint, rerun_test
from ci.results import as_ported
from ci.results.acceptance import Verdict
from ci.results.junit import FileRead, Metric
from ci.results.merge import Results, RowResult
from ci.results.sides import Comparison
from ci.stack.model import Stack
from ci.stack.plan import Plan
from ci.stack.seed_table import PLAN_HEADERS, change_label, plan_table_rows
from ci.upstream.port.tried import Tried
from ci.upstream.state import Snapshot

STATUS_MARK = {
    "pass": "✔ pass",
    "failure": "✘ failure",
    "error": "✘ error",
    "conflict": "⚠ conflict",
    "skipped": "⚠ skipped",
    "incomplete": "⚠ incomplete",
    "not run": "not run",
}
CRITERION_MARK = {"pass": "✔ pass", "fail": "✘ fail", "missing": "⚠ missing"}
FAILING = ("failure", "error", "conflict", "incomplete")
MATRIX_HEADERS = (*PLAN_HEADERS, "Runs?", "Score", "Notes")
_NOTE_CHARS = 240  # a failure message longer than this is cut in tables; report.json keeps it whole


@dataclass(frozen=True, kw_only=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True, kw_only=True)
class Report:
    stack: Stack
    plan: Plan
    results: Results
    verdicts: tuple[Verdict, ...]
    baseline: FileRead | None  # the --baseline file and whether it could be used
    comparison: Comparison | None = None  # --compare: the other sides, this report's results being side A
    upstream: Snapshot | None = None  # --upstream: each change's rebase state in a fork checkout (ci upstream)
    upstream_read: FileRead | None = None  # the --upstream file and whether it could be used
    out: Path | None = None  # the folder the report is written to: its links are relative to it
    made_with: tuple[str, ...] = ()  # the `python -m ci` arguments that made it, paths as given
    subject: Snapshot | None = None  # the fork the rows were run to judge (ci main): each change's state in it
    stock: bool = False  # ci main --stock: the locked release judged, a fork being configured
    # (change, target) planned but left out of the report by a filter -> the filter ("--target")
    left_out: Mapping[tuple[str, str], str] = field(default_factory=dict)
    history: Across | None = None  # this build beside the earlier ones its history holds (--history)
    tried: tuple[Tried, ...] = ()  # the changes tried as ports (ci main --try-port): their rows ran on the port


def banner(report: Report) -> list[str]:
    """What the reader must see first: inputs that were missing, empty or unreadable, and a report that
    read no testcase at all (every row then reads "not run", which is no evidence of anything)."""
    res = report.results
    lines = [f"input {f.path}: {f.status} ({f.problem})" for f in res.problems()]
    for role, read in (("baseline", report.baseline), ("upstream state", report.upstream_read)):
        if read and read.status != "ok":
            lines.append(f"{role} {read.path}: {read.status} ({read.problem})")
    lines += defined.lines(report.stack, res)
    lines += _mixed_builds(res)
    for side in report.comparison.sides[1:] if report.comparison else ():
        lines += [f"side {side.label}: input {f.path}: {f.status} ({f.problem})" for f in side.results.problems()]
        if not side.rows:
            lines.append(f"side {side.label}: no testcase of a row was read from its inputs")
    why_not: dict[str, int] = {}
    for r in res.rows:
        if r.status == "not run" and r.note:
            why_not[r.note] = why_not.get(r.note, 0) + 1
    lines += [f"{tables.counted(n, 'row')} not run: {note}" for note, n in why_not.items()]
    if not why_not and not any(r.cases for r in res.rows) and not res.unkeyed:
        lines.append("no testcase was read from the inputs: every row is reported as not run")
    return lines


def _mixed_builds(res: Results) -> list[str]:
    """One target's rows measured on different images or vLLM versions are not one measurement: say so."""
    seen: dict[tuple[str, str], set[str]] = {}
    for r in res.rows:
        for c in r.cases:
            if c.image_digest and c.image_digest != "none":
                seen.setdefault((r.target, "images"), set()).add(c.image_digest)
            if c.vllm_version:
                seen.setdefault((r.target, "vLLM versions"), set()).add(c.vllm_version)
    cut = {"images": 19, "vLLM versions": None}  # image digests shortened; a vLLM build whole
    return [
        f"{target}: results from {len(values)} {what} ({', '.join(sorted(v[: cut[what]] for v in values))})"
        for (target, what), values in seen.items()
        if len(values) > 1
    ]


def short(text: str, limit: int = _NOTE_CHARS) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def fmt_metric(m: Metric) -> str:
    spread = f" ±{m.spread / 2:g}" if m.spread else ""
    return f"{m.value:g}{spread} {m.unit} (n={m.repeats})".replace("  ", " ")


def counts(results: Results) -> dict[str, int]:
    out = dict.fromkeys(STATUS_MARK, 0)
    for r in results.rows:
        out[r.status] += 1
    return {k: v for k, v in out.items() if v}


def inputs_table(report: Report) -> Table:
    """Every input, but for inputs alike (same role, status and problem, no testcase): the first few of a kind
    are listed and the rest counted on one line; report.json lists every one."""
    reads = [*report.results.inputs, *(r for r in (report.baseline, report.upstream_read) if r)]
    rows = []
    alike: dict[tuple[str, str, str], int] = {}
    for f in reads:
        role = "baseline" if f is report.baseline else "upstream" if f is report.upstream_read else "junit"
        status = ("✔ " if f.status == "ok" else "✘ ") + f.status
        if not f.cases:
            kind = (role, status, f.problem)
            alike[kind] = alike.get(kind, 0) + 1
            if alike[kind] > ALIKE_SHOWN:
                continue
        builds = sorted({v for c in f.cases if (v := getattr(c, "vllm_version", None))})  # the vLLM under test
        rows.append((f.path, role, status, f.problem, str(len(f.cases)), ", ".join(builds) or "–"))
    for (role, status, problem), n in alike.items():
        if n > ALIKE_SHOWN:
            rows.append((f"… {n - ALIKE_SHOWN} more alike (every one in report.json)", role, status, problem, "0", "–"))
    return Table(headers=("Input", "Role", "Status", "Problem", "Testcases", "vLLM"), rows=tuple(rows))


ALIKE_SHOWN = 5  # inputs of one kind listed by name in the inputs table; the rest are counted


def criteria_table(verdict: Verdict) -> Table:
    return Table(
        headers=("Criterion", "Status", "Evidence"),
        rows=tuple((c.name, CRITERION_MARK[c.status], c.evidence) for c in verdict.criteria),
    )


def change_heading(verdict: Verdict, results: Results | None = None) -> tuple[str, str]:
    """The change's title line and its upstream state (recorded in the manifest, with its date), and how the fork
    build its rows ran on holds it, as that build's bundle recorded it."""
    ch = verdict.change
    up = ch.upstream
    if up is None:  # the harness self-test imports nothing from upstream
        return f"{change_label(ch.id)} {ch.title}", f"no upstream change ({ch.kind})"
    merged = f" on {up.merged_on}" if up.merged_on else ""
    released = f", first in vLLM {up.first_release}" if up.first_release else ""
    state = f"{up.repo}#{up.pr}: {up.state}{merged}{released} (as of {up.as_of})"
    if up.state == "closed" and up.superseded_by:
        instead = " and ".join(f"#{pr}" for pr in up.superseded_by)
        how = f" ({up.superseded_how})" if up.superseded_how else ""
        state += f"; never merged, so no release holds it: upstream reached its goal by {instead}{how}"
    held = as_ported.held(results, ch.id) if results is not None else None
    if held:
        state += f"; in the fork build ({held[0]}): {held[1]}"
    for f in (f for f in up.follow_ups if f.regression_test):
        p = f.proven
        shown = (
            f"fails on vLLM {p.fails_on}, passes on vLLM {p.passes_on} ({p.evidence})"
            if p
            else "not yet run on a build with the bug"
        )
        state += f"; regression test {f.ref} ({f.what}): {shown}"
    return f"{change_label(ch.id)} {ch.title}", state


def failing_table(results: Results) -> Table:
    rows = tuple(
        (r.id, r.target, STATUS_MARK[r.status], short(r.message or r.note), tables.code(hint(r)))
        for r in results.rows
        if r.status in FAILING
    )  # (Markdown alone: the HTML writes its failing rows itself, the command in <code>)
    return Table(headers=("Row", "Target", "Status", "Message", "Reproduce locally"), rows=rows)


def duplicates_table(results: Results) -> Table:
    rows = []
    for r in results.rows:
        for test in r.duplicates:
            runs = [c for c in r.cases if c.test == test]
            where = "; ".join(
                f"{c.file}: {c.status}" + (f" ({short(c.message, 80)})" if c.message else "") for c in runs
            )
            rows.append((r.id, test, str(len(runs)), where))
    return Table(headers=("Row", "Test", "Runs", "Each run (file: status)"), rows=tuple(rows))


def targets(report: Report) -> list[str]:
    """Every target of the stack, then any target named only by results."""
    named = list(report.stack.targets)
    return named + sorted({r.target for r in report.results.rows} - set(named))


def status_tables(report: Report) -> dict[str, Table]:
    """Each target's status matrix (`matrix_table`), for the targets that have rows: made once where both the HTML
    and the Markdown are rendered."""
    return {target: t for target in targets(report) if (t := matrix_table(report, target)).rows}


def matrix_table(report: Report, target: str) -> Table:
    """The seed table's shape, one line per planned row of `target`, with its result."""
    rows = [r for r in report.results.rows if r.target == target and r.planned is not None]
    sub = Plan(tuple(r.planned for r in rows if r.planned is not None), ())
    body = []
    hardware = PLAN_HEADERS.index("Hardware")
    for plan_cells, r in zip(plan_table_rows(report.stack, sub), rows, strict=True):
        cells = [str(c) for c in plan_cells]
        if ran_on := cards.recorded([r], target):  # the card it ran on, not the target's planned hardware
            cells[hardware] = cards.named(report.stack.targets[target], ran_on)
        body.append((*cells, STATUS_MARK[r.status], _score(report, r), _notes(r)))
    return Table(headers=MATRIX_HEADERS, rows=tuple(body))


def _score(report: Report, r: RowResult) -> str:
    """The change's numerical-tolerance metric: the row's score against its reference."""
    tol = report.stack.changes[r.change].acceptance.tolerance if r.change in report.stack.changes else None
    m = r.metric(tol.metric) if tol else None
    return f"{m.value:g} {m.unit}".strip() if m else ""


def _notes(r: RowResult) -> str:
    parts = [short(r.message)] if r.message else []
    if r.note:
        parts.append(short(r.note))
    for c in r.cases:
        if c.jit_compiles:
            parts.append(f"JIT: {c.jit_compiles} compiles ({', '.join(c.jit_kernels) or 'kernels not named'})")
        if c.problems:  # seldom: no list made for each of a row's cases
            parts += [f"{c.file}: {p}" for p in c.problems]
    return "; ".join(dict.fromkeys(parts))


def unplanned_table(report: Report) -> Table:
    """Results for row ids the plan lacks, and testcases naming no row at all."""
    results = report.results
    rows = [
        (r.id, r.target, STATUS_MARK[r.status], short(r.note or r.message), "") for r in results.rows if not r.planned
    ]
    rows += [
        (
            f"{c.classname}::{c.name}",
            c.target or "?",
            STATUS_MARK[c.status],
            short(f"{c.file}: {c.message}"),
            rerun_test(c, report.stack),
        )
        for c in results.unkeyed
    ]
    return Table(headers=("Row or test", "Target", "Status", "Notes", "Re-run"), rows=tuple(rows))


@dataclass(frozen=True, kw_only=True)
class ColdWarm:
    row: str
    target: str
    cold: tuple[Metric, ...]
    warm: tuple[Metric, ...]


def cold_warm(report: Report, verdict: Verdict) -> tuple[ColdWarm, ...]:
    """Per row that ran, the change's cold and warm measurements, never averaged together."""
    want = verdict.change.acceptance.measurements
    out = []
    for r in report.results.rows:
        if r.change != verdict.change.id or not r.ran:
            continue
        ms = r.metrics
        cold = tuple(ms[n] for n in want.cold if n in ms)
        warm = tuple(ms[n] for n in want.warm if n in ms)
        if cold or warm:
            out.append(ColdWarm(row=r.id, target=r.target, cold=cold, warm=warm))
    return tuple(out)


def cold_warm_table(verdict: Verdict, data: Sequence[ColdWarm]) -> Table:
    want = verdict.change.acceptance.measurements
    headers = ("Row", "Target", *(f"cold {n}" for n in want.cold), *(f"warm {n}" for n in want.warm))
    rows = []
    for d in data:
        cold = {m.name: fmt_metric(m) for m in d.cold}
        warm = {m.name: fmt_metric(m) for m in d.warm}
        rows.append((d.row, d.target, *(cold.get(n, "—") for n in want.cold), *(warm.get(n, "—") for n in want.warm)))
    return Table(headers=headers, rows=tuple(rows))
