"""One change's commits looked for in a fork: upstream's merge in the ref's history or in the base release, the
patches of the commits that make it (those the fork records carrying it, else the PR's own, else upstream's merge)
among the fork's own commits, its files edited, or the files it adds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ci.stack.change import Change, Upstream
from ci.stack.model import Carried
from ci.upstream import edited
from ci.upstream.checkout import Checkout
from ci.upstream.edited import Edited
from ci.upstream.judge import Added, Found
from ci.upstream.scope import Scope


@dataclass(frozen=True, kw_only=True)
class Facts:
    """What git says about the fork, shared by every change."""

    scope: Scope
    full: dict[str, str | None]  # each commit id the stack or the fork's records name -> its full id here, or None
    in_fork: dict[str, str]  # patch-id -> a fork commit (the fork's own) with that patch
    source_ids: dict[str, str]  # full id of each recorded port (or PR, or merge) commit -> its patch-id
    titled: dict[str, str]  # subject -> a fork commit with it (to name a port commit whose patch changed)
    source_titles: dict[str, str]  # full id of each recorded port (or PR, or merge) commit -> its subject
    undone: frozenset[str] = frozenset()  # commits whose patch the fork took back (ci.upstream.reverts)

    @property
    def co(self) -> Checkout:
        return self.scope.co


def record_of(scope: Scope, ch: Change) -> Carried | None:
    return scope.records.get(ch.id)


def ids(scope: Scope, ch: Change) -> list[str]:
    """Every commit id the stack and the fork's records name for `ch`."""
    up, rec = ch.upstream, record_of(scope, ch)
    return [
        *([up.merge_commit] if up and up.merge_commit else []),
        *(up.commits if up else ()),
        *(rec.commits if rec else ()),
    ]


def upstream_patches(ch: Change) -> tuple[str, ...]:
    """Upstream's own commits whose patch a fork may carry as it is: the merge (a squash) and the PR's commits."""
    up = ch.upstream
    return ((up.merge_commit,) if up.merge_commit else ()) + up.commits if up else ()


def sources(scope: Scope, ch: Change) -> tuple[str, ...]:
    """The commits whose patches make the change: those the fork records carrying it, else the PR's own."""
    rec = record_of(scope, ch)
    return rec.commits if rec else (ch.upstream.commits if ch.upstream else ())


def find(facts: Facts, ch: Change) -> Found:
    up = ch.upstream
    if up is None:
        return Found()
    scope, co = facts.scope, facts.co
    rec = record_of(scope, ch)
    recorded_ids: Mapping[str, str] = rec.patch_ids if rec else {}
    present, missing, unchecked, patchless, by_record, mismatched, retitled = [], [], [], [], [], [], []
    for s in sources(scope, ch):
        commit = facts.full.get(s)
        patch_id = facts.source_ids.get(commit) if commit else None
        recorded = recorded_ids.get(s)
        if commit and recorded and patch_id and recorded != patch_id:
            mismatched.append(s)
        if commit is None:
            if recorded is None:
                unchecked.append(s)
                continue
            patch_id = recorded
            by_record.append(s)
        if patch_id is None:
            patchless.append(s)
        elif patch_id in facts.in_fork:
            present.append((s, facts.in_fork[patch_id]))
        elif commit and commit not in facts.undone and co.is_ancestor(commit, scope.head):  # through history
            present.append((s, commit))
        else:
            missing.append(s)
            if commit and (twin := facts.titled.get(facts.source_titles.get(commit, ""))):
                retitled.append((s, twin))
    merge = facts.full.get(up.merge_commit) if up.merge_commit else None
    converged_by, through_base = _converged(facts, up, merge)
    anything = bool(converged_by or present)
    by_upstream = None if anything else _by_upstream(facts, ch)
    carried = None if anything or by_upstream else _edited(facts, ch)
    added = None if anything or by_upstream or carried or rec else _added(scope, up)
    return Found(
        from_pr=rec is None,
        present=tuple(present),
        missing=tuple(missing),
        unchecked=tuple(unchecked),
        patchless=tuple(patchless),
        by_record=tuple(by_record),
        mismatched=tuple(mismatched),
        same_subject=tuple(retitled),
        converged_by=converged_by,
        through_base=through_base,
        merge=merge or "",
        by_upstream=by_upstream,
        edited=carried,
        added=added,
        merge_on_ref=bool(merge and scope.upstream and co.is_ancestor(merge, scope.upstream)),
    )


