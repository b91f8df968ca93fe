"""A port made: upstream's commits applied in turn onto the fork's ref in a scratch index (ci.upstream.port.apply),
each committed with upstream's message, author and date and `(cherry picked from commit …)` as `git cherry-pick -x`
writes it, the objects kept and a new ref (a branch, or a scratch ref of `ci main --try-port`) pointed at the last; or,
where any commit conflicts, nothing at all (the scratch directory goes, no ref moves) and what stopped it.

A pinned port is committed by stackgate at each upstream commit's own commit time: the same fork commit and the same
upstream commits make the same commit ids on any machine, so a pipeline can carry the port by its tip's id and each
agent that makes it again knows it made that very tree; made with no ref (`ref=None`), nothing is kept but the ids."""

from __future__ import annotations

from dataclasses import dataclass

from ci.common import signals
from ci.upstream.checkout import Checkout
from ci.upstream.port import apply, commits, patch_files
from ci.upstream.port.apply import Stages
from ci.upstream.port.commits import Unit
from ci.upstream.port.scratch import Scratch
from ci.upstream.readiness import PORTABLE, Readiness

STACKGATE = {"GIT_COMMITTER_NAME": "stackgate", "GIT_COMMITTER_EMAIL": "stackgate@localhost"}


@dataclass(frozen=True, kw_only=True)
class Made:
    ref: str  # the ref made ("refs/heads/stackgate/port-46514"); "" where none was asked (the ids only)
    tip: str
    commits: tuple[tuple[str, Unit], ...]  # (new commit, the upstream commit it ports), oldest first
    skipped: tuple[Unit, ...] = ()  # upstream commits whose patch the fork already holds

    @property
    def branch(self) -> str:
        return self.ref.removeprefix("refs/heads/")


@dataclass(frozen=True, kw_only=True)
class ByHand:
    """One upstream commit of a port done by hand: the files it changes that the fork holds under another name
    (upstream's path, the fork's), and those it deletes that the fork changed (git merges no deletion)."""

    unit: Unit
    moved: tuple[tuple[str, str], ...] = ()
    removed: tuple[str, ...] = ()
    retyped: tuple[str, ...] = ()  # files the fork holds as a symlink where upstream has a file (or the other way)


@dataclass(frozen=True, kw_only=True)
class Stopped:
    """Why nothing was made, and every commit the port takes, in order, for doing it by hand."""

    verdict: str  # "conflicts", "needs prerequisites", or "unknown" where git could not merge (a blob it lacks)
    detail: str
    applied: tuple[Unit, ...]  # the commits that applied before it, in order
    stopped: Unit | None
    conflicted: tuple[Stages, ...]
    missing: tuple[str, ...] = ()  # needs prerequisites: the files the stopped commit changes that the fork lacks
    # every commit the port takes, in order (those after the stop too): what a recipe by hand applies, through it
    todo: tuple[ByHand, ...] = ()


def units(co: Checkout, r: Readiness, with_prerequisites: bool) -> list[Unit]:
    """The upstream commits the port applies, in order: its prerequisites first where asked."""
    first = [p.commit for p in r.prerequisites] if with_prerequisites else []
    found = commits.units(co, [*first, *r.patch])
    return [found[c] for c in dict.fromkeys((*first, *r.patch)) if c in found]


def make(
    co: Checkout, head: str, todo: list[Unit], ref: str | None, reflog: str, *, pinned: bool = False
) -> Made | Stopped:
    """`todo` applied onto `head` and committed, `ref` (a full ref name, created: never moved) pointed at the last;
    `ref=None`: the commits made in the scratch store and dropped with it (their ids are what is asked). `pinned`:
    committed by stackgate at each upstream commit's commit time (the same ids anywhere), not by the user now."""
    with Scratch(co) as sc:
        done = apply.attempt(sc, head, todo, trees=True)
        if done.verdict not in (*PORTABLE, "in the fork"):
            return Stopped(
                verdict=done.verdict,
                detail=done.detail,
                applied=tuple(s.unit for s in done.steps if s.how != "in the fork"),
                stopped=done.stopped,
                conflicted=done.conflicted,
                missing=done.missing,
                todo=_by_hand(sc, head, todo, done),
            )
        ident = {} if pinned else _ident(co)
        parent, made = head, []
        for step in done.steps:
            if step.how == "in the fork":
                continue
            message = co.git("log", "-1", "--format=%B", step.unit.commit).rstrip("\n")
            message += f"\n\n(cherry picked from commit {step.unit.commit})\n"
            author = _author(co, step.unit.commit)
            stamp = _pinned(co, step.unit.commit) if pinned else ident
            parent = sc.git("commit-tree", step.tree, "-p", parent, stdin=message, ident={**author, **stamp}).strip()
            made.append((parent, step.unit))
        skipped = tuple(s.unit for s in done.steps if s.how == "in the fork")
        if made and ref:  # the objects, then the ref (an empty old value: created, never moved); a stop waits for both
            with signals.held():
                sc.keep()
                co.git("update-ref", "-m", reflog, ref, parent, "")
    return Made(ref=ref or "", tip=parent, commits=tuple(made), skipped=skipped)


def _by_hand(sc: apply.Scratch, head: str, todo: list[Unit], done: apply.Outcome) -> tuple[ByHand, ...]:
    """Each commit of `todo` with the files it needs that the fork holds under another name, those it deletes that
    the fork changed, and those the fork holds as another kind: as the attempt found them up to the stop, and from it
    on as the fork's tree has them (those commits were not reached; a file an earlier commit of the port brings is
    no longer the fork's to follow)."""
    moves = {s.unit.commit: dict(s.moved) for s in done.steps}
    if done.stopped is not None:
        before = {m for s in done.steps for m in s.moved}
        moves[done.stopped.commit] = dict(m for m in done.moved if m not in before)
    removed = {s.path for s in done.conflicted if s.base and s.ours and not s.theirs}
    retyped: set[str] = set()
    brought: set[str] = set()  # the paths the port's commits so far add or move to
    out = []
    fresh = False
    for unit in todo:
        found = patch_files.changes(sc, unit)
        if unit.commit not in moves:
            if not fresh:
                sc.read_tree(head)
                fresh = True
            read = patch_files.read(sc, unit, found)
            moves[unit.commit] = {a: b for a, b in read.moved.items() if a not in brought}
            removed.update(read.removed)
            retyped.update(read.retyped)
        needs = {c.needs for c in found if c.needs}
        out.append(
            ByHand(
                unit=unit,
                moved=tuple((a, b) for a, b in moves[unit.commit].items() if a in needs),
                removed=tuple(c.path for c in found if c.status == "D" and c.path in removed),
                retyped=tuple(c.path for c in found if c.path in retyped),
            )
        )
        brought.update(c.path for c in found if c.status in ("A", "R", "C"))
    return tuple(out)


def _ident(co: Checkout) -> dict[str, str]:
    """The committer: the user's git identity, else stackgate's (a clone with no user.name still gets its port)."""
    return {} if co.git("var", "GIT_COMMITTER_IDENT", ok=(0, 128)).strip() else dict(STACKGATE)


def _pinned(co: Checkout, commit: str) -> dict[str, str]:
    """The committer of a pinned port's commit: stackgate, at the upstream commit's own commit time."""
    when = co.git("log", "-1", "--format=%cI", commit).strip()
    return {**STACKGATE, "GIT_COMMITTER_DATE": when}


def _author(co: Checkout, commit: str) -> dict[str, str]:
    name, email, date = co.git("log", "-1", "--format=%an%x00%ae%x00%aI", commit).rstrip("\n").split("\0")
    return {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date}
