"""Each change's rebase state beside its verdict, from the upstream.json `ci upstream --format json` wrote and
`ci report --upstream` was given: a column of the verdict table, a line under each change, a field of report.json.
A change the document does not list says so; nothing is shown where no document was given."""

from __future__ import annotations

from ci.common.tables import counted
from ci.report.view import Report
from ci.upstream.state import ChangeState

NOT_LISTED = "not in the upstream state given"


def _unread(report: Report) -> str:
    read = report.upstream_read
    return f"upstream state {read.status} ({read.path})" if read and report.upstream is None else ""


def _state(report: Report, change: str) -> ChangeState | None:
    snap = report.upstream
    return next((c for c in snap.changes if c.change == change), None) if snap else None


def cell(report: Report, change: str) -> str:
    """The verdict table's cell: the state, and what it lacks or collides with."""
    s = _state(report, change)
    if s is None:
        return _unread(report) or NOT_LISTED
    extra = {"diverged": ", ".join(s.diverged_files), "partially ported": "missing " + ", ".join(s.missing)}
    text = f"{s.state} ({extra[s.state]})" if s.state in extra else s.state
    return text + (f"; {counted(len(s.flags), 'flag')}" if s.flags else "")


def line(report: Report, change: str) -> str:
    """Under the change's heading: the state, what was found, each flag and the fix."""
    s = _state(report, change)
    if s is None:
        return f"Rebase state: {_unread(report) or NOT_LISTED}."
    parts = [f"Rebase state: {s.state}: {s.detail}."]
    parts += [f"Flag: {f}." for f in s.flags]
    if s.fix:
        parts.append(f"Fix: {s.fix}")
    return " ".join(parts)


def where(report: Report) -> str:
    """Which checkout and upstream the states are of."""
    snap = report.upstream
    if snap is None:
        return ""
    shallow = " (a shallow clone)" if snap.shallow else ""
    source = f", read from {report.upstream_read.path}" if report.upstream_read else ""
    over = [f"{snap.upstream_ref} ({snap.upstream[:12]})"] if snap.upstream_ref else []
    over += [f"its base vLLM {snap.base_version} ({snap.base_ref})"] if snap.base_version else []
    name = f"{snap.name} " if snap.name else ""
    return (
        f"Rebase state of {name}{snap.fork}{shallow} at {snap.ref} {snap.head[:12]}: {snap.fork_commits} own commits "
        f"over {' and '.join(over) or 'its base'}{source}."
    )


def to_json(report: Report, change: str) -> dict[str, object] | None:
    if report.upstream is None:
        return None
    s = _state(report, change)
    return s.to_json() if s else {"state": None, "detail": NOT_LISTED}


def document(report: Report) -> dict[str, object] | None:
    """report.json's `upstream`: the checkout and upstream the states are of (each change carries its own)."""
    snap = report.upstream
    if snap is None:
        return None
    return {
        "path": report.upstream_read.path if report.upstream_read else None,
        "fork": snap.fork,
        "head": snap.head,
        "upstream_ref": snap.upstream_ref,
        "upstream": snap.upstream,
        "merge_base": snap.merge_base,
        "shallow": snap.shallow,
        "fork_commits": snap.fork_commits,
    }
