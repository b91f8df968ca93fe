"""This build set beside the earlier ones its history holds (`ci.history`): which rows the stack's rule quarantines as
flaky, what each failing row is across builds (new, new and unconfirmed, failing since build N on K commits, with
its bisect range), each change's timing trends, and the verdicts as the other gate setting would give them.

Made before the verdicts are final: where the stack waives quarantined rows (stack/flaky.yaml `gate: waive`), each
change is judged without them, and the verdict counting them is kept beside it to say so; where it holds them (the
default), the verdict counts them, and the one without them is kept beside it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from functools import cached_property
from pathlib import Path

from ci.history import flaky_rules, past, trends
from ci.history.flaky_rules import Failing, Flakiness
from ci.history.past import Entry, Past
from ci.history.record import Build, Seen
from ci.history.trends import Trend
from ci.report import this_build
from ci.results.acceptance import Verdict
from ci.results.criteria import registry
from ci.results.merge import Results
from ci.stack.flaky import Flaky
from ci.stack.model import Stack


@dataclass(frozen=True, kw_only=True)
class Across:
    path: Path  # the history file
    build: Build  # this build, as it will be written
    earlier: tuple[Entry, ...]  # the builds before it, oldest first
    rule: Flaky
    flaky: Mapping[str, Flakiness] = field(default_factory=dict)  # rows quarantined or reinstated
    failing: Mapping[str, Failing] = field(default_factory=dict)  # each failing row's streak on this branch
    trends: tuple[Trend, ...] = ()
    runs: Mapping[str, tuple[Seen, ...]] = field(default_factory=dict)  # a row's runs, this build's last
    otherwise: Mapping[str, Verdict] = field(default_factory=dict)  # change -> its verdict under the other setting

    @property
    def quarantined(self) -> list[str]:
        return [row for row, f in self.flaky.items() if f.quarantined]

    @cached_property
    def placed(self) -> dict[str, tuple[str, str]]:
        """Each row of this build -> its (change, target)."""
        return {r.row: (r.change, r.target) for r in self.build.runs}

    def change_of(self, row: str) -> str:
        return self.placed.get(row, ("", ""))[0]

    def target_of(self, row: str) -> str:
        return self.placed.get(row, ("", ""))[1]

    @property
    def last_on_branch(self) -> Entry | None:
        return next((b for b in reversed(self.earlier) if b.branch == self.build.branch), None)


Judge = Callable[[Results], tuple[Verdict, ...]]


def make(stack: Stack, results: Results, path: Path, judge: Judge) -> tuple[Across, tuple[Verdict, ...]]:
    """This build beside the history at `path`, and the verdicts as the stack's gate setting gives them (`judge`
    judges a set of results: once with every row, and where rows are quarantined, once without them)."""
    rule = stack.flaky
    counted = judge(results)
    this = this_build.build(stack, results, (), {})  # its runs and facts; its verdicts are the report's (`written`)
    window = timedelta(days=max(rule.quarantine.window_days, trends.BEST_DAYS))
    now = this_build.seen(this)
    failing_rows = [row for row, s in now.items() if s.failed]
    earlier: Past = past.read(
        path,
        since=this.at - window,
        last=trends.SHOWN,
        failing=failing_rows,
        branch=this.branch,
        leave_out=this.key,
        metrics=trends.METRICS,
    )
    runs = {row: (*earlier.runs.get(row, ()), s) for row, s in now.items()}
    flaky = {}
    for row, seq in runs.items():
        found = flaky_rules.flakiness(seq, this.at, rule.quarantine)
        if found.quarantined or found.reinstated:
            flaky[row] = found
    failing = {
        row: flaky_rules.failing([s for s in runs[row] if s.branch == this.branch], rule.confirm_on_commits)
        for row in failing_rows
        if row not in flaky or not flaky[row].quarantined
    }
    placed = {r.row: (r.change, r.target) for r in this.runs}
    across = Across(
        path=path,
        build=this,
        earlier=earlier.builds,
        rule=rule,
        flaky=flaky,
        failing=failing,
        trends=tuple(trends.trends(placed, runs, earlier.units | _units(this), this.at)),
        runs=runs,
    )
    quarantined = set(across.quarantined)
    if not quarantined:
        return across, counted
    without = judge(replace(results, rows=tuple(r for r in results.rows if r.id not in quarantined)))
    held = rule.quarantine.gate == "hold"
    chosen, other = (counted, without) if held else (without, counted)
    touched = {o.change.id: o for o in other if _touched(o.change.id, results, quarantined)}
    return replace(across, otherwise=touched), chosen


def _units(b: Build) -> dict[str, str]:
    return {name: unit for r in b.runs for name, _, unit in r.metrics}


def _touched(change: str, results: Results, quarantined: set[str]) -> bool:
    return any(r.change == change for r in results.rows if r.id in quarantined)


def written(across: Across, verdicts: Sequence[Verdict]) -> Build:
    """This build as it is written into the history: its runs, and each criterion's verdict as the report gives it."""
    return replace(across.build, verdicts=this_build.judged(verdicts, registry.ids()))


def remember(across: Across, verdicts: Sequence[Verdict]) -> int:
    """This build added to its history, in one transaction (a build of the same key, the same results reported
    again, replaced); its number there."""
    from ci.history import store

    return store.append(across.path, written(across, verdicts))
