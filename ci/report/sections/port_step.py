"""The next step of a change the fork lacks, on the report's first screen: its port (the `ci fork port` command and
its verdict: clean, by a three-way merge, or what conflicts and what it needs first), not rows to run; and of a
change the fork holds without a follow-up upstream merged since (a fix), that follow-up's port. From the fork state
the report judged (`ci main`'s fork, or `--upstream`: `ci upstream --format json`; each carries the changes' port
readiness). The command is made here from the verdict's fields and the fork's options (ci.upstream.port.command_line),
never taken from the document: an upstream.json is a file from elsewhere.

A change tried as a port (`ci main --try-port`: its rows run on the fork with the port, against the fork as it is)
leads with that: "not in the fork; tried as a port (clean, 2 prerequisites): ready on H200", or not ready and why, per
target; where it is ready, the next step is the command that makes the port for real; where not, what failed."""

from __future__ import annotations

from ci.common.options import RELEASE
from ci.report.sections import at_target, in_fork
from ci.report.view import Report
from ci.results.acceptance import Verdict
from ci.upstream.port import command_line, words
from ci.upstream.port.tried import Tried
from ci.upstream.readiness import PORTABLE, Readiness
from ci.upstream.state import Snapshot


def tried(report: Report, change: str) -> Tried | None:
    return next((t for t in report.tried if t.change == change), None)


def as_tried(t: Tried) -> str:
    """The change in the fork, as the first screen's lead column says it: "not in the fork; tried as a port (clean,
    2 prerequisites)"."""
    return f"not in the fork; tried as a port ({t.said})"


def lead(report: Report, verdict: Verdict) -> str:
    """The change tried as a port, in one sentence: ready or not, and why, per target ("" where it was not tried)."""
    t = tried(report, verdict.change.id)
    if t is None:
        return ""
    per = [a for a in at_target.verdicts(report, verdict) if a.state not in ("waived", "not in this report")]
    if verdict.ready:
        return f"#{t.change}: {as_tried(t)}: ready on {', '.join(a.short for a in per)}"
    where = [f"{a.short} {at_target.said(a)}" for a in per if a.state != "ready"]
    blocked = ", ".join(f"{at_target.SHORT.get(c.name, c.name)} {c.status}" for c in verdict.blocking)
    return f"#{t.change}: {as_tried(t)}: not ready: {'; '.join([*where, f'blocked by {blocked}'])}"


def builds(report: Report, change: str) -> list[str]:
    """The builds a tried port was compared on: the port's against the fork's as it is, and the A/A arm's floor."""
    c = report.comparison
    out = []
    for p in c.ported if c else ():
        if p.change != change:
            continue
        aa = f"; the A/A arm {p.aa!r} gave the floor" if p.aa else "; no A/A arm ran"
        out.append(
            f"side {p.fork!r} (the fork with the port, build {p.builds[0]}) against side {p.without!r} (the fork as "
            f"it is, build {p.builds[1]}) on {len(p.rows)} row{'s' * (len(p.rows) != 1)}{aa}"
            + ("" if p.isolated else f"; not the port alone: {'; '.join(p.problems)}")
        )
    return out


def tried_step(report: Report, verdict: Verdict) -> tuple[str, str] | None:
    """A tried port that held: the command that makes it for real. None where it was not tried or did not hold (what
    failed is then the next step)."""
    t = tried(report, verdict.change.id)
    if t is None or not verdict.ready:
        return None
    return t.command, "make the port for real: tried on a scratch ref, it held"


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
