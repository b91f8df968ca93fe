"""Benchmarks, printed as tables: figures come from repeated runs side by side, never from tests."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ci import plan, stack, tables


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
    return 0 if statistics.median(both) < 0.5 else 1
