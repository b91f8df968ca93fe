"""What an acceptance criterion is made of: its result (Criterion), what a rule may read (Evidence), the rule itself
(Rule) and the names of the eight the registry (`ci.results.criteria.registry`) holds."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ci.results.baseline import Baseline
from ci.results.merge import Results, RowResult
from ci.stack.change import Change

Status = Literal["pass", "fail", "missing"]

TIED = "tied to a focused regression or benchmark"
COLD_WARM = "cold and warm measurements reported separately"
NO_JIT = "no runtime JIT fallback where AOT/warm-up is expected"
MATRIX = "model/context/batch matrix covered on every target"
TOLERANCE = "numerical tolerance against the named reference backend"
GRAPH = "graph-replay assertion"
REGRESSION = "regression within the allowed bound versus the baseline"
EFFECT = "the change's effect on what it acts on, against the fork without it"
NO_SIDE_WITHOUT = "no side without it"  # the effect's first-screen words where no run without the change was given

SHOWN = 3  # rows named in one piece of evidence before "and N more"


@dataclass(frozen=True, kw_only=True)
class Criterion:
    name: str
    status: Status
    evidence: str
    by_target: tuple[tuple[str, Status], ...] = ()  # a per-target rule's status on each target it judged
    short: str = ""  # what holds it back in a few words, for the first screen, where the rule gives them


@dataclass(frozen=True, kw_only=True)
class Evidence:
    """What a rule may read: the change, its planned rows' results by target, every result, the baseline."""

    change: Change
    rows: tuple[RowResult, ...]
    by_target: Mapping[str, list[RowResult]]
    results: Results
    baseline: Baseline | None
    required_targets: tuple[str, ...] = ()  # the targets the tracking issue names
    warmers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # kernel -> the changes whose warm-up runs it


PerTarget = Callable[[Change, list[RowResult]], tuple[Status, str]]


@dataclass(frozen=True, kw_only=True)
class Rule:
    """One acceptance criterion, defined once: its words, its id, what it reads and how it judges. The report's ids
    (report.json `criteria[].id`, the schema's enum), the first screen's short name and the change file's field it
    reads all come from here (tests/unit/test_criteria_registry.py holds them together)."""

    name: str  # its full title, in the report's words
    id: str  # its stable id for scripts (report.json): the title is English and may be reworded
    short: str  # its name on the first screen ("cold/warm")
    field: str  # the change file's field it reads (acceptance.<field>), "" where it reads none
    reads: str  # the stack field and the evidence it is judged on, in words
    per_target: PerTarget | None = None  # judged on each target's rows, the worst target deciding
    whole: Callable[[Evidence], Criterion] | None = None  # judged on the change as a whole
    rule: Callable[[Change], str] = lambda change: ""  # the rule in words, shown before the evidence

    def judge(self, ev: Evidence) -> Criterion:
        if self.whole is not None:
            return self.whole(ev)
        assert self.per_target is not None
        return each_target(self.name, ev, self.per_target, self.rule(ev.change))


def each_target(name: str, ev: Evidence, judge: PerTarget, rule: str = "") -> Criterion:
    """`judge` on each target's rows, the worst target deciding; the rule in words first."""
    judged = [(t, *judge(ev.change, rows)) for t, rows in ev.by_target.items()]
    crit = combine(name, [(s, f"{t}: {e}") for t, s, e in judged])
    return Criterion(
        name=name,
        status=crit.status,
        evidence=f"{rule}. {crit.evidence}" if rule else crit.evidence,
        by_target=tuple((t, s) for t, s, _ in judged),
    )


def combine(name: str, parts: Sequence[tuple[Status, str]]) -> Criterion:
    statuses = {s for s, _ in parts}
    status: Status = "fail" if "fail" in statuses else "missing" if "missing" in statuses or not parts else "pass"
    return Criterion(name=name, status=status, evidence="; ".join(e for _, e in parts) or "no planned rows")


def listed(rows: Sequence[str], total: int | None = None) -> str:
    more = (total if total is not None else len(rows)) - SHOWN
    return ", ".join(rows[:SHOWN]) + (f" and {more} more" if more > 0 else "")


def ran_rows(rows: Sequence[RowResult]) -> list[RowResult]:
    return [r for r in rows if r.ran]
