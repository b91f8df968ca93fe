"""Why a port conflicts and what it needs first: each conflicting file's hunks with the upstream commits and the
fork's commits that touched their lines (ci.upstream.port_blame), the PRs the change is stacked on and what the fork
holds of them, and every prerequisite the fork lacks in the order to port them (oldest first)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping

from ci.stack.change import Change
from ci.upstream import port_blame, port_files
from ci.upstream.git_streams import REC
from ci.upstream.port_apply import Outcome, Stages
from ci.upstream.port_blame import ForkSide
from ci.upstream.port_hunks import regions
from ci.upstream.port_source import Unit, pr_of
from ci.upstream.readiness import Conflict, Hunk, Missing, Prerequisite, Readiness, Stacked
from ci.upstream.scope import Scope
from ci.upstream.scratch import Scratch
from ci.upstream.state import ChangeState

STACKED_WINDOW = dt.timedelta(days=90)  # a PR stacked on another is looked for in the quarter before it merged
MAX_HUNKS = 16  # hunks of one change asked about by `git log -L`; more are listed without their commits


class Sides:
    """The fork's side since it left upstream at a merge base, read once per base."""

    def __init__(self, scope: Scope, undone: frozenset[str] = frozenset()) -> None:
        self.scope = scope
        self.undone = undone  # commits whose patch the fork took back: they hold nothing (ci.upstream.reverts)
        self._by_base: dict[str, ForkSide] = {}
        self._bases: dict[str, str] = {}
        self._after: set[str] | None = None  # upstream's commits after where the ref left it
        self.conflicts: dict[tuple[str, tuple[Stages, ...]], tuple[Conflict, ...]] = {}  # asked once per stop
        self.missing: dict[tuple[str, tuple[str, ...]], tuple[Missing, ...]] = {}  # so too the files it lacks
        self.touched: dict[tuple[str, tuple[Stages, ...]], tuple[Prerequisite, ...]] = {}  # and the lines' commits

    def lacking(self, sc: Scratch, unit: Unit, paths: tuple[str, ...]) -> tuple[Missing, ...]:
        """The files `unit` changes that the fork lacks, each with the upstream commits that bring it (asked once)."""
        key = (unit.commit, paths)
        if key not in self.missing:
            base = self.base_with(unit.parent)
            if not base:
                self.missing[key] = tuple(Missing(file=f, commit=unit.commit) for f in paths)
            else:
                side = self.at(base)
                self.missing[key] = port_files.history(sc, side, base, unit, self.scope.head, paths, side.own)
        return self.missing[key]

    def at(self, base: str) -> ForkSide:
        if base not in self._by_base:
            s = self.scope
            self._by_base[base] = port_blame.fork_side(s.co, s.head, base, s.own, self.undone)
        return self._by_base[base]

    def base_with(self, commit: str) -> str:
        """Where the fork's ref and `commit`'s history part ("" where they share none). An upstream commit after where
        the ref left upstream's main parts there (one rev-list for all of them, not a merge-base each)."""
        left = self.scope.left
        if left is not None and self.scope.upstream:
            if self._after is None:
                out = self.scope.co.git("rev-list", self.scope.upstream, f"^{left.commit}", "--")
                self._after = set(out.split())
            if commit in self._after:
                return left.commit
        if commit not in self._bases:
            self._bases[commit] = self.scope.co.merge_base(self.scope.head, commit) or ""
        return self._bases[commit]


def conflicts(sc: Scratch, sides: Sides, outcome: Outcome) -> tuple[Conflict, ...]:
    unit = outcome.stopped
    assert unit is not None
    key = (unit.commit, outcome.conflicted)
    if key not in sides.conflicts:
        sides.conflicts[key] = _conflicts(sc, sides, outcome)
    return sides.conflicts[key]


def touched(sc: Scratch, sides: Sides, outcome: Outcome) -> tuple[Prerequisite, ...]:
    """The upstream commits since the fork left upstream that touched any conflicting region of the commit that
    stopped `outcome` (one `git log` for them all, where `conflicts` asks hunk by hunk)."""
    unit = outcome.stopped
    assert unit is not None
    key = (unit.commit, outcome.conflicted)  # changes lacking the same files stop at the same commits: asked once
    if key in sides.touched:
        return sides.touched[key]
    base = sides.base_with(unit.parent)
    found: tuple[Prerequisite, ...] = ()
    if base:
        spans = [(s.path, r.upstream) for s in outcome.conflicted if s.base for r in regions(sc, s)][:MAX_HUNKS]
        lines = port_blame.touching_any(sc, (unit.parent, f"^{base}"), spans)
        found = port_blame.prerequisites(sides.scope.co, lines, sides.at(base))
    sides.touched[key] = found
    return found


