"""The side a regression is judged against (a previous report.json, or the fork without the change), and the
comparison, over runs (ci.results.run_medians says why the run is the unit).

A row's difference is flagged only when the median of its runs worsened past the allowed bound, past the noise
floor an A/A arm measured (where one ran), and a one-sided exact Mann-Whitney test on the runs' medians says chance
explains it less than 1 time in 20 (`ALPHA`). With fewer than `MIN_RUNS` runs a side no test can say that: the row
"needs N runs a side", neither pass nor fail. Rows run once a side are judged across rows instead, by the sign
test (`pooled`): each row's one run against its own baseline run, pairs of independent runs.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Literal

from ci.common import files, untrusted
from ci.common.errors import ReportError
from ci.results.metrics import metric_from_json
from ci.results.run_medians import MIN_RUNS, pct
from ci.results.stat_tests import Shift, mann_whitney_greater, shift, sign_test_greater


@dataclass(frozen=True)
class Floor:
    """The noise floor an A/A arm measured on the host for one row and metric."""

    pct: float | None  # None where its runs were too few for one, or shared their GPU
    runs: int  # the runs a side it was measured on (the fewer of the A/A pair's)
    sides: tuple[int, int] = (0, 0)  # the runs of each: the fork's side, the A/A arm

    @property
    def measured_on(self) -> str:
        """ "5 runs a side", or "5 runs of the fork against 3 of the A/A arm" where the two differ."""
        fork, aa = self.sides if any(self.sides) else (self.runs, self.runs)
        if fork == aa:
            return f"{fork} run{'' if fork == 1 else 's'} a side"
        return f"{fork} run{'' if fork == 1 else 's'} of the fork against {aa} of the A/A arm"


NO_FLOOR = Floor(pct=None, runs=0)  # no A/A arm ran


@dataclass(frozen=True)
class Baseline:
    path: str
    rows: Mapping[str, Mapping[str, tuple[float, ...]]]  # row id -> metric name -> each run's median
    # row id -> metric name -> the noise floor an A/A arm measured on the host, where one ran
    floors: Mapping[str, Mapping[str, Floor]] = field(default_factory=dict)
    aa: str = ""  # the A/A side's label, where one gave the floors
    # the fork's own build without the change (ci.results.as_ported): what a change's effect is measured against; a
    # report.json given as --baseline is an earlier run of the same build, not one without the change
    without: bool = False

    def runs(self, row: str, name: str) -> tuple[float, ...] | None:
        return self.rows.get(row, {}).get(name)

    def floor(self, row: str, name: str) -> Floor:
        return self.floors.get(row, {}).get(name, NO_FLOOR)


PROJECTED_RUNS = 10  # the runs a side a projection of the floor names a judgeable bound at
ALPHA = 0.05  # one-sided: a regression is claimed only when chance explains it less than 1 time in 20


@dataclass(frozen=True, kw_only=True)
class Comparison:
    before: tuple[float, ...]  # each run's median, the baseline side
    after: tuple[float, ...]
    unit: str
    pct_worse: float  # positive: worse than the baseline by this much (the medians of the runs' medians)
    p_value: float | None  # one-sided toward "worse"; None where either side has fewer than MIN_RUNS runs
    max_pct: float
    floor_pct: float | None = None  # the A/A noise floor (%), where measured
    aa: bool = False  # an A/A arm ran: without a floor from it, its runs were too few for one
    interval: Shift | None = None  # after - before over runs, where each side has a run
    floor_runs: int = 0  # the runs a side the floor was measured on
    floor_on: str = ""  # the runs it was measured on, in words (Floor.measured_on)

    @property
    def judged(self) -> bool:
        return self.p_value is not None

    @property
    def inconclusive(self) -> bool:
        """The floor is as wide as the bound: no difference within the bound can be told from noise on this host."""
        return self.floor_pct is not None and self.floor_pct >= self.max_pct

    @property
    def narrowing(self) -> str:
        """Where the floor is as wide as the bound: how many runs a side would narrow it under the bound, were it to
        narrow as an interval over runs does (as 1/sqrt(n)), and the bound 10 runs a side could judge; a projection
        from one floor, said as one."""
        if not self.inconclusive or not self.floor_runs or self.floor_pct is None or math.isinf(self.floor_pct):
            return ""
        n = self.floor_runs
        needed = math.ceil(n * (self.floor_pct / self.max_pct) ** 2)
        at_ten = self.floor_pct * math.sqrt(n / PROJECTED_RUNS)
        runs = self.floor_on or f"{n} run{'' if n == 1 else 's'} a side"
        return (
            f"a floor of {pct(self.floor_pct)} at {runs}, narrowing as 1/sqrt(runs), would pass under "
            f"the {self.max_pct:g}% bound at about {needed} runs a side; {PROJECTED_RUNS} runs a side could judge "
            f"a bound of about {at_ten:.0f}% (a projection from this floor, not a measurement)"
        )

    @property
    def flagged(self) -> bool:
        past = self.pct_worse > max(self.max_pct, self.floor_pct or 0.0)
        return self.judged and not self.inconclusive and past and (self.p_value or 1.0) < ALPHA

    @property
    def text(self) -> str:
        b, a = statistics.median(self.before), statistics.median(self.after)
        test = f"needs {MIN_RUNS} runs a side" if self.p_value is None else f"p={self.p_value:.3f} over runs"
        i = self.interval
        between = f"; shift {i.estimate:+.3g} [{i.interval[0]:+.3g}, {i.interval[1]:+.3g}]" if i and i.interval else ""
        floor = f"; A/A floor {pct(self.floor_pct)}" if self.floor_pct is not None else ""
        if self.aa and self.floor_pct is None:
            floor = "; A/A floor not measured (too few runs)"
        runs = f"runs {len(self.before)}/{len(self.after)}"
        change = f"{self.pct_worse:+.1f}% worse" if self.pct_worse >= 0 else f"{-self.pct_worse:.1f}% better"
        return f"{b:g} -> {a:g} {self.unit} ({change}; {runs}, {test}{between}{floor})"


def compare(
    before: Sequence[float],
    after: Sequence[float],
    better: Literal["higher", "lower"],
    max_pct: float,
    *,
    unit: str = "",
    floor_pct: float | None = None,
    aa: bool = False,
    floor_runs: int = 0,
    floor_on: str = "",
) -> Comparison:
    """`after`'s runs against `before`'s, each a sequence of run medians."""
    b_mid, a_mid = statistics.median(before), statistics.median(after)
    delta = a_mid - b_mid if better == "lower" else b_mid - a_mid
    pct_worse = 100.0 * delta / abs(b_mid) if b_mid else _sign_only(delta)
    p = None
    if len(before) >= MIN_RUNS and len(after) >= MIN_RUNS:
        worse, base = (after, before) if better == "lower" else ([-x for x in after], [-x for x in before])
        p = mann_whitney_greater(base, worse)
    return Comparison(
        before=tuple(before),
        after=tuple(after),
        unit=unit,
        pct_worse=pct_worse,
        p_value=p,
        max_pct=max_pct,
        floor_pct=floor_pct,
        aa=aa,
        interval=shift(before, after),
        floor_runs=floor_runs,
        floor_on=floor_on,
    )


def _sign_only(delta: float) -> float:
    """Percent change from a zero baseline: none, or infinitely worse/better."""
    return 0.0 if delta == 0 else math.copysign(math.inf, delta)


_KIND = untrusted.Kind(
    what="a stackgate report.json",
    limit=files.REPORT_JSON_MAX,
    fix="pass the report.json written by an earlier `python -m ci report`",
    depth=32,
)


def load(path: Path) -> Baseline:
    """Each row's runs of each metric from a report.json this tool wrote (`rows[].run_values`, else the one run
    `rows[].metrics` holds); anything else is a ReportError."""
    try:
        doc = untrusted.json_value(files.read_regular(path, files.REPORT_JSON_MAX), _KIND, str(path))
        rows = {}
        for row in doc["rows"]:
            runs = {name: (metric_from_json(name, m).value,) for name, m in row["metrics"].items()}
            for name, values in (row.get("run_values") or {}).items():
                runs[str(name)] = tuple(float(v) for v in values if math.isfinite(float(v)))
            rows[str(row["id"])] = MappingProxyType({k: v for k, v in runs.items() if v})
    except OSError as exc:
        raise ReportError(f"{path}: baseline cannot be read: {exc.strerror or exc}") from None
    except untrusted.BadInput as exc:
        raise ReportError(exc.message, hint=exc.hint) from None
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise ReportError(
            f"{path}: not a stackgate report.json ({type(exc).__name__}: {exc})",
            hint="pass the report.json written by an earlier `python -m ci report`",
        ) from None
    return Baseline(path=str(path), rows=MappingProxyType(rows))


@dataclass(frozen=True, kw_only=True)
class Pooled:
    """Rows run once a side, judged together: how many got worse past the bound, and the sign test's p."""

    worse: int
    total: int
    p_value: float
    median_pct: float

    @property
    def flagged(self) -> bool:
        return self.p_value < ALPHA and self.median_pct > 0

    @property
    def text(self) -> str:
        return (
            f"{self.worse} of {self.total} rows run once a side worse past the bound, median change "
            f"{self.median_pct:+.1f}%; sign test p={self.p_value:.3f}"
        )


MIN_POOLED = 5  # the fewest rows at which the sign test can reach ALPHA (5 of 5: p = 0.031)


def pooled(comparisons: list[Comparison]) -> Pooled | None:
    if len(comparisons) < MIN_POOLED:
        return None
    bound = [max(c.max_pct, c.floor_pct or 0.0) for c in comparisons]
    worse = sum(c.pct_worse > b for c, b in zip(comparisons, bound, strict=True))
    return Pooled(
        worse=worse,
        total=len(comparisons),
        p_value=sign_test_greater(worse, len(comparisons)),
        median_pct=statistics.median(c.pct_worse for c in comparisons),
    )
