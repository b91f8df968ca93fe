"""A port tried before it is made (`ci main --try-port X`, `ci pipeline --try-ports`): the change the fork lacks, with
its prerequisite chain where it needs one, ported onto the fork's ref on a scratch ref of stackgate's own
(`refs/stackgate/try-port/X-<pid>`: never a branch, so no user's branch, index or work tree is touched), pinned
(ci.upstream.port.make: the same fork commit and upstream commits give the same commit ids on every machine), then
read as `ci fork` reads it there, built, judged by the change's rows, and removed, unless the user keeps it as a branch
of their own.

A change that does not port cleanly (a conflict in it or in its chain, a file no commit brings, a chain past its
bound) is not tried: its readiness and the fix are said, before anything is built."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace

from ci.common.errors import UsageError
from ci.common.escape import one_line
from ci.common.tables import counted
from ci.fork import port, source
from ci.stack.model import Stack
from ci.stack.plan import Row
from ci.upstream.port import command_line, tried, words
from ci.upstream.port import make as port_make
from ci.upstream.port.make import Made
from ci.upstream.port.tried import Tried
from ci.upstream.readiness import Readiness
from ci.upstream.state import ChangeState, Snapshot

SCRATCH = "refs/stackgate/try-port/"  # stackgate's own namespace: a run's ref, removed when it ends


def readiness(snap: Snapshot, wanted: str) -> Readiness:
    """The port readiness of a change the fork lacks, by its id: a follow-up, a change the fork holds (in part too),
    or an unknown id is refused (its rows on the fork judge it already, or there is nothing to port)."""
    r = port.find(snap, wanted)
    if r.follow_up:
        raise UsageError(
            f"--try-port {wanted}: {r.label} is a follow-up fix of a change the fork holds: its rows run on the fork "
            "with or without it",
            hint=f"port it (python -m ci fork port {r.pr}), then judge the fork: ci main --ref BRANCH",
        )
    state = snap.get(r.change)
    if state.state != "absent":
        raise UsageError(
            f"--try-port {wanted}: #{r.change} is {state.state} in the fork, not absent: its rows run on the fork "
            "already",
            hint=f"judge it as the fork holds it: python -m ci main --compare-without {r.change}",
        )
    return r


def refusal(snap: Snapshot, r: Readiness) -> tuple[list[str], str]:
    """Why a change is not tried, in the readiness's own words (what conflicts, what it needs, where the chain stops),
    and the fix: what makes it known, or the port by hand, then the fork judged at that branch."""
    state: ChangeState = snap.get(r.change)
    out = [f"#{r.change} is not tried as a port: {words.cell_of(r)}"]
    out += [f"  {line}" for line in words.lines(replace(state, follow_up_ports=()))]
    if r.command.startswith("fix: "):
        fix = f"{r.command.removeprefix('fix: ')}, then --try-port {r.change} again"
    else:
        fix = (
            f"make the port by hand ({r.command} prints where it stops and the commands that finish it on a branch of "
            "your own), then judge that branch: python -m ci main --ref BRANCH"
        )
    return [one_line(line) for line in out], one_line(fix)


def candidates(snap: Snapshot, changes: Sequence[str] = ()) -> tuple[list[Readiness], list[Readiness]]:
    """The changes the fork lacks (of `changes`, where given) whose port readiness is known: those that port cleanly
    (as they are, or after their prerequisite chain), and those that do not (a conflict, a chain that stops)."""
    found = [c.port for c in snap.changes if c.pr and c.state == "absent" and c.port is not None]
    known = [r for r in found if r.verdict != "unknown" and (not changes or r.change in changes)]
    return [r for r in known if tried.triable(r)], [r for r in known if not tried.triable(r)]


def make(fork: source.Fork, r: Readiness, *, keep: bool = True) -> Tried:
    """The port of `r`'s change (its chain first where it takes one) on a scratch ref of its own, pinned; with
    `keep=False`, on none: its commits are made in a scratch store and dropped (their ids are what is asked: the
    tip a pipeline carries)."""
    co = fork.checkout
    chain = tried.with_prerequisites(r)
    todo = port_make.units(co, r, chain)
    ref = f"{SCRATCH}{r.change}-{os.getpid()}" if keep else None
    made = port_make.make(co, fork.commit, todo, ref, f"stackgate: try the port of {r.label}", pinned=True)
    if not isinstance(made, Made):  # `ci fork` said it ports: the checkout moved since, or upstream did
        raise UsageError(
            f"--try-port {r.change}: the port stopped at {made.stopped.commit[:12] if made.stopped else 'a commit'} "
            f"({made.verdict}: {one_line(made.detail) or 'see ci fork'}), though its readiness said it ports",
            hint=f"ask again: {fork.scope.command('fork', '--change', r.change)}",
        )
    if not made.commits:
        raise UsageError(f"--try-port {r.change}: every commit of it is already in {fork.ref}", hint="nothing to try")
    return Tried(
        change=r.change,
        pr=r.pr,
        readiness=r.verdict,
        how=tried.how(r),
        prerequisites=r.prerequisites if chain else (),
        onto=fork.commit,
        commits=tuple((c, unit.commit) for c, unit in made.commits),
        ref=made.ref,
        command=command_line.port(fork.scope.options, r.pr, with_prerequisites=chain),
    )


def at_tip(st: Stack, fork: source.Fork, t: Tried) -> source.Fork:
    """The fork at the port's tip, each change as `ci fork` reads it there (what the port build holds)."""
    return source.of(st, replace(fork.scope, ref=t.ref, head=t.tip))


