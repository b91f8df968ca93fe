"""Port readiness in words, one way for every verb that shows it: the `Port` cell of `ci fork` and `ci upstream`,
and the lines under their tables (what conflicts where, what it needs first, how settled upstream is, the next
command)."""

from __future__ import annotations

from ci.escape import one_line
from ci.upstream.readiness import Conflict, Missing, Readiness
from ci.upstream.state import ChangeState

SHOWN = 3  # commits named per hunk; the rest are counted


def readinesses(state: ChangeState) -> tuple[Readiness, ...]:
    """The change's own port verdict, or those of its follow-ups the fork lacks."""
    if state.port is not None:
        return (state.port,)
    return tuple(f for f in state.follow_up_ports if f.verdict != "in the fork")


def cell(state: ChangeState) -> str:
    """ "clean", "conflicts: speculator.py (1 hunk)", "follow-up #52512: clean"; "—" where there is nothing to port."""
    parts = [f"follow-up #{r.pr}: {cell_of(r)}" if r.follow_up else cell_of(r) for r in readinesses(state)]
    return one_line("; ".join(parts)) or "—"


def cell_of(r: Readiness) -> str:
    """One verdict in a cell: "conflicts: pre.py (1 hunk); after #47000: clean; stacked on #49903 absent"."""
    text = f"unknown: {r.detail}" if r.verdict == "unknown" else r.short()
    if r.chain:
        text += f"; {r.chain}"
    elif r.prerequisites and r.after_prerequisites:  # an upstream.json written before chains were said in a line
        text += f"; after {', '.join(f'#{p.pr}' if p.pr else p.commit[:12] for p in r.prerequisites)}: "
        text += r.after_prerequisites
    lacking = [f"#{s.pr} {s.state}" for s in r.stacked_on if s.lacking]
    if lacking:
        text += f"; stacked on {', '.join(lacking)}"
    st = r.stability
    if st and not st.stable and r.verdict != "unknown":  # an open PR still moves; a reverted one was taken back
        text += f"; {st.reverted or st.upstream}"
    return text


def lines(state: ChangeState) -> list[str]:
    """What the maintainer reads under the table, per verdict: what was tried, each conflict, the prerequisites,
    how settled it is upstream, and the next command."""
    out = []
    for r in readinesses(state):
        out.append(f"{r.label}: {r.verdict}: {r.detail}")
        for c in r.conflicts:
            out += [f"  {h}" for h in hunk_lines(c)]
        out += [f"  {line}" for line in missing_lines(r.missing)]
        if r.prerequisites:
            said = ", ".join(_commit(p.commit, p.pr, p.subject) for p in r.prerequisites)
            out.append(f"  needs first (oldest first), lacking in the fork: {said}")
        if r.chain:
            out.append(f"  the chain: {r.chain}")
        for s in r.stacked_on:
            out.append(f"  stacked on #{s.pr}: {s.state}" + (f" (change {s.change})" if s.change else ""))
        if r.stability:
            st = r.stability
            settled = "; ".join([st.upstream, *st.follow_ups, *([st.reverted] if st.reverted else [])])
            out.append(f"  upstream: {settled}")
        if r.command:
            out.append(f"  next: {r.command}")
    return [one_line(line) for line in out]


def hunk_lines(c: Conflict) -> list[str]:
    out = []
    for h in c.hunks:
        up = f"{h.upstream_lines[0]}-{h.upstream_lines[1]}"
        fork = f"{h.fork_lines[0]}-{h.fork_lines[1]}"
        parts = [f"{c.file}: upstream lines {up}, fork lines {fork}"]
        if h.prerequisites:
            named = [
                _commit(p.commit, p.pr, p.subject) + (" (in the fork)" if p.held else " (not in the fork)")
                for p in h.prerequisites[:SHOWN]
            ]
            more = len(h.prerequisites) - SHOWN
            parts.append("upstream touched them in " + ", ".join(named) + (f" and {more} more" if more > 0 else ""))
        if h.fork_edits:
            named = [_commit(e.commit, None, e.subject) for e in h.fork_edits[:SHOWN]]
            more = len(h.fork_edits) - SHOWN
            parts.append("the fork edited them in " + ", ".join(named) + (f" and {more} more" if more > 0 else ""))
        if not h.prerequisites and not h.fork_edits:
            parts.append("no commit since the fork left upstream touched them on either side")
        out.append(one_line("; ".join(parts)))
    return out


def missing_lines(missing: tuple[Missing, ...]) -> list[str]:
    """Each file the fork lacks, and what brings it: "vllm/x.py: not in the fork; upstream created it in … and
    changed it in …"."""
    out = []
    for m in missing:
        said = f"{m.file}: not in the fork"
        if m.removed_by is not None:
            said += f"; the fork removed it in {_commit(m.removed_by.commit, None, m.removed_by.subject)}"
        elif m.commits:
            made, *then = m.commits
            said += f"; upstream created it in {_commit(made.commit, made.pr, made.subject)}{_held(made.held)}"
            if then:
                shown = [_commit(p.commit, p.pr, p.subject) + _held(p.held) for p in then[:SHOWN]]
                more = len(then) - SHOWN
                said += " and changed it in " + ", ".join(shown) + (f" and {more} more" if more > 0 else "")
        else:
            said += "; no upstream commit since the fork left upstream brought it"
        out.append(one_line(said))
    return out


def _held(held: bool) -> str:
    return " (in the fork)" if held else " (not in the fork)"


def _commit(commit: str, pr: int | None, subject: str) -> str:
    return f"{commit[:12]}{f' #{pr}' if pr else ''} {subject!r}"


def _prs(r: Readiness) -> str:
    return ", ".join(f"#{p.pr}" if p.pr else p.commit[:12] for p in r.prerequisites)
