"""Each change's timing numbers over builds: per change, target and metric, the value of each of the last builds (the
median over the change's rows on the target that recorded it, to the 7 significant digits a history keeps), the mean
of the last 7 days and the best of the last 30 beside the current value, and whether it moved past the A/A floor
since the build before.

The A/A floor comes from the history itself: builds that ran the same build ids (the same images and fork commits)
are repeats of one build, as an A/A arm is; the farthest any of them lies from their median, in %, is the floor. Where
no build was repeated there is no floor, and a move is shown but never headlined."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from ci.history.record import Seen
from ci.history.sql_schema import shown

# The timing metrics a trend is drawn for: engine ready, the cold first request, a warm request and the inter-token
# latency, and compiles after ready (lower is better for each)
METRICS = ("engine_ready_s", "cold_first_request_ms", "warm_request_ms", "warm_itl_ms", "compiles_after_ready")
MEAN_DAYS, BEST_DAYS = 7, 30
SHOWN = 20  # builds a trend shows


@dataclass(frozen=True, kw_only=True)
class Point:
    build: int  # its number in the history (0: this build)
    called: str  # "build 412", "build #7", "this build"
    at: datetime
    value: float  # the median over the rows that recorded it
    rows: int


@dataclass(frozen=True, kw_only=True)
class Trend:
    change: str
    target: str
    metric: str
    unit: str
    points: tuple[Point, ...]  # the last SHOWN builds that recorded it, oldest first
    mean: float | None  # of the builds in the MEAN_DAYS up to this one
    best: float | None  # the least in the BEST_DAYS up to this one
    floor_pct: float | None  # the A/A floor, from repeated builds
    moved_pct: float | None  # this build against the one before, in % of that one

    @property
    def current(self) -> Point | None:
        return self.points[-1] if self.points and self.points[-1].build == 0 else None

    @property
    def headline(self) -> bool:
        """Moved past the A/A floor since the build before."""
        return self.moved_pct is not None and self.floor_pct is not None and abs(self.moved_pct) > self.floor_pct


def trends(
    rows: Mapping[str, tuple[str, str]], runs: Mapping[str, Sequence[Seen]], units: Mapping[str, str], at: datetime
) -> list[Trend]:
    """The trends of every (change, target, metric) the runs recorded: `rows` maps a row to its (change, target),
    `runs` a row to its runs (this build's with build 0)."""
    values: dict[tuple[str, str, str], dict[int, list[float]]] = {}
    seen: dict[int, Seen] = {}
    ids: dict[tuple[str, str, int], set[tuple[str, str]]] = {}
    for row, (change, target) in rows.items():
        for run in runs.get(row, ()):
            seen.setdefault(run.build, run)
            ids.setdefault((change, target, run.build), set()).add(run.ids)
            for name, value in run.metrics:
                if name in METRICS:
                    values.setdefault((change, target, name), {}).setdefault(run.build, []).append(value)
    out = []
    for (change, target, name), by_build in sorted(values.items()):
        points = sorted(
            (
                Point(build=b, called=seen[b].called, at=seen[b].at, value=shown(statistics.median(v)), rows=len(v))
                for b, v in by_build.items()
                if seen[b].at <= at
            ),
            key=lambda p: (p.at, p.build == 0, p.build),
        )
        if not points:
            continue
        recent = [p.value for p in points if at - timedelta(days=MEAN_DAYS) <= p.at]
        best = [p.value for p in points if at - timedelta(days=BEST_DAYS) <= p.at]
        moved = None
        if len(points) > 1 and points[-2].value:
            moved = 100.0 * (points[-1].value - points[-2].value) / points[-2].value
        out.append(
            Trend(
                change=change,
                target=target,
                metric=name,
                unit=units.get(name, ""),
                points=tuple(points[-SHOWN:]),
                mean=statistics.fmean(recent) if recent else None,
                best=min(best) if best else None,
                floor_pct=_floor(points, {p.build: frozenset(ids[(change, target, p.build)]) for p in points}),
                moved_pct=moved,
            )
        )
    return out


def _floor(points: Sequence[Point], ids: Mapping[int, frozenset[tuple[str, str]]]) -> float | None:
    """The farthest a build lies from the median of the builds that ran its same build ids, in % of that median."""
    groups: dict[frozenset[tuple[str, str]], list[float]] = {}
    for p in points:
        if any(image or commit for image, commit in ids[p.build]):
            groups.setdefault(ids[p.build], []).append(p.value)
    spreads = [
        100.0 * max(abs(v - mid) for v in vs) / mid
        for vs in groups.values()
        if len(vs) > 1 and (mid := statistics.median(vs))
    ]
    return max(spreads) if spreads else None
