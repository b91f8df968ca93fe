"""A port made: upstream's commits applied in turn onto the fork's ref in a scratch index (ci.upstream.port_apply),
each committed with upstream's message, author and date and `(cherry picked from commit …)` as `git cherry-pick -x`
writes it, the objects kept and a new branch pointed at the last; or, where any commit conflicts, nothing at all
(the scratch directory goes, no ref moves) and what stopped it."""

from __future__ import annotations

from dataclasses import dataclass

from ci import signals
from ci.upstream import port_apply, port_source
from ci.upstream.checkout import Checkout
from ci.upstream.port_apply import Stages
from ci.upstream.port_source import Unit
from ci.upstream.readiness import PORTABLE, Readiness
from ci.upstream.scratch import Scratch

STACKGATE = {"GIT_COMMITTER_NAME": "stackgate", "GIT_COMMITTER_EMAIL": "stackgate@localhost"}


@dataclass(frozen=True, kw_only=True)
class Made:
    branch: str
    tip: str
    commits: tuple[tuple[str, Unit], ...]  # (new commit, the upstream commit it ports), oldest first
    skipped: tuple[Unit, ...] = ()  # upstream commits whose patch the fork already holds


@dataclass(frozen=True, kw_only=True)
class Stopped:
    """Why nothing was made."""

    verdict: str  # "conflicts", or "unknown" where git could not merge (a blob the checkout lacks)
    detail: str
    applied: tuple[Unit, ...]  # the commits that applied before it, in order
    stopped: Unit | None
    conflicted: tuple[Stages, ...]


def units(co: Checkout, r: Readiness, with_prerequisites: bool) -> list[Unit]:
    """The upstream commits the port applies, in order: its prerequisites first where asked."""
    first = [p.commit for p in r.prerequisites] if with_prerequisites else []
    found = port_source.units(co, [*first, *r.patch])
    return [found[c] for c in dict.fromkeys((*first, *r.patch)) if c in found]


def make(co: Checkout, head: str, todo: list[Unit], branch: str, reflog: str) -> Made | Stopped:
    with Scratch(co) as sc:
        done = port_apply.attempt(sc, head, todo, trees=True)
        if done.verdict not in (*PORTABLE, "in the fork"):
            return Stopped(
                verdict=done.verdict,
                detail=done.detail,
                applied=tuple(s.unit for s in done.steps if s.how != "in the fork"),
                stopped=done.stopped,
                conflicted=done.conflicted,
            )
        ident = _ident(co)
        parent, made = head, []
        for step in done.steps:
            if step.how == "in the fork":
                continue
            message = co.git("log", "-1", "--format=%B", step.unit.commit).rstrip("\n")
            message += f"\n\n(cherry picked from commit {step.unit.commit})\n"
            author = _author(co, step.unit.commit)
            parent = sc.git("commit-tree", step.tree, "-p", parent, stdin=message, ident={**author, **ident}).strip()
            made.append((parent, step.unit))
        skipped = tuple(s.unit for s in done.steps if s.how == "in the fork")
        if made:  # the objects, then the branch (an empty old value: created, never moved); a stop waits for both
            with signals.held():
                sc.keep()
                co.git("update-ref", "-m", reflog, f"refs/heads/{branch}", parent, "")
    return Made(branch=branch, tip=parent, commits=tuple(made), skipped=skipped)


def _ident(co: Checkout) -> dict[str, str]:
    """The committer: the user's git identity, else stackgate's (a clone with no user.name still gets its port)."""
    return {} if co.git("var", "GIT_COMMITTER_IDENT", ok=(0, 128)).strip() else dict(STACKGATE)


def _author(co: Checkout, commit: str) -> dict[str, str]:
    name, email, date = co.git("log", "-1", "--format=%an%x00%ae%x00%aI", commit).rstrip("\n").split("\0")
    return {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date}
