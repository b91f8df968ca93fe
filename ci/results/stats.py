"""The two tests a regression verdict rests on, exact and dependency-free.

- Mann-Whitney U, one-sided: are a row's repeated samples after larger than before? Exact null
  distribution for small samples (the usual case: 3-10 repeats), normal approximation with the tie
  correction once both sides have more than 20, or where ties make the exact count inapplicable.
- The sign test, one-sided: across rows measured once each (engine start-up), did more rows get worse
  than chance would give? Binomial tail with p = 1/2.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache


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
