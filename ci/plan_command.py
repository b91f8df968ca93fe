"""`python -m ci plan`: the matrix of rows; with `--fork`, the rows the fork under test can run (ci.fork.fork_plan sets
apart those of changes it lacks); with `--estimate`, in place of the rows, the projected wall time of the bake and the
run of each target's rows on N GPUs, from the last measured costs (ci.run.schedule.estimate)."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from ci.common import options, tables
from ci.common.errors import UsageError
from ci.fork import source
from ci.fork.fork_plan import split
from ci.run.schedule import costs, estimate
from ci.stack import loader, plan
from ci.stack.model import Stack
from ci.stack.plan import Plan
from ci.stack.seed_table import PLAN_HEADERS, change_label, counts, plan_table_rows
from ci.upstream import kept, scope
from ci.upstream.port import words
from ci.upstream.readiness import Readiness


def cmd_plan(args: argparse.Namespace) -> int:
    st = loader.load(args.stack)
    p = plan.build(st).select(targets=args.target, suites=args.suite, changes=args.change).only(args.rows)
    fork = source.from_command(st, args) if scope.wanted(st, args) else None
    parts = split(p, fork) if fork else None
    shown = parts.runs if parts else p
    if args.estimate:
        return _estimate(st, shown, args)
    if args.not_run is not None:
        if parts is None:
            raise UsageError("--not-run records the rows a fork lacks", hint="give --fork with it (or configure one)")
        for path in parts.record(args.not_run):
            print(f"wrote {path}", file=sys.stderr)
    if args.format == "json":
        doc: dict[str, object] = {"rows": [r.to_json() for r in shown.rows]}
        if parts and fork:
            doc["absent_in_fork"] = [
                {"row": r.id, "change": r.change, "reason": parts.reason[r.change]} for r in parts.absent.rows
            ]
            doc["if_ported"] = [
                {"change": c, "rows": n, "port": r.verdict if r else None, "command": r.command if r else ""}
                for c, n, r in _if_ported(st, fork, parts.absent)
            ]
        if args.explain:
            doc["excluded"] = [e.to_json() for e in p.excluded]
        print(json.dumps(doc, indent=2))
        return 0
    render = tables.markdown if args.format == "markdown" else tables.text
    sys.stdout.write(render(PLAN_HEADERS, plan_table_rows(st, shown)))
    if args.explain and p.excluded:
        print()
        left_out = [(change_label(e.change), e.target, e.model, e.reason) for e in p.excluded]
        sys.stdout.write(render(("Change", "Target", "Model", "Not planned because"), left_out))
    print(
        f"\n{tables.counted(len(shown.rows), 'row')} ({', '.join(counts(shown))}); "
        f"{tables.counted(len(p.excluded), 'pairing')} not planned"
        + ("" if args.explain else " (--explain lists them)")
    )
    if parts and fork and parts.absent.rows:
        print(f"not scheduled, absent in the fork: {tables.counted(len(parts.absent.rows), 'row')}")
        for change, n, r in _if_ported(st, fork, parts.absent):
            # "94 rows of #48804: absent in the fork ..."
            print(f"  {tables.counted(n, 'row')} of {parts.reason[change]}")
            if r is not None:
                step = f": {r.command}" if r.command else ""
                print(
                    f"    porting it would add {'this' if n == 1 else 'these'} {tables.counted(n, 'row')}; its port: "
                    f"{words.cell_of(r)}{step}"
                )
    return 0


def _if_ported(st: Stack, fork: source.Fork, absent: Plan) -> list[tuple[str, int, Readiness | None]]:
    """Per change the fork lacks: the rows its port would add, and whether it ports (ci.upstream.port.decision)."""
    snap = kept.answer(st, fork.scope)
    ports = {c.change: c.port for c in snap.changes}
    return [(c, n, ports.get(c)) for c, n in Counter(r.change for r in absent.rows).items()]


def _estimate(st: Stack, shown: Plan, args: argparse.Namespace) -> int:
    """The projection of each target's rows on --gpus GPUs of --gpu-memory GiB, from the measured costs."""
    if not args.target:
        raise UsageError("--estimate projects a target's matrix", hint="add --target TARGET")
    if args.gpu_memory is None:
        raise UsageError(
            "--estimate packs rows by memory", hint="add --gpu-memory GIB (each GPU's, e.g. 119 on a GB10)"
        )
    paths = args.costs or [costs.store()]
    known = estimate.Costs(costs.load(paths))
    if not known:
        raise UsageError(
            f"no measured costs in {', '.join(map(str, paths))}",
            hint="a scheduled ci run --host or ci bake --host records them; or pass --costs FILE",
        )
    devices = estimate.devices(args.gpus, args.gpu_memory)
    for target in dict.fromkeys(r.target for r in shown.rows):
        rows = [r for r in shown.rows if r.target == target]
        print(f"{target}: {tables.counted(len(rows), 'row')}; a projection from measured costs, not a measurement")
        for phase in costs.PHASES:
            if not any(m.phase == phase for m in known.measured):
                print(f"{phase}: no {phase} costs measured in {', '.join(map(str, paths))}")
                continue
            projected = estimate.project(st, rows, devices, known, phase)
            hosts = [m.host for m in known.measured if m.phase == phase]
            print("\n".join(estimate.describe(projected, args.gpu_memory, hosts)))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = options.verb(sub, "plan", help="print the matrix of rows the fork must prove", codes=(0, 2))
    p.add_argument(
        "--format",
        choices=("table", "json", "markdown"),
        default="table",
        help="table (terminal), json ({rows: [...]}) or markdown (default: %(default)s)",
    )
    options.add_filters(p, "target", "suite", "change", "rows")
    options.add_fork(p, switch=True)
    p.add_argument("--explain", action="store_true", help="also list the pairings not planned, and why")
    p.add_argument(
        "--not-run",
        type=Path,
        metavar="DIR",
        help="with --fork: write DIR/fork-absent/<target>-<suite>-0/not-run.json for the rows of changes the fork "
        "lacks, which the report then lists as not run, with the reason",
    )
    p.add_argument(
        "--estimate",
        action="store_true",
        help="print, in place of the rows, the projected wall time of the bake and the run of each --target's "
        "rows on --gpus GPUs of --gpu-memory GiB, from the last measured costs (the host's store, or --costs)",
    )
    p.add_argument(
        "--gpus",
        type=options.whole(1, options.GPUS_MAX),
        default=1,
        metavar="N",
        help=f"with --estimate: GPUs, 1 to {options.GPUS_MAX} (default: %(default)s)",
    )
    p.add_argument("--gpu-memory", type=options.gib, metavar="GIB", help="with --estimate: each GPU's memory")
    p.add_argument(
        "--costs",
        type=Path,
        action="append",
        metavar="FILE",
        help="with --estimate: a costs.json (or a results folder holding one) in place of the host's store "
        "(repeatable)",
    )
    p.set_defaults(func=cmd_plan)
