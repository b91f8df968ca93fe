"""From what git found for one change to its state, the line that says why, and the flags that say what to do."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from ci.stack.change import Change, Upstream
from ci.tables import folded
from ci.upstream.edited import Edited
from ci.upstream.scope import Scope
from ci.upstream.state import ChangeState, State, Upstreamed

WAITING: tuple[State, ...] = ("absent", "unknown", "partially ported")  # a base in one of these fails its stack


@dataclass(frozen=True, kw_only=True)
class Added:
    """The files a PR adds, as the fork's ref holds them."""

    held: tuple[str, ...]
    lacking: tuple[str, ...]
    by: tuple[str, ...]  # the fork's own commits that added the files held


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
    through_base: bool = False  # converged because the base release holds it
    merge: str = ""  # the full id of upstream's merge commit, where the checkout holds it
    by_upstream: tuple[str, str] | None = None  # (upstream's commit, the fork commit carrying its patch as it is)
    edited: Edited | None = None  # the fork commit carrying it with edits
    added: Added | None = None  # the files it adds, where nothing else of it could be compared
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
    scope: Scope,
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
        f"the patch-id recorded for {c} differs from the commit's own: record it again (ci fork --record)"
        for c in found.mismatched
    ]
    flags += [f"{c} has no patch (a merge or an empty commit): not compared" for c in found.patchless]
    what = "the PR's commits" if found.from_pr else "port"
    state: State
    fix = ""
    carried: tuple[str, ...] = tuple(dict.fromkeys(f for _, f in found.present))
    if found.converged_by:
        state, detail = "converged", found.converged_by
        carried = () if found.through_base else tuple(c for c in (found.merge,) if c)
        if found.present and not found.from_pr:
            flags.append(f"the port is still carried after convergence ({_pairs(found.present)}): drop it")
    elif found.by_upstream:
        state = "diverged" if touched else "ported"
        detail = f"{found.by_upstream[0]}'s patch present as {found.by_upstream[1][:12]}"
        carried = (found.by_upstream[1],)
    elif found.edited:
        as_is = found.edited.code_as_is
        state = ("diverged" if touched else "ported") if as_is else "ported, edited"
        state = "partially ported" if found.edited.partial else state
        detail, carried = found.edited.describe(), (found.edited.commit,)
    elif found.unchecked and not (found.from_pr and (up.patch_id or up.file_ids)):
        # (the PR's own commits alone missing, where upstream's merge patch and files were compared, tell nothing)
        state = "unknown"
        co = scope.co
        if found.from_pr:
            detail = f"the PR's commits are not in this checkout: {', '.join(found.unchecked)}"
            fix = f"fetch them: {co.command('fetch', f'https://github.com/{up.repo}.git', f'pull/{up.pr}/head')}"
        else:
            detail = f"port commits not in this checkout: {', '.join(found.unchecked)}"
            fix = (
                f"fetch a ref holding them into {co.path} ({co.command('fetch', 'REMOTE', 'BRANCH')}), or record their "
                "patch-ids once from a clone that has them: python -m ci fork --fork THERE --record"
            )
        if found.present:
            detail += f"; present: {_pairs(found.present)}"
        if co.shallow:
            fix = f"the checkout is shallow ({co.command('fetch', '--unshallow')}); or {fix}"
    elif found.added is not None and found.compared == 0:
        state, detail, carried = _by_files(scope, found.added)
    elif found.compared == 0:
        state, detail, fix = _nothing_to_compare(scope, file, ch, candidates)
    elif not found.missing:
        state = "diverged" if touched else "ported"
        detail = f"{what} present: {_pairs(found.present)}"
    elif found.present:
        state = "partially ported"
        detail = f"present: {_pairs(found.present)}; missing: {', '.join(found.missing)}"
    else:
        state = "absent"
        detail = f"no patch of {', '.join(found.missing)} is among the fork's own commits ({scope.own_label})"
        if up.merge_commit:
            detail = f"{_unmerged(scope, up)}; {detail}"
    if state in ("partially ported", "absent"):
        flags += [
            f"{c} is missing, but {f[:12]} has its subject with another patch (changed resolving a conflict?): "
            "if it carries the port, record it (stack/fork.yaml carries)"
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
        ref = scope.upstream_ref
        if found.merge_on_ref and ref:
            flags.append(f"merged upstream: converge, dropping the port at the next rebase onto {ref}")
        elif ref:
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
        carried_by=carried if state not in ("absent", "unknown") else (),
        merge=found.merge if state == "converged" else "",
    )


def _by_files(scope: Scope, added: Added) -> tuple[State, str, tuple[str, ...]]:
    """Nothing of the change to compare but the files it adds (a PR closed unmerged)."""
    if not added.held:
        return "absent", f"none of the files it adds is in {scope.ref}: {', '.join(added.lacking)}", ()
    by = f"added by {', '.join(c[:12] for c in added.by)}" if added.by else "in the base release"
    if added.lacking:
        return (
            "partially ported",
            f"{', '.join(added.held)} in {scope.ref} ({by}); missing: {', '.join(added.lacking)}",
            added.by,
        )
    return (
        "ported, edited",
        f"the files it adds are in {scope.ref} ({by}); no commit of the PR to compare them with",
        added.by,
    )


def _nothing_to_compare(
    scope: Scope, file: str, ch: Change, candidates: Mapping[int, tuple[str, str]]
) -> tuple[State, str, str]:
    """No patch to look for: the merge commit alone decides, where one is recorded."""
    up = ch.upstream
    assert up is not None
    if up.merge_commit:
        return "absent", _unmerged(scope, up), ""
    where = scope.upstream_ref or scope.ref
    if up.state == "merged":
        hit = candidates.get(up.pr)
        record = f"record upstream.merge_commit (the commit that merged #{up.pr}) in {file}"
        fix = f"{where} has {hit[0][:12]} {hit[1]!r}: if that merged #{up.pr}, {record}" if hit else record
        return "unknown", "merge commit not recorded, and no port commits to compare", fix
    return (
        "unknown",
        "nothing recorded to look for: no merge commit, PR commits or files it adds",
        f"record upstream.commits (the PR's commits) or upstream.adds (the files it adds) in {file}, or the fork's "
        "commits that carry it: python -m ci fork --record",
    )


def _unmerged(scope: Scope, up: Upstream) -> str:
    merge = up.merge_commit
    assert merge is not None
    co = scope.co
    when = f" on {up.merged_on}" if up.merged_on else ""
    if co.commit(merge) is None:  # not in this checkout at all, so not in the ref's history
        held = f" (nor {scope.upstream_ref})" if scope.upstream_ref else ""
        return f"merged upstream{when} as {merge}, which this checkout does not hold{held}"
    if scope.upstream is None:
        return f"merge commit {merge} is not an ancestor of {scope.ref}"
    on_ref = co.is_ancestor(merge, scope.upstream)
    ref = scope.upstream_ref
    where = f"it is on {ref}: the next rebase brings it" if on_ref else f"nor of {ref}: fetch upstream"
    return f"merge commit {merge} is not an ancestor of {scope.ref} ({where})"


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
