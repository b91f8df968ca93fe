"""Each imported change as ported: its rows on the fork's own build, judged with the same fork without that change
(`ci fork bundle --without`) as the baseline its allowed regression is measured against.

The sides are found from what the rows recorded, not from labels: a fork side's cases name the change among
`stackgate.fork_changes`; the side without it is a fork build whose cases do not: the ablated fork (its cases name it
as `stackgate.fork_without`), or, for a port tried (`ci main --try-port`: the fork with the port against the fork as
it is), the fork itself. The change is credited with
the difference only where the two are one fork at one base (`stackgate.fork_source`: the fork and commit, the base
release and commit, each build was made from), their imported changes differ by exactly that change, and its
presence probe says present on the fork and absent without it; where any of these does not hold, the judgement
says so instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from ci.results import acceptance, run_medians
from ci.results.acceptance import Verdict
from ci.results.baseline import Baseline, Floor
from ci.results.junit import Case
from ci.results.merge import Results, RowResult
from ci.stack.change import Change
from ci.stack.model import Stack


class SideOf(Protocol):
    """What `find` reads of a comparison side (ci.results.sides.Side)."""

    label: str
    rows: dict[str, RowResult]
    results: Results


@dataclass(frozen=True, kw_only=True)
class Ported:
    change: str
    fork: str  # the side label holding the fork's build
    without: str  # the side label holding the fork without the change
    builds: tuple[str, str]  # each side's vllm_build, as recorded
    rows: tuple[str, ...]  # the change's rows that ran on both sides
    seen: tuple[str, str]  # the presence probe on each side: "present", "absent", "mixed", "not recorded"
    verdict: Verdict  # the fork side's, its allowed regression judged against the side without the change
    problems: tuple[str, ...]  # why the two sides do not isolate the change, where they do not
    aa: str = ""  # the side label of the A/A arm (the fork's build again), whose runs gave the noise floor
    # row -> metric -> the A/A floor measured for it (each metric the change is timed on), where an A/A arm ran
    floors: Mapping[str, Mapping[str, Floor]] = field(default_factory=dict)

    @property
    def isolated(self) -> bool:
        return not self.problems


def find(stack: Stack, sides: Sequence[SideOf]) -> tuple[Ported, ...]:
    out = []
    for change in stack.changes.values():
        cid = change.id
        fork = _side(sides, cid, lambda c, cid=cid: cid in (c.fork_changes or ()) and c.fork_without != cid)
        without = _side(sides, cid, lambda c, cid=cid: c.fork_without == cid or cid not in (c.fork_changes or ()))
        if fork is None or without is None:
            continue
        rows = tuple(r for r, res in fork.rows.items() if res.change == change.id and r in without.rows)
        aa = _aa(sides, (fork, without), rows)
        baseline = _baseline(change, fork, without, aa, rows)
        required = tuple(t.id for t in stack.targets.values() if t.required)
        verdict = acceptance.judge(change, fork.results, baseline, required, acceptance.warmers(stack))
        seen = (_seen(fork, rows), _seen(without, rows))
        builds = (_build(fork, rows), _build(without, rows))
        problems = []
        if seen[0] != "present":
            problems.append(f"the presence probe on side {fork.label!r} reads {seen[0]}, not present")
        if seen[1] != "absent":
            problems.append(f"the presence probe on side {without.label!r} reads {seen[1]}, not absent")
        if builds[0] == builds[1]:
            problems.append(f"both sides ran the same vLLM build {builds[0]}")
        problems += _not_one_fork(fork, without, rows, cid)
        out.append(
            Ported(
                change=change.id,
                fork=fork.label,
                without=without.label,
                builds=builds,
                rows=rows,
                seen=seen,
                verdict=verdict,
                problems=tuple(problems),
                aa=aa[0].label if aa is not None else "",
                floors=baseline.floors,
            )
        )
    return tuple(out)


def _aa(sides: Sequence[SideOf], pair: tuple[SideOf, SideOf], rows: tuple[str, ...]) -> tuple[SideOf, SideOf] | None:
    """The A/A arm: another side that ran one of the pair's builds again on the same rows (its noise floor), and the
    side whose build it ran: the fork's (`--compare-without`), or the fork's as it is against a port tried on it."""
    for s in sides:
        if any(s is p for p in pair) or not rows or not all(r in s.rows for r in rows):
            continue
        for twin in pair:
            if _build(s, rows) == _build(twin, rows):
                return s, twin
    return None


def _baseline(
    change: Change, fork: SideOf, without: SideOf, aa: tuple[SideOf, SideOf] | None, rows: tuple[str, ...]
) -> Baseline:
    """The side without the change as the baseline, its runs of each metric the change is timed on (its effects and
    its allowed regression); with an A/A side, the floor of each, from the runs of the build it repeats against its
    own."""
    names = tuple(
        dict.fromkeys([*(e.metric for e in change.acceptance.effect), change.acceptance.allowed_regression.metric])
    )
    before: dict[str, MappingProxyType] = {}
    floors: dict[str, MappingProxyType] = {}
    for r in rows:
        theirs = {name: run_medians.of_cases(without.rows[r].ran, name) for name in names}
        before[r] = MappingProxyType({n: t.values for n, t in theirs.items() if t and t.runs and not t.shared})
        if aa is not None:
            arm, twin = aa
            floors[r] = MappingProxyType({name: _floor(twin.rows[r], arm.rows[r], name) for name in names})
    return Baseline(
        path=f"side {without.label!r} (the fork without #{change.id})",
        rows=MappingProxyType(before),
        floors=MappingProxyType(floors),
        aa=aa[0].label if aa is not None else "",
        without=True,
    )


def _floor(fork: RowResult, aa: RowResult, name: str) -> Floor:
    """The A/A floor of one row's metric: the fork side's runs against the A/A side's, neither shared."""
    a, a2 = run_medians.of_cases(fork.ran, name), run_medians.of_cases(aa.ran, name)
    floor = run_medians.floor_pct(a.values, a2.values) if a and a2 and not (a.shared or a2.shared) else None
    sides = (len(a.values), len(a2.values)) if a and a2 else (0, 0)
    return Floor(floor, min(sides), sides)


