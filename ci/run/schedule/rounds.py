"""The rounds of a timing protocol (`ci main --compare-without`): which arms run in each, and how long they take.

The time is said from measurements only: before the first run from the costs this host (or the protocol's own folder)
measured for the rows' configurations, a cold run costing what a bake of them cost and a run what a run cost; after
each run from the runs themselves, per arm (the fork's arm also starts its reference engine, so the arms differ).
Nothing measured: it says so, never a guess."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path

from ci.common.errors import UsageError
from ci.common.tables import counted
from ci.run.schedule.estimate import clock, measured_in
from ci.stack.plan import Row


def before(rows: Sequence[Row], runs: int, folder: Path, *, cold: bool) -> str:
    """One line: the protocol's runs and what they are projected to take from the measured costs."""
    phase = "bake" if cold else "run"  # a cold run starts from empty caches, as a bake does
    seconds, hows = measured_in([folder]).job_seconds(phase, rows)
    if seconds is None:
        unmeasured = "no cost measured for these rows' configurations: the time is said after the first run"
        return f"{counted(runs, 'run')}; {unmeasured}"
    found = ", ".join(sorted(set(hows)))
    projected = f"about {clock(seconds * runs)} from the measured {phase} costs ({found}; each run alone)"
    return f"{counted(runs, 'run')}, {projected}"


class Clock:
    """Each arm's run times so far, and the time left they project."""

    def __init__(self, planned: dict[str, int]) -> None:
        self.planned = dict(planned)  # arm label -> runs it will make
        self.took: dict[str, list[float]] = {label: [] for label in planned}
        self.total = sum(self.planned.values())

    def ran(self, label: str, seconds: float) -> str:
        """Record one run of `label`; the line that says what is left."""
        self.took[label].append(seconds)
        done = sum(map(len, self.took.values()))
        left = 0.0
        for arm, n in self.planned.items():
            times = self.took[arm] or [t for ts in self.took.values() for t in ts]
            left += statistics.median(times) * (n - len(self.took[arm]))
        took = f"({label}: {seconds:.0f} s); about {clock(left)} left at their medians"
        return f"{done} of {counted(self.total, 'run')} done {took}"


def aa_rounds(runs: int, aa_runs: int | None) -> frozenset[int]:
    """The rounds (1..runs) the A/A arm runs in: every one (`aa_runs` None), none (0: no A/A arm), or `aa_runs` of
    them spread evenly from the first, so a protocol cut short has its A/A runs among the rounds it finished. Counts
    the protocol cannot use are refused (exit 2)."""
    if runs < 1:
        raise UsageError(
            "--runs takes 1 or more",
            hint="the runs each arm makes (--runs 5); which bound they can judge, the A/A floor says (--aa)",
        )
    if aa_runs is not None and aa_runs != 0 and aa_runs < 2:
        raise UsageError("--aa-runs takes 2 or more", hint="the floor is an interval over the A/A runs: 2 give one")
    k = runs if aa_runs is None else min(aa_runs, runs)
    return frozenset(1 + (j * runs) // k for j in range(k))
