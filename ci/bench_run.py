"""Per-row overhead of `ci run` on the cpu target: fresh process per item, plugin, JUnit, container start.

The rows are the cpu target's planned self-test rows, served by a test that does no work, so what is
timed is the harness and (in docker) the container, nothing else.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from ci import run, stack, tables
from ci.errors import StackgateError

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


def _once(argv: list[str], st_dir: Path) -> float:
    from ci import cli

    ns = cli.parser().parse_args(["--stack", str(st_dir), *argv])
    start = time.perf_counter()
    with _quiet():  # the harness's progress lines (ours and the child pytest's) would drown the table
        rc = run.main(ns)
    elapsed = time.perf_counter() - start
    if rc != 0:
        raise StackgateError(f"benchmark run failed (exit {rc}): {' '.join(argv)}")
    return elapsed


def main(stack_dir: Path, repeats: int, image: str | None) -> int:
    st = stack.load(stack_dir)
    n_rows = len(run.select_rows(st, "cpu", "selftest", []))
    one_row = run.select_rows(st, "cpu", "selftest", [])[0].id
    table: list[list[object]] = []
    over = False
    with tempfile.TemporaryDirectory(prefix="stackgate-bench-") as tmp:
        tree = Path(tmp) / "suites"
        (tree / "selftest").mkdir(parents=True)
        (tree / "selftest" / "test_empty.py").write_text(EMPTY_ROW_TEST)
        modes: list[tuple[str, list[str]]] = [("--host", ["--host"])]
        if image is None:
            from ci import images

            try:  # the image of this checkout; an unchanged rebuild takes under a second
                image = images.build(st.targets["cpu"]).tags[0]
            except StackgateError as exc:
                print(f"docker: not measured ({exc.message}); pass --image REF")
        if image:
            modes.append(("docker", ["--image", image]))
        for label, flags in modes:
            base = ["run", "cpu", "selftest", "--suites-dir", str(tree), "--out", f"{tmp}/out", *flags]
            all_rows = [_once(base, stack_dir) for _ in range(repeats)]
            single = [_once([*base, "--rows", one_row], stack_dir) for _ in range(repeats)]
            per_row = [s / n_rows for s in all_rows]
            for what, samples in (
                (f"{label}: {n_rows} rows, per row", per_row),
                (f"{label}: 1 row, whole run", single),
            ):
                med = statistics.median(samples)
                over |= med > BUDGET_S
                ms = [f"{x * 1000:.0f}" for x in (med, min(samples), max(samples), BUDGET_S)]
                table.append([what, len(samples), *ms, "OVER" if med > BUDGET_S else "ok"])
    print("per-row overhead of `ci run` on the cpu target (empty row tests; medians over repeats)")
    print(tables.text(("what", "n", "median ms", "min ms", "max ms", "budget ms", ""), table), end="")
    return 1 if over else 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--image", help="the cpu image for the docker figures (default: ci.images' cpu image)")
    p.add_argument("--run-repeats", type=int, default=5, help="repeats of each run overhead figure")
