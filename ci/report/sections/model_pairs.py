"""The named models, each with its rows: the real model's (hub weights; not run where no host has them) beside
its shrunk twin's (the same architecture, shrunk, random weights), one line per model and change, so a reader
sees what each named model has run, on which tracks, and why a row failed.

A model is named here when the stack carries a shrunk twin of it (`shrunk_of`); its rows and the twin's are
planned by the same trait rules, so the two sides list the same changes unless the plan says otherwise.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from ci.report.view import FAILING, STATUS_MARK, Report, Table, short
from ci.results.merge import RowResult

HEADERS = ("Model", "Change (track)", "Real model's rows", "Shrunk rows", "Shrunk rows' outcome", "First failure")


def table(report: Report) -> Table:
    twins = {m.shrunk_of: m for m in report.stack.models.values() if m.shrunk_of}
    by_model: dict[str, dict[str, list[RowResult]]] = {}
    for r in report.results.rows:
        if r.planned is not None:
            by_model.setdefault(r.planned.model, {}).setdefault(r.change, []).append(r)
    rows = []
    for real_id, twin in sorted(twins.items()):
        real, shrunk = by_model.get(real_id, {}), by_model.get(twin.id, {})
        name = report.stack.models[real_id].name if real_id in report.stack.models else real_id
        for change in sorted(set(real) | set(shrunk)):
            track = report.stack.changes[change].track if change in report.stack.changes else "?"
            mine = shrunk.get(change, [])
            rows.append(
                (
                    name,
                    f"#{change} ({track})",
                    _counts(real.get(change, [])),
                    str(len(mine)),
                    _counts(mine) if mine else "no shrunk row planned",
                    _first_failure(mine),
                )
            )
        if not real and not shrunk:
            rows.append((name, "-", "no row planned", "0", "no row planned on the targets reported", ""))
    return Table(headers=HEADERS, rows=tuple(rows))


def _counts(rows: Iterable[RowResult]) -> str:
    """'3 ✔ pass, 2 ✘ failure, 7 not run' (or '-' for none)."""
    seen = Counter(r.status for r in rows)
    return ", ".join(f"{n} {STATUS_MARK[s]}" for s, n in sorted(seen.items(), key=lambda kv: _order(kv[0]))) or "-"


def _order(status: str) -> int:
    return list(STATUS_MARK).index(status) if status in STATUS_MARK else len(STATUS_MARK)


def _first_failure(rows: list[RowResult]) -> str:
    """The first failed row of the twin and why: a failed test's own message; for a row that crashed (error), the
    harness's cause line from its log where it found one (the message of a crash is only how it ended)."""
    for r in rows:
        if r.status in FAILING:
            case = next((c for c in r.cases if c.status in ("failure", "error")), None)
            why = case.message if case else r.message or r.note
            if case is not None and case.status == "error" and case.cause:
                why = case.cause
            return f"{r.id}: {short(why, 200)}"
    return ""


def tally(t: Table) -> str:
    """'7 models, 23 model-change lines'."""
    return f"{len({row[0] for row in t.rows})} models, {len(t.rows)} model-change lines"
