"""Every change of the stack against one fork checkout, from git alone (ci.upstream.state says what each state means).

The fork's own commits are REF..HEAD (REF: `--upstream-ref`, by default the main branch of the remote whose URL is
upstream's repository; never the fork's own origin). One
`git log -p | git patch-id --stable` stream gives their patch-ids, a second the port commits'; a port is present
where a patch-id matches, so a cherry-pick or a rebase still matches. A port commit the checkout lacks (a rebase
dropped it, and no ref or reflog keeps it) is compared by the patch-id its change file records (`--record`);
with neither, the change is "unknown", never "absent".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ci.stack.change import Change
from ci.stack.model import Stack
from ci.upstream import edited, history
from ci.upstream.checkout import Checkout
from ci.upstream.edited import Edited
from ci.upstream.judge import Found, judge, with_bases
from ci.upstream.state import Snapshot, Upstreamed


@dataclass(frozen=True, kw_only=True)
class Facts:
    """What git says about the checkout, shared by every change."""

    co: Checkout
    ref: str
    tip: str  # the commit `ref` names
    full: dict[str, str | None]  # each commit id the stack records -> its full id here, or None
    in_fork: dict[str, str]  # patch-id -> a fork commit (REF..HEAD) with that patch
    source_ids: dict[str, str]  # full id of each recorded port (or PR) commit -> its patch-id
    titled: dict[str, str]  # subject -> a fork commit with it (to name a port commit whose patch changed)
    source_titles: dict[str, str]  # full id of each recorded port (or PR) commit -> its subject
    found: dict[str, Found] = field(default_factory=dict)


def survey(st: Stack, co: Checkout, upstream_ref: str | None = None) -> Snapshot:
    ref, tip = history.upstream_tip(co, st, upstream_ref)
    base = history.require_vllm(co, st, ref, tip)
    changes = list(st.changes.values())
    full = co.resolve(i for c in changes for i in _ids(c))
    fork_ids = co.patch_ids(f"{tip}..{co.head}")
    in_fork: dict[str, str] = {}
    for commit, patch_id in fork_ids.items():
        in_fork.setdefault(patch_id, commit)
    sources = sorted({c for ch in changes for i in _sources(ch) if (c := full.get(i))})
    upstreams = sorted({c for ch in changes for i in _upstream_patches(ch) if (c := full.get(i))})
    titled = {subject: commit for commit, subject in reversed(co.titles(f"{tip}..{co.head}").items())}
    facts = Facts(
        co=co,
        ref=ref,
        tip=tip,
        full=full,
        in_fork=in_fork,
        source_ids=co.patch_ids(*sorted({*sources, *upstreams}), walk=False),
        titled=titled,
        source_titles=co.titles(*sorted({*sources, *upstreams}), walk=False),
    )
    for ch in changes:
        facts.found[ch.id] = _found(facts, ch)
    touched = _divergence(facts, changes)
    candidates = _merge_candidates(co, tip, changes)
    tip_date = co.date(tip)
    states = [
        history.missing_merge(
            st,
            co,
            ref,
            tip_date,
            ch,
            full,
            judge(ref, co, _file(st, ch.id), ch, facts.found[ch.id], touched.get(ch.id, ()), candidates),
        )
        for ch in changes
    ]
    by_id = {s.change: s for s in states}
    by_pr = {ch.upstream.pr: ch.id for ch in changes if ch.upstream}
    states = [with_bases(s, ch, by_pr, by_id) for s, ch in zip(states, changes, strict=True)]
    return Snapshot(
        fork=str(co.path),
        head=co.head,
        upstream_ref=ref,
        upstream=tip,
        merge_base=base,
        shallow=co.shallow,
        fork_commits=len(fork_ids),
        changes=tuple(states),
    )


def _file(st: Stack, change: str) -> str:
    """The change file as the user named the stack (stack/changes/48407.yaml), for a fix line."""
    path = st.root / "changes" / f"{change}.yaml"
    return str(path if path.is_file() else st.root / "changes")


def _ids(ch: Change) -> list[str]:
    up = ch.upstream
    return [*([up.merge_commit] if up and up.merge_commit else []), *(up.commits if up else ()), *ch.fork.commits]


def _upstream_patches(ch: Change) -> tuple[str, ...]:
    """Upstream's own commits whose patch a fork may carry as it is: the merge (a squash) and the PR's commits."""
    up = ch.upstream
    return ((up.merge_commit,) if up.merge_commit else ()) + up.commits if up else ()


def _by_upstream(facts: Facts, ch: Change) -> tuple[str, str] | None:
    """(what, fork commit): a fork commit carrying upstream's own patch, the merge's (from the checkout, else the
    recorded upstream.patch_id) or a PR commit's."""
    up = ch.upstream
    assert up is not None
    for i in _upstream_patches(ch):
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
    checkout, else the recorded upstream.file_ids) and the port commits in the checkout."""
    up = ch.upstream
    assert up is not None
    co = facts.co
    sources: dict[str, dict[str, str]] = {}
    subjects: dict[str, str] = {}
    named = ((up.merge_commit,) if up.merge_commit else ()) + ch.fork.commits
    in_checkout = {i: c for i in named if (c := facts.full.get(i))}
    ids = co.file_ids(in_checkout.values())
    if up.merge_commit:
        label = f"upstream's merge commit {up.merge_commit}"
        merge = in_checkout.get(up.merge_commit)
        sources[label] = ids.get(merge, {}) if merge else dict(up.file_ids)
        subjects[label] = facts.source_titles.get(merge or "", f"{up.title} (#{up.pr})")
    for port in ch.fork.commits:
        if commit := in_checkout.get(port):
            sources[f"port commit {port}"] = ids.get(commit, {})
            subjects[f"port commit {port}"] = facts.source_titles.get(commit, "")
    return edited.find(co, facts.tip, co.head, {k: v for k, v in sources.items() if v}, subjects)


def _sources(ch: Change) -> tuple[str, ...]:
    """The commits whose patches make the change: the fork's port commits, else the upstream PR's own."""
    return ch.fork.commits or (ch.upstream.commits if ch.upstream else ())


def _found(facts: Facts, ch: Change) -> Found:
    up = ch.upstream
    if up is None:
        return Found()
    present, missing, unchecked, patchless, by_record, mismatched, retitled = [], [], [], [], [], [], []
    for s in _sources(ch):
        commit = facts.full.get(s)
        patch_id = facts.source_ids.get(commit) if commit else None
        recorded = ch.fork.patch_ids.get(s)
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
        elif commit and facts.co.is_ancestor(commit, facts.co.head):  # reached by HEAD through REF itself
            present.append((s, commit))
        else:
            missing.append(s)
            if commit and (twin := facts.titled.get(facts.source_titles.get(commit, ""))):
                retitled.append((s, twin))
    co, head = facts.co, facts.co.head
    converged_by = ""
    if up.merge_commit:
        merge = facts.full[up.merge_commit]
        if merge and co.is_ancestor(merge, head):
            converged_by = f"merge commit {up.merge_commit} is an ancestor of HEAD"
    elif up.commits and all((c := facts.full[x]) and co.is_ancestor(c, head) for x in up.commits):
        converged_by = "every commit of the PR is an ancestor of HEAD (merge commit not recorded)"
    by_upstream = None if converged_by or present else _by_upstream(facts, ch)
    carried = None if converged_by or present or by_upstream else _edited(facts, ch)
    merge = facts.full.get(up.merge_commit) if up.merge_commit else None
    return Found(
        from_pr=not ch.fork.commits,
        present=tuple(present),
        missing=tuple(missing),
        unchecked=tuple(unchecked),
        patchless=tuple(patchless),
        by_record=tuple(by_record),
        mismatched=tuple(mismatched),
        same_subject=tuple(retitled),
        converged_by=converged_by,
        by_upstream=by_upstream,
        edited=carried,
        merge_on_ref=bool(merge and co.is_ancestor(merge, facts.tip)),
    )


def _divergence(facts: Facts, changes: list[Change]) -> dict[str, tuple[Upstreamed, ...]]:
    """Per change with a port present: the upstream commits after each port commit's base (its merge base with the
    upstream ref) that changed the same files, the change's own upstream commits (its PR's, its merge) left out.
    One process for the files, one per distinct base for upstream."""
    co = facts.co
    carried = sorted({f for found in facts.found.values() for _, f in found.present})
    files = co.files(carried)
    bases = {f: co.merge_base(f, facts.tip) or "" for f in carried}
    touches = {}
    for base in sorted(set(bases.values()) - {""}):
        paths = {p for f in carried if bases[f] == base for p in files.get(f, ())}
        touches[base] = co.touching(base, facts.tip, paths)
    out: dict[str, tuple[Upstreamed, ...]] = {}
    for ch in changes:
        found, own = facts.found[ch.id], {facts.full.get(i) for i in _ids(ch)}
        hits: dict[str, tuple[str, set[str]]] = {}
        for _, f in found.present:
            mine = set(files.get(f, ()))
            for t in touches.get(bases[f], ()):
                if t.commit not in own and (common := mine & set(t.files)):
                    hits.setdefault(t.commit, (t.subject, set()))[1].update(common)
        if hits:
            out[ch.id] = tuple(Upstreamed(commit=c, subject=s, files=tuple(sorted(fs))) for c, (s, fs) in hits.items())
    return out


def _merge_candidates(co: Checkout, tip: str, changes: list[Change]) -> dict[int, tuple[str, str]]:
    """For a PR recorded as merged without its merge commit: the newest upstream commit whose subject ends in
    "(#<pr>)", as upstream's squash merges are titled; offered in the fix line, never taken as the answer."""
    prs = [
        ch.upstream.pr
        for ch in changes
        if ch.upstream and ch.upstream.state == "merged" and not ch.upstream.merge_commit
    ]
    found: dict[int, tuple[str, str]] = {}
    for commit, subject in co.subjects(tip, [f"(#{pr})" for pr in prs]):
        for pr in prs:
            if subject.rstrip().endswith(f"(#{pr})"):
                found.setdefault(pr, (commit, subject))
    return found
