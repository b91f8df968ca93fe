"""The fork's plan: the rows the fork under test can run. A row of a change the fork lacks (ci.upstream.holds.classify
says "absent") is planned as "absent in the fork" and never scheduled: it can only fail "absent", spending GPU hours.
`ci plan --fork` shows them, `ci main --fork` and the pipeline record them as not run, with the reason, so the report
lists them (count and change)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ci.common import contract
from ci.fork.source import Fork
from ci.stack.model import Stack
from ci.stack.plan import Plan

ABSENT = "fork-absent"  # the results folder (under --out) that holds their not-run.json, one per target and suite


@dataclass(frozen=True, kw_only=True)
class Split:
    runs: Plan  # the rows the fork can run
    absent: Plan  # the rows of changes it lacks
    reason: dict[str, str]  # change -> why its rows do not run
    fix: str

    def record(self, out: Path) -> list[Path]:
        """not-run.json for the rows set apart, one per target and suite, under out/fork-absent/."""
        written = []
        for target, suite in sorted({(r.target, r.suite) for r in self.absent.rows}):
            rows = [r for r in self.absent.rows if (r.target, r.suite) == (target, suite)]
            folder = out / ABSENT / contract.results_folder(target, suite)
            folder.mkdir(parents=True, exist_ok=True)
            why = "; ".join(dict.fromkeys(self.reason[r.change] for r in rows))
            written.append(contract.record_not_run(folder, target, suite, [r.id for r in rows], why, self.fix))
        return written


def judged_on(st: Stack, p: Plan) -> frozenset[str]:
    """The targets where a fork configured (not named) is judged: those running rows of a change imported from
    upstream. The others (the cpu self-test) judge the harness, and build the locked release as they are."""
    return frozenset(r.target for r in p.rows if st.changes[r.change].upstream is not None)


def split(p: Plan, fork: Fork, without: str | None = None) -> Split:
    """The fork's plan: rows of the changes it lacks set apart. `without`: an ablation's change keeps its rows (they
    judge the fork without it)."""
    lacking = {c for c in fork.absent if c != without}
    reason = {
        c: f"#{c}: absent in the fork {fork.name} {fork.ref} ({fork.commit[:12]}): {fork.state(c).detail}"
        for c in lacking
    }
    return Split(
        runs=Plan(tuple(r for r in p.rows if r.change not in lacking), p.excluded),
        absent=Plan(tuple(r for r in p.rows if r.change in lacking), ()),
        reason=reason,
        fix=f"nothing to run until the fork carries the change: {fork.scope.command('fork')} says what is looked for",
    )
