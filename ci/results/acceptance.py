"""Judge each imported change against the seed's acceptance criteria (`ci.results.criteria.registry`), with the
evidence for each. A change is ready for default enablement only when every criterion passes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ci.results.baseline import Baseline
from ci.results.criteria.registry import CRITERIA, Criterion, Evidence
from ci.results.merge import Results, RowResult
from ci.stack.change import Change
from ci.stack.model import Stack

READY = "ready for default enablement"


@dataclass(frozen=True, kw_only=True)
class Verdict:
    change: Change
    criteria: tuple[Criterion, ...]

    @property
    def ready(self) -> bool:
        return all(c.status == "pass" for c in self.criteria)

    @property
    def blocking(self) -> tuple[Criterion, ...]:
        return tuple(c for c in self.criteria if c.status != "pass")

    @property
    def text(self) -> str:
        if self.ready:
            return READY
        return "not ready: blocked by " + "; ".join(f"{c.name} ({c.status})" for c in self.blocking)


def evaluate(stack: Stack, results: Results, baseline: Baseline | None) -> tuple[Verdict, ...]:
    required = tuple(t.id for t in stack.targets.values() if t.required)
    known = warmers(stack)
    return tuple(judge(change, results, baseline, required, known) for change in stack.changes.values())


def warmers(stack: Stack) -> dict[str, tuple[str, ...]]:
    """Each kernel some change's warm-up launches at start (`upstream.warms`) -> those changes, as a report names them
    ("#48804 of the kernel-warmup track")."""
    found: dict[str, tuple[str, ...]] = {}
    for change in stack.changes.values():
        for kernel in change.upstream.warms if change.upstream else ():
            found[kernel] = (*found.get(kernel, ()), f"#{change.id} of the {change.track} track")
    return found


def judge(
    change: Change,
    results: Results,
    baseline: Baseline | None,
    required: tuple[str, ...] = (),
    warmers: Mapping[str, tuple[str, ...]] | None = None,  # kernel -> the changes whose warm-up launches it
) -> Verdict:
    rows = tuple(r for r in results.rows if r.change == change.id and r.planned is not None)
    by_target: dict[str, list[RowResult]] = {}
    for r in rows:
        by_target.setdefault(r.target, []).append(r)
    ev = Evidence(
        change=change,
        rows=rows,
        by_target=by_target,
        results=results,
        baseline=baseline,
        required_targets=required,
        warmers=warmers or {},
    )
    return Verdict(change=change, criteria=tuple(rule.judge(ev) for rule in CRITERIA))
