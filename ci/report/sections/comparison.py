"""The comparison section (`python -m ci report A --compare B`): its tables for report.md and report.html (its
object in report.json: `ci.report.sections.comparison_json`). Side A is the reference; the rest of the report is side
A's own."""

from __future__ import annotations

import math

from ci.report.view import CRITERION_MARK, STATUS_MARK, Table
from ci.results.as_ported import Ported
from ci.results.sides import Comparison, Line, Summary, Versus
from ci.results.stat_tests import Shift
from ci.stack.seed_table import change_label

TOO_FEW = "n too small"
INTRO = (
    "Side {a} is the reference. The run is the unit: each run of a row (one engine process) counts once, as the "
    "median of its samples; samples within a run describe that run only. For each row and metric: each side's "
    "median of its runs, n (runs) and the runs' min–max; for each other side, its median minus {a}'s, the ratio of "
    "the two, and the Hodges–Lehmann shift over runs (the median of every pairwise difference of run medians, side "
    "− {a}) with its distribution-free interval at the confidence achieved: the largest at or below 95% that the "
    "runs allow (one run a side allows none). The sections after the comparison are side {a}'s report."
)


def title(c: Comparison) -> str:
    return "Comparison: " + " vs ".join(c.labels)


def intro(c: Comparison) -> str:
    return INTRO.format(a=c.labels[0])


def tables(c: Comparison) -> list[tuple[str, Table]]:
    """The section's tables in order, each with its heading."""
    ported = (
        [
            ("Each change as ported: the fork against the fork without it", ported_table(c)),
            ("Criteria as ported", ported_criteria_table(c)),
        ]
        if c.ported
        else []
    )
    return [
        *ported,
        ("Sides", sides_table(c)),
        ("Verdict per side", verdicts_table(c)),
        ("Measurements", measurements_table(c)),
        ("Rows missing from a side", partial_table(c)),
    ]


def _as_ported(p: Ported) -> str:
    """The verdict, its failing criteria apart from the ones still missing evidence (a target not run, too few
    samples): the first are what the change as ported got wrong, the second what is left to measure."""
    if not p.isolated:
        return "not isolated: " + "; ".join(p.problems)
    if p.verdict.ready:
        return "✔ " + p.verdict.text
    failed = [k.name for k in p.verdict.blocking if k.status == "fail"]
    missing = [k.name for k in p.verdict.blocking if k.status != "fail"]
    parts = [
        f"fails: {', '.join(failed)}" if failed else "",
        f"evidence missing: {', '.join(missing)}" if missing else "",
    ]
    return "✘ not ready; " + "; ".join(x for x in parts if x)


def ported_table(c: Comparison) -> Table:
    """Per change with a fork side and a side without it: the builds, the rows both ran, what the presence probe saw,
    and the verdict on the fork's build with its allowed regression judged against the build without the change."""
    rows = []
    for p in c.ported:
        rows.append(
            (
                change_label(p.change),
                f"{p.fork} ({p.builds[0]})",
                f"{p.without} ({p.builds[1]})",
                str(len(p.rows)),
                f"{p.seen[0]} / {p.seen[1]}",
                _as_ported(p),
            )
        )
    return Table(
        headers=(
            "Change",
            "On the fork (build)",
            "Without it (build)",
            "Rows on both",
            "Probe: fork / without",
            "Verdict on the fork's build",
        ),
        rows=tuple(rows),
    )


def ported_criteria_table(c: Comparison) -> Table:
    """Each criterion of each change as ported, with what decided it: the cause of every one that blocks."""
    rows = []
    for p in c.ported:
        for k in p.verdict.criteria:
            rows.append((change_label(p.change), k.name, CRITERION_MARK[k.status], k.evidence))
    return Table(headers=("Change", "Criterion", "On the fork", "Evidence"), rows=tuple(rows))


def sides_table(c: Comparison) -> Table:
    rows = []
    for s in c.sides:
        problems = s.results.problems()
        rows.append(
            (
                s.label,
                ", ".join(s.paths),
                ", ".join(s.vllm_versions) or "not recorded",
                ", ".join(s.caches) or "not recorded",
                str(len(s.rows)),
                str(s.cases),
                "; ".join(f"{f.path}: {f.status}" for f in problems) or "none",
            )
        )
    return Table(
        headers=("Side", "Inputs", "vLLM", "Caches at start", "Rows", "Runs", "Input problems"), rows=tuple(rows)
    )


