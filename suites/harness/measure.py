"""Measurements with their unit and how they were taken, and cold vs warm timing.

Cold is the first call in the row's fresh process (each test item runs in its own process, so the
first call a test makes is cold); warm is the steady state after it. They are separate measurements
and never averaged together. A cold figure has one sample per process: repeating it needs more
processes, so its `repeats` says 1 rather than pretending otherwise.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from harness.items import ENV_SHARE

Phase = Literal["cold", "warm", "none"]
PROPERTY_PREFIX = "stackgate.metric."

COLD_FROM = "stackgate.cold_from"  # on a later row of a shared process: the row its cold figures were taken on
_cold_taken: dict[str, tuple[str, tuple[float, ...]]] = {}  # name -> (the row that took it first here, its samples)


@dataclass(frozen=True, kw_only=True)
class Measurement:
    name: str
    value: float
    unit: str
    phase: Phase
    samples: tuple[float, ...]
    taken_on: str | None = None  # a cold figure another row of this shared process took (`first_cold`)

    @property
    def repeats(self) -> int:
        return len(self.samples)

    @property
    def spread(self) -> float:
        """max - min of the samples (0 for one sample)."""
        return max(self.samples) - min(self.samples) if self.samples else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "unit": self.unit,
            "phase": self.phase,
            "repeats": self.repeats,
            "spread": self.spread,
            "samples": list(self.samples),
        }

    def property(self) -> tuple[str, str]:
        return PROPERTY_PREFIX + self.name, json.dumps(self.to_json(), sort_keys=True)


def of_samples(name: str, samples: Sequence[float], unit: str, phase: Phase = "none") -> Measurement:
    """A measurement whose value is the median of its samples."""
    if not samples:
        raise ValueError(f"measurement {name!r} has no samples")
    return Measurement(name=name, value=statistics.median(samples), unit=unit, phase=phase, samples=tuple(samples))


def record(item_or_request: Any, m: Measurement) -> Measurement:
    """Attach a measurement to the running test as a JUnit property (`record_property` semantics)."""
    node = getattr(item_or_request, "node", item_or_request)
    node.user_properties.append(m.property())
    if m.taken_on:
        node.user_properties.append((COLD_FROM, cold_from(m.taken_on)))
    return m


def cold_from(row: str) -> str:
    """The label of a cold figure taken on `row`, the first row of this shared process."""
    return f"{row}: this process's first row, where its cold figures (engine ready, first request) were taken"


def first_cold(name: str, samples: Sequence[float], row: str) -> tuple[tuple[float, ...], str | None]:
    """Cold figure `name` as this process can report it for `row`: `samples` where `name` is first taken here (or
    taken again by the same row); else, a later row of a shared process (harness.shared), the samples the first
    row took, and that row. Only a process's first figure of a kind met a fresh process."""
    first_row, first_samples = _cold_taken.setdefault(name, (row, tuple(samples)))
    return (tuple(samples), None) if first_row == row else (first_samples, first_row)


def _ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000.0


@dataclass(frozen=True, kw_only=True)
class ColdWarm:
    cold: Measurement
    warm: Measurement


def cold_warm(
    name: str,
    fn: Callable[[], object],
    *,
    repeats: int = 5,
    settle: int = 1,
    cold_name: str | None = None,
    warm_name: str | None = None,
) -> ColdWarm:
    """Time `fn` cold (its first call in this process) and warm (`repeats` calls after `settle` untimed ones).

    Refuses a second cold measurement of the same name in one process: it would not be cold. In a shared process
    (harness.shared) a later row gets the first row's cold figure, labelled with that row (`record` says so).
    """
    if repeats < 1:
        raise ValueError("repeats must be >= 1")
    if name in _cold_taken and os.environ.get(ENV_SHARE) != "1":
        raise RuntimeError(f"{name!r} was already timed cold in this process; a second call is not cold")
    taken = _cold_taken.get(name)
    cold, taken_on = first_cold(name, taken[1] if taken else [_ms(fn)], os.environ.get("STACKGATE_ROW_ID", ""))
    for _ in range(settle):
        fn()
    warm = [_ms(fn) for _ in range(repeats)]
    timed = replace(of_samples(cold_name or f"cold_{name}_ms", cold, "ms", "cold"), taken_on=taken_on)
    return ColdWarm(cold=timed, warm=of_samples(warm_name or f"warm_{name}_ms", warm, "ms", "warm"))
