"""The next step of a change the fork lacks, on the report's first screen: its port (the `ci fork port` command and
its verdict: clean, by a three-way merge, or what conflicts and what it needs first), not rows to run; and of a
change the fork holds without a follow-up upstream merged since (a fix), that follow-up's port. From the fork state
the report judged (`ci main`'s fork, or `--upstream`: `ci upstream --format json`; each carries the changes' port
readiness). The command is made here from the verdict's fields and the fork's options (ci.upstream.port.command_line),
never taken from the document: an upstream.json is a file from elsewhere."""

from __future__ import annotations

from ci.common.options import RELEASE
from ci.report.sections import in_fork
from ci.report.view import Report
from ci.upstream.port import command_line, words
from ci.upstream.readiness import PORTABLE, Readiness
from ci.upstream.state import Snapshot


def step(report: Report, change: str) -> tuple[str, str] | None:
    """(command, note) for a change the fork lacks, or holds without a follow-up; None for any other."""
    state = in_fork.state(report, change)
    snap = in_fork.snapshot(report)
    if state is None or snap is None:
        return None
    flags = _flags(snap)
    if state.port is not None:
        r = state.port
        note = f"{state.state} in the fork; its port: {words.cell_of(r)}"
        if r.command.startswith("fix: "):  # words to read (escaped where shown), never a command shown as one
            note += f"; {r.command}"
        return command_line.of(flags, r), note
    lacking = [f for f in state.follow_up_ports if f.verdict != "in the fork"]
    if not lacking:
        return None
    said = "; ".join(f"#{f.pr}: {words.cell_of(f)}" for f in lacking)
    note = f"{state.state} in the fork without its follow-up{'s' * (len(lacking) > 1)} {said}"
    first = next((f for f in reversed(lacking) if _portable(f)), None)  # the newest fix, with what it needs first
    return (command_line.of(flags, first), note) if first else ("", note)


def _flags(snap: Snapshot) -> tuple[str, ...]:
    """The fork options a port command repeats: the document's own (fork options alone, checked when it was read),
    else, in one written before it recorded them, its checkout, ref and base."""
    if snap.options:
        return snap.options
    base = ("--base-ref", snap.base_ref, "--base-version", snap.base_version)
    known = snap.base_ref and RELEASE.fullmatch(snap.base_version)
    return ("--fork", snap.fork, "--ref", snap.ref, *(base if known else ()))


def _portable(r: Readiness) -> bool:
    return r.verdict in PORTABLE or r.after_prerequisites in PORTABLE
