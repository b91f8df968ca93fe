"""A previous report.json as the baseline for regressions, and the comparison that respects spread.

A row's difference is flagged only when its median worsened past the allowed bound and a one-sided
Mann-Whitney test on the repeated samples says chance explains it less than 1 time in 20 (`ALPHA`). A
metric measured once per row (engine start-up) is judged across rows instead, by the sign test
(`pooled`): did more rows get worse past the bound than a fair coin would give?
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Literal

from ci import files
from ci.errors import ReportError
from ci.results.metrics import Metric, metric_from_json
from ci.results.stats import mann_whitney_greater, sign_test_greater


@dataclass(frozen=True)
class Baseline:
    path: str
    rows: MappingProxyType  # row id -> {metric name -> Metric}

    def metric(self, row: str, name: str) -> Metric | None:
        return self.rows.get(row, {}).get(name)


ALPHA = 0.05  # one-sided: a regression is claimed only when chance explains it less than 1 time in 20
MIN_SAMPLES = 4  # the fewest repeats per side at which Mann-Whitney can reach ALPHA (3 vs 3 cannot)


@dataclass(frozen=True, kw_only=True)
class Comparison:
    before: Metric
    after: Metric
    pct_worse: float  # positive: worse than the baseline by this much (medians of the samples)
    p_value: float | None  # Mann-Whitney, one-sided toward "worse"; None where either side has too few samples
    max_pct: float

    @property
    def judged(self) -> bool:
        return self.p_value is not None

    @property
    def flagged(self) -> bool:
        return self.judged and self.pct_worse > self.max_pct and (self.p_value or 1.0) < ALPHA

    @property
    def text(self) -> str:
        b, a = self.before, self.after
        test = f"p={self.p_value:.3f}" if self.p_value is not None else f"needs >= {MIN_SAMPLES} samples a side"
        return f"{b.value:g} -> {a.value:g} {a.unit} ({self.pct_worse:+.1f}% worse; n={b.repeats}/{a.repeats}, {test})"


def _samples(m: Metric) -> tuple[float, ...]:
    return m.samples or ((m.value,) if m.repeats == 1 else ())


def compare(before: Metric, after: Metric, better: Literal["higher", "lower"], max_pct: float) -> Comparison:
    b, a = _samples(before), _samples(after)
    b_mid = statistics.median(b) if b else before.value
    a_mid = statistics.median(a) if a else after.value
    delta = a_mid - b_mid if better == "lower" else b_mid - a_mid
    pct = 100.0 * delta / abs(b_mid) if b_mid else _sign_only(delta)
    p = None
    if len(b) >= MIN_SAMPLES and len(a) >= MIN_SAMPLES:
        worse, base = (a, b) if better == "lower" else ([-x for x in a], [-x for x in b])
        p = mann_whitney_greater(base, worse)
    return Comparison(before=before, after=after, pct_worse=pct, p_value=p, max_pct=max_pct)


def _sign_only(delta: float) -> float:
    """Percent change from a zero baseline: none, or infinitely worse/better."""
    return 0.0 if delta == 0 else math.copysign(math.inf, delta)


def load(path: Path) -> Baseline:
    """Read the `rows[].metrics` of a report.json this tool wrote; anything else is a ReportError."""
    try:
        doc = json.loads(files.read_regular(path, files.REPORT_JSON_MAX).decode("utf-8"))
        rows = {}
        for row in doc["rows"]:
            rows[str(row["id"])] = MappingProxyType(
                {name: metric_from_json(name, m) for name, m in row["metrics"].items()}
            )
    except OSError as exc:
        raise ReportError(f"{path}: baseline cannot be read: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise ReportError(
            f"{path}: not a stackgate report.json ({type(exc).__name__}: {exc})",
            hint="pass the report.json written by an earlier `python -m ci report`",
        ) from None
    return Baseline(path=str(path), rows=MappingProxyType(rows))


@dataclass(frozen=True, kw_only=True)
class Pooled:
    """Single-sample rows judged together: how many got worse past the bound, and the sign test's p."""

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
            f"{self.worse} of {self.total} single-sample rows worse past the bound, median change "
            f"{self.median_pct:+.1f}%; sign test p={self.p_value:.3f}"
        )


MIN_POOLED = 5  # the fewest rows at which the sign test can reach ALPHA (5 of 5: p = 0.031)


def pooled(comparisons: list[Comparison]) -> Pooled | None:
    if len(comparisons) < MIN_POOLED:
        return None
    worse = sum(c.pct_worse > c.max_pct for c in comparisons)
    return Pooled(
        worse=worse,
        total=len(comparisons),
        p_value=sign_test_greater(worse, len(comparisons)),
        median_pct=statistics.median(c.pct_worse for c in comparisons),
    )
