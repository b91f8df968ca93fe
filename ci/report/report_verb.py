"""`python -m ci report`: the verb; the merging and rendering it calls are imported when it runs."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ci.common import options, teardown
from ci.common.errors import STRICT_INPUTS, UsageError

if TYPE_CHECKING:
    from ci.report.view import Report


def from_args(args: argparse.Namespace, argv: Sequence[str]) -> Report:
    """The report `python -m ci <argv>` makes (`args`, parsed from it), recording `argv` in report.json."""
    if args.label and not args.compare:
        raise UsageError(
            "--label names the sides of a comparison, and no --compare was given",
            hint="python -m ci report A --compare B --label A --label B --out DIR",
        )
    from ci.results import junit_read

    begun = junit_read.begin(args.inputs)  # the JUnit is read (by a forked reader too) while the rest is imported
    from ci.report import html
    from ci.report.write import build

    html.template()  # compiled while the JUnit is being read, not after
    return build(
        args.stack,
        args.inputs,
        args.baseline,
        targets=args.target,
        suites=args.suite,
        changes=args.change,
        rows=args.rows,
        compare_paths=args.compare,
        labels=args.label,
        upstream_path=args.upstream,
        out=args.out,
        made_with=argv,
        begun=begun,
        history=options.history_path(args, args.out.parent),  # beside the report's folder: out/ for out/report
    )


def cmd_report(args: argparse.Namespace) -> int:
    from ci.results.junit_read import uncollected

    with uncollected():
        report = from_args(args, getattr(args, "argv", sys.argv[1:]))  # imports the rest once the reading has begun
        from ci.report.write import failing, problems, summary, write

        write(report, args.out)  # rendered whole before anything is written
        if report.history is not None:  # then this build added to its history, in one transaction
            from ci.report import across

            across.remember(report.history, report.verdicts)
        said = summary(report, args.out, outside_informational=args.outside_informational)
        if args.strict and problems(report):
            code = STRICT_INPUTS
        else:
            code = 1 if failing(report, outside_informational=args.outside_informational) else 0
        teardown.keep(report)  # to the process's end, never freed one object at a time, never walked by the collector
    print(said)
    return code


def add_parser(sub: argparse._SubParsersAction) -> None:
    r = options.verb(
        sub,
        "report",
        help="combine JUnit into report.md/html/json with a verdict per imported change",
        codes=(0, 1, 2, 5, 7),
    )
    r.add_argument(
        "inputs",
        nargs="+",
        type=Path,
        metavar="JUNIT",
        help="JUnit files or results folders (every *.xml and not-run.json below them)",
    )
    r.add_argument("--out", type=Path, required=True, help="directory for report.md, report.html, report.json")
    r.add_argument("--baseline", type=Path, help="a previous report.json to judge regressions against")
    r.add_argument(
        "--upstream",
        type=Path,
        metavar="UPSTREAM.json",
        help="each change's rebase state, shown beside its verdict: the JSON of "
        "python -m ci upstream --fork CHECKOUT --format json",
    )
    r.add_argument(
        "--strict",
        action="store_true",
        help=f"exit {STRICT_INPUTS} when an input is missing, empty or unreadable (report still written)",
    )
    r.add_argument(
        "--compare",
        action="append",
        type=Path,
        default=[],
        metavar="RESULTS",
        help="another side to set against the inputs (side A): a results folder or JUnit file; repeat "
        "for more sides. Runs of one row within a side are pooled; a side holding a row under two vLLM "
        "versions is refused (exit 2)",
    )
    r.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="NAME",
        help="a side's name in the comparison, once per side, A first (default: each side's folder name)",
    )
    r.add_argument(
        "--outside-informational",
        action="store_true",
        help="testcases outside the plan (another tool's JUnit, a suite of your own) are counted and shown, but "
        "their failures do not set the exit status; the headline says so",
    )
    options.add_history(r, "history.sqlite beside the --out folder: out/history.sqlite for --out out/report")
    options.add_filters(r, "target", "suite", "change", "rows")
    r.set_defaults(func=cmd_report)
