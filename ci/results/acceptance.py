"""Judge each imported change against the seed's acceptance criteria (`ci.results.criteria`), with the
evidence for each. A change is ready for default enablement only when every criterion passes."""

from __future__ import annotations

from dataclasses import dataclass

from ci.results.baseline import Baseline
from ci.results.criteria import CRITERIA, Criterion, Evidence
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
    return tuple(judge(change, results, baseline, required) for change in stack.changes.values())


def judge(change: Change, results: Results, baseline: Baseline | None, required: tuple[str, ...] = ()) -> Verdict:
    rows = tuple(r for r in results.rows if r.change == change.id and r.planned is not None)
    by_target: dict[str, list[RowResult]] = {}
    for r in rows:
        by_target.setdefault(r.target, []).append(r)
    ev = Evidence(
        change=change, rows=rows, by_target=by_target, results=results, baseline=baseline, required_targets=required
    )
    return Verdict(change=change, criteria=tuple(rule.judge(ev) for rule in CRITERIA))
