"""The prerequisite chain of a port, closed: the ordered upstream commits that make a change apply to the fork, as
the Linux stable process's "possible dependencies" and its maintainers' per-commit dependency maps name them, found
here by trying them.

It starts from what the change is known to need first (the PRs it is stacked on that the fork lacks), then applies
the chain and the change in a scratch index (ci.upstream.port.apply), oldest first. Where a commit stops it, what it
needs is added: for a file it changes that the fork lacks, the upstream commits that created and changed that file
since the fork left upstream (ci.upstream.port.patch_files); for a conflicting hunk, the upstream commits that touched
its lines (ci.upstream.port.blame); each only where the fork does not hold it already. Then it is tried again, until the
change applies, or a commit stops it with nothing more to add (a conflict with the fork's own edits, a file the fork
removed), or the chain would pass BOUND commits. The outcome is one line: "ports after 2 prerequisites (#47327, #46808):
all clean", "the chain stops at #47000: conflicts in vllm/ctx.py"."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ci.common.tables import counted
from ci.upstream.port import apply, commits, why
from ci.upstream.port.apply import Outcome, Step
from ci.upstream.port.commits import Unit
from ci.upstream.port.scratch import Scratch
from ci.upstream.port.why import Sides
from ci.upstream.readiness import Prerequisite

BOUND = 24  # prerequisites in one chain: past that, rebasing onto upstream is the shorter road, and it is said so
NAMED = 4  # prerequisites named in the outcome line; the rest are counted


@dataclass(frozen=True, kw_only=True)
class Chain:
    prerequisites: tuple[Prerequisite, ...]  # oldest first: what --with-prerequisites ports before the change
    verdict: str  # the change after them: clean, clean by three-way merge, conflicts, needs prerequisites, unknown
    outcome: str  # in one line
    stopped: Unit | None = None  # the commit the chain stops at
    stops: tuple[str, ...] = ()  # every commit of it that conflicts (or lacks files), in order: the first stops it
    cut: bool = False  # it would pass BOUND: the chain is cut at the last of `stops`, what follows it not found


def close(
    sides: Sides, sc: Scratch, units: Sequence[Unit], first: Iterable[Prerequisite], label: str
) -> tuple[Chain, Outcome]:
    """The chain that makes `units` (the change, `label`: "#48407") apply to the fork's ref, and the last attempt.

    Where a commit stops it with nothing more to add (a conflict with the fork's own lines), that is where the chain
    stops; the search goes on past it all the same, that commit's files taken as upstream has them (as a maintainer
    resolving it upstream's way would), so that the commits after it have their own prerequisites found: the
    chain is then whole, through the change, for a port by hand."""
    co, head = sides.scope.co, sides.scope.head
    own = {u.commit for u in units}
    chosen: dict[str, Prerequisite] = {p.commit: p for p in first if p.commit not in own}
    made: dict[str, Unit] = {}
    kept: list[tuple[str, str, Step]] = []  # (commit, the index file after it, its step): the prefix tried before
    stops: dict[str, tuple[Outcome, str]] = {}  # the commits that stop it, each with how and why, in order found
    while True:
        order = _ordered(sides, chosen)
        made.update(commits.units(co, [c for c in order if c not in made]))
        todo = [made[c] for c in order if c in made] + list(units)
        done = _attempt(sc, head, todo, kept, frozenset(stops))
        if done.verdict not in ("conflicts", "needs prerequisites") or done.stopped is None:
            if stops:
                return _stopped(chosen, order, done, label, stops), done
            return _settled(chosen, order, done, label), done
        stopped = done.stopped
        wanted, reason = _wanted(sides, sc, done)
        more = [p for p in wanted if p.commit not in chosen and p.commit not in own]
        if len(chosen) + len(more) > BOUND:
            past = f"it needs more than {counted(BOUND, 'prerequisite')} (next: {_named(more)})"
            stops.setdefault(stopped.commit, (done, past))
            return _stopped(chosen, order, done, label, stops, cut=True), done
        if more:
            chosen.update((p.commit, p) for p in more)
            continue
        stops[stopped.commit] = (done, reason)
        if stopped.commit in own:  # the change itself: nothing after it to find
            return _stopped(chosen, order, done, label, stops), done
        if len(stops) > BOUND:
            return _stopped(chosen, order, done, label, stops, cut=True), done


def _ordered(sides: Sides, chosen: dict[str, Prerequisite]) -> list[str]:
    """The chosen commits in upstream's order, oldest first (upstream's main is linear: its squash merges)."""
    if not chosen:
        return []
    out = sides.scope.co.git("log", "--no-walk=sorted", "--format=%H", *chosen, "--").split()
    return list(reversed(out))


def _attempt(
    sc: Scratch, head: str, todo: list[Unit], kept: list[tuple[str, str, Step]], force: frozenset[str]
) -> Outcome:
    """`todo` applied onto `head`, resuming after the longest prefix an earlier round applied the same way (each
    round adds commits in the middle of the order, rarely at its start); `force`: the commits taken past their
    conflicts."""
    same = 0
    while same < len(kept) and same < len(todo) and kept[same][0] == todo[same].commit:
        same += 1
    del kept[same:]
    if same:
        sc.restore(kept[-1][1])
    else:
        sc.read_tree(head)
    steps = [k[2] for k in kept]
    done = apply.resume(
        sc,
        todo[same:],
        done=steps,
        force=force,
        on_step=lambda step: kept.append((step.unit.commit, sc.save(f"after-{len(kept)}"), step)),
    )
    return done


def _wanted(sides: Sides, sc: Scratch, done: Outcome) -> tuple[list[Prerequisite], str]:
    """What the commit that stopped the attempt needs first and the fork does not hold (the commits that bring the
    files it lacks, and those that touched its conflicting lines), and why it stopped, in words."""
    stopped = done.stopped
    assert stopped is not None
    base = sides.base_with(stopped.parent)
    side = sides.at(base) if base else None
    if done.verdict == "needs prerequisites":
        if side is None:
            return [], f"it needs {', '.join(done.missing)}, which the fork lacks (it shares no history with upstream)"
        found = sides.lacking(sc, stopped, done.missing)
        reasons = []
        for m in found:
            if m.removed_by is not None:
                e = m.removed_by
                reasons.append(f"it changes {m.file}, which the fork removed in {e.commit[:12]} {e.subject!r}")
            elif not any(not p.held for p in m.commits):
                reasons.append(f"it changes {m.file}, which the fork lacks though it holds the commits that bring it")
        return [p for m in found for p in m.commits if not p.held], "; ".join(reasons)
    said = f"conflicts in {', '.join(dict.fromkeys(s.path for s in done.conflicted))}"
    return [p for p in why.touched(sc, sides, done) if not p.held], said


def _settled(chosen: dict[str, Prerequisite], order: list[str], done: Outcome, label: str) -> Chain:
    """The change applies after the chain (or is found in the fork, or cannot be tried)."""
    kept = {s.unit.commit for s in done.steps if s.how != "in the fork"}
    chain = tuple(chosen[c] for c in order if c in kept)
    if not chain:
        return Chain(prerequisites=(), verdict=done.verdict, outcome="")
    if done.verdict == "unknown":
        return Chain(prerequisites=chain, verdict="unknown", outcome=f"after {_named(chain)}: {done.detail}")
    merged = [s for s in done.steps if s.how == "clean by three-way merge"]
    how = "all clean" if not merged else f"all apply ({', '.join(_label(s.unit) for s in merged)} by a three-way merge)"
    return Chain(
        prerequisites=chain,
        verdict=done.verdict,
        outcome=f"ports after {counted(len(chain), 'prerequisite')} ({_named(chain)}): {how}",
    )


def _stopped(
    chosen: dict[str, Prerequisite],
    order: list[str],
    done: Outcome,
    label: str,
    stops: dict[str, tuple[Outcome, str]],
    cut: bool = False,
) -> Chain:
    """Where the chain stops first, and why, and the commits past it that conflict too; the whole chain still (the
    commits past the stop are needed too), or where the bound cut it."""
    first, (how, reason) = next(iter(stops.items()))
    stopped = how.stopped
    assert stopped is not None
    held = {s.unit.commit for s in done.steps if s.how == "in the fork"}
    chain = tuple(chosen[c] for c in order if c not in held)
    name = {c: _label_of(chosen[c]) if c in chosen else label for c in stops}
    more = [c for c in stops if c != first]
    last = list(stops)[-1]
    said = f"{label} itself: {reason}" if first not in chosen else f"the chain stops at {name[first]}: {reason}"
    if first not in chosen and chain:
        said = f"after {counted(len(chain), 'prerequisite')} ({_named(chain)}), {said}"
    plain = [c for c in more if not (cut and c == last)]
    if plain:
        verb = "conflicts" if len(plain) == 1 else "conflict"
        named = ", ".join(name[c] for c in plain)
        said += f"; past it, {counted(len(plain), 'more commit')} of it {verb} too ({named})"
    if cut:
        said += f"; cut at {name[last]}: {stops[last][1]}" if last != first else ""
    return Chain(prerequisites=chain, verdict=how.verdict, outcome=said, stopped=stopped, stops=tuple(stops), cut=cut)


def _named(chain: Sequence[Prerequisite]) -> str:
    named = [_label_of(p) for p in chain[:NAMED]]
    return ", ".join(named + (["…"] if len(chain) > NAMED else []))


def _label_of(p: Prerequisite) -> str:
    return f"#{p.pr}" if p.pr else p.commit[:12]


def _label(unit: Unit) -> str:
    pr = commits.pr_of(unit.subject)
    return f"#{pr}" if pr else unit.commit[:12]
