"""A measurement as the boundary carries it (docs/boundary.md: a JSON object per metric), read strictly."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import orjson

Phase = Literal["cold", "warm", "none"]


class Metric(NamedTuple):
    """One `stackgate.metric.<name>` property: a value with its unit and how it was measured.

    A NamedTuple rather than a frozen dataclass: a report builds one per metric per testcase (65,000
    for 10,000 testcases), and a frozen dataclass's per-field setattr was the largest cost of reading."""

    name: str
    value: float
    unit: str
    phase: Phase
    repeats: int
    spread: float | None  # max - min of the samples; None where a single value was recorded
    samples: tuple[float, ...] = ()

    def range(self) -> tuple[float, float]:
        """The interval the repeated measurements covered."""
        if self.samples:
            return min(self.samples), max(self.samples)
        half = (self.spread or 0.0) / 2
        return self.value - half, self.value + half

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        # Unpickled by tuple.__new__ in C, not by the Python-level __new__ a NamedTuple is given: a report's second
        # process sends this one 40,000 metrics of the testcases it read.
        return _new, (Metric, tuple(self))

    def to_json(self) -> dict[str, object]:
        return {
            "value": self.value,
            "unit": self.unit,
            "phase": self.phase,
            "repeats": self.repeats,
            "spread": self.spread,
            "samples": self.samples,  # a tuple: an array to orjson and json alike
        }


def metrics_of(
    raws: list[tuple[str, str]], problems: list[str], one: Callable[[str, str], str] | None = None
) -> list[Metric]:
    # One decode for all of a case's metrics, by orjson (strict RFC 8259: no NaN): decoding was the largest
    # part of reading 10,000 cases. Where any of them is not JSON, each is decoded alone, so that the problem
    # names the right metric. `one`: a dict's setdefault, keeping each unit once (ci.results.testcase).
    try:
        docs = orjson.loads("[" + ",".join(raw for _, raw in raws) + "]")
    except ValueError:
        docs = None
    if docs is None or len(docs) != len(raws):
        docs = [_loads(raw) for _, raw in raws]
    out = []
    for (name, _), doc in zip(raws, docs, strict=True):
        metric = _as_written(name, doc, one) or _metric(name, doc, problems)
        if metric:
            out.append(metric)
    return out


_FLOAT = {float}
_new = tuple.__new__


def _as_written(name: str, doc: Any, one: Callable[[str, str], str] | None = None) -> Metric | None:
    """The metric, where its object has the shape the harness writes (floats where numbers go, samples all floats,
    a count of repeats); else None, and `metric_from_json` reads it, naming what is off. orjson never decodes a
    number that is not finite, so floats from it need no check; nothing here converts, so nothing is let through
    that `metric_from_json` would refuse."""
    if type(doc) is not dict:
        return None
    value, samples, spread = doc.get("value"), doc.get("samples", ()), doc.get("spread")
    phase, unit, repeats = doc.get("phase", "none"), doc.get("unit", ""), doc.get("repeats")
    if not (
        type(value) is float
        and type(samples) is list
        and (not samples or set(map(type, samples)) == _FLOAT)
        and (spread is None or type(spread) is float)
        and phase in _PHASES
        and type(unit) is str
        and type(repeats) is int
        and repeats >= 1
    ):
        return None
    s = tuple(samples)
    if spread is None and s:
        spread = max(s) - min(s)
    unit = one(unit, unit) if one else unit
    return _new(Metric, (name, value, unit, _PHASE[phase], repeats, spread, s))


def _loads(raw: str) -> object:
    try:
        return orjson.loads(raw)
    except ValueError as exc:
        return exc


def _metric(name: str, doc: Any, problems: list[str]) -> Metric | None:
    try:
        if isinstance(doc, Exception):
            raise doc
        return metric_from_json(name, doc)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        problems.append(f"metric {name}: not the contract's JSON object ({type(exc).__name__}: {exc})")
        return None


def metric_from_json(name: str, doc: Any) -> Metric:
    """A metric object of docs/boundary.md (a JUnit property, or a row of report.json) as a Metric.
    Anything off, a number that is not finite included, is a ValueError naming it: NaN compares false
    both ways, so one would pass every threshold it meets."""
    if not isinstance(doc, dict):
        raise TypeError(f"{type(doc).__name__}, not an object")
    phase = doc.get("phase", "none")
    if phase not in _PHASES:
        raise ValueError(f"phase {phase!r}")
    raw = doc.get("samples") or ()
    samples = tuple(map(float, raw))  # map/all run in C: 10,000 cases hold half a million samples
    if not all(map(math.isfinite, samples)):
        raise ValueError(f"sample in {list(raw)!r} is not a finite number")
    repeats = doc.get("repeats", len(samples) or 1)
    if type(repeats) is not int:
        repeats = finite(repeats, "repeats")
        if repeats != int(repeats):
            raise ValueError(f"repeats {repeats!r} is not a count")
    if repeats < 1:
        raise ValueError(f"repeats {repeats!r} is not a count")
    spread = doc.get("spread")
    return Metric(
        name,
        finite(doc["value"], "value"),
        str(doc.get("unit", "")),
        phase,
        int(repeats),
        finite(spread, "spread") if spread is not None else (max(samples) - min(samples) if samples else None),
        samples,
    )


_PHASES = frozenset(("cold", "warm", "none"))
_PHASE = {p: p for p in _PHASES}  # one str per phase, not orjson's new one per metric


def finite(raw: Any, what: str) -> float:
    """`raw` as a float, or a ValueError naming `what` where it is not a finite number."""
    value = float(raw)
    if value - value != 0.0:  # NaN and ±inf, without a call
        raise ValueError(f"{what} {raw!r} is not a finite number")
    return value
