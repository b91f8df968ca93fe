"""report.md: the Buildkite annotation (`buildkite-agent annotate` takes at most 1 MiB of Markdown).

Sections go most important first. If the whole does not fit, the status matrices shrink to the rows
that did not pass; if it still does not fit, it is cut at a line boundary outside any table header,
so every table that remains is whole, and a note says what was left out and where to find it.
"""

from __future__ import annotations

from ci.common import tables
from ci.report.sections import (
    across_view,
    at_target,
    combinations,
    comparison,
    first_screen,
    model_pairs,
    port_step,
    rebase,
)
from ci.report.view import (
    FAILING,
    STATUS_MARK,
    Report,
    Table,
    change_heading,
    cold_warm,
    cold_warm_table,
    counts,
    criteria_table,
    duplicates_table,
    failing_table,
    inputs_table,
    status_tables,
    unplanned_table,
)

LIMIT_BYTES = 1024 * 1024  # Buildkite's annotation body limit
BUDGET_BYTES = LIMIT_BYTES - 16 * 1024  # room for the truncation note
md = tables.md_cell


# Each target's status matrix as lines (header, separator, one per row), with the indices of its rows that did not pass
Matrix = tuple[str, list[str], tuple[int, ...]]
Parts = tuple[list[str], list[Matrix], list[str]]  # the lines before the matrices, the matrices, the lines after


def render(report: Report, budget: int = BUDGET_BYTES) -> str:
    head, tail = around(report)
    return assemble((head, matrices(status_tables(report)), tail), budget)


def around(report: Report) -> tuple[list[str], list[str]]:
    """The lines before the status matrices and after them, rendered once: only the matrices differ between the
    tries of `assemble` (and `ci.report.write` renders these in another process than the matrices)."""
    return _head(report), _tail(report)


def matrices(tables: dict[str, Table]) -> list[Matrix]:
    out = []
    for target, t in tables.items():
        status = t.headers.index("Runs?")
        failing = tuple(i for i, r in enumerate(t.rows) if r[status] != STATUS_MARK["pass"])
        out.append((target, _table(t), failing))
    return out


def assemble(parts: Parts, budget: int = BUDGET_BYTES) -> str:
    """The annotation: everything where it fits; else the matrices' failing rows only; else cut (module doc)."""
    head, matrices, tail = parts
    whole = _matrices(matrices, only_failing=False)
    if _chars(head, whole, tail) <= budget:  # a text's bytes are at least its characters: else it cannot fit
        full = _join(head, whole, tail)
        if len(full.encode()) <= budget:
            return full
    shrunk = _join(head, _matrices(matrices, only_failing=True), tail)
    if len(shrunk.encode()) <= budget:
        return shrunk
    return _cut(shrunk, budget)


def _chars(*parts: list[str]) -> int:
    return sum(len(line) + 1 for part in parts for line in part)


def _join(*parts: list[str]) -> str:
    return "\n".join(line for part in parts for line in part) + "\n"


def _table(t: Table) -> list[str]:
    return tables.markdown(t.headers, t.rows).splitlines() if t.rows else ["_none_"]


