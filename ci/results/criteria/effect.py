"""The effect criterion: each metric a change acts on (`acceptance.effect`), on the fork's build against the same fork
without the change, over runs (ci.results.run_medians says why the run is the unit).

Per row the change's gain is the difference of the two sides' run medians, in % of the side without it, and its
Hodges-Lehmann interval over runs (ci.results.stat_tests) gives the gain's range. A row passes when the whole range is
at least the bound and a one-sided exact Mann-Whitney test puts chance under 1 in 20; it fails when the whole range
falls short of the bound. A bound no wider than the A/A floor measured on that row cannot be judged at all: the row says
"not judgeable at this floor (±X%)", never pass or fail, and what would make it judgeable. Fewer than `MIN_RUNS` runs a
side, a run that shared its GPU, or no side without the change leave it missing, saying which."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from ci.results import baseline, run_medians
from ci.results.baseline import Baseline, Floor
from ci.results.criteria.rule import EFFECT, NO_SIDE_WITHOUT, Criterion, Evidence, Status, combine, listed, ran_rows
from ci.results.merge import RowResult
from ci.results.stat_tests import mann_whitney_greater, shift
from ci.stack.change import Effect


@dataclass(frozen=True, kw_only=True)
class Gain:
    """One row's gain on one metric: the fork's runs against the runs without the change."""

    before: tuple[float, ...]  # each run's median without the change
    after: tuple[float, ...]  # each run's median on the fork
    unit: str
    effect: Effect
    floor: Floor

    @property
    def pct(self) -> float:
        """The gain, the medians of the runs' medians: positive is better, in % of the side without the change."""
        b, a = statistics.median(self.before), statistics.median(self.after)
        return self._pct_of(b - a if self.effect.better == "lower" else a - b)

    def _pct_of(self, gained: float) -> float:
        """`gained` (in the metric's unit, positive is better) in % of the side without the change."""
        b = statistics.median(self.before)
        return 100.0 * gained / abs(b) if b else (0.0 if gained == 0 else math.copysign(math.inf, gained))

    @property
    def interval(self) -> tuple[float, float] | None:
        """The gain's range (%), from the shift's distribution-free interval; None where too few runs give one."""
        s = shift(self.before, self.after)
        if s.interval is None:
            return None
        lo, hi = s.interval
        ends = sorted(self._pct_of(-x if self.effect.better == "lower" else x) for x in (lo, hi))
        return ends[0], ends[1]

    @property
    def p_value(self) -> float | None:
        """One-sided, toward "better on the fork"; None with fewer than MIN_RUNS runs a side."""
        if min(len(self.before), len(self.after)) < run_medians.MIN_RUNS:
            return None
        if self.effect.better == "lower":
            return mann_whitney_greater(self.after, self.before)
        return mann_whitney_greater(self.before, self.after)

    @property
    def judgeable(self) -> bool:
        """The A/A floor, where one was measured, is narrower than the bound."""
        return self.floor.pct is None or self.floor.pct < self.effect.min_gain_pct

    def status(self) -> Status:
        rng, p = self.interval, self.p_value
        if p is None or rng is None or not self.judgeable:
            return "missing"
        if rng[0] >= self.effect.min_gain_pct and p < baseline.ALPHA:
            return "pass"
        if rng[1] < self.effect.min_gain_pct:
            return "fail"
        return "missing"

    @property
    def text(self) -> str:
        b, a = statistics.median(self.before), statistics.median(self.after)
        rng = self.interval
        between = f" [{rng[0]:+.1f}%, {rng[1]:+.1f}%]" if rng else ""
        p = self.p_value
        test = f"p={p:.3f} over runs" if p is not None else f"needs {run_medians.MIN_RUNS} runs a side"
        floor = ""
        if self.floor.pct is not None:
            floor = f"; A/A floor {run_medians.pct(self.floor.pct)} at {self.floor.measured_on}"
        said = f"{b:g} -> {a:g} {self.unit} (gain {self.pct:+.1f}%{between}; runs {len(self.before)}/{len(self.after)}"
        return f"{said}, {test}{floor})"

    @property
    def short(self) -> str:
        """What holds the row back, for the first screen: "needs 4 runs a side", "draft_step_ms not judgeable at this
        floor (±24.0%)", "decode_tok_s gains +1.2% < 5%"."""
        status, want = self.status(), self.effect.min_gain_pct
        if not self.judgeable:
            return f"{self.effect.metric} {self.verdict.split(':')[0]}"
        if status == "fail":
            return f"{self.effect.metric} gains {self.pct:+.1f}% < {want:g}%"
        if self.p_value is None:
            return self.verdict
        return f"{self.effect.metric} inconclusive against {want:g}%"

    @property
    def verdict(self) -> str:
        """The row's judgement in words, after its numbers."""
        want = self.effect.min_gain_pct
        if not self.judgeable:
            assert self.floor.pct is not None
            return (
                f"not judgeable at this floor ({run_medians.pct(self.floor.pct)}): a {want:g}% gain cannot be told "
                "from the run-to-run spread of one build; a quieter row, or a bound wider than the floor, can be "
                "judged"
            )
        status = self.status()
        if status == "pass":
            return f"at least {want:g}% better"
        if status == "fail":
            return f"less than the {want:g}% the change must gain"
        if self.p_value is None:
            return f"needs {run_medians.MIN_RUNS} runs a side"
        return f"inconclusive: the gain's range straddles the {want:g}% bound"


