"""`python -m harness.warmup`: the image bake's warm run. Every row's configuration runs once, so every
cache the runtime reads (Triton, Inductor/vLLM compile cache, FlashInfer, DeepGEMM, AITER, MIOpen)
is filled with the image's own paths and env before `ci bake` commits it.

Rows come from rows.json ($STACKGATE_ROWS, which `ci bake` mounts). Each row warms in its own fresh
process (engines run one at a time on a GPU) through its suite's hook, `<suite>/warmup.py`'s
`warm(row)`; a suite without one has nothing beyond its baked kernels to warm (the self-test). The GPU
suites' hook runs the row's own test once (`run_row_test`), so the caches hold what the test reaches.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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


def warm_one(row_id: str) -> int:
    doc = load(os.environ[ENV_ROWS])
    row = next(r for r in doc.rows if r.id == row_id)
    hook = _hook(row.suite)
    return (hook.warm(row) or 0) if hook is not None else 0


def run_row_test(row: Any, *, suites: Path | None = None) -> int:
    """Run the row's own test once, off the record (its JUnit and JIT log go to a scratch folder, JIT is not
    refused): every engine configuration, request shape and kernel specialisation the test reaches is then
    in the caches, where starting the row's engine once would miss the rest (a reference engine, a mixed
    batch). The test's verdict is not the warm-up's: 0 once the test ran, whatever it concluded; else
    pytest's exit status."""
    root = suites or Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="stackgate-warm-") as tmp:
        junit = Path(tmp) / "warm.xml"
        argv = [
            sys.executable,
            "-m",
            "pytest",
            str(root / row.suite),
            "--rootdir",
            str(root),
            "-p",
            "harness.plugin",
            "-p",
            "no:cacheprovider",
            "-q",
            "--stackgate-row",
            row.id,
            "--stackgate-junit",
            str(junit),
        ]
        kept_log = os.environ.get(ENV_WARM_LOG)  # where the bake asks, the compiles and logs are kept
        log = kept_log or str(Path(tmp) / "jit.jsonl")
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "STACKGATE_REFUSE_JIT": "0", "STACKGATE_JIT_LOG": log}
        env.pop("STACKGATE_PROFILE_DIR", None)
        done = subprocess.run(argv, env=env, cwd=root, check=False, capture_output=True, text=True)
        ran = junit.is_file() and row.id in junit.read_text()
        if kept_log:  # the warm run's own logs travel with the caches, beside its compiles
            kept = Path(kept_log).parent / "warm-logs"
            kept.mkdir(exist_ok=True)
            for found in (Path(tmp) / "logs").glob("*.log"):
                shutil.copyfile(found, kept / found.name)
    tail = (done.stdout.strip().splitlines() or ["no output"])[-1]
    print(
        f"{row.id}: warm run of its test {'ran' if ran else 'did not run'} (pytest exit {done.returncode}: {tail})",
        flush=True,
    )
    return 0 if ran and done.returncode in (0, 1) else (done.returncode or 1)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.warmup")
    ap.add_argument("--row", help="warm this row only, in this process (the parent starts one child per row)")
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
    failed = []
    for n, row in enumerate(doc.rows, 1):
        if _hook(row.suite) is None:
            print(f"[{n}/{len(doc.rows)}] {row.id}: nothing to warm for suite {row.suite}", flush=True)
            continue
        t0 = time.monotonic()
        try:
            rc = subprocess.run(
                [sys.executable, "-m", "harness.warmup", "--row", row.id], timeout=args.timeout
            ).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        status = "ok" if rc == 0 else f"FAILED ({rc})"
        print(f"[{n}/{len(doc.rows)}] {row.id}: {status} in {time.monotonic() - t0:.0f} s", flush=True)
        if rc != 0:
            failed.append(row.id)
    if failed:
        print(f"warm-up failed for {len(failed)} row(s): {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
