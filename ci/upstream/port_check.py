"""Port readiness, decided once beside the presence classifier (ci.upstream.classify) and shown by every verb that
asks (`ci fork`, `ci upstream`, `ci plan --fork`, `ci fork port`, the report through upstream.json): for each change
the fork lacks (absent, partially ported), and for each follow-up it lacks of a change it holds, whether upstream's
patch applies to the ref, and what stands in the way (ci.upstream.readiness says what each verdict means).

Everything is tried in a scratch index and object directory (ci.upstream.scratch): the checkout, its index, refs and
object store are left as they were."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from ci.stack.change import Change, FollowUp
from ci.stack.model import Stack
from ci.tables import counted
from ci.upstream import port_apply, port_command, port_source, port_why, stability
from ci.upstream.port_source import Source, Unit
from ci.upstream.port_why import Sides
from ci.upstream.readiness import PORTABLE, Prerequisite, Readiness, Stability, Stacked
from ci.upstream.scope import Scope
from ci.upstream.scratch import Scratch
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
        ctx = Context(st=st, scope=scope, sc=sc, sides=Sides(scope, snap.undone), states=states,
                      full=scope.co.resolve(ids), flags=port_command.fork_flags(st, scope))  # fmt: skip
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
                out.append(replace(s, follow_up_ports=tuple(follow_up(ctx, ch, f) for f in merged)))
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
    return [*([up.merge_commit] if up.merge_commit else []), *up.commits,
            *(f.merge_commit for f in up.follow_ups if f.merge_commit)]  # fmt: skip


def change(ctx: Context, ch: Change, state: ChangeState, earlier: Mapping[str, Readiness]) -> Readiness:
    """`earlier`: the readiness of the changes already assessed (those it is stacked on among them)."""
    up = ch.upstream
    assert up is not None
    source = port_source.of_change(ctx.scope.co, ch, state.missing, ctx.full)
    merge = ctx.full.get(up.merge_commit or "") or ""
    subject = next((u.subject for u in source.units if u.commit == merge), "")
    stable = stability.of_change(ctx.scope, up, merge, subject)
    by_pr = {c.upstream.pr: c.id for c in ctx.st.changes.values() if c.upstream}
    merges = {
        c.id: m for c in ctx.st.changes.values() if c.upstream and (m := ctx.full.get(c.upstream.merge_commit or ""))
    }
    on = port_why.stacked(ctx.sides, ch, ctx.states, by_pr, merges)
    return _tried(ctx, ch.id, source, stable, on, earlier, follow_up=False)


def follow_up(ctx: Context, ch: Change, f: FollowUp) -> Readiness:
    source = port_source.of_follow_up(ctx.scope.co, ch, f, ctx.full)
    merge = source.units[0].commit if source.units else ""
    stable = stability.of_follow_up(ctx.scope, f, merge, source.units[0].subject if source.units else "")
    if merge and (held := _held(ctx, source.units[0])):
        return Readiness(pr=source.pr, change=ch.id, follow_up=True, verdict="in the fork", detail=held,
                         patch=(merge,), stability=stable)  # fmt: skip
    return _tried(ctx, ch.id, source, stable, (), {}, follow_up=True)


def _held(ctx: Context, unit: Unit) -> str:
    """Why the fork holds an upstream commit ("" where nothing says so): in the ref's history, or a fork commit
    since they parted with its subject, its cherry-pick line or its patch."""
    scope = ctx.scope
    if unit.commit not in ctx.sides.undone and scope.co.is_ancestor(unit.commit, scope.head):
        return f"upstream's merge {unit.commit[:12]} is in the history of {scope.ref}"
    base = ctx.sides.base_with(unit.commit)
    if not base:
        return ""
    side = ctx.sides.at(base)
    if (
        unit.subject in side.subjects
        or unit.commit in side.picked
        or scope.co.patch_ids(unit.commit, walk=False).get(unit.commit) in side.patch_ids
    ):
        return f"a commit of {scope.ref} carries upstream's {unit.commit[:12]} (its subject, patch or cherry-pick line)"
    return ""


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
    shell = Readiness(pr=source.pr, change=change_id, follow_up=follow_up, verdict="unknown", detail=source.none,
                      stacked_on=on, stability=stable)  # fmt: skip
    if not source.units:
        return replace(shell, command=f"fix: {source.fix}" if source.fix else "")
    scope = ctx.scope
    done = port_apply.attempt(ctx.sc, scope.head, source.units)
    patch = tuple(u.commit for u in source.units)
    shell = replace(shell, patch=patch, files=done.files, three_way=done.three_way, detail=done.detail)
    if done.verdict == "unknown":
        return shell
    if done.verdict == "in the fork":
        return replace(shell, verdict="in the fork", detail=f"its vllm/ diff is already in {scope.ref} (it reverses)")
    n = len(done.files)
    what = f"upstream's vllm/ diff of {', '.join(c[:12] for c in patch)} ({counted(n, 'file')})"
    if done.verdict in PORTABLE:
        how = "as it is" if done.verdict == "clean" else f"by a three-way merge of {', '.join(done.three_way)}"
        needs = port_why.needs(ctx.sides, (), on, earlier)
        after = _after(ctx, needs, source.units) if needs else ""
        made = replace(shell, verdict=done.verdict, detail=f"{what} applies to {scope.ref} {how}",
                       prerequisites=needs, after_prerequisites=after)  # fmt: skip
        return replace(made, command=port_command.of(ctx.flags, made))
    found = port_why.conflicts(ctx.sc, ctx.sides, done)
    needs = port_why.needs(ctx.sides, found, on, earlier)
    hunks = sum(len(c.hunks) for c in found)
    clean = len(done.files) - len(found)
    detail = (
        f"{what}: a three-way merge onto {scope.ref} conflicts in {', '.join(c.file for c in found)} "
        f"({counted(hunks, 'hunk')}); {counted(clean, 'other file')} merge cleanly"
    )
    after = _after(ctx, needs, source.units) if needs else ""
    made = replace(shell, verdict="conflicts", detail=detail, conflicts=found, prerequisites=needs,
                   after_prerequisites=after)  # fmt: skip
    return replace(made, command=port_command.of(ctx.flags, made))


def _after(ctx: Context, needs: tuple[Prerequisite, ...], units: tuple[Unit, ...]) -> str:
    """The verdict with the prerequisites ported first, each in turn."""
    first = port_source.units(ctx.scope.co, [p.commit for p in needs])
    done = port_apply.attempt(ctx.sc, ctx.scope.head, [*(first[p.commit] for p in needs if p.commit in first), *units])
    if done.verdict == "conflicts" and done.stopped is not None and done.stopped not in units:
        return f"conflicts: prerequisite {done.stopped.commit[:12]} does not apply"
    return done.verdict
