"""Benchmarks, printed as tables: figures come from repeated runs side by side, never from tests."""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ci import tables
from ci.bench import synthetic
from ci.stack import loader as stack
from ci.stack import plan

REPORT_FILES, REPORT_CASES = 50, 10_000
REPORT_BUDGET_S, REPORT_BUDGET_MB = 2.0, 300.0


def _times(fn: Callable[[], object], repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def _row(name: str, samples: list[float], budget_s: float | None) -> list[object]:
    med = statistics.median(samples)
    verdict = "" if budget_s is None else ("ok" if med < budget_s else "OVER")
    return [name, len(samples), f"{med * 1000:.1f}", f"{min(samples) * 1000:.1f}", f"{max(samples) * 1000:.1f}",
            "" if budget_s is None else f"{budget_s * 1000:.0f}", verdict]  # fmt: skip


def make_junit(st: stack.Stack, folder: Path, files: int = REPORT_FILES, cases: int = REPORT_CASES) -> None:
    """`cases` contract-shaped testcases over every planned row (several tests per row), in `files` files."""
    rows = plan.build(st).rows
    scopes: dict[tuple[str, str], list[synthetic.FakeCase]] = {}
    for n in range(cases):
        row = rows[n % len(rows)]
        case = synthetic.for_row(row, st.changes[row.change], test=f"test_{n // len(rows)}")
        scopes.setdefault((row.target, row.suite), []).append(case)
    shards = {k: max(1, round(files * len(v) / cases)) for k, v in scopes.items()}
    biggest = max(shards, key=lambda k: len(scopes[k]))
    shards[biggest] += files - sum(shards.values())
    for (target, suite), items in scopes.items():
        n = shards[(target, suite)]
        for i in range(n):
            chunk = items[i::n]
            synthetic.write(folder / f"stackgate.{target}.{suite}.{i}.xml", target, suite, chunk, shard=i)


def report_child(stack_dir: str, junit: str, out: str) -> None:
    """Run in a fresh process: time merge + judge + render + write, and report the process's peak RSS."""
    from ci.report import write as report

    start = time.perf_counter()
    rep = report.build(Path(stack_dir), [Path(junit)], None)
    report.write_atomic(Path(out), report.render(rep))
    seconds = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(json.dumps({"seconds": seconds, "peak_mb": peak_mb, "cases": sum(len(r.cases) for r in rep.results.rows)}))


def _report_figures(stack_dir: Path, repeats: int) -> tuple[list[object], list[object], bool]:
    st = stack.load(stack_dir)
    with tempfile.TemporaryDirectory() as tmp:
        junit, out = Path(tmp) / "junit", Path(tmp) / "out"
        make_junit(st, junit)
        code = "import sys; from ci.bench.planning import report_child; report_child(*sys.argv[1:])"
        runs = []
        for _ in range(repeats):
            cmd = [sys.executable, "-c", code, str(stack_dir), str(junit), str(out)]
            runs.append(json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout))
        cli = [sys.executable, "-m", "ci", "--stack", str(stack_dir), "report", str(junit), "--out", str(out)]
        wall = _times(lambda: subprocess.run(cli, check=True, stdout=subprocess.DEVNULL), repeats)
        n_files = len(list(junit.glob("*.xml")))
    secs = [r["seconds"] for r in runs]
    peak = max(r["peak_mb"] for r in runs)
    timing = _row(f"report: merge {n_files} files / {runs[0]['cases']} testcases + render 3 outputs", secs,
                  REPORT_BUDGET_S)  # fmt: skip
    fresh = _row("python -m ci report (fresh process, same inputs)", wall, None)
    ok = statistics.median(secs) < REPORT_BUDGET_S and peak < REPORT_BUDGET_MB
    memory = [f"report: peak RSS of the whole process (MB), max of {len(runs)}", len(runs), f"{peak:.0f}",
              f"{min(r['peak_mb'] for r in runs):.0f}", f"{peak:.0f}", f"{REPORT_BUDGET_MB:.0f}",
              "ok" if peak < REPORT_BUDGET_MB else "OVER"]  # fmt: skip
    return [timing, fresh], memory, ok


def main(stack_dir: Path, repeats: int) -> int:
    st = stack.load(stack_dir)
    n_rows = len(plan.build(st).rows)
    load = _times(lambda: stack.load(stack_dir), repeats)
    build = _times(lambda: plan.build(st), repeats)
    both = _times(lambda: plan.build(stack.load(stack_dir)), repeats)
    cmd = [sys.executable, "-m", "ci", "--stack", str(stack_dir), "plan", "--format", "json"]
    cli = _times(lambda: subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL), max(3, repeats // 4))
    rows = [
        _row("stack.load (validate all files)", load, None),
        _row("plan.build (expand matrix)", build, None),
        _row("load + plan, in process", both, 0.5),
        _row("python -m ci plan --format json (fresh process)", cli, None),
    ]
    print(f"planning the full matrix: {n_rows} rows from {stack_dir}")
    sys.stdout.write(tables.text(("what", "n", "median ms", "min ms", "max ms", "budget ms", ""), rows))
    report_rows, memory, report_ok = _report_figures(stack_dir, max(3, repeats // 4))
    print(f"\nreport: {REPORT_CASES} synthetic testcases (docs/boundary.md shape) in {REPORT_FILES} files")
    sys.stdout.write(tables.text(("what", "n", "median ms", "min ms", "max ms", "budget ms", ""), report_rows))
    sys.stdout.write(tables.text(("what", "n", "MB", "min MB", "max MB", "budget MB", ""), [memory]))
    return 0 if statistics.median(both) < 0.5 and report_ok else 1
