"""`python -m ci <verb>`: the library's command line. Each nox session calls one verb.

Every verb rejects an unknown target, suite or change the same way (exit 2, the known names in the fix
line) before it asks the docker engine anything, and stays quiet when its reader closes the pipe.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import ci
from ci import flow, options
from ci.bench import commands as bench
from ci.buildkite import commands as buildkite
from ci.errors import EXIT_CODES, StackgateError, UsageError
from ci.fork import commands as fork
from ci.images import commands as images
from ci.images import kernels
from ci.report import commands as report
from ci.run import commands as run_commands
from ci.run import reproduce
from ci.stack import commands as stack_commands
from ci.stack import loader
from ci.upstream import commands as upstream


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m ci",
        description="stackgate: evidence for the vLLM changes a fork imports, per target",
        epilog=options.exit_codes(*EXIT_CODES),
        formatter_class=options.formatter,
    )
    ap.add_argument("--version", action="version", version=f"stackgate {ci.__version__}")
    options.add_stack(ap, top=True)
    sub = ap.add_subparsers(dest="verb", required=True, metavar="VERB")
    stack_commands.add_parser(sub)
    flow.add_parser(sub)
    images.add_parsers(sub)
    sub.choices["bake"].set_defaults(func=flow.bake)  # --host packs an artefact; without it, the image route
    kernels.add_parser(sub)
    run_commands.add_parser(sub)
    reproduce.add_parser(sub)
    report.add_parser(sub)
    upstream.add_parser(sub)
    fork.add_parser(sub)
    bench.add_parser(sub)
    buildkite.add_parsers(sub)
    return ap


def check_names(args: argparse.Namespace) -> None:
    """Unknown targets, suites and changes stop every verb the same way, before any engine call."""
    wanted = {name: _listed(getattr(args, name, None)) for name in ("target", "suite", "change")}
    if not any(wanted.values()):
        return
    st = loader.load(args.stack)
    suites_dir: Path | None = getattr(args, "suites_dir", None)
    known = {
        "target": list(st.targets),
        "suite": sorted({t.suite for t in st.tracks.values()}),
        "change": list(st.changes),
    }
    for name, values in wanted.items():
        for value in values:
            if value in known[name] or (name == "suite" and suites_dir and (suites_dir / value).is_dir()):
                continue
            where = f"; or a folder of {suites_dir}" if name == "suite" and suites_dir else ""
            raise UsageError(f"unknown {name} {value!r}", hint=f"one of {', '.join(known[name])}{where}")


def _listed(value: object) -> list[str]:
    if value is None:
        return []
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def main(argv: Sequence[str] | None = None) -> int:
    ap = parser()
    try:
        import argcomplete  # optional: shell completion where the user installed it

        argcomplete.autocomplete(ap)
    except ImportError:
        pass
    args = ap.parse_args(argv)
    try:
        check_names(args)
        return args.func(args)
    except StackgateError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        # The reader has all it wanted (`plan | head`): no traceback, and nothing more to flush.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        # Ctrl-C before anything was started that passes it on (a run's harness does, and ends with 130 itself)
        print("stopped by SIGINT before anything ran", file=sys.stderr)
        return 130


def run() -> None:
    """The `stackgate` console script."""
    sys.exit(main())
