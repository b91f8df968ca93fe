"""This build beside its history, in the report's words and tables (`ci.report.across` finds it): the first screen's
lines (which history, the rows quarantined as flaky per target and what the gate does with them, the numbers that
moved past their A/A floor), each change's verdict as the other gate setting would give it, each failing row across
builds with its bisect range and the command that runs it on a chosen commit, and the trends per change.

Plain text, as `ci.report.view`'s tables: the renderers escape it."""

from __future__ import annotations

import shlex
from collections import Counter
from pathlib import Path

from ci.common.tables import counted
from ci.history.trends import Trend
from ci.report.view import Report, Table

MARK = {"pass": "✔", "failure": "✘", "error": "✘", "conflict": "⚠", "skipped": "–", "incomplete": "?"}
_SHOWN = 3  # rows named on a line before the rest are counted


def _rows(names: list[str]) -> str:
    more = len(names) - _SHOWN
    return ", ".join(names[:_SHOWN]) + (f" and {more} more" if more > 0 else "")


def _short(report: Report, target: str) -> str:
    t = report.stack.targets.get(target)
    return t.short if t else target


def lines(report: Report) -> list[str]:
    """The first screen's lines: the history and this build's place in it, the rows quarantined as flaky per target
    and what the gate does with them, those reinstated, and each trend that moved past its A/A floor."""
    a = report.history
    if a is None:
        return []
    branch = f"branch {a.build.branch}" if a.build.branch else "no branch named"
    last = a.last_on_branch
    if a.earlier:
        said = f"this build beside {counted(len(a.earlier), 'earlier build')} in {a.path} ({branch}"
        said += f"; the last on it: {last.called}, {last.at:%Y-%m-%d})" if last else "; none on it before)"
    else:
        said = f"this build, the first in {a.path} ({branch})"
    out = [f"History: {said}."]
    q = a.rule.quarantine
    rule = (
        f"at least {q.min_runs} runs in {q.window_days} days, {q.fail_rate[0]:.0%} to {q.fail_rate[1]:.0%} failed, "
        f"passed and failed on one build; back after {q.reinstate_after} passes in a row"
    )
    if a.quarantined:
        by_target = Counter(a.target_of(row) for row in a.quarantined)
        per = "; ".join(
            f"{_short(report, t)}: {counted(n, 'row')} ({_rows([r for r in a.quarantined if a.target_of(r) == t])})"
            for t, n in by_target.items()
        )
        gate = (
            "they still hold their changes back (stack/flaky.yaml gate: hold)"
            if q.gate == "hold"
            else "their changes are judged without them (stack/flaky.yaml gate: waive)"
        )
        out.append(f"Quarantined as flaky ({rule}): {per}; {gate}.")
    back = [row for row, f in a.flaky.items() if f.reinstated]
    if back:
        out.append(f"Reinstated after {q.reinstate_after} passes in a row: {_rows(back)}.")
    for t in (t for t in a.trends if t.headline):
        out.append(f"Moved past its A/A floor since the last build: {moved(report, t)}.")
    return out


def moved(report: Report, t: Trend) -> str:
    before, now = t.points[-2], t.points[-1]
    unit = f" {t.unit}" if t.unit else ""
    said = f"#{t.change} on {_short(report, t.target)}: {t.metric} {num(before.value)} → {num(now.value)}{unit}"
    floor = f"; A/A floor ±{t.floor_pct:.1f}%" if t.floor_pct is not None else "; no A/A floor known"
    return f"{said} ({t.moved_pct:+.1f}% against {before.called}{floor})"


