"""The run is the unit of a timing comparison: one engine process, its samples summarised by their median.

Samples within one run describe that run only: on one H200, one build, the warm ITL of a tiny row moved by about
+-18% from run to run (2.88-4.16 ms) while its samples within a run were tight, so a test over pooled samples
judges the run, not the build. Each side of a comparison is its runs' medians; the test (an exact one-sided
Mann-Whitney) and the interval (Hodges-Lehmann) are over those; a run's own spread is shown beside it, never used
as if its samples were independent runs. A run that shared its GPU with another engine
(`stackgate.gpu_shared_with`) is no evidence about timing and is set apart, named.

An A/A arm (the same build again, as its own side) gives the noise floor: the largest difference between two sides
of one build that its interval cannot exclude, as a percentage of the first side's median.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

from ci.results.junit import Case
from ci.results.stat_tests import shift

MIN_RUNS = 4  # a side's fewest runs at which the exact one-sided test can reach p < 0.05 (4 vs 4: 1/70)


@dataclass(frozen=True, kw_only=True)
class Run:
    value: float  # the median of the run's samples (its one value, where it recorded one)
    low: float  # the run's own spread: its smallest and largest sample
    high: float
    samples: int


@dataclass(frozen=True, kw_only=True)
class Runs:
    """One metric of one row on one side: the runs alone on their GPU, and those that shared it."""

    runs: tuple[Run, ...]
    shared: tuple[str, ...] = ()  # for each run that shared its GPU: what it shared it with

    @property
    def values(self) -> tuple[float, ...]:
        return tuple(r.value for r in self.runs)

    @property
    def median(self) -> float:
        return float(median(self.values))

    def spread(self) -> str:
        """Each run's median and its own range, for a reader: "3.31 (3.25-3.40), 3.09 (3.02-3.15)"."""
        return ", ".join(
            f"{r.value:.4g}" + (f" ({r.low:.4g}-{r.high:.4g})" if r.samples > 1 else "") for r in self.runs
        )


def run_of(case: Case, name: str) -> Run | None:
    m = case.metric(name)
    if m is None:
        return None
    samples = m.samples or (m.value,)
    return Run(value=float(median(samples)), low=min(samples), high=max(samples), samples=len(samples))


def of_cases(cases: Sequence[Case], name: str) -> Runs | None:
    """The runs of `cases` (each case one run of the row) that recorded `name`; None where none did."""
    alone, shared = [], []
    for c in cases:
        run = run_of(c, name)
        if run is None:
            continue
        if c.gpu_shared_with:
            shared.append(", ".join(c.gpu_shared_with))
        else:
            alone.append(run)
    if not alone and not shared:
        return None
    return Runs(runs=tuple(alone), shared=tuple(shared))


def floor_pct(a: Sequence[float], a2: Sequence[float]) -> float | None:
    """The noise floor from an A/A pair of sides of one build: the farthest end of the interval of A' - A, in % of
    A's median; None where the runs are too few for an interval (or A's median is 0)."""
    if not a or not a2:
        return None
    s = shift(a, a2)
    mid = float(median(a))
    if s.interval is None or not mid:
        return None
    return 100.0 * max(abs(s.interval[0]), abs(s.interval[1])) / abs(mid)


def pct(value: float) -> str:
    return "±inf%" if math.isinf(value) else f"±{value:.1f}%"
