"""A previous report.json as the baseline for regressions, and the comparison that respects spread.

A difference is flagged only when it exceeds the allowed bound and the two sets of repeated
measurements do not overlap: a gap that the run-to-run spread explains is noise, not a regression.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Literal

from ci.errors import ReportError
from ci.results.junit import Metric, metric_from_json


@dataclass(frozen=True)
class Baseline:
    path: str
    rows: MappingProxyType  # row id -> {metric name -> Metric}

    def metric(self, row: str, name: str) -> Metric | None:
        return self.rows.get(row, {}).get(name)


@dataclass(frozen=True, kw_only=True)
class Comparison:
    before: Metric
    after: Metric
    pct_worse: float  # positive: worse than the baseline by this much
    overlap: bool  # the two sample ranges overlap: the spread explains the difference
    judged: bool  # both sides were measured repeatedly
    max_pct: float

    @property
    def flagged(self) -> bool:
        return self.judged and self.pct_worse > self.max_pct and not self.overlap

    @property
    def text(self) -> str:
        b, a = self.before, self.after
        spread = f"spread {_g(b.spread)} / {_g(a.spread)} {a.unit}, n={b.repeats}/{a.repeats}"
        return f"{b.value:g} -> {a.value:g} {a.unit} ({self.pct_worse:+.1f}% worse; {spread})"


def _g(x: float | None) -> str:
    return "?" if x is None else f"{x:g}"


def compare(before: Metric, after: Metric, better: Literal["higher", "lower"], max_pct: float) -> Comparison:
    delta = after.value - before.value if better == "lower" else before.value - after.value
    pct = 100.0 * delta / abs(before.value) if before.value else _sign_only(delta)
    (b_lo, b_hi), (a_lo, a_hi) = before.range(), after.range()
    return Comparison(
        before=before,
        after=after,
        pct_worse=pct,
        overlap=a_lo <= b_hi and b_lo <= a_hi,
        judged=before.repeats >= 2 and after.repeats >= 2,
        max_pct=max_pct,
    )


def _sign_only(delta: float) -> float:
    """Percent change from a zero baseline: none, or infinitely worse/better."""
    return 0.0 if delta == 0 else math.copysign(math.inf, delta)


def load(path: Path) -> Baseline:
    """Read the `rows[].metrics` of a report.json this tool wrote; anything else is a ReportError."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
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
