"""`python -m ci bench`: the benchmarks, printed as tables of medians over repeated runs."""

from __future__ import annotations

import argparse

from ci.bench import history_bench, plan_bench, runs, upstream
from ci.common import options


def cmd_bench(args: argparse.Namespace) -> int:
    if args.only == "upstream":
        return upstream.main(args.stack, args.repeats // 4 or 1)
    if args.only == "report":
        return plan_bench.main(args.stack, args.repeats)
    if args.only == "history":
        return history_bench.main(args.stack, max(3, args.repeats // 4), args.history_builds)
    rc = plan_bench.main(args.stack, args.repeats)
    print()
    rc = upstream.main(args.stack, args.repeats // 4 or 1) or rc
    print()
    return rc or runs.main(args.stack, args.run_repeats, args.image)


def add_parser(sub: argparse._SubParsersAction) -> None:
    what = "benchmarks: planning, report merge and render, ci upstream, per-row overhead of `ci run`"
    b = options.verb(sub, "bench", help=what, codes=(0, 1, 2))
    repeats = "repeats of each planning figure, a quarter of them for ci upstream's (default: %(default)s)"
    b.add_argument("--repeats", type=int, default=20, help=repeats)
    b.add_argument(
        "--run-repeats", type=int, default=5, help="repeats of each run-overhead figure (default: %(default)s)"
    )
    b.add_argument("--image", help="the cpu image for the docker figures (default: this checkout's, built if needed)")
    b.add_argument(
        "--only",
        choices=("upstream", "report", "history"),
        help="only this benchmark: upstream (ci upstream on a 20,000-commit history), report (planning "
        "and the report beside lxml's parse), history (the report with a history of 1,000 builds beside it without)",
    )
    b.add_argument(
        "--history-builds",
        type=options.whole(1, 100_000),
        default=history_bench.BUILDS,
        help="builds in the history of --only history (default: %(default)s)",
    )
    b.set_defaults(func=cmd_bench)
