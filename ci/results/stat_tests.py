"""The two tests a regression verdict rests on, and the shift a comparison reports; exact and dependency-free.

- Mann-Whitney U, one-sided: are a row's repeated samples after larger than before? Exact null
  distribution for small samples (the usual case: 3-10 repeats), normal approximation with the tie
  correction once both sides have more than 20, or where ties make the exact count inapplicable.
- The sign test, one-sided: across rows measured once each (engine start-up), did more rows get worse
  than chance would give? Binomial tail with p = 1/2.
- The Hodges-Lehmann shift (`shift`): the median of every pairwise difference after - before, with the
  distribution-free interval between two of those differences' order statistics, chosen from the
  Mann-Whitney null distribution.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from statistics import NormalDist, median
from typing import Literal


def mann_whitney_greater(before: Sequence[float], after: Sequence[float]) -> float:
    """P-value of "after is stochastically greater than before" (one-sided)."""
    n1, n2 = len(before), len(after)
    if not n1 or not n2:
        return 1.0
    # U of `after`: pairs where after > before, ties counting half
    u = sum((a > b) + 0.5 * (a == b) for a in after for b in before)
    pooled = [*before, *after]
    tied = len(set(pooled)) != len(pooled)
    if not tied and n1 <= 20 and n2 <= 20:
        counts = _u_counts(n2, n1)
        total = math.comb(n1 + n2, n1)
        return sum(counts[int(k)] for k in range(math.ceil(u), n1 * n2 + 1)) / total
    mean = n1 * n2 / 2
    ties = {v: pooled.count(v) for v in set(pooled)}
    n = n1 + n2
    var = n1 * n2 / 12 * ((n + 1) - sum(t**3 - t for t in ties.values()) / (n * (n - 1)))
    if var <= 0:
        return 1.0
    z = (u - mean - 0.5) / math.sqrt(var)  # continuity correction
    return 0.5 * math.erfc(z / math.sqrt(2))


@cache
def _u_counts(m: int, n: int) -> tuple[int, ...]:
    """How many of the C(m+n, m) arrangements give each U from 0 to m*n (no ties)."""
    if m == 0 or n == 0:
        return (1,)
    a = _u_counts(m - 1, n)  # the largest value belongs to the first sample: it beats all n of the other
    b = _u_counts(m, n - 1)
    out = [0] * (m * n + 1)
    for u, c in enumerate(a):
        out[u + n] += c
    for u, c in enumerate(b):
        out[u] += c
    return tuple(out)


def sign_test_greater(worse: int, total: int) -> float:
    """P-value of seeing at least `worse` of `total` rows get worse if each were a fair coin."""
    if total <= 0:
        return 1.0
    return sum(math.comb(total, k) for k in range(worse, total + 1)) / 2**total


EXACT_UP_TO = 20  # samples a side: beyond this the null distribution is the normal approximation
Method = Literal["exact", "normal approximation", "n too small"]


@dataclass(frozen=True, kw_only=True)
class Shift:
    """How far `after` sits from `before`: the Hodges-Lehmann estimate and its confidence interval.

    `confidence` is the achieved one, the largest the pairwise differences offer at or below the level
    asked for; None with `interval`, where the samples are too few for any interval (1 against 1). With
    tied samples the exact confidence is that of the untied null distribution (nominal)."""

    estimate: float
    interval: tuple[float, float] | None
    confidence: float | None
    method: Method
    ties: bool = False


def shift(before: Sequence[float], after: Sequence[float], level: float = 0.95) -> Shift:
    """The shift of `after` against `before` (after - before), with its distribution-free interval."""
    m, n = len(before), len(after)
    if not m or not n:
        raise ValueError("a shift needs at least one sample on each side")
    diffs = sorted(float(b - a) for b in after for a in before)
    estimate = float(median(diffs))
    pooled = [*before, *after]
    ties = len(set(pooled)) != len(pooled)
    exact = m <= EXACT_UP_TO and n <= EXACT_UP_TO
    k, confidence = _order_exact(m, n, level) if exact else _order_normal(m, n, level)
    if k is None:
        return Shift(estimate=estimate, interval=None, confidence=None, method="n too small", ties=ties)
    # The interval runs from the k-th smallest difference to the k-th largest.
    return Shift(
        estimate=estimate,
        interval=(diffs[k - 1], diffs[len(diffs) - k]),
        confidence=confidence,
        method="exact" if exact else "normal approximation",
        ties=ties,
    )


def _order_exact(m: int, n: int, level: float) -> tuple[int | None, float | None]:
    """The smallest k whose interval's confidence, 1 - 2 P(U <= k - 1), is at most `level` and above 0."""
    counts = _u_counts(m, n)
    total = math.comb(m + n, m)
    target = Fraction(level).limit_denominator(10**6)
    below = 0  # arrangements with U <= k - 1
    for k in range(1, (m * n + 1) // 2 + 1):
        below += counts[k - 1]
        confidence = 1 - Fraction(2 * below, total)
        if confidence <= 0:
            return None, None
        if confidence <= target:
            return k, float(confidence)
    return None, None


def _order_normal(m: int, n: int, level: float) -> tuple[int | None, float | None]:
    """As `_order_exact`, with U's normal approximation (continuity corrected) for large samples."""
    mean, sd = m * n / 2, math.sqrt(m * n * (m + n + 1) / 12)
    z = NormalDist().inv_cdf((1 - level) / 2)  # negative
    k = max(1, math.ceil(mean + 0.5 + sd * z))
    confidence = 1 - 2 * NormalDist().cdf((k - 0.5 - mean) / sd)
    return (k, confidence) if confidence > 0 and k <= (m * n + 1) // 2 else (None, None)
