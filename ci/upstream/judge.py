"""From what git found for one change to its state, the line that says why, and the flags that say what to do."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from ci.stack.change import Change, Upstream
from ci.upstream.checkout import Checkout
from ci.upstream.edited import Edited
from ci.upstream.state import ChangeState, State, Upstreamed

WAITING: tuple[State, ...] = ("absent", "unknown", "partially ported")  # a base in one of these fails its stack


@dataclass(frozen=True, kw_only=True)
class Found:
    """One change's commits as found in the checkout."""

    from_pr: bool = False  # compared by the PR's own commits (no port commits recorded)
    present: tuple[tuple[str, str], ...] = ()  # (recorded commit, fork commit with its patch)
    missing: tuple[str, ...] = ()
    unchecked: tuple[str, ...] = ()  # neither in the checkout nor recorded by patch-id
    patchless: tuple[str, ...] = ()  # merges and empty commits: no patch to compare
    by_record: tuple[str, ...] = ()  # compared by the patch-id the change file records
    mismatched: tuple[str, ...] = ()  # the recorded patch-id differs from the commit's own
    same_subject: tuple[tuple[str, str], ...] = ()  # (missing commit, a fork commit with its subject but not its patch)
    converged_by: str = ""  # why it is converged, or ""
    by_upstream: tuple[str, str] | None = None  # (upstream's commit, the fork commit carrying its patch as it is)
    edited: Edited | None = None  # the fork commit carrying it with edits
    merge_on_ref: bool = False  # the merge commit is an ancestor of the upstream ref (a rebase onto it converges)

    @property
    def compared(self) -> int:
        return len(self.present) + len(self.missing)


def recorded(up: Upstream) -> str:
    """The upstream state the stack records, with its date."""
    if up.state == "merged":
        return f"merged{f' on {up.merged_on}' if up.merged_on else ''} (as of {up.as_of})"
    return f"{'closed unmerged' if up.state == 'closed' else 'open'} (as of {up.as_of})"


def _pairs(present: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"{c} as {f[:12]}" for c, f in present)


def judge(
    ref: str,
    co: Checkout,
    file: str,
    ch: Change,
    found: Found,
    touched: tuple[Upstreamed, ...],
    candidates: Mapping[int, tuple[str, str]],
) -> ChangeState:
    up = ch.upstream
    if up is None:
        return ChangeState(change=ch.id, state="not imported", detail="imports nothing from upstream", recorded="—")
    flags: list[str] = []
    flags += [
        f"the patch-id recorded for {c} differs from the commit's own: record it again (--record)"
        for c in found.mismatched
    ]
    flags += [f"{c} has no patch (a merge or an empty commit): not compared" for c in found.patchless]
    what = "the PR's commits" if found.from_pr else "port"
    state: State
    fix = ""
    if found.converged_by:
        state, detail = "converged", found.converged_by
        if found.present and not found.from_pr:
            flags.append(f"the port is still carried after convergence ({_pairs(found.present)}): drop it")
    elif found.by_upstream:
        state = "diverged" if touched else "ported"
        detail = f"{found.by_upstream[0]}'s patch present as {found.by_upstream[1][:12]}"
    elif found.edited:
        state, detail = "ported, edited", found.edited.describe()
    elif found.unchecked:
        state = "unknown"
        detail = f"port commits not in this checkout: {', '.join(found.unchecked)}"
        if found.present:
            detail += f"; present: {_pairs(found.present)}"
        fix = (
            f"fetch a ref holding them into {co.path} (git -C {co.path} fetch REMOTE BRANCH), or record their "
            "patch-ids once from a checkout that has them: python -m ci upstream --fork THERE --record"
        )
        if co.shallow:
            fix = f"the checkout is shallow (git -C {co.path} fetch --unshallow); or {fix}"
    elif found.compared == 0:
        state, detail, fix = _nothing_to_compare(ref, co, file, ch, candidates)
    elif not found.missing:
        state = "diverged" if touched else "ported"
        detail = f"{what} present: {_pairs(found.present)}"
    elif found.present:
        state = "partially ported"
        detail = f"present: {_pairs(found.present)}; missing: {', '.join(found.missing)}"
    else:
        state = "absent"
        detail = f"no patch of {', '.join(found.missing)} is among the fork's own commits ({ref}..HEAD)"
        if up.merge_commit:
            detail = f"{_unmerged(ref, co, up)}; {detail}"
    if state in ("partially ported", "absent"):
        flags += [
            f"{c} is missing, but {f[:12]} has its subject with another patch (changed resolving a conflict?): "
            "if it carries the port, name it in fork.commits"
            for c, f in found.same_subject
        ]
    if up.state == "merged" and not up.merge_commit and "merge commit not recorded" not in detail:
        flags.append("merge commit not recorded")
    if found.by_record and state != "converged" and not (found.by_upstream or found.edited):
        detail += f" (by recorded patch-id: {', '.join(found.by_record)})"
    if touched:
        files = sorted({f for u in touched for f in u.files})
        commits = [f"{u.commit[:12]} {u.subject!r}" for u in touched]
        flags.append(f"upstream changed {folded(files)} since the port's base: {folded(commits)}")
    if up.state == "merged" and state in ("ported", "ported, edited", "partially ported", "diverged"):
        if found.merge_on_ref:
            flags.append(f"merged upstream: converge, dropping the port at the next rebase onto {ref}")
        else:
            when = f" on {up.merged_on}" if up.merged_on else ""
            flags.append(
                f"merged upstream{when}, but {ref} does not hold the merge yet: fetch upstream; a rebase "
                "onto it then converges"
            )
    return ChangeState(
        change=ch.id,
        state=state,
        detail=detail,
        recorded=recorded(up),
        pr=f"{up.repo}#{up.pr}",
        present=found.present,
        missing=found.missing,
        unchecked=found.unchecked,
        diverged=touched,
        flags=tuple(flags),
        fix=fix,
    )


