"""`python -m ci bench`: the benchmarks, printed as tables of medians over repeated runs."""

from __future__ import annotations

import argparse

from ci import options
from ci.bench import planning, runs


def cmd_bench(args: argparse.Namespace) -> int:
    rc = planning.main(args.stack, args.repeats)
    print()
    return rc or runs.main(args.stack, args.run_repeats, args.image)


def add_parser(sub: argparse._SubParsersAction) -> None:
    b = options.verb(sub, "bench", help="benchmarks: planning, report merge and render, per-row overhead of `ci run`",
                     codes=(0, 1, 2))  # fmt: skip
    b.add_argument("--repeats", type=int, default=20, help="repeats of each planning figure (default: %(default)s)")
    b.add_argument(
        "--run-repeats", type=int, default=5, help="repeats of each run-overhead figure (default: %(default)s)"
    )
    b.add_argument("--image", help="the cpu image for the docker figures (default: this checkout's, built if needed)")
    b.set_defaults(func=cmd_bench)
