"""Port readiness, decided once beside the presence classifier (ci.upstream.holds.classify) and shown by every verb that
asks (`ci fork`, `ci upstream`, `ci plan --fork`, `ci fork port`, the report through upstream.json): for each change
the fork lacks (absent, partially ported), and for each follow-up it lacks of a change it holds, whether upstream's
patch applies to the ref, and what stands in the way (ci.upstream.readiness says what each verdict means).

Everything is tried in a scratch index and object directory (ci.upstream.port.scratch): the checkout, its index, refs
and object store are left as they were."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from ci.common.tables import counted
from ci.stack.change import Change, FollowUp
from ci.stack.model import Stack
from ci.upstream.holds import follow_ups
from ci.upstream.port import apply, command_line, commits, prerequisites, stability, why
from ci.upstream.port.apply import Outcome
from ci.upstream.port.commits import Source
from ci.upstream.port.scratch import Scratch
from ci.upstream.port.why import Sides
from ci.upstream.readiness import PORTABLE, Conflict, Missing, Readiness, Stability, Stacked
from ci.upstream.scope import Scope
from ci.upstream.state import ChangeState, Snapshot

LACKING = ("absent", "partially ported")  # states whose change gets a port verdict


@dataclass(frozen=True, kw_only=True)
class Context:
    st: Stack
    scope: Scope
    sc: Scratch
    sides: Sides
    states: Mapping[str, ChangeState]
    full: Mapping[str, str | None]  # each id the stack names -> its full id here (None where absent)
    flags: tuple[str, ...] = ()  # the fork options of a port command


def assess(st: Stack, scope: Scope, snap: Snapshot) -> Snapshot:
    """`snap` with each change's port readiness, and its follow-ups', filled in."""
    changes = [st.changes[s.change] for s in snap.changes if s.change in st.changes]
    ids = [i for ch in changes if ch.upstream for i in _ids(ch)]
    states = {s.change: s for s in snap.changes}
    with Scratch(scope.co) as sc:
        ctx = Context(
            st=st,
            scope=scope,
            sc=sc,
            sides=Sides(scope, snap.undone),
            states=states,
            full=scope.co.resolve(ids),
            flags=command_line.fork_flags(st, scope),
        )
        ports: dict[str, Readiness] = {}
        for c in _stacked_first(st, [s.change for s in snap.changes if s.state in LACKING]):
            ports[c] = change(ctx, st.changes[c], states[c], ports)
        out = []
        for s in snap.changes:
            ch = st.changes.get(s.change)
            if ch is None or ch.upstream is None:
                out.append(s)
            elif s.change in ports:
                out.append(replace(s, port=ports[s.change]))
            elif s.held:
                merged = [f for f in ch.upstream.follow_ups if f.merge_commit]  # an unmerged one: nothing to port
                said = (follow_up(ctx, ch, f, s) for f in merged)
                out.append(replace(s, follow_up_ports=tuple(r for r in said if r is not None)))
            else:
                out.append(s)
    return replace(snap, changes=tuple(out))


def _stacked_first(st: Stack, lacking: list[str]) -> list[str]:
    """`lacking` ordered so that a change comes after the tracked changes it is stacked on (what a port of it
    ports first is known by then)."""
    by_pr = {c.upstream.pr: c.id for c in st.changes.values() if c.upstream}
    order: dict[str, None] = {}

    def visit(change: str, path: tuple[str, ...]) -> None:
        up = st.changes[change].upstream
        for pr in up.stacked_on if up else ():
            base = by_pr.get(pr)
            if base in lacking and base not in path:
                visit(base, (*path, change))
        order.setdefault(change, None)

    for c in lacking:
        if c in st.changes:
            visit(c, ())
    return list(order)


def _ids(ch: Change) -> list[str]:
    up = ch.upstream
    assert up is not None
    return [
        *([up.merge_commit] if up.merge_commit else []),
        *up.commits,
        *(f.merge_commit for f in up.follow_ups if f.merge_commit),
    ]


def change(ctx: Context, ch: Change, state: ChangeState, earlier: Mapping[str, Readiness]) -> Readiness:
    """`earlier`: the readiness of the changes already assessed (those it is stacked on among them)."""
    up = ch.upstream
    assert up is not None
    source = commits.of_change(ctx.scope.co, ch, state.missing, ctx.full)
    merge = ctx.full.get(up.merge_commit or "") or ""
    subject = next((u.subject for u in source.units if u.commit == merge), "")
    stable = stability.of_change(ctx.scope, up, merge, subject)
    by_pr = {c.upstream.pr: c.id for c in ctx.st.changes.values() if c.upstream}
    merges = {
        c.id: m for c in ctx.st.changes.values() if c.upstream and (m := ctx.full.get(c.upstream.merge_commit or ""))
    }
    on = why.stacked(ctx.sides, ch, ctx.states, by_pr, merges)
    return _tried(ctx, ch.id, source, stable, on, earlier, follow_up=False)


def follow_up(ctx: Context, ch: Change, f: FollowUp, state: ChangeState) -> Readiness | None:
    """A follow-up's port, where the fork lacks it by the one rule that lists it missing (ci.upstream.holds.follow_ups:
    `state.follow_ups_missing`); one the fork holds reads "in the fork", and one upstream's main here predates (its
    merge not in the checkout) is not listed: the follow-ups offered for porting are the ones listed missing."""
    source = commits.of_follow_up(ctx.scope.co, ch, f, ctx.full)
    merge = source.units[0].commit if source.units else ""
    stable = stability.of_follow_up(ctx.scope, f, merge, source.units[0].subject if source.units else "")
    if f.ref not in state.follow_ups_missing and not merge:
        return None
    if f.ref not in state.follow_ups_missing:
        return Readiness(
            pr=source.pr,
            change=ch.id,
            follow_up=True,
            verdict="in the fork",
            detail=f"{ctx.scope.ref} holds it ({follow_ups.HELD})",
            patch=(merge,) if merge else (),
            stability=stable,
        )
    return _tried(ctx, ch.id, source, stable, (), {}, follow_up=True)


def _tried(
    ctx: Context,
    change_id: str,
    source: Source,
    stable: Stability,
    on: tuple[Stacked, ...],
    earlier: Mapping[str, Readiness],
    *,
    follow_up: bool,
) -> Readiness:
    shell = Readiness(
        pr=source.pr,
        change=change_id,
        follow_up=follow_up,
        verdict="unknown",
        detail=source.none,
        stacked_on=on,
        stability=stable,
    )
    if not source.units:
        return replace(shell, command=f"fix: {source.fix}" if source.fix else "")
    scope = ctx.scope
    done = apply.attempt(ctx.sc, scope.head, source.units)
    patch = tuple(u.commit for u in source.units)
    shell = replace(
        shell, patch=patch, files=done.files, three_way=done.three_way, detail=done.detail, moved=done.moved
    )
    if done.verdict == "unknown":
        fix = f"fetch upstream's objects into it: git -C {scope.co.path} fetch {_source(scope)} main"
        return replace(shell, command=f"fix: {fix}" if done.stopped is not None else "")
    if done.verdict == "in the fork":
        return replace(shell, verdict="in the fork", detail=f"its vllm/ diff is already in {scope.ref} (it reverses)")
    n = len(done.files)
    what = f"upstream's vllm/ diff of {', '.join(c[:12] for c in patch)} ({counted(n, 'file')})"
    moved = f"; followed where the fork moved them: {_moves(done.moved)}" if done.moved else ""
    found: tuple[Conflict, ...] = ()
    missing: tuple[Missing, ...] = ()
    if done.verdict in PORTABLE:
        how = "as it is" if done.verdict == "clean" else f"by a three-way merge of {', '.join(done.three_way)}"
        detail = f"{what} applies to {scope.ref} {how}{moved}"
    elif done.verdict == "needs prerequisites":
        missing = _missing(ctx, done)
        detail = (
            f"{what} changes {counted(len(done.missing), 'file')} {scope.ref} lacks, added upstream after it left: "
            f"{', '.join(done.missing)}{moved}"
        )
    else:
        found = why.conflicts(ctx.sc, ctx.sides, done)
        hunks = sum(len(c.hunks) for c in found)
        clean = len(done.files) - len(found)
        detail = (
            f"{what}: a three-way merge onto {scope.ref} conflicts in {', '.join(c.file for c in found)} "
            f"({counted(hunks, 'hunk')}); {counted(clean, 'other file')} {'merges' if clean == 1 else 'merge'} "
            f"cleanly{moved}"
        )
    first = why.needs(ctx.sides, (), on, earlier)  # the PRs it is stacked on that the fork lacks
    shell = replace(shell, verdict=done.verdict, detail=detail, conflicts=found, missing=missing)
    if done.verdict in PORTABLE and not first:
        return replace(shell, command=command_line.port(ctx.flags, source.pr))
    chain, _ = prerequisites.close(ctx.sides, ctx.sc, source.units, first, f"#{source.pr}")
    after = chain.verdict if chain.prerequisites else ""
    first_them = bool(chain.prerequisites) and after in PORTABLE
    command = command_line.port(ctx.flags, source.pr, with_prerequisites=first_them)
    return replace(
        shell,
        prerequisites=chain.prerequisites,
        after_prerequisites=after,
        chain=chain.outcome,
        stopped_at=chain.stopped.commit if chain.stopped else "",
        stops=chain.stops,
        cut=chain.cut,
        command=command,
    )


def _missing(ctx: Context, done: Outcome) -> tuple[Missing, ...]:
    """The files the stopped commit changes that the fork lacks, each with the upstream commits that bring it."""
    unit = done.stopped
    assert unit is not None
    return ctx.sides.lacking(ctx.sc, unit, done.missing)


def _moves(moved: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(f"{old} as {new}" for old, new in moved)


def _source(scope: Scope) -> str:
    """Where upstream's objects come from: the remote upstream's main was found on, else its URL."""
    remote = (scope.upstream_ref or "").split("/", 1)[0]
    return remote if remote in scope.co.remotes() else "https://github.com/vllm-project/vllm.git"
