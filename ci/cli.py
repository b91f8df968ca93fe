"""`python -m ci <verb>`: the library's command line. Each nox session calls one verb."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from ci import host, images, plan, stack, tables
from ci.errors import StackgateError, UsageError
from ci.model import Stack

PLAN_HEADERS = (
    "Row", "Model", "Hardware", "Spec Decode", "k", "TP", "DP", "EP Enabled?", "CUDA Graph Mode",
    "DCP Size", "DBO Enabled?", "KV Cache DType", "Attn Backend", "Context", "Batch", "Change", "Seen",
)  # fmt: skip
_SEEN = {"ok": "✅", "fail": "❌", "partial": "⚠️", "unknown": "?"}


def change_label(change_id: str) -> str:
    """Upstream PR numbers read as #48804; other changes (the self-test) by their id."""
    return f"#{change_id}" if change_id.isdigit() else change_id


def _yn(value: bool) -> str:
    return "Y" if value else "N"


def plan_table_rows(st: Stack, p: plan.Plan) -> list[list[object]]:
    out = []
    for r in p.rows:
        model, target = st.models[r.model], st.targets[r.target]
        spec = model.drafter.type.upper() if r.spec_method and model.drafter else "-"
        seen = plan.history_for(st, r)
        out.append([
            r.id, model.seed_name or model.id, target.short, spec, r.num_speculative_tokens or "-", r.tp, r.dp,
            _yn(r.ep), r.cudagraph_mode, r.dcp, _yn(r.dbo), r.kv_cache_dtype, r.backend, r.context, r.batch,
            change_label(r.change), f"{_SEEN[seen.runs]} {seen.score or ''}".strip() if seen else "",
        ])  # fmt: skip
    return out


def _select(args: argparse.Namespace, st: Stack) -> plan.Plan:
    for name, known in (("target", st.targets), ("change", st.changes)):
        for value in getattr(args, name) or ():
            if value not in known:
                raise UsageError(f"unknown {name} {value!r}", hint=f"one of {', '.join(known)}")
    return plan.build(st).select(targets=args.target or (), suites=args.suite or (), changes=args.change or ())


def cmd_plan(args: argparse.Namespace) -> int:
    st = stack.load(args.stack)
    p = _select(args, st)
    if args.format == "json":
        doc: dict[str, object] = {"rows": [r.to_json() for r in p.rows]}
        if args.explain:
            doc["excluded"] = [e.to_json() for e in p.excluded]
        print(json.dumps(doc, indent=2))
        return 0
    render = tables.markdown if args.format == "markdown" else tables.text
    sys.stdout.write(render(PLAN_HEADERS, plan_table_rows(st, p)))
    if args.explain and p.excluded:
        print()
        left_out = [(change_label(e.change), e.target, e.model, e.reason) for e in p.excluded]
        sys.stdout.write(render(("Change", "Target", "Model", "Not planned because"), left_out))
    print(f"\n{len(p.rows)} rows ({', '.join(_counts(p))}); {len(p.excluded)} pairings not planned"
          + ("" if args.explain else " (--explain lists them)"))  # fmt: skip
    return 0


def _counts(p: plan.Plan) -> list[str]:
    counts: dict[str, int] = {}
    for r in p.rows:
        counts[f"{r.target}/{r.suite}"] = counts.get(f"{r.target}/{r.suite}", 0) + 1
    return [f"{k}: {v}" for k, v in counts.items()] or ["none"]


def cmd_main(args: argparse.Namespace) -> int:
    """The main job on this host's target: build and verify its image, run each suite it has rows in,
    report. Every step is the `python -m ci` verb of the same name; a failed build or verify stops it."""
    st = stack.load(args.stack)
    target = host.detect(st)
    suites = sorted({r.suite for r in plan.build(st).select(targets=[target.id]).rows})
    print(f"host target: {target.id} ({target.name}); suites: {', '.join(suites) or 'none'}", flush=True)
    out = args.out
    runs = [out / f"{target.id}-{suite}" for suite in suites]
    setup = [] if args.host else [["build", target.id], ["verify", target.id]]
    for step in setup:
        rc = _step(args.stack, step)
        if rc:
            return rc
    worst = 0
    for suite, folder in zip(suites, runs, strict=True):
        worst = max(worst, _step(args.stack, ["run", target.id, suite, "--out", str(folder)] + ["--host"] * args.host))
    rc = _step(args.stack, ["report", *map(str, runs), "--out", str(out / "report")])
    return rc or worst


def _step(stack_dir: Path, argv: list[str]) -> int:
    print(f"\n== python -m ci {' '.join(argv)}", flush=True)
    return main(["--stack", str(stack_dir), *argv])


def cmd_bench(args: argparse.Namespace) -> int:
    from ci import bench, bench_run  # imported late: only the bench verb needs them

    planning = bench.main(args.stack, args.repeats)
    print()
    return planning or bench_run.main(args.stack, args.run_repeats, args.image)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m ci", description="stackgate: evidence for imported vLLM changes")
    ap.add_argument("--stack", type=Path, default=stack.DEFAULT_STACK, help="stack directory (default: %(default)s)")
    sub = ap.add_subparsers(dest="verb", required=True)

    p = sub.add_parser("plan", help="print the matrix of rows the fork must prove")
    p.add_argument("--format", choices=("table", "json", "markdown"), default="table")
    p.add_argument("--target", action="append", help="only this target (repeatable)")
    p.add_argument("--suite", action="append", choices=("spec_decode", "sparse_mla", "selftest"))
    p.add_argument("--change", action="append", help="only this imported change, e.g. 48804 (repeatable)")
    p.add_argument("--explain", action="store_true", help="also list pairings not planned, and why")
    p.set_defaults(func=cmd_plan)

    m = sub.add_parser("main", help="the main job for this host's target (cpu where no GPU is found)")
    m.add_argument("--out", type=Path, default=Path("out"), help="results and report (default: %(default)s)")
    m.add_argument("--host", action="store_true", help="no docker: run the suites on this host's Python")
    m.set_defaults(func=cmd_main)

    b = sub.add_parser("bench", help="benchmarks: planning, report merge and render, per-row overhead of `ci run`")
    b.add_argument("--repeats", type=int, default=20)
    from ci import bench_run

    bench_run.add_arguments(b)
    b.set_defaults(func=cmd_bench)

    images.add_parsers(sub)
    from ci import report  # imported here: ci.report draws the status matrix with this module's plan table

    report.add_parsers(sub)
    from ci import repro, run  # light: both import docker and junitparser only when a verb runs

    run.add_parser(sub)
    repro.add_parser(sub)
    # --stack is accepted after the verb too (python -m ci plan --stack DIR)
    for verb in sub.choices.values():
        if not any("--stack" in action.option_strings for action in verb._actions):
            verb.add_argument("--stack", type=Path, default=argparse.SUPPRESS, help="stack directory")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except StackgateError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