def verdicts_table(c: Comparison) -> Table:
    """Per change that some side ran rows of, its verdict on each side, then each criterion's status on each
    side; the changes no side ran, on one line."""
    by_side = [{v.change.id: v for v in s.verdicts} for s in c.sides]
    compared = {r.change for s in c.sides for r in s.rows.values()}
    changes = list(dict.fromkeys(change for side in by_side for change in side))
    rows = []
    for change in (ch for ch in changes if ch in compared):
        verdicts = [side.get(change) for side in by_side]
        rows.append(
            (
                change_label(change),
                "verdict",
                *("—" if v is None else "✔ ready" if v.ready else "✘ not ready" for v in verdicts),
            )
        )
        names = dict.fromkeys(k.name for v in verdicts if v for k in v.criteria)
        for name in names:
            cells = []
            for v in verdicts:
                status = next((k.status for k in v.criteria if k.name == name), None) if v else None
                cells.append("—" if status is None else CRITERION_MARK[status])
            rows.append((change_label(change), name, *cells))
    idle = [change_label(ch) for ch in changes if ch not in compared]
    if idle:
        rows.append((", ".join(idle), "no row on any side: not compared", *("—" for _ in c.sides)))
    return Table(headers=("Change", "Verdict or criterion", *c.labels), rows=tuple(rows))


def num(x: float, spread: float = 0.0) -> str:
    """Rounded to what the spread supports (two significant digits of it), else to four significant digits."""
    if spread > 0 and math.isfinite(spread) and math.isfinite(x):
        return f"{round(x, max(0, 1 - math.floor(math.log10(spread)))):g}"
    return f"{x:.4g}"


def _with_unit(text: str, unit: str) -> str:
    return f"{text} {unit}" if unit else text


def interval(s: Shift) -> str:
    if s.interval is None:
        return TOO_FEW
    width = s.interval[1] - s.interval[0]
    return f"[{num(s.interval[0], width)}, {num(s.interval[1], width)}]"


def confidence(s: Shift) -> str:
    return "—" if s.confidence is None else f"{100 * s.confidence:.1f}%"


def _cells(line: Line, i: int) -> tuple[str, ...]:
    mine: Summary | None = line.sides[i]
    if mine is None:
        head: tuple[str, ...] = ("—", "0", "—")
    else:
        spread = mine.high - mine.low
        head = (
            _with_unit(num(mine.median, spread), line.unit),
            str(mine.n),
            f"{num(mine.low, spread)}–{num(mine.high, spread)}",
        )
    vs: Versus | None = line.versus[i]
    if i == 0:
        return (*head, "reference", "", "", "", "")
    if vs is None:
        return (*head, "—", "—", "—", "—", "—")
    ratio = "—" if vs.ratio is None else f"{vs.ratio:.3f}"
    width = vs.shift.interval[1] - vs.shift.interval[0] if vs.shift.interval else 0.0
    shift = _with_unit(_signed(num(vs.shift.estimate, width)), line.unit)
    delta = _with_unit(_signed(num(vs.delta, width)), line.unit)
    return (
        *head,
        delta,
        ratio,
        shift,
        _with_unit(interval(vs.shift), line.unit if vs.shift.interval else ""),
        confidence(vs.shift),
    )


def _signed(text: str) -> str:
    return text if text.startswith("-") else f"+{text}"


def measurements_table(c: Comparison) -> Table:
    rows = []
    for line in c.lines:
        for i, label in enumerate(c.labels):
            rows.append((line.row, line.metric, label, *_cells(line, i)))
    a = c.labels[0]
    headers = (
        "Row",
        "Metric",
        "Side",
        "Median",
        "n",
        "Min–max",
        f"Δ median vs {a}",
        f"Ratio vs {a}",
        f"HL shift vs {a}",
        "Interval",
        "Confidence",
    )
    return Table(headers=headers, rows=tuple(rows))


def partial_table(c: Comparison) -> Table:
    rows = []
    for row, present in c.partial:
        statuses = []
        for s, here in zip(c.sides, present, strict=True):
            statuses.append(STATUS_MARK[s.rows[row].status] if here else "absent")
        rows.append((row, *statuses))
    return Table(headers=("Row", *c.labels), rows=tuple(rows))
