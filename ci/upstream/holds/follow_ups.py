"""A change's follow-ups (`upstream.follow_ups`: a later upstream fix of the same code) as one fork holds them. A fork
that carries the change but not a merged follow-up carries the bug the follow-up fixes: that is a flag on the change,
naming the follow-up, what it fixes and the commit that brings it. A follow-up is held (HELD) where its merge commit
is in the ref's history, or its patch or its subject is among the fork's own commits' (a cherry-pick whose conflict
was resolved keeps the subject); where the checkout lacks its merge commit, the flag says it could not be checked
(unless upstream's main there predates the follow-up: nothing was missed yet). This is the one rule: the follow-ups
offered for porting (ci.upstream.port.decision) are exactly those it lists missing."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from ci.stack.change import Change, FollowUp
from ci.upstream.scope import Scope
from ci.upstream.state import ChangeState

HELD = "its merge commit in the ref's history, or its patch or subject among the fork's own commits"


def ids(changes: Iterable[Change]) -> list[str]:
    """The merge commits of every merged follow-up: resolved and patch-id'd with the changes' own commits."""
    return [f.merge_commit for ch in changes if ch.upstream for f in ch.upstream.follow_ups if f.merge_commit]


def flag(
    scope: Scope,
    ch: Change,
    state: ChangeState,
    full: Mapping[str, str | None],
    patch_ids: Mapping[str, str],
    in_fork: Mapping[str, str],
    tip_date: str,
    titles: Mapping[str, str] = {},
    titled: Mapping[str, str] = {},
    undone: frozenset[str] = frozenset(),
) -> ChangeState:
    """`state` with a flag for each merged follow-up the fork lacks while holding the change (`undone`: commits the
    fork took back, ci.upstream.holds.reverts)."""
    if ch.upstream is None or not state.held:
        return state
    flags, missing = list(state.flags), []
    for f in ch.upstream.follow_ups:
        commit = full.get(f.merge_commit) if f.merge_commit else None
        if not f.merge_commit or (commit is None and tip_date and f.merged_on and tip_date < f.merged_on.isoformat()):
            continue  # not merged, or merged after upstream's main here: nothing was missed yet
        said = _said(scope, f, commit, patch_ids, in_fork, titles, titled, undone)
        if said:
            flags.append(said)
            missing.append(f.ref)
    return replace(state, flags=tuple(flags), follow_ups_missing=tuple(missing)) if missing else state


def _said(
    scope: Scope,
    f: FollowUp,
    commit: str | None,
    patch_ids: Mapping[str, str],
    in_fork: Mapping[str, str],
    titles: Mapping[str, str],
    titled: Mapping[str, str],
    undone: frozenset[str],
) -> str:
    """The flag for one follow-up ("" where the fork holds it)."""
    merged = f" (merged {f.merged_on})" if f.merged_on else ""
    if commit is None:
        return (
            f"follow-up {f.ref}{merged}, which fixes {f.what}, could not be checked: this checkout lacks its merge "
            f"commit {f.merge_commit} (fetch upstream)"
        )
    held = scope.co.is_ancestor(commit, scope.head) or titles.get(commit) in titled
    if (commit not in undone and held) or patch_ids.get(commit) in in_fork:
        return ""
    return (
        f"follow-up {f.ref}{merged} missing: the fork carries this change without the fix of {f.what} (port it: "
        f"git cherry-pick -x {f.merge_commit})"
    )