def _side(sides: Sequence[SideOf], change: str, holds: Callable[[Case], bool]) -> SideOf | None:
    """The first side whose runs of the change's rows are all fork builds for which `holds` is true."""
    for s in sides:
        cases = [c for r in s.rows.values() if r.change == change for c in r.cases]
        if cases and all(c.fork_changes is not None and holds(c) for c in cases):
            return s
    return None


def _seen(side: SideOf, rows: tuple[str, ...]) -> str:
    values = {c.change_present for r in rows for c in side.rows[r].cases if c.status != "skipped"}
    if not values or values == {None}:
        return "not recorded"
    if len(values) > 1:
        return "mixed"
    return "present" if values.pop() else "absent"


def _build(side: SideOf, rows: tuple[str, ...]) -> str:
    builds = sorted({c.vllm_build or "not recorded" for r in rows for c in side.rows[r].cases})
    return ", ".join(b.removeprefix("sha256:")[:12] for b in builds)


def _not_one_fork(fork: SideOf, without: SideOf, rows: tuple[str, ...], change: str) -> list[str]:
    """Why the two sides are not the same fork at the same base differing by `change` alone (empty where they are)."""
    out = []
    sources = [_one(side, rows, lambda c: c.fork_source) for side in (fork, without)]
    if "not recorded" in sources or "mixed" in sources or sources[0] != sources[1]:
        out.append(
            f"the sides are not one fork at one base: side {fork.label!r} was built from {sources[0]}, "
            f"side {without.label!r} from {sources[1]}"
        )
    held = [{x for r in rows for c in side.rows[r].cases for x in c.fork_changes or ()} for side in (fork, without)]
    if held[0] - held[1] != {change} or held[1] - held[0]:
        differ = sorted((held[0] - held[1]) | (held[1] - held[0]))
        out.append(
            f"the sides' imported changes differ by {', '.join(f'#{c}' for c in differ) or 'none'}, "
            f"not by #{change} alone"
        )
    return out


def _one(side: SideOf, rows: tuple[str, ...], read: Callable[[Case], str | None]) -> str:
    """The one value `read` gives every case of `rows` on `side`: "not recorded" or "mixed" where there is none."""
    values = {read(c) for r in rows for c in side.rows[r].cases}
    if not values or values == {None}:
        return "not recorded"
    return values.pop() or "not recorded" if len(values) == 1 else "mixed"


def held(results: Results, change: str) -> tuple[str, str] | None:
    """(the fork build, how it holds `change`) from the first row that ran on a fork build: the state `ci fork` gave
    when its bundle was made ("converged", "ported, edited", "absent", "removed"); for a build whose bundle recorded
    only the changes it holds (before `stackgate.fork_held`), "carried", "absent" or "removed". None: a stock vLLM."""
    for r in results.rows:
        for c in r.cases:
            if c.fork_held is not None:
                return (c.fork or "build"), dict(c.fork_held).get(change, "absent")
            if c.fork_changes is not None:
                state = "removed" if c.fork_without == change else "carried" if change in c.fork_changes else "absent"
                return (c.fork or "build"), state
    return None
