"""`python -m ci report`: the verb; the merging and rendering it calls are imported when it runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from ci import options
from ci.errors import STRICT_INPUTS


def cmd_report(args: argparse.Namespace) -> int:
    from ci.report.write import build, render, summary, write_atomic

    report = build(args.stack, args.inputs, args.baseline, targets=args.target, suites=args.suite,
                   changes=args.change)  # fmt: skip
    write_atomic(args.out, render(report))  # rendered whole before anything is written
    print(summary(report, args.out))
    return STRICT_INPUTS if args.strict and report.results.problems() else 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    r = options.verb(sub, "report", help="combine JUnit into report.md/html/json with a verdict per imported change",
                     codes=(0, 2, 5, 7))  # fmt: skip
    r.add_argument("inputs", nargs="+", type=Path, metavar="JUNIT",
                   help="JUnit files or results folders (every *.xml and not-run.json below them)")  # fmt: skip
    r.add_argument("--out", type=Path, required=True, help="directory for report.md, report.html, report.json")
    r.add_argument("--baseline", type=Path, help="a previous report.json to judge regressions against")
    r.add_argument(
        "--strict",
        action="store_true",
        help=f"exit {STRICT_INPUTS} when an input is missing, empty or unreadable (report still written)",
    )
    options.add_filters(r, "target", "suite", "change")
    r.set_defaults(func=cmd_report)
