"""`ci bench --only history`: the report with a history of 1,000 builds of every planned row, beside the same
report without one, side by side; and the history file's size.

The history is made as `ci report` makes it (ci.history.store.append, one build a night for 1,000 nights): each
criterion's verdict per change and target, each row's run with the metrics its change's rows record, some rows
failing now and then on one build's ids (flaky), some breaking at a commit, the fork commit moving every 7 builds and
the image every 14. The report is of 832 real-shaped testcases (one per planned row, cloned from the JUnit the H200
campaigns wrote), as the night after the last build. Each pair runs the whole command in fresh processes (the
history's read, its rules and trends, and its write of this build included), without the history, then with it; the
ratio is the median of the pairs' ratios."""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ci.bench import real_shaped, synthetic
from ci.bench.plan_bench import _whole_command
from ci.common import tables
from ci.history import store
from ci.history.record import Build, Judged, Run
from ci.results.criteria import registry
from ci.stack import loader as stack
from ci.stack import plan

BUILDS = 1000
RATIO = 1.5  # the report with the history over the report without it
SIZE_MB = 100.0


def make(stack_dir: Path, path: Path, builds: int = BUILDS, seed: int = 71) -> float:
    """A history of `builds` nightly builds of every planned row at `path`; the seconds it took to write."""
    st = stack.load(stack_dir)
    rows = plan.build(st).rows
    metrics = {
        c: tuple((m.name, m.value, m.unit) for m in synthetic.passing_metrics(st.changes[c])) for c in st.changes
    }
    rng = random.Random(seed)
    flaky = set(rng.sample(range(len(rows)), 12))
    broke = {i: rng.randrange(builds) for i in rng.sample(range(len(rows)), 8)}  # row -> the build it broke at
    last = datetime.now(UTC).replace(microsecond=0) - timedelta(days=1)
    # each criterion's verdict on each change, per target where it has rows, as a report records them
    targets = {c: sorted({r.target for r in rows if r.change == c}) for c in st.changes}
    verdicts = tuple(
        Judged(change=c, target=t, criterion=k, status=rng.choice(("pass", "fail", "missing")))
        for c in st.changes
        for k in registry.ids().values()
        for t in (targets[c] if k not in ("tied", "effect", "allowed_regression") else [""])
    )
    start = time.perf_counter()
    for b in range(builds):
        commit, image = f"{b // 7:040x}", f"sha256:{b // 14:064x}"
        failed = {i for i in broke if b >= broke[i]} | {i for i in flaky if rng.random() < 0.3}
        runs = tuple(
            Run(
                row=r.id,
                change=r.change,
                target=r.target,
                status="failure" if i in failed else "pass",
                image=image,
                commit=commit,
                metrics=tuple((n, v * rng.uniform(0.95, 1.05), u) for n, v, u in metrics[r.change]),
            )
            for i, r in enumerate(rows)
        )
        at = last - timedelta(days=builds - 1 - b)
        made = Build(
            key=f"bench:{b}",
            at=at,
            branch="main",
            commit=commit,
            stack=st.digest,
            images=(("cuda-sm90", image),),
            number=b + 1,
            runs=runs,
            verdicts=verdicts,
        )
        store.append(path, made)
    return time.perf_counter() - start


def _ms(xs: list[float]) -> list[str]:
    return [f"{statistics.median(xs) * 1000:.0f}", f"{min(xs) * 1000:.0f}", f"{max(xs) * 1000:.0f}"]


def main(stack_dir: Path, repeats: int, builds: int = BUILDS) -> int:
    st = stack.load(stack_dir)
    n_rows = len(plan.build(st).rows)
    with tempfile.TemporaryDirectory() as tmp:
        history, junit = Path(tmp) / "history.sqlite", Path(tmp) / "junit"
        made_s = make(stack_dir, history, builds)
        size_mb = history.stat().st_size / 1e6
        real_shaped.make(st, junit, 8, n_rows)
        base = ["--stack", str(stack_dir), "report", str(junit), "--out", str(Path(tmp) / "out")]
        without, with_history = [*base, "--no-history"], [*base, "--history", str(history)]
        _whole_command(without), _whole_command(with_history)  # untimed: caches warm, this build in the history
        pairs = [(_whole_command(without)[0], _whole_command(with_history)[0]) for _ in range(repeats)]
        size_after = history.stat().st_size / 1e6
    ratios = [b / a for a, b in pairs]
    ratio = statistics.median(ratios)
    counted_ms = f"{made_s * 1000:.0f}"
    verdict = "ok" if size_mb < SIZE_MB else "OVER"
    rows = [
        [f"history: {builds} builds x {n_rows} rows, written build by build", 1, counted_ms, "", "", "", ""],
        [f"  its file (MB; {size_after:.1f} after the timed reports)", 1, f"{size_mb:.1f}", "", "", SIZE_MB, verdict],
        [f"python -m ci report, {n_rows} real-shaped cases, no history", repeats, *_ms([a for a, _ in pairs]), "", ""],
        ["  the same, with the history (read, judged, this build added)", repeats, *_ms([b for _, b in pairs]), "", ""],
        [
            "  with / without (median of the pairs)",
            repeats,
            f"{ratio:.2f}x",
            f"{min(ratios):.2f}x",
            f"{max(ratios):.2f}x",
            f"{RATIO:g}x",
            "ok" if ratio <= RATIO else "OVER",
        ],
    ]
    print(f"the report with a history of {builds} builds, beside the report without one: fresh processes, in pairs")
    sys.stdout.write(tables.text(("what", "n", "median ms", "min ms", "max ms", "budget", ""), rows))
    return 0 if ratio <= RATIO and size_mb < SIZE_MB else 1
