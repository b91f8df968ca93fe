"""`python -m ci plan`: print the matrix of rows the fork must prove."""

from __future__ import annotations

import argparse
import json
import sys

from ci import options, tables
from ci.stack import loader, plan
from ci.stack.table import PLAN_HEADERS, change_label, counts, plan_table_rows


def cmd_plan(args: argparse.Namespace) -> int:
    st = loader.load(args.stack)
    p = plan.build(st).select(targets=args.target, suites=args.suite, changes=args.change)
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
    print(
        f"\n{len(p.rows)} rows ({', '.join(counts(p))}); {len(p.excluded)} pairings not planned"
        + ("" if args.explain else " (--explain lists them)")
    )
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = options.verb(sub, "plan", help="print the matrix of rows the fork must prove", codes=(0, 2))
    p.add_argument(
        "--format",
        choices=("table", "json", "markdown"),
        default="table",
        help="table (terminal), json ({rows: [...]}) or markdown (default: %(default)s)",
    )
    options.add_filters(p, "target", "suite", "change")
    p.add_argument("--explain", action="store_true", help="also list the pairings not planned, and why")
    p.set_defaults(func=cmd_plan)