def _converged(facts: Facts, up: Upstream, merge: str | None) -> tuple[str, bool]:
    """Why the change is converged ("" where it is not), and whether the base release is what holds it."""
    scope, co = facts.scope, facts.co
    base = scope.base
    if merge and merge not in facts.undone and co.is_ancestor(merge, scope.head):
        if base and co.is_ancestor(merge, base.commit):
            return f"merge commit {up.merge_commit} is in the base release {base.ref} (vLLM {base.version})", True
        return f"merge commit {up.merge_commit} is an ancestor of {scope.ref}", False
    if (
        not up.merge_commit
        and up.commits
        and all((c := facts.full[x]) and co.is_ancestor(c, scope.head) for x in up.commits)
    ):
        return f"every commit of the PR is an ancestor of {scope.ref} (merge commit not recorded)", False
    if up.state == "merged" and up.first_release and base and _release(base.version) >= _release(up.first_release):
        how = (
            f"upstream's merge {up.merge_commit} is not in its history here (a release line's cherry-pick)"
            if merge
            else "the checkout does not hold upstream's merge commit"
        )
        return (
            f"the base release vLLM {base.version} holds it (first released in {up.first_release}); {how}",
            True,
        )
    return "", False


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.replace(".post", ".").split("."))


def _by_upstream(facts: Facts, ch: Change) -> tuple[str, str] | None:
    """(what, fork commit): a fork commit carrying upstream's own patch, the merge's (from the checkout, else the
    recorded upstream.patch_id) or a PR commit's."""
    up = ch.upstream
    assert up is not None
    for i in upstream_patches(ch):
        commit = facts.full.get(i)
        patch_id = facts.source_ids.get(commit) if commit else None
        if patch_id is None and i == up.merge_commit:
            patch_id = up.patch_id
        if patch_id and patch_id in facts.in_fork:
            what = "merge commit" if i == up.merge_commit else "PR commit"
            return f"upstream's {what} {i}", facts.in_fork[patch_id]
    return None


def _edited(facts: Facts, ch: Change) -> Edited | None:
    """The fork commit carrying the change with edits, compared file by file with the merge commit (from the
    checkout, else the recorded upstream.file_ids) and the recorded port commits in the checkout."""
    up = ch.upstream
    assert up is not None
    co, scope = facts.co, facts.scope
    rec = record_of(scope, ch)
    found: dict[str, dict[str, str]] = {}
    subjects: dict[str, str] = {}
    named = ((up.merge_commit,) if up.merge_commit else ()) + (rec.commits if rec else ())
    in_checkout = {i: c for i in named if (c := facts.full.get(i))}
    file_ids = co.file_ids(in_checkout.values())
    if up.merge_commit:
        label = f"upstream's merge commit {up.merge_commit}"
        merge = in_checkout.get(up.merge_commit)
        found[label] = file_ids.get(merge, {}) if merge else dict(up.file_ids)
        subjects[label] = facts.source_titles.get(merge or "", f"{up.title} (#{up.pr})")
    for port in rec.commits if rec else ():
        if commit := in_checkout.get(port):
            found[f"port commit {port}"] = file_ids.get(commit, {})
            subjects[f"port commit {port}"] = facts.source_titles.get(commit, "")
    return edited.find(co, scope.own, {k: v for k, v in found.items() if v}, subjects, facts.undone)


def _added(scope: Scope, up: Upstream) -> Added | None:
    """The files the PR adds, where no commit of it can be compared: which the ref's tree holds, and which of the
    fork's own commits added them; None where the change names none."""
    if not up.adds:
        return None
    held = tuple(p for p in up.adds if scope.co.has_path(scope.head, p))
    by = scope.co.adding(scope.own, held)
    return Added(held=held, lacking=tuple(p for p in up.adds if p not in held), by=tuple(dict.fromkeys(by.values())))
