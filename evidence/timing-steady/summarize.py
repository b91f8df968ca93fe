"""The A/A floor of each timed metric from two arms of one build (floor.sh's arms/fork and arms/aa, or a
--compare-without protocol's arms/fork and arms/aa), as the report computes it (ci.results.runs.floor_pct): the
farthest end of the 95% interval of A' - A over runs, in % of A's median.

    python evidence/timing-steady/summarize.py WORK/arms/fork WORK/arms/aa [--baseline-report REPORT.json]

With --baseline-report, each metric's floor in that report (report.json comparison.ported[].floors) is printed
beside it: the floor before and after, on the same row."""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from ci.results import merge, runs
from ci.stack import loader, plan

TIMED = ("draft_step_ms", "warm_itl_ms", "warm_request_ms", "prefill_ms", "cold_first_request_ms", "engine_ready_s",
         "launches_per_draft_step", "draft_step_fused_over_unfused", "warm_workload_ms")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("fork", type=Path)
    ap.add_argument("aa", type=Path)
    ap.add_argument("--baseline-report", type=Path)
    args = ap.parse_args()
    p = plan.build(loader.load())
    a, a2 = merge.collect([args.fork], p), merge.collect([args.aa], p)
    before: dict[tuple[str, str], float] = {}
    if args.baseline_report:
        doc = json.loads(args.baseline_report.read_text())
        for ported in (doc.get("comparison") or {}).get("ported") or ():
            for f in ported.get("floors") or ():
                if f.get("pct") is not None:
                    before[(f["row"], f["metric"])] = float(f["pct"])
    print("| row | metric | fork runs | A/A runs | fork median [range] | A/A median | floor | floor before |")
    print("|---|---|---|---|---|---|---|---|")
    for row in sorted(r.id for r in a.rows if r.cases):
        ra, rb = next(r for r in a.rows if r.id == row), next((r for r in a2.rows if r.id == row), None)
        for name in TIMED:  # a skipped row's cases too: a rehearsal's self-test rows skip their bake check
            x, y = runs.of_cases(ra.cases, name), runs.of_cases(rb.cases, name) if rb else None
            if not x or not x.runs:
                continue
            floor = runs.floor_pct(x.values, y.values) if y and y.runs else None
            said = runs.pct(floor) if floor is not None else "—"
            was = runs.pct(before[(row, name)]) if (row, name) in before else "—"
            ymed = f"{statistics.median(y.values):.4g}" if y and y.runs else "—"
            print(f"| {row} | {name} | {len(x.values)} | {len(y.values) if y else 0} | {x.median:.4g} "
                  f"[{min(x.values):.4g}-{max(x.values):.4g}] | {ymed} | {said} | {was} |")  # fmt: skip


if __name__ == "__main__":
    main()
