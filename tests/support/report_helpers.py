"""Shared builders for the results/acceptance/report tests: contract-shaped JUnit on disk."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ci.bench import synthetic
from ci.bench.synthetic import FakeCase
from ci.stack import loader as stack
from ci.stack import plan
from ci.stack.model import Stack
from ci.stack.plan import Plan, Row

STACK: Stack = stack.load()
PLAN: Plan = plan.build(STACK)


def rows(change: str | None = None, target: str | None = None) -> list[Row]:
    return [r for r in PLAN.rows if (change is None or r.change == change) and (target is None or r.target == target)]


def write_rows(
    folder: Path,
    selected: list[Row],
    edit: Callable[[Row, FakeCase], FakeCase] = lambda r, c: c,
    prefix: str = "",
    caches: str = "",
) -> list[Path]:
    """One file per (target, suite), named as the contract's suite, every row passing unless `edit` says otherwise."""
    groups: dict[tuple[str, str], list[FakeCase]] = {}
    for r in selected:
        case = edit(r, synthetic.for_row(r, STACK.changes[r.change]))
        groups.setdefault((r.target, r.suite), []).append(case)
    return [
        synthetic.write(folder / f"{prefix}stackgate.{t}.{s}.0.xml", t, s, cases, caches=caches)
        for (t, s), cases in groups.items()
    ]
