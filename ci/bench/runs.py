"""Per-row overhead of `ci run` on the cpu target: fresh process per item, plugin, JUnit, container start.

The rows are the cpu target's planned self-test rows, served by a test that does no work, so what is
timed is the harness and (in docker) the container, nothing else.
"""

from __future__ import annotations

import contextlib
import io
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from ci.common import options, tables
from ci.common.errors import StackgateError
from ci.images import build as images
from ci.run import execute, run_spec
from ci.stack import loader as stack
from ci.stack.model import Stack
from ci.stack.plan import Row

BUDGET_S = 2.0
EMPTY_ROW_TEST = """\
import pytest


@pytest.mark.track("harness-selftest")
def test_row(row):
    pass
"""


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    sys.stdout.flush()
    saved = os.dup(1)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 1)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                yield
        finally:
            os.dup2(saved, 1)
            os.close(saved)


def _once(st: Stack, spec: run_spec.RunSpec, image: str | None) -> float:
    start = time.perf_counter()
    with _quiet():  # the harness's progress lines (ours and the child pytest's) would drown the table
        rc = execute.run_rows(st, spec, host=image is None, image=image)
    elapsed = time.perf_counter() - start
    if rc != 0:
        raise StackgateError(f"benchmark run failed (exit {rc}): {spec.target.id}/{spec.suite} in {image or 'host'}")
    return elapsed


def main(stack_dir: Path, repeats: int, image: str | None) -> int:
    st = stack.load(stack_dir)
    cpu = st.targets["cpu"]
    rows = execute.select_rows(st, "cpu", "selftest", [])
    table: list[list[object]] = []
    over = False
    with tempfile.TemporaryDirectory(prefix="stackgate-bench-") as tmp:
        tree = Path(tmp) / "suites"
        (tree / "selftest").mkdir(parents=True)
        (tree / "selftest" / "test_empty.py").write_text(EMPTY_ROW_TEST)
        if image is None:
            try:  # the image of this checkout; an unchanged rebuild takes under a second
                image = images.build(cpu).tags[0]
            except StackgateError as exc:
                print(f"docker: not measured ({exc.message}); pass --image REF")
        modes: list[tuple[str, str | None]] = [("--host", None)] + ([("docker", image)] if image else [])
        for label, ref in modes:

            def spec(chosen: tuple[Row, ...]) -> run_spec.RunSpec:
                return run_spec.RunSpec(
                    target=cpu,
                    suite="selftest",
                    rows=chosen,
                    out=Path(tmp) / "out",
                    suites_dir=tree,
                    timeout_s=options.DEFAULT_TIMEOUT_S,
                )

            all_rows = [_once(st, spec(rows), ref) for _ in range(repeats)]
            single = [_once(st, spec(rows[:1]), ref) for _ in range(repeats)]
            per_row = [s / len(rows) for s in all_rows]
            for what, samples in (
                (f"{label}: {len(rows)} rows, per row", per_row),
                (f"{label}: 1 row, whole run", single),
            ):
                med = statistics.median(samples)
                over |= med > BUDGET_S
                ms = [f"{x * 1000:.0f}" for x in (med, min(samples), max(samples), BUDGET_S)]
                table.append([what, len(samples), *ms, "OVER" if med > BUDGET_S else "ok"])
    print("per-row overhead of `ci run` on the cpu target (empty row tests; medians over repeats)")
    print(tables.text(("what", "n", "median ms", "min ms", "max ms", "budget ms", ""), table), end="")
    return 1 if over else 0