def finish(fork: source.Fork, t: Tried, keep_as: str | None) -> Tried:
    """The scratch ref removed; with `keep_as`, the port kept first as a new branch of that name (never moved)."""
    co = fork.checkout
    out = t
    if keep_as:
        co.git("update-ref", "-m", f"stackgate: the port of #{t.change} tried", f"refs/heads/{keep_as}", t.tip, "")
        out = replace(t, ref=keep_as, kept=True)
    if t.ref.startswith(SCRATCH) and co.commit(t.ref):
        co.git("update-ref", "-d", t.ref, t.tip)
    return out


def tally(rows: Mapping[str, Sequence[Row]], names: Mapping[str, str], refused: Sequence[str] = ()) -> str:
    """The candidates and the rows they run, per target, before anything runs: "3 candidates, 261 rows on GB10, 120
    on H200"; `rows`: each candidate that ports cleanly, its rows; `refused`: those that do not ("; 1 does not port
    cleanly: #46849")."""
    per = Counter(r.target for found in rows.values() for r in found)
    where = [f"{counted(n, 'row') if i == 0 else n} on {names.get(t, t)}" for i, (t, n) in enumerate(per.items())]
    said = ", ".join([counted(len(rows) + len(refused), "candidate"), *where])
    if refused:
        said += (
            f"; {len(refused)} {'does' if len(refused) == 1 else 'do'} not port cleanly: "
            f"{', '.join(f'#{c}' for c in refused)}"
        )
    return said


def expect(t: Tried, tip: str | None) -> None:
    """The port made here is the one a pipeline carried (`--port-tip`): else the fork or upstream moved since, and
    this would judge another tree than the one the pipeline names."""
    if tip and t.tip != tip and not t.tip.startswith(tip):
        raise UsageError(
            f"--try-port {t.change}: the port made here ends at {t.tip[:12]}, not at {tip[:12]} as --port-tip says: "
            f"the fork commit {t.onto[:12]} or upstream's commits of it are not those the pipeline was made from",
            hint="make the pipeline again from the fork as it is now (python -m ci pipeline --try-ports ...)",
        )


def keep_name(fork: source.Fork, name: str | None, candidates: list[Readiness]) -> str | None:
    """--keep-port-branch NAME, checked before anything is made: one candidate, a valid name no branch has yet."""
    if name is None:
        return None
    if len(candidates) != 1:
        raise UsageError(
            f"--keep-port-branch keeps one port as a branch; --try-port names {counted(len(candidates), 'change')}",
            hint="try one change at a time to keep its port",
        )
    return port.branch_name(fork.checkout, candidates[0].change, name)
