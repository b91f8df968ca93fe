"""What porting a change means in git: the upstream commits whose `vllm/` diff makes it, each against its first
parent. A merged PR is upstream's merge (a squash: the whole change in one commit); a PR never merged is its own
commits, oldest first; a partial port whose merge the checkout lacks, the commits it misses. Only `vllm/` travels:
what a build runs, and what a clone lacking other blobs can still diff."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ci.stack.change import Change, FollowUp
from ci.upstream.checkout import Checkout
from ci.upstream.git_streams import REC

PACKAGE = "vllm/"
DIFF = ("--binary", "--full-index", "--no-renames", "--no-color", "--no-ext-diff", "--no-textconv")
# the patch a port applies: a file upstream moved is moved (and merged three ways where the fork changed it), as
# `git cherry-pick` and a recipe by hand move it; never the user's diff.renames setting
PORT_DIFF = ("--binary", "--full-index", "--find-renames", "--no-color", "--no-ext-diff", "--no-textconv")
_PR = re.compile(r"\(#(\d+)\)\s*$")
_REF = re.compile(r"#(\d+)$")


@dataclass(frozen=True, kw_only=True)
class Unit:
    """One upstream commit to port: its `vllm/` diff against its first parent."""

    commit: str  # full id
    parent: str  # its first parent, full id
    subject: str


@dataclass(frozen=True, kw_only=True)
class Source:
    pr: int
    units: tuple[Unit, ...] = ()  # oldest first
    none: str = ""  # why there is nothing to apply (then `fix` says what makes it known)
    fix: str = ""


def pr_of(subject: str) -> int | None:
    """The PR an upstream subject names: "[Core] Fix it (#12345)" -> 12345."""
    m = _PR.search(subject)
    return int(m.group(1)) if m else None


def follow_up_pr(f: FollowUp) -> int:
    m = _REF.search(f.ref)
    if m is None:
        raise ValueError(f"follow-up ref {f.ref!r} names no PR (owner/repo#NUMBER)")
    return int(m.group(1))


def units(co: Checkout, commits: Iterable[str]) -> dict[str, Unit]:
    """Each commit (full id) -> its Unit; one process. A root commit has no parent to diff against: left out."""
    wanted = list(dict.fromkeys(commits))
    if not wanted:
        return {}
    out = co.git("log", "--no-walk=unsorted", f"--format={REC}%H%x02%P%x02%s", *wanted, "--")
    found = {}
    for chunk in out.split(REC)[1:]:
        commit, parents, subject = chunk.rstrip("\n").split("\x02", 2)
        if parents:
            found[commit] = Unit(commit=commit, parent=parents.split()[0], subject=subject)
    return found


def of_change(co: Checkout, ch: Change, missing: tuple[str, ...], full: Mapping[str, str | None]) -> Source:
    """The commits porting `ch` would apply. `missing`: the commits a partial port lacks (ChangeState.missing);
    `full`: each id the stack names -> its full id in the checkout (None where absent)."""
    up = ch.upstream
    assert up is not None
    file = f"stack/changes/{ch.id}.yaml"
    if up.merge_commit:
        merge = full.get(up.merge_commit)
        if merge:
            return Source(pr=up.pr, units=tuple(units(co, [merge]).values()))
        if not missing:
            main = co.command("fetch", f"https://github.com/{up.repo}.git", "main")
            return Source(
                pr=up.pr,
                none=f"upstream's merge {up.merge_commit} is not in this checkout",
                fix=f"fetch upstream's main into it: {main}",
            )
    named = missing if missing else up.commits
    held = [c for i in named if (c := full.get(i))]
    if named and len(held) == len(named):
        found = units(co, held)
        return Source(pr=up.pr, units=tuple(found[c] for c in held if c in found))
    if named:
        lacking = ", ".join(i for i in named if not full.get(i))
        return Source(
            pr=up.pr,
            none=f"the PR's commits {lacking} are not in this checkout",
            fix=f"fetch them: {co.command('fetch', f'https://github.com/{up.repo}.git', f'pull/{up.pr}/head')}",
        )
    if up.state == "merged":
        return Source(pr=up.pr, none="its merge commit is not recorded", fix=f"record upstream.merge_commit in {file}")
    instead = ", ".join(f"#{p}" for p in up.superseded_by)
    why = f"never merged{f' (upstream took another road: {instead})' if instead else ''}"
    return Source(
        pr=up.pr,
        none=f"{why}, and no commit of the PR is recorded to apply",
        fix=f"record upstream.commits (the PR's commits: git fetch https://github.com/{up.repo}.git "
        f"pull/{up.pr}/head) in {file}",
    )


def of_follow_up(co: Checkout, ch: Change, f: FollowUp, full: Mapping[str, str | None]) -> Source:
    pr = follow_up_pr(f)
    if not f.merge_commit:
        return Source(
            pr=pr,
            none="not merged upstream (no merge commit recorded)",
            fix=f"record its merge_commit under follow_ups in stack/changes/{ch.id}.yaml once it merges",
        )
    merge = full.get(f.merge_commit)
    repo = f.ref.split("#")[0]
    if merge is None:
        return Source(
            pr=pr,
            none=f"upstream's merge {f.merge_commit} is not in this checkout",
            fix=f"fetch upstream's main into it: {co.command('fetch', f'https://github.com/{repo}.git', 'main')}",
        )
    return Source(pr=pr, units=tuple(units(co, [merge]).values()))


def files_of(co: Checkout, unit: Unit) -> tuple[str, ...]:
    """The `vllm/` files the unit's diff changes."""
    out = co.git("diff", "--name-only", "-z", "--no-renames", unit.parent, unit.commit, "--", PACKAGE)
    return tuple(p for p in out.split("\0") if p)
