"""Result sets side by side: each row's measurements on side A against the same row on B (and C, ...).

A side is one or more results folders or JUnit files, read and merged as the report reads them. Within a
side every case of a row counts: repeated runs of it (c1-ROW/, c2-ROW/, ...) pool their samples of each
metric, where the report itself keeps them apart as duplicates. A side holding one row under two vLLM
versions is refused: those are two builds, not repeats of one. Across sides, different builds are what is
compared. Each other side is set against A: the difference and the ratio of the medians, and the
Hodges-Lehmann shift with its distribution-free interval (`stats.shift`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import median

from ci.errors import ResultsError, UsageError
from ci.escape import quote
from ci.results import acceptance, ported
from ci.results.acceptance import Verdict
from ci.results.baseline import Baseline
from ci.results.junit import Case
from ci.results.merge import Results, RowResult
from ci.results.metrics import Metric
from ci.results.ported import Ported
from ci.results.stats import Shift, shift
from ci.stack.model import Stack


@dataclass(frozen=True, kw_only=True)
class Side:
    label: str
    paths: tuple[str, ...]
    results: Results
    verdicts: tuple[Verdict, ...]
    rows: dict[str, RowResult]  # the rows compared: every row with a case, within the report's filters

    @property
    def vllm_versions(self) -> tuple[str, ...]:
        return tuple(sorted({c.vllm_version for r in self.rows.values() for c in r.cases if c.vllm_version}))

    @property
    def caches(self) -> tuple[str, ...]:
        """What the JIT caches started from (`stackgate.caches` of each suite), where the runs said."""
        return tuple(sorted({s.caches for f in self.results.inputs for s in f.scopes if s.caches}))

    @property
    def cases(self) -> int:
        return sum(len(r.cases) for r in self.rows.values())


@dataclass(frozen=True, kw_only=True)
class Summary:
    """One metric of one row on one side: its runs (each case of the row, one engine process), each summarised by
    the median of its samples. The run is the unit (ci.results.runs): the side's median, range and n are its runs';
    `samples` keeps every sample of every run, for what each run's own spread shows."""

    values: tuple[float, ...]  # each run's median
    samples: tuple[float, ...]

    @property
    def runs(self) -> int:
        return len(self.values)

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def median(self) -> float:
        return float(median(self.values))

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)


@dataclass(frozen=True, kw_only=True)
class Versus:
    """A side's summary against side A's, B - A."""

    delta: float  # median B - median A
    ratio: float | None  # median B / median A; None where A's median is 0
    shift: Shift


@dataclass(frozen=True, kw_only=True)
class Line:
    """One metric of one row, on every side (None where the side did not record it)."""

    row: str
    metric: str
    unit: str
    sides: tuple[Summary | None, ...]
    versus: tuple[Versus | None, ...]  # against side A: None for A itself, and where either side lacks it


@dataclass(frozen=True, kw_only=True)
class Comparison:
    sides: tuple[Side, ...]
    lines: tuple[Line, ...]
    partial: tuple[tuple[str, tuple[bool, ...]], ...]  # rows some side lacks, with which sides hold them
    ported: tuple[Ported, ...] = ()  # each change with a fork side and a side without it (ci.results.ported)

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(s.label for s in self.sides)


def labels(sides: Sequence[Sequence[Path]], given: Sequence[str]) -> tuple[str, ...]:
    """Each side's label: as given (once per side, A first), else its folder's (or file's) name."""
    if given:
        if len(given) != len(sides):
            raise UsageError(
                f"{len(given)} --label for {len(sides)} sides",
                hint="give one --label per side, A first, or none: python -m ci report A --compare B "
                "--label A --label B --out DIR",
            )
        if len(set(given)) != len(given):
            raise UsageError(f"--label names a side twice: {', '.join(given)}", hint="give each side its own label")
        return tuple(given)
    named = tuple("+".join(p.resolve().name if p.is_dir() else p.stem for p in paths) for paths in sides)
    if len(set(named)) == len(named):
        return named
    return tuple("+".join(str(p) for p in paths) for paths in sides)  # two folders of one name: the paths


