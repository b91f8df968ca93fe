"""The self-test's CPU workload: a float32 mean of exp(x), checked against a float64 reference.

Pure Python (the cpu image carries no NumPy): float32 rounding comes from storing partial results in
`array("f")`, so the error against the float64 reference is real and small, and a broken precision
path (or a tolerance set to 0) makes the tolerance check fail.
"""

from __future__ import annotations

import math
import random
from array import array

CHUNK = 256


def inputs(context: int, batch: int) -> list[array]:
    rng = random.Random(context * 1_000_003 + batch)
    return [array("f", (rng.random() for _ in range(context))) for _ in range(batch)]


def mean_exp_f32(x: array) -> float:
    partial = array(
        "f", (sum(map(math.exp, x[i : i + CHUNK])) / len(x[i : i + CHUNK]) for i in range(0, len(x), CHUNK))
    )
    return array("f", [sum(partial) / len(partial)])[0]


def mean_exp_f64(x: array) -> float:
    return math.fsum(math.exp(v) for v in x) / len(x)


def run(xs: list[array]) -> list[float]:
    return [mean_exp_f32(x) for x in xs]


def max_abs_err(xs: list[array], got: list[float]) -> float:
    return max(abs(g - mean_exp_f64(x)) for x, g in zip(xs, got, strict=True))
