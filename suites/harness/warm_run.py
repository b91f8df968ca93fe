"""`python -m harness.warm_run`: the image bake's warm run. Every row's configuration runs once, so every
cache the runtime reads (Triton, Inductor/vLLM compile cache, FlashInfer, DeepGEMM, AITER, MIOpen)
is filled with the image's own paths and env before `ci bake` commits it.

Rows come from rows.json ($STACKGATE_ROWS, which `ci bake` mounts). The rows of one model, change and suite warm
in one fresh process, as `ci run` shares them (harness.shared): each engine configuration is built once and its
further rows run on it, so the bake costs what a run does, not a process per row. A suite's hook, `<suite>/warmup.py`,
gives `warm(row)` and, where its rows can share a process, `warm_group(rows)`; a suite without one has nothing
beyond its baked kernels to warm (the self-test). The GPU suites' hooks run the rows' own tests once
(`run_rows_test`), so the caches hold what the tests reach. A line per group says what it took and the time left.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness import boundary
from harness.rows import ENV_ROWS, load

# where the warm run's compiles are logged, with their key parts (`ci bake --host` keeps them beside the
# caches, so that a row the artefact did not serve can say which part of a kernel's key differed)
ENV_WARM_LOG = "STACKGATE_WARM_JIT_LOG"


def _hook(suite: str):
    try:
        return importlib.import_module(f"{suite}.warmup")
    except ModuleNotFoundError as exc:
        if exc.name in (suite, f"{suite}.warmup"):
            return None
        raise


def warm_one(row_ids: Sequence[str]) -> int:
    """Warm rows of one group in this process: the hook's `warm_group` where it has one, else `warm` row by row."""
    doc = load(os.environ[ENV_ROWS])
    rows = [next(r for r in doc.rows if r.id == row_id) for row_id in row_ids]
    hook = _hook(rows[0].suite)
    if hook is None:
        return 0
    if len(rows) > 1 and hasattr(hook, "warm_group"):
        return hook.warm_group(rows) or 0
    return max((hook.warm(row) or 0) for row in rows)


def run_row_test(row: Any, *, suites: Path | None = None) -> int:
    """`run_rows_test` of one row."""
    return run_rows_test([row], suites=suites)


def run_rows_test(rows: Sequence[Any], *, suites: Path | None = None) -> int:
    """Run the rows' own tests once, off the record (their JUnit and JIT log go to a scratch folder, JIT is not
    refused), several rows in one process sharing their engines (harness.shared): every engine configuration,
    request shape and kernel specialisation the tests reach is then in the caches, where starting a row's engine
    once would miss the rest (a reference engine, a mixed batch). The tests' verdicts are not the warm-up's: 0 once
    every row's test ran, whatever it concluded; else pytest's exit status."""
    root = suites or Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="stackgate-warm-") as tmp:
        junit = Path(tmp) / "warm.xml"
        argv = [
            sys.executable,
            "-m",
            "pytest",
            str(root / rows[0].suite),
            "--rootdir",
            str(root),
            "-p",
            "harness.plugin",
            "-p",
            "no:cacheprovider",
            "-q",
            "--stackgate-junit",
            str(junit),
        ]
        for row in rows:
            argv += ["--stackgate-row", row.id]
        if len(rows) > 1:
            argv.append("--stackgate-share")
        kept_log = os.environ.get(ENV_WARM_LOG)  # where the bake asks, the compiles and logs are kept
        log = kept_log or str(Path(tmp) / "jit.jsonl")
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, boundary.ENV_REFUSE_JIT: "0", boundary.ENV_JIT_LOG: log}
        env.pop("STACKGATE_PROFILE_DIR", None)
        done = subprocess.run(argv, env=env, cwd=root, check=False, capture_output=True, text=True)
        text = junit.read_text() if junit.is_file() else ""
        missed = [row.id for row in rows if row.id not in text]
        if kept_log:  # the warm run's own logs travel with the caches, beside its compiles
            kept = Path(kept_log).parent / "warm-logs"
            kept.mkdir(exist_ok=True)
            for found in (Path(tmp) / "logs").glob("*.log"):
                shutil.copyfile(found, kept / found.name)
    tail = (done.stdout.strip().splitlines() or ["no output"])[-1]
    for row in rows:
        said = "did not run" if row.id in missed else "ran"
        print(f"{row.id}: warm run of its test {said} (pytest exit {done.returncode}: {tail})", flush=True)
    return 0 if not missed and done.returncode in (0, 1) else (done.returncode or 1)


def groups(rows: Sequence[Any]) -> list[list[Any]]:
    """The rows by model, change and suite (what `ci run` shares a process among), in the order they first appear."""
    found: dict[tuple[str, str, str], list[Any]] = {}
    for row in rows:
        found.setdefault((str(row.get("model")), row.change, row.suite), []).append(row)
    return list(found.values())


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.warm_run")
    ap.add_argument(
        "--row",
        action="append",
        help="warm these rows only, in this process (the parent starts one child per group; repeatable)",
    )
    ap.add_argument("--rows", help=f"rows.json (default: ${ENV_ROWS})")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per row")
    args = ap.parse_args(argv)
    if args.rows:
        os.environ[ENV_ROWS] = args.rows  # this process and its children only, never the image's config
    if ENV_ROWS not in os.environ:
        print(f"no rows: set ${ENV_ROWS} to a rows.json (python -m ci bake mounts one)", file=sys.stderr)
        return 2
    if args.row:
        return warm_one(args.row)
    doc = load(os.environ[ENV_ROWS])
    failed: list[str] = []
    took: list[float] = []  # seconds a row, so far
    together = groups(doc.rows)
    left = len(doc.rows)
    for n, rows in enumerate(together, 1):
        name = f"{rows[0].get('model')}/{rows[0].change} ({rows[0].suite})"
        if _hook(rows[0].suite) is None:
            left -= len(rows)
            print(f"[{n}/{len(together)}] {name}: nothing to warm for suite {rows[0].suite}", flush=True)
            continue
        t0 = time.monotonic()
        child = [sys.executable, "-m", "harness.warm_run", *(a for r in rows for a in ("--row", r.id))]
        try:
            rc = subprocess.run(child, timeout=args.timeout * len(rows)).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        seconds = time.monotonic() - t0
        took += [seconds / len(rows)] * len(rows)
        left -= len(rows)
        configs = len({r.engine for r in rows})
        status = "ok" if rc == 0 else f"FAILED ({rc})"
        eta = statistics.median(took) * left
        print(
            f"[{n}/{len(together)}] {name}: {status}, {len(rows)} rows, {configs} engine configuration(s) in "
            f"{seconds:.0f} s · {left} rows left, ETA {eta / 60:.0f} min",
            flush=True,
        )
        if rc != 0:
            failed += [r.id for r in rows]
    if failed:
        print(f"warm-up failed for {len(failed)} row(s): {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