def effect(ev: Evidence) -> Criterion:
    """Every effect the change names, on every row it applies to that ran; the worst row deciding."""
    change, base = ev.change, ev.baseline
    wants = change.acceptance.effect
    if not wants and change.kind != "import":  # the harness's own rows, the seed's combinations: no change to act
        said = f"not applicable: the {change.kind} rows import no change, so there is nothing without it to gain on"
        return Criterion(name=EFFECT, status="pass", evidence=said)
    if not wants:
        said = "the change names no metric it acts on: add acceptance.effect to its file (docs/howto-add-change.md)"
        return Criterion(name=EFFECT, status="missing", evidence=said, short="names no metric it acts on")
    rule = "; ".join(
        f"{e.metric} ({e.better} is better) at least {e.min_gain_pct:g}% better than without the change" for e in wants
    )

    def verdict(status: Status, text: str, short: str) -> Criterion:
        said = f"{rule}, over runs, the bound wider than the A/A floor; {text}"
        return Criterion(name=EFFECT, status=status, evidence=said, short=short)

    if base is None or not base.without:
        how = f"python -m ci main --compare-without {change.id} --aa"
        said = f"judged against the fork without #{change.id} only ({how})"
        return verdict("missing", said, NO_SIDE_WITHOUT)
    parts: list[tuple[Status, str]] = []
    held: list[str] = []  # the first screen's words: each metric not passing, and why
    for want in wants:
        judged, short = _judged(ev, base, want)
        held += short
        if not judged:
            parts.append(("missing", f"{want.metric}: no row it applies to ran"))
            held.append(f"{want.metric}: no row it applies to ran")
        for status in ("fail", "missing", "pass"):
            if status in judged:
                parts.append((status, f"{want.metric}: {listed(judged[status])}"))
    crit = combine(EFFECT, parts)
    return verdict(crit.status, crit.evidence, "; ".join(dict.fromkeys(held)))


def _judged(ev: Evidence, base: Baseline, want: Effect) -> tuple[dict[Status, list[str]], list[str]]:
    """Each row `want` applies to that ran, by its status (the row and its numbers), and the first screen's words for
    the rows that do not pass."""
    judged: dict[Status, list[str]] = {}
    short: list[str] = []
    for r in ran_rows(ev.rows):
        if r.planned is None or not want.applies(_axes(r)):
            continue
        now, before = run_medians.of_cases(r.ran, want.metric), base.runs(r.id, want.metric)
        if now is not None and now.shared:
            judged.setdefault("missing", []).append(f"{r.id}: runs shared their GPU ({'; '.join(now.shared)})")
            short.append(f"{want.metric}: runs shared their GPU")
            continue
        if now is None or not now.runs or not before:
            judged.setdefault("missing", []).append(f"{r.id}: {want.metric} not recorded on both sides")
            short.append(f"{want.metric} not recorded on both sides")
            continue
        unit = next((m.unit for c in r.ran if (m := c.metric(want.metric))), "")
        gain = Gain(before=before, after=now.values, unit=unit, effect=want, floor=base.floor(r.id, want.metric))
        judged.setdefault(gain.status(), []).append(f"{r.id}: {gain.text}: {gain.verdict}")
        if gain.status() != "pass":
            short.append(gain.short)
    return judged, short


def _axes(r: RowResult) -> dict[str, object]:
    """A planned row's fields (model, context, batch, kv_cache_dtype, ...): what `Effect.only` selects on."""
    return dict(r.planned.__dict__) if r.planned is not None else {}