def num(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def per_change(report: Report, change: str) -> list[str]:
    """What the history says of one change on the first screen: its rows quarantined, per target, and its verdict as
    the other gate setting would give it."""
    a = report.history
    if a is None:
        return []
    mine = [row for row in a.quarantined if a.change_of(row) == change]
    out = []
    for target in dict.fromkeys(a.target_of(row) for row in mine):
        rows = [r for r in mine if a.target_of(r) == target]
        out.append(f"{_short(report, target)}: {counted(len(rows), 'row')} quarantined as flaky ({_rows(rows)})")
    if other := a.otherwise.get(change):
        chosen = next((v for v in report.verdicts if v.change.id == change), None)
        same = " all the same" if chosen is not None and chosen.ready == other.ready else ""
        lead = (
            "without its quarantined rows" if a.rule.quarantine.gate == "hold" else "were its quarantined rows counted"
        )
        out.append(f"{lead}: {'ready' if other.ready else 'not ready'}{same}")
    return out


def row_words(report: Report, row: str) -> str:
    """A failing row across builds: flaky (quarantined, with the rule's count), or its streak on this branch."""
    a = report.history
    if a is None:
        return ""
    if (f := a.flaky.get(row)) and f.quarantined:
        return f"flaky, quarantined: {f.words()}"
    found = a.failing.get(row)
    return found.words() if found else ""


def bisect(report: Report, row: str) -> tuple[str, str]:
    """Where a row went from passing to failing between two fork commits: the range, the fork's commits in it where
    its checkout is at hand (each imported change's marked), and the command that runs the row on one of them (the
    middle one); ("", "") where there is no range."""
    a = report.history
    found = a.failing.get(row) if a else None
    span = found.bisect if found else None
    if found is None or span is None:
        return "", ""
    good, bad = span
    target = next((r.target for r in report.results.rows if r.id == row), "")
    checkout = _checkout(report)
    commits = _between(checkout, good, bad) if checkout else []
    passed = found.last_pass.called if found.last_pass else "the last pass"
    said = f"passed on {good[:12]} ({passed}), failed on {bad[:12]} ({found.since.called})"
    if not commits:
        where = shlex.quote(str(checkout)) if checkout else "CHECKOUT"
        said += f"; list the range with: git -C {where} log --oneline {good}..{bad}"
        pick, fork = bad, str(checkout or "CHECKOUT")
    else:
        said += (
            f"; {counted(len(commits), 'commit')} between: "
            + "; ".join(f"{c[:12]} {s}" for c, s in commits[:8])
            + (f"; and {len(commits) - 8} more" if len(commits) > 8 else "")
        )
        pick, fork = commits[len(commits) // 2][0], str(checkout)
    command = shlex.join(
        ["python", "-m", "ci", "main", "--fork", fork, "--ref", pick, "--target", target, "--rows", row]
    )
    return said, command


def _checkout(report: Report) -> Path | None:
    from ci.common.errors import UsageError
    from ci.upstream import scope

    try:
        return scope.checkout_path(report.stack) if scope.configured(report.stack) else None
    except UsageError:  # a fork named wrongly is the fork commands' to say; here the range is given without its list
        return None


def _between(checkout: Path, good: str, bad: str) -> list[tuple[str, str]]:
    """The fork's commits after `good` up to `bad`, oldest first, each imported change's marked ("(#48407)"); none
    where the checkout lacks either."""
    from ci.common.errors import UsageError
    from ci.upstream.checkout import Checkout, git_lines

    try:
        out = Checkout.open(checkout).git("log", "--reverse", "--format=%H%x09%s%x09%b%x1e", f"{good}..{bad}", "--")
    except UsageError:
        return []
    found = []
    for entry in out.split("\x1e"):
        parts = entry.strip("\n").split("\t", 2)
        if len(parts) == 3 and parts[0]:
            commit, subject, body = parts
            picked = next((w for w in git_lines(body) if "cherry picked from commit" in w), "")
            found.append((commit, subject + (f" ({picked.strip('() ')})" if picked else "")))
    return found


def quarantine_table(report: Report, change: str) -> Table:
    a = report.history
    rows = []
    for row, f in a.flaky.items() if a else ():
        if a.change_of(row) != change:
            continue
        strip = "".join(MARK.get(s.status, "?") for s in a.runs.get(row, ())[-20:])
        state = "quarantined" if f.quarantined else "reinstated"
        rows.append((row, a.target_of(row), state, f"{f.fails} of {f.runs}", strip, f.words()))
    return Table(headers=("Row", "Target", "State", "Failed", "Runs, oldest first", "Why"), rows=tuple(rows))


def trend_table(report: Report, change: str, *, values: bool = True) -> Table:
    """A change's trends, a line each; with `values`, each build's value too (report.md: report.html draws them)."""
    a = report.history
    rows = []
    for t in (t for t in (a.trends if a else ()) if t.change == change):
        now = t.current
        cells = (
            _short(report, t.target),
            f"{t.metric} ({t.unit})" if t.unit else t.metric,
            num(now.value) if now else "–",
            num(t.mean) if t.mean is not None else "–",
            num(t.best) if t.best is not None else "–",
            f"{t.moved_pct:+.1f}%" if t.moved_pct is not None else "–",
            f"±{t.floor_pct:.1f}%" if t.floor_pct is not None else "none known",
            *((" ".join(num(p.value) for p in t.points),) if values else ()),
        )
        rows.append(cells)
    headers = ("Target", "Metric", "Now", "7-day mean", "30-day best", "Moved", "A/A floor")
    return Table(headers=(*headers, *(("Last builds",) if values else ())), rows=tuple(rows))


def tables(report: Report, change: str, *, values: bool = True) -> list[tuple[str, Table]]:
    """A change's tables across builds, where they hold rows: its rows quarantined or reinstated, its trends (with
    each build's value, where `values`)."""
    found = [
        ("Rows quarantined as flaky, or reinstated (stack/flaky.yaml)", quarantine_table(report, change)),
        ("Trends over builds (the median of its rows on the target)", trend_table(report, change, values=values)),
    ]
    return [(heading, t) for heading, t in found if t.rows]


def with_history(report: Report, t: Table) -> Table:
    """The failing rows' table with a column saying what each row is across builds (its first cell: the row id)."""
    if report.history is None:
        return t
    rows = []
    for r in t.rows:
        said, command = bisect(report, r[0])
        parts = (
            row_words(report, r[0]),
            f"bisect: {said}" if said else "",
            f"run it on a commit: {command}" * bool(command),
        )
        rows.append((*r, "; ".join(x for x in parts if x) or "–"))
    return Table(headers=(*t.headers, "Across builds"), rows=tuple(rows))


def title(report: Report, t: Trend) -> str:
    """A trend chart's title: what, where, and the current value."""
    now = f": now {num(t.current.value)} {t.unit}".rstrip() if t.current else ""
    return f"{t.metric} on {_short(report, t.target)} ({t.unit or 'no unit'}){now}"


def rows(report: Report) -> dict[str, tuple[str, str, str]]:
    """Each failing row across builds: (its words, its bisect range, the command that runs it on a commit)."""
    a = report.history
    if a is None:
        return {}
    out = {}
    for row in (*a.failing, *a.quarantined):
        words = row_words(report, row)
        said, command = bisect(report, row)
        if words or said:
            out[row] = (words, said, command)
    return out