SHOWN = 3  # items of a long list a flag names; the JSON (--format json) holds every one


def folded(items: Sequence[str]) -> str:
    """A list in a line: all of it when short, else the first few and a count of the rest."""
    if len(items) <= SHOWN + 1:
        return ", ".join(items)
    return f"{', '.join(items[:SHOWN])} and {len(items) - SHOWN} more (all in --format json)"


def _nothing_to_compare(
    ref: str, co: Checkout, file: str, ch: Change, candidates: Mapping[int, tuple[str, str]]
) -> tuple[State, str, str]:
    """No patch to look for: the merge commit alone decides, where one is recorded."""
    up = ch.upstream
    assert up is not None
    if up.merge_commit:
        return "absent", _unmerged(ref, co, up), ""
    if up.state == "merged":
        hit = candidates.get(up.pr)
        record = f"record upstream.merge_commit (the commit that merged #{up.pr}) in {file}"
        fix = f"{ref} has {hit[0][:12]} {hit[1]!r}: if that merged #{up.pr}, {record}" if hit else record
        return "unknown", "merge commit not recorded, and no port commits to compare", fix
    return (
        "unknown",
        "nothing recorded to look for: no merge commit, PR commits or port commits",
        f"record fork.commits (the port) or upstream.commits (the PR's commits) in {file}",
    )


def _unmerged(ref: str, co: Checkout, up: Upstream) -> str:
    merge = up.merge_commit
    assert merge is not None
    if co.commit(merge) is None:  # not in this checkout at all, so not in HEAD's history
        when = f" on {up.merged_on}" if up.merged_on else ""
        return f"merged upstream{when} as {merge}, which this checkout does not hold (nor {ref})"
    on_ref = co.is_ancestor(merge, co.commit(ref) or co.head)
    where = f"it is on {ref}: the next rebase brings it" if on_ref else f"nor of {ref}: fetch upstream"
    return f"merge commit {merge} is not an ancestor of HEAD ({where})"


def with_bases(
    state: ChangeState, ch: Change, by_pr: Mapping[int, str], states: Mapping[str, ChangeState]
) -> ChangeState:
    """Flag a change whose stacked-on change is not (wholly) in the fork, or is not tracked at all."""
    if ch.upstream is None or not ch.upstream.stacked_on:
        return state
    flags = list(state.flags)
    for pr in ch.upstream.stacked_on:
        base = by_pr.get(pr)
        if base is None:
            flags.append(f"stacked on #{pr}, which no change file tracks: its presence is not checked")
        elif states[base].state in WAITING:
            flags.append(f"stacked on #{pr}, which is {states[base].state} here")
    return replace(state, flags=tuple(flags))
