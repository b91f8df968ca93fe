"""Every change of the stack in one fork at one ref, from git alone: the one answer to "is change X in this fork, and
by which commits" that `ci upstream`, `ci fork`, the bundle, `--without`, the plan and the pipeline all ask
(ci.upstream.state says what each state means).

The fork's own commits are the ref's, less what upstream's main and the base release reach (`Scope.own`). One
`git log -p | git patch-id --stable` stream gives their patch-ids, a second those of the commits that make each
change (the fork's records, the PR's own, upstream's merge); a change is present where a patch-id matches, so a
cherry-pick or a rebase still matches. A recorded commit the checkout lacks (a rebase dropped it, and no ref or
reflog keeps it) is compared by the patch-id the fork records; with neither, the change is "unknown", never
"absent". A change the base release holds (upstream's merge in its history, or its first release at or below the
base's) is converged through the base.
"""

from __future__ import annotations

from collections.abc import Sequence

from ci.stack.change import Change
from ci.stack.model import Stack
from ci.upstream import follow_ups, found, history, reverts
from ci.upstream.found import Facts
from ci.upstream.judge import judge, with_bases
from ci.upstream.scope import Scope
from ci.upstream.state import Snapshot, Upstreamed


def survey(st: Stack, scope: Scope) -> Snapshot:
    co = scope.co
    changes = list(st.changes.values())
    full = co.resolve([*(i for c in changes for i in found.ids(scope, c)), *follow_ups.ids(changes)])
    fork_ids = co.patch_ids(*scope.own)
    sources = sorted({c for ch in changes for i in found.sources(scope, ch) if (c := full.get(i))})
    upstreams = sorted({c for ch in changes for i in found.upstream_patches(ch) if (c := full.get(i))})
    upstreams += sorted({c for i in follow_ups.ids(changes) if (c := full.get(i))} - set(upstreams))
    source_ids = co.patch_ids(*sorted({*sources, *upstreams}), walk=False)
    gone = reverts.undone(co, scope.head, scope.own, fork_ids, source_ids)  # what the fork took back
    in_fork: dict[str, str] = {}
    for commit, patch_id in fork_ids.items():
        if commit not in gone.commits:
            in_fork.setdefault(patch_id, commit)
    titled = {subject: commit for commit, subject in reversed(co.titles(*scope.own).items())}
    facts = Facts(
        scope=scope,
        full=full,
        in_fork=in_fork,
        source_ids=source_ids,
        titled=titled,
        source_titles=co.titles(*sorted({*sources, *upstreams}), walk=False),
        undone=gone.commits,
    )
    seen = {ch.id: found.find(facts, ch) for ch in changes}
    touched = _divergence(facts, changes, seen)
    candidates = _merge_candidates(scope, changes)
    tip_date = co.date(scope.upstream) if scope.upstream else ""
    states = []
    for ch in changes:
        state = judge(scope, _file(st, ch.id), ch, seen[ch.id], touched.get(ch.id, ()), candidates)
        if scope.upstream_ref and state.state != "converged":
            state = history.missing_merge(st, co, scope.upstream_ref, tip_date, ch, full, state)
        states.append(state)
    by_id = {s.change: s for s in states}
    by_pr = {ch.upstream.pr: ch.id for ch in changes if ch.upstream}
    states = [with_bases(s, ch, by_pr, by_id) for s, ch in zip(states, changes, strict=True)]
    states = [
        follow_ups.flag(
            scope, ch, s, full, facts.source_ids, in_fork, tip_date, facts.source_titles, titled, gone.commits
        )
        for s, ch in zip(states, changes, strict=True)
    ]
    base = scope.base
    return Snapshot(
        fork=str(co.path),
        head=scope.head,
        upstream_ref=scope.upstream_ref or "",
        upstream=scope.upstream or "",
        merge_base=scope.left.commit if scope.left else "",
        shallow=co.shallow,
        fork_commits=len(fork_ids),
        changes=tuple(states),
        name=scope.name,
        ref=scope.ref,
        own=scope.own_label,
        base_version=base.version if base else "",
        base_ref=base.ref if base else "",
        base=base.commit if base else "",
        base_how=base.how if base else "",
        base_unknown="" if base else f"{scope.base_problem} (fix: {scope.base_fix})",
        left_date=scope.left.date if scope.left else "",
        options=scope.options,
        undone=gone.commits,
    )


def _file(st: Stack, change: str) -> str:
    """The change file as the user named the stack (stack/changes/48407.yaml), for a fix line."""
    path = st.root / "changes" / f"{change}.yaml"
    return str(path if path.is_file() else st.root / "changes")


def _divergence(
    facts: Facts, changes: Sequence[Change], seen: dict[str, found.Found]
) -> dict[str, tuple[Upstreamed, ...]]:
    """Per change with a port present: the upstream commits after each port commit's base (its merge base with the
    upstream ref) that changed the same files, the change's own upstream commits (its PR's, its merge) left out.
    One process for the files, one per distinct base for upstream. Nothing without an upstream ref."""
    co, tip = facts.co, facts.scope.upstream
    if not tip:
        return {}
    carried = sorted({f for fd in seen.values() for _, f in fd.present})
    files = co.files(carried)
    bases = {f: co.merge_base(f, tip) or "" for f in carried}
    touches = {}
    for base in sorted(set(bases.values()) - {""}):
        paths = {p for f in carried if bases[f] == base for p in files.get(f, ())}
        touches[base] = co.touching((f"{base}..{tip}",), paths)
    out: dict[str, tuple[Upstreamed, ...]] = {}
    for ch in changes:
        own = {facts.full.get(i) for i in found.ids(facts.scope, ch)}
        hits: dict[str, tuple[str, set[str]]] = {}
        for _, f in seen[ch.id].present:
            mine = set(files.get(f, ()))
            for t in touches.get(bases[f], ()):
                if t.commit not in own and (common := mine & set(t.files)):
                    hits.setdefault(t.commit, (t.subject, set()))[1].update(common)
        if hits:
            out[ch.id] = tuple(Upstreamed(commit=c, subject=s, files=tuple(sorted(fs))) for c, (s, fs) in hits.items())
    return out


def _merge_candidates(scope: Scope, changes: Sequence[Change]) -> dict[int, tuple[str, str]]:
    """For a PR recorded as merged without its merge commit: the newest upstream commit whose subject ends in
    "(#<pr>)", as upstream's squash merges are titled; offered in the fix line, never taken as the answer."""
    prs = [
        ch.upstream.pr
        for ch in changes
        if ch.upstream and ch.upstream.state == "merged" and not ch.upstream.merge_commit
    ]
    hits: dict[int, tuple[str, str]] = {}
    for commit, subject in scope.co.subjects(scope.upstream or scope.head, [f"(#{pr})" for pr in prs]):
        for pr in prs:
            if subject.rstrip().endswith(f"(#{pr})"):
                hits.setdefault(pr, (commit, subject))
    return hits