def _conflicts(sc: Scratch, sides: Sides, outcome: Outcome) -> tuple[Conflict, ...]:
    unit = outcome.stopped
    assert unit is not None
    head = sides.scope.head
    base = sides.base_with(unit.parent)
    side = sides.at(base) if base else None
    out = []
    asked = 0
    for stages in outcome.conflicted:
        hunks = []
        for r in regions(sc, stages):
            pre, edits = (), ()
            if side is not None and asked < MAX_HUNKS:
                asked += 1
                if stages.base:
                    lines = port_blame.touching(sc, (unit.parent, f"^{base}"), stages.path, r.upstream)
                    pre = port_blame.prerequisites(sides.scope.co, lines, side)
                if stages.ours:
                    mine = port_blame.touching(sc, (head, f"^{base}"), stages.path, r.fork)
                    edits = port_blame.fork_edits(mine, side)
            hunks.append(Hunk(upstream_lines=r.upstream, fork_lines=r.fork, prerequisites=pre, fork_edits=edits))
        out.append(Conflict(file=stages.path, commit=unit.commit, hunks=tuple(hunks)))
    return tuple(out)


def stacked(
    sides: Sides, ch: Change, states: Mapping[str, ChangeState], by_pr: Mapping[int, str], merges: Mapping[str, str]
) -> tuple[Stacked, ...]:
    """The PRs `ch` is stacked on: a tracked one's state in the fork (`merges`: change -> upstream's merge, full);
    an untracked one found upstream by its subject "(#N)", held where the ref's history or a fork commit has it."""
    up = ch.upstream
    if up is None or not up.stacked_on:
        return ()
    co, scope = sides.scope.co, sides.scope
    untracked = [pr for pr in up.stacked_on if pr not in by_pr]
    found = _by_subject(sides.scope, untracked, (up.merged_on or up.as_of) - STACKED_WINDOW) if untracked else {}
    out = []
    for pr in up.stacked_on:
        if change := by_pr.get(pr):
            out.append(Stacked(pr=pr, change=change, state=states[change].state, commit=merges.get(change, "")))
            continue
        hit = found.get(pr)
        if hit is None:
            out.append(Stacked(pr=pr, change="", state="not found upstream"))  # in the window before the change
            continue
        commit, subject = hit
        base = sides.base_with(commit)
        held = co.is_ancestor(commit, scope.head) or (
            bool(base) and (subject in sides.at(base).subjects or commit in sides.at(base).picked)
        )
        out.append(Stacked(pr=pr, change="", state="held" if held else "not held", commit=commit))
    return tuple(out)


def _by_subject(scope: Scope, prs: list[int], since: dt.date) -> dict[int | None, tuple[str, str]]:
    """PR -> (commit, subject) of the newest upstream commit since `since` whose subject ends "(#PR)"; one
    process (the date bound keeps it off the whole of upstream's history)."""
    tip = scope.upstream or scope.head
    greps = [f"--grep=(#{pr})" for pr in prs]
    since_ = f"--since={since.isoformat()}"
    out = scope.co.git("log", "--fixed-strings", since_, f"--format=%H{REC}%s", *greps, tip, "--")
    found: dict[int | None, tuple[str, str]] = {}
    for line in out.splitlines():
        commit, _, subject = line.partition(REC)
        if (pr := pr_of(subject)) in prs:
            found.setdefault(pr, (commit, subject))
    return found


def needs(
    sides: Sides, found: Iterable[Conflict], on: Iterable[Stacked], earlier: Mapping[str, Readiness]
) -> tuple[Prerequisite, ...]:
    """What the fork lacks first, oldest first, each once: the stacked-on PRs it lacks (a tracked one's own
    prerequisites and patch, from `earlier`: change -> its readiness; an untracked one's upstream commit), then every
    possible prerequisite of a hunk it does not hold."""
    co = sides.scope.co
    lacking = [s for s in on if s.lacking]
    named = [c for s in lacking for c in (earlier[s.change].patch if s.change in earlier else (s.commit,)) if c]
    subjects = co.titles(*named, walk=False) if named else {}
    wanted: dict[str, Prerequisite] = {}
    for s in lacking:
        base = earlier.get(s.change)
        for p in base.prerequisites if base else ():
            wanted.setdefault(p.commit, p)
        for c in base.patch if base else (s.commit,) if s.commit else ():
            wanted.setdefault(c, Prerequisite(commit=c, subject=subjects.get(c, ""), pr=s.pr, held=False))
    for c in found:
        for h in c.hunks:
            for p in h.prerequisites:
                if not p.held:
                    wanted.setdefault(p.commit, p)
    if not wanted:
        return ()
    order = co.git("log", "--no-walk=sorted", "--format=%H", *wanted, "--").split()
    return tuple(wanted[c] for c in reversed(order) if c in wanted)
