"""`python -m ci <verb>`: the library's command line. Each nox session calls one verb.

Every verb rejects an unknown target, suite or change the same way (exit 2, the known names in the fix
line) before it asks the docker engine anything, and stays quiet when its reader closes the pipe.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import ci
from ci.common import escape, options, startup, teardown
from ci.common.errors import EXIT_CODES, StackgateError, UsageError

if TYPE_CHECKING:
    from ci.stack.model import Target

# Each module that defines verbs (its add_parser or add_parsers), in the order --help lists them, and its verbs. A
# command line naming one verb imports only its module: `ci upstream` never loads the image or run stages.
MODULES: dict[str, tuple[str, ...]] = {
    "ci.plan_command": ("plan",),
    "ci.flow": ("main",),
    "ci.images.image_verbs": ("push", "pull", "build", "verify", "lock", "source-build"),
    "ci.run.bake_verb": ("bake",),
    "ci.images.kernels": ("kernels",),
    "ci.run.run_verb": ("run",),
    "ci.run.rerun.repro_verb": ("repro",),
    "ci.report.report_verb": ("report",),
    "ci.upstream.upstream_verb": ("upstream",),
    "ci.fork.fork_verbs": ("fork",),
    "ci.bench.bench_verb": ("bench",),
    "ci.buildkite.pipeline_verb": ("pipeline", "gate"),
    "ci.buildkite.history": ("history",),
}


def parser(verb: str | None = None) -> argparse.ArgumentParser:
    """The command line; with `verb`, only the module defining it is imported (the others' verbs are left out)."""
    ap = argparse.ArgumentParser(
        prog="python -m ci",
        description="stackgate: evidence for the vLLM changes a fork imports, per target",
        epilog=options.exit_codes(*EXIT_CODES),
        formatter_class=options.formatter,
    )
    ap.add_argument("--version", action="version", version=f"stackgate {ci.__version__}")
    options.add_stack(ap, top=True)
    sub = ap.add_subparsers(dest="verb", required=True, metavar="VERB")
    for name, verbs in MODULES.items():
        if verb is None or verb in verbs:
            module = importlib.import_module(name)
            register = getattr(module, "add_parsers", None) or module.add_parser
            register(sub)
    return ap


def _verb(argv: Sequence[str]) -> str | None:
    """The verb `argv` names (the first word that is not a top-level option), where it is a known one."""
    words = iter(argv)
    for word in words:
        if word == "--stack":
            next(words, None)
        elif not word.startswith("-"):
            return word if any(word in verbs for verbs in MODULES.values()) else None
    return None


def check_names(args: argparse.Namespace) -> None:
    """Unknown targets, suites and changes stop every verb the same way, before any engine call."""
    wanted = {name: _listed(getattr(args, name, None)) for name in ("target", "suite", "change")}
    if not any(wanted.values()):
        return
    from ci.stack import loader  # here, not above: a verb that reads no stack (a report's first steps) skips it

    st = loader.load(args.stack)
    _targets_by_session(args, st.targets)
    wanted["target"] = _listed(getattr(args, "target", None))
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


def _targets_by_session(args: argparse.Namespace, targets: Mapping[str, Target]) -> None:
    """A target named as its nox sessions name it (`--target rocm`, `sm121a`) is that target (`rocm-gfx1151`)."""
    by_session = {prefix: t.id for t in targets.values() for prefix in t.sessions if prefix not in targets}
    value = getattr(args, "target", None)
    if isinstance(value, list):
        args.target = [by_session.get(v, v) for v in value]
    elif isinstance(value, str):
        args.target = by_session.get(value, value)


def _listed(value: object) -> list[str]:
    if value is None:
        return []
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def main(argv: Sequence[str] | None = None, held: startup.Held | None = None) -> int:
    """The command line; `held`: a Ctrl-C held since before its modules imported (`python -m ci`), else held here."""
    teardown.forget()
    held = held or startup.Held()
    try:
        try:
            ap = parser(_verb(sys.argv[1:] if argv is None else argv))  # imports the verb's modules
        finally:
            stopped = held.release()
        if stopped:
            raise KeyboardInterrupt
        if "_ARGCOMPLETE" in os.environ:  # the shell's completion hook is asking (argcomplete's protocol)
            try:
                import argcomplete  # optional: shell completion where the user installed it

                argcomplete.autocomplete(ap)
            except ImportError:
                pass
        args, extra = ap.parse_known_args(argv)
        if extra:  # said with the verb's own usage, not the top level's
            verbs = next((a.choices for a in ap._actions if isinstance(a, argparse._SubParsersAction)), {})
            verbs.get(getattr(args, "verb", None), ap).error(f"unrecognized arguments: {' '.join(extra)}")
        args.argv = list(sys.argv[1:] if argv is None else argv)  # what made a report (report.json generator.argv)
        check_names(args)
        return args.func(args)
    except StackgateError as exc:
        print(f"error: {escape.lines(exc)}", file=sys.stderr)  # a name it quotes from elsewhere drives no terminal
        return exc.exit_code
    except ModuleNotFoundError as exc:
        missing = needs()
        if not missing or (exc.name or "").split(".")[0] not in RUNTIME.values():
            raise
        print(
            f"error: stackgate needs {', '.join(missing)}, which this Python ({sys.executable}) lacks\n"
            f"  fix: {escape.command([sys.executable, '-m', 'pip', 'install', *missing])}   (on a host without a "
            "package index: carry their wheels and install them with --no-index, as evidence/h200-env.sh does)",
            file=sys.stderr,
        )
        return UsageError.exit_code
    except BrokenPipeError:
        # The reader has all it wanted (`plan | head`): no traceback, and nothing more to flush.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        # Ctrl-C before anything was started that passes it on (a run's harness does, and ends with 130 itself)
        print("stopped by SIGINT before anything ran", file=sys.stderr)
        return 130


# Each runtime dependency (pyproject.toml) -> the module it installs. A bare GPU host (the lent H200) has torch and
# pytest, not these: a command that needs one says which are missing, all at once, with the command that installs
# them, rather than the traceback of the first import that failed.
RUNTIME = {
    "pyyaml": "yaml",
    "pydantic": "pydantic",
    "docker": "docker",
    "junitparser": "junitparser",
    "lxml": "lxml",
    "jinja2": "jinja2",
    "orjson": "orjson",
}


def needs() -> list[str]:
    """The runtime dependencies this Python cannot import (their distribution names)."""
    import importlib.util

    def absent(module: str) -> bool:
        try:
            return importlib.util.find_spec(module) is None
        except (ImportError, ValueError):  # an import hook that refuses it, a half-installed package
            return True

    return [dist for dist, module in RUNTIME.items() if absent(module)]


def run(held: startup.Held | None = None) -> None:
    """The `stackgate` console script (and `python -m ci`, which holds a Ctrl-C from its first line: `held`)."""
    teardown.end(main(held=held))