def _head(report: Report) -> list[str]:
    """Everything before the status matrices."""
    res = report.results
    out = ["# stackgate report", "", f"**{md(first_screen.judged(report))}**", ""]
    for v in report.verdicts:  # a change tried as a port leads: ready or not, why, and the next step
        if lead := port_step.lead(report, v):
            command, note = first_screen.next_step(report, v)
            out += [f"**{md(lead)}.**" + (f" Next: {tables.code(command)}" if command else f" Next: {md(note)}"), ""]
            out += [f"Builds compared: {md(line)}." for line in port_step.builds(report, v.change.id)]
            out += [""] if port_step.builds(report, v.change.id) else []
    ready = sum(v.ready for v in report.verdicts)
    out.append(
        f"**{ready} of {len(report.verdicts)} imported changes ready for default enablement.** "
        + "Rows: "
        + ", ".join(f"{STATUS_MARK[k]} {n}" for k, n in counts(res).items())
        + "."
        + (
            f" **{md(line)}** (below, under Results outside the plan)."
            if (line := first_screen.outside_line(report))
            else ""
        )
    )
    out += ["", "## Summary", "", *_table(first_screen.table(report)), ""]
    if base := first_screen.baseline(first_screen.entries(report)):
        said = "The baseline line (a previous report of this fork, to judge allowed regression against):"
        out += [f"{said} {tables.code(base)}", ""]
    for line in across_view.lines(report):  # this build beside its history
        out += [md(line), ""]
    warnings = first_screen.warnings(report)  # plain Markdown: Buildkite's renderer has no GitHub alerts
    if warnings:
        kinds = tables.counted(len(warnings), "kind")
        out += [f"**Warnings** ({kinds})", "", *(f"- {md(w)}" for w in warnings), ""]
    out += ["## Verdicts", "", *([md(rebase.where(report)), ""] if report.upstream else [])]
    out += [*_table(_verdicts(report)), ""]
    for v in report.verdicts:
        title, state = change_heading(v, report.results)
        out += [f"### {md(title)}", "", md(state), "", f"**Verdict: {md(v.text)}**", ""]
        if report.upstream_read:
            out += [md(rebase.line(report, v.change.id)), ""]
        out += [*_table(criteria_table(v)), ""]
        for heading, t in across_view.tables(report, v.change.id):
            out += [f"**{md(heading)}**", "", *_table(t), ""]
    if report.comparison:  # below the verdicts: its statistics are what a reader checks, not where one starts
        c = report.comparison
        out += [f"## {md(comparison.title(c))}", ""]
        for heading, t in comparison.tables(c):
            out += [f"### {md(heading)}", "", *_table(t), ""]
        out += [md(comparison.intro(c)), ""]
    comp = combinations.table(report)
    if comp.rows:
        out += [
            f"## {md(combinations.heading(report))}",
            "",
            md(
                f"The seed table's shape: {combinations.tally(comp)}. A crash or hang is the row's outcome, "
                "with its cause."
            ),
            "",
            *_table(comp),
            "",
        ]
    named = model_pairs.table(report)
    if named.rows:
        intro = f"Each named model's rows beside its shrunk twin's (random weights): {model_pairs.tally(named)}."
        out += ["## Named models", "", md(intro), "", *_table(named), ""]
    out += [
        "## Failing rows",
        "",
        "Run the re-run lines from the folder this report was made in (the checkout, or where "
        "the build's artifacts were downloaded).",
        "",
        *_table(across_view.with_history(report, failing_table(res))),
        "",
    ]
    out += ["## Inputs", "", *_table(inputs_table(report)), ""]
    dups = duplicates_table(res)
    if dups.rows:
        out += ["## Rows run more than once", "", "Kept side by side, never merged.", "", *_table(dups), ""]
    return out


def _matrices(matrices: list[Matrix], only_failing: bool) -> list[str]:
    """Each target's status matrix; with `only_failing`, the rows that did not pass, saying how many were left out."""
    out = []
    for target, lines, failing in matrices:
        out += [f"## Status matrix: {md(target)}", ""]
        if only_failing:
            out += [
                f"_{len(lines) - 2 - len(failing)} passing rows left out to fit the annotation; "
                "report.html lists every row._",
                "",
            ]
            lines = [*lines[:2], *(lines[2 + i] for i in failing)] if failing else ["_none_"]
        out += [*lines, ""]
    return out


def _tail(report: Report) -> list[str]:
    """Everything after the status matrices."""
    out = ["## Cold vs warm", "", "Cold: first request in a fresh process. Warm: steady state. Never averaged.", ""]
    for v in report.verdicts:
        data = cold_warm(report, v)
        if data:
            out += [f"### #{md(v.change.id)}", "", *_table(cold_warm_table(v, data)), ""]
    other = unplanned_table(report)
    if other.rows:
        out += ["## Results outside the plan", "", *_table(other), ""]
    return out


def _verdicts(report: Report) -> Table:
    rows = []
    for v in report.verdicts:
        failing = sum(r.status in FAILING for r in report.results.rows if r.change == v.change.id)
        rows.append(
            (
                f"#{v.change.id}",
                v.change.track,
                f"{first_screen.mark(v.ready)} {'ready' if v.ready else 'not ready'}",
                at_target.held_back(report, v),
                str(failing),
                *([rebase.cell(report, v.change.id)] if report.upstream_read else []),
            )
        )
    headers = ("Change", "Track", "Verdict", "Why", "Rows failing their test")
    return Table(headers=(*headers, *(["Rebase state"] if report.upstream_read else [])), rows=tuple(rows))


def _cut(text: str, budget: int) -> str:
    lines = text.splitlines()
    kept: list[str] = []
    size = 0
    for line in lines:
        n = len(line.encode()) + 1
        if size + n > budget:
            break
        kept.append(line)
        size += n
    # A table header without its separator line would not render as a table: drop it.
    while kept and kept[-1].startswith("|") and not kept[-1].startswith("|---"):
        nxt = lines[len(kept)] if len(kept) < len(lines) else ""
        if not nxt.startswith("|---"):
            break
        kept.pop()
    left = len(lines) - len(kept)
    note = (
        f"\n> **Truncated:** {left} more lines did not fit Buildkite's 1 MiB annotation limit; "
        "report.html and report.json hold the whole report."
    )
    return "\n".join(kept) + "\n" + note + "\n"