def side(label: str, paths: Sequence[Path], results: Results, verdicts: Sequence[Verdict], filtered: bool) -> Side:
    """A side of the comparison, refused where it holds one row under two vLLM versions."""
    rows = {r.id: r for r in results.rows if r.cases and (r.planned is not None or not filtered)}
    for r in rows.values():
        _one_build(label, r)
    return Side(label=label, paths=tuple(str(p) for p in paths), results=results, verdicts=tuple(verdicts), rows=rows)


def judge(stack: Stack, results: Results, baseline: Baseline | None, changes: set[str]) -> tuple[Verdict, ...]:
    """The acceptance judgement of one side, the same as the report's own."""
    return tuple(v for v in acceptance.evaluate(stack, results, baseline) if v.change.id in changes)


def _one_build(label: str, row: RowResult) -> None:
    first: dict[str, str] = {}
    for c in row.cases:
        if c.vllm_version:
            first.setdefault(c.vllm_version, c.file)
    if len(first) > 1:
        seen = ", ".join(f"{v} ({f})" for v, f in first.items())
        one, two = (quote(str(Path(f).parent)) for f in list(first.values())[:2])
        raise ResultsError(
            f"side {label}: row {row.id} ran under {len(first)} vLLM versions: {seen}; "
            "runs of different builds are not repeats and are not pooled",
            hint=f"give each build a side of its own, e.g. python -m ci report {one} --compare {two} --out DIR",
        )


def compare(sides: Sequence[Side], stack: Stack | None = None) -> Comparison:
    """Every row and metric of the sides, each other side against A; rows some side lacks, listed; with the stack,
    each change that one side holds as a fork build and another lacks, judged as ported."""
    order = list(dict.fromkeys(row for s in sides for row in s.rows))
    lines: list[Line] = []
    partial = []
    for row in order:
        present = tuple(row in s.rows for s in sides)
        if not all(present):
            partial.append((row, present))
        if sum(present) < 2:
            continue
        cases = [c for s in sides if row in s.rows for c in s.rows[row].cases]
        names = dict.fromkeys(m.name for c in cases for m in c.metrics)
        names.update(
            (name, None) for name, attr in _JIT_COUNTS.items() if any(getattr(c, attr) is not None for c in cases)
        )
        lines += [_line(row, name, sides) for name in names]
    judged = ported.find(stack, sides) if stack is not None else ()
    return Comparison(sides=tuple(sides), lines=tuple(lines), partial=tuple(partial), ported=judged)


# what a row's whole process tree compiled (the JIT sentinel's properties), one sample per run, compared as
# metrics are: a baked side against an unbaked one, a release against another
_JIT_COUNTS = {"jit.compiles": "jit_compiles", "jit.cache_new_files": "jit_cache_new_files"}


def _case_metric(case: Case, name: str) -> Metric | None:
    if name in _JIT_COUNTS:
        count = getattr(case, _JIT_COUNTS[name])
        return None if count is None else Metric(name, float(count), "count", "cold", 1, None, (float(count),))
    return case.metric(name)


def _line(row: str, name: str, sides: Sequence[Side]) -> Line:
    summaries: list[Summary | None] = []
    units: set[str] = set()
    for s in sides:
        samples: list[float] = []
        values: list[float] = []
        for c in s.rows[row].cases if row in s.rows else ():
            m = _case_metric(c, name)
            if m is not None:
                mine = m.samples or (m.value,)  # a value recorded without its samples is one sample
                samples += mine
                values.append(float(median(mine)))
                units.add(m.unit)
        summaries.append(Summary(values=tuple(values), samples=tuple(samples)) if values else None)
    a = summaries[0]
    versus: list[Versus | None] = [None]
    for b in summaries[1:]:
        if a is None or b is None or len(units) > 1:  # different units are different quantities
            versus.append(None)
            continue
        ratio = b.median / a.median if a.median else None
        versus.append(Versus(delta=b.median - a.median, ratio=ratio, shift=shift(a.values, b.values)))
    return Line(row=row, metric=name, unit=" / ".join(sorted(units)), sides=tuple(summaries), versus=tuple(versus))
