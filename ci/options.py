"""Options shared by several verbs, each defined once: its flag, environment variable, default and help.

`--target`, `--suite`, `--change` and `--rows` filters all follow one convention: repeat the flag, or
give commas (`--rows A --rows B` == `--rows A,B`).
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ci.errors import EXIT_CODES, UsageError

REPO = Path(__file__).resolve().parent.parent
ENV_STACK = "STACKGATE_STACK"
DEFAULT_TIMEOUT_S = 900.0  # seconds per test item; rows.json carries it to the harness


SECONDS_MAX = 7 * 86400.0  # a test item's timeout, a run's deadline: a week is past any run's length
GIB_MAX = 4096.0  # one GPU's memory: past any device made
GPUS_MAX = 1024  # GPUs a projection packs rows on: a cluster, not a host
RUNS_MAX = 1000  # runs of an arm of the timing protocol


# a vLLM release as stackgate names one (a lock, a wheel, a tag's vX.Y.Z): no rc, dev or name such as "latest"
RELEASE = re.compile(r"\d+\.\d+\.\d+(\.post\d+)?")


def release(text: str) -> str:
    """A vLLM release, X.Y.Z or X.Y.Z.postN (argparse type): checked once, where it is given, so nothing after it
    compares a version it cannot read."""
    if not RELEASE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a vLLM release (X.Y.Z, e.g. 0.27.1; no rc, dev or name)")
    return text


def seconds(text: str) -> float:
    """A positive, finite number of seconds, at most a week (argparse type): 0, negatives, nan and inf are refused."""
    return _positive(text, "seconds", SECONDS_MAX)


def gib(text: str) -> float:
    """A positive, finite number of GiB (argparse type): a device of no memory packs nothing, nan packs anything."""
    return _positive(text, "GiB", GIB_MAX)


def _positive(text: str, unit: str, most: float) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of {unit}") from None
    if not (0 < value <= most):
        raise argparse.ArgumentTypeError(f"{text!r}: give a positive, finite number of {unit}, at most {most:,g}")
    return value


def whole(least: int, most: int) -> Callable[[str], int]:
    """An argparse type: a whole number from `least` to `most`; anything else exits 2 naming the bound (a count of
    GPUs of 30,000,000 would have the projection build them all)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not least <= value <= most:
            raise argparse.ArgumentTypeError(f"{value} is out of bounds: give {least} to {most:,}")
        return value

    return parse


def default_stack() -> Path:
    return Path(os.environ.get(ENV_STACK) or REPO / "stack")


def cache_home() -> Path:
    """This user's stackgate cache: $STACKGATE_CACHE, else $XDG_CACHE_HOME/stackgate (~/.cache/stackgate)."""
    return Path(
        os.environ.get("STACKGATE_CACHE")
        or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "stackgate")
    )


class Csv(argparse.Action):
    """A repeatable filter that also takes comma-separated values; the result is a list, in order, once each."""

    def __call__(self, parser: Any, namespace: Any, values: Any, _option_string: Any = None) -> None:
        have = list(getattr(namespace, self.dest, None) or [])
        for part in str(values).split(","):
            if part.strip() and part.strip() not in have:
                have.append(part.strip())
        setattr(namespace, self.dest, have)


def add_stack(p: argparse.ArgumentParser, *, top: bool = False) -> None:
    help_ = f"stack directory (default: ${ENV_STACK}, else the repository's stack/)"
    # after the verb too; SUPPRESS there keeps the value given before the verb
    p.add_argument("--stack", type=Path, default=default_stack() if top else argparse.SUPPRESS, help=help_)


def add_filters(p: argparse.ArgumentParser, *names: str) -> None:
    helps = {
        "target": "only this target, e.g. cuda-sm121a (repeatable, or comma-separated)",
        "suite": "only this suite, e.g. sparse_mla (repeatable, or comma-separated)",
        "change": "only this imported change, e.g. 48804 (repeatable, or comma-separated)",
        "rows": "only these row ids (repeatable, or comma-separated)",
    }
    for name in names:
        p.add_argument(f"--{name}", action=Csv, default=[], metavar=name.upper(), help=helps[name])


class _TheFork:
    """A bare --fork: the fork under test ($STACKGATE_FORK, else stack/fork.yaml's checkout). Not a str: argparse
    passes a str const through the option's type, and this must never become a Path."""

    def __repr__(self) -> str:
        return "THE_FORK"


THE_FORK = _TheFork()


def add_fork(p: argparse.ArgumentParser, *, switch: bool) -> None:
    """One fork at one ref, the same flags on every verb (ci.upstream.scope resolves them). `switch`: a bare --fork
    turns the fork on (build, run and plan the fork's vLLM, not a stock release), and --fork PATH names it."""
    where = "the fork's checkout: a local clone, bare or not (default: $STACKGATE_FORK, else stack/fork.yaml's)"
    if switch:
        p.add_argument(
            "--fork",
            type=Path,
            nargs="?",
            const=THE_FORK,
            metavar="CHECKOUT",
            help=f"the fork under test (judged without this flag too, wherever one is configured); {where}",
        )
        p.add_argument(
            "--stock",
            action="store_true",
            help="judge the target's locked vLLM release, not the fork configured ($STACKGATE_FORK, or "
            "stack/fork.yaml whose checkout exists)",
        )
    else:
        p.add_argument("--fork", type=Path, metavar="CHECKOUT", help=where)
    p.add_argument(
        "--ref",
        metavar="REF",
        help="the branch, tag or commit judged, remote branches too (default: $STACKGATE_FORK_REF, else "
        "stack/fork.yaml's ref for its checkout, else HEAD)",
    )
    p.add_argument(
        "--upstream-ref",
        metavar="REF",
        help="upstream's main in the checkout: a ref, or a remote's name (default: $STACKGATE_UPSTREAM_REF, else "
        "stack/fork.yaml's upstream, else <remote>/main of the remote whose URL ends in vllm-project/vllm)",
    )
    p.add_argument(
        "--base-ref",
        metavar="REF",
        help="the release tree the fork is built on (default: stack/fork.yaml's base, else found from history: the "
        "release line where REF left upstream's main)",
    )
    p.add_argument(
        "--base-version",
        metavar="X.Y.Z",
        type=release,
        help="the vLLM release --base-ref holds, where its name is not vX.Y.Z; alone: the release over where REF "
        "left upstream's main",
    )
    p.add_argument(
        "--fetch-missing",
        action="store_true",
        help="where the checkout is a partial clone: fetch the objects it lacks from its promisor remote first, in "
        "one fetch (without it such a clone is refused, with the commands that fill it)",
    )


HISTORY = "history.sqlite"  # the history's file name, beside the report's folder (the output root's)


def add_history(p: argparse.ArgumentParser, where: str) -> None:
    """--history PATH and --no-history: the file every report's build is remembered in (`where`: its default)."""
    p.add_argument(
        "--history",
        type=Path,
        metavar="PATH",
        help=f"the history every report's build is added to, and read back from for flaky rows, new failures and "
        f"trends: a SQLite file, made where absent (default: {where})",
    )
    p.add_argument("--no-history", action="store_true", help="neither read nor write a history")


def history_path(args: argparse.Namespace, root: Path) -> Path | None:
    """The history a verb reads and adds to: --history, else `root`/history.sqlite; None with --no-history."""
    if getattr(args, "no_history", False):
        if getattr(args, "history", None):
            raise UsageError("--history and --no-history exclude each other", hint="give one of them")
        return None
    return getattr(args, "history", None) or root / HISTORY


def exit_codes(*codes: int) -> str:
    """The epilog listing the exit codes a verb can return."""
    said = {**EXIT_CODES, 0: EXIT_CODES[0] if 1 in codes else "success"}  # rows and reports: where a verb runs rows
    lines = [f"  {c}  {said[c]}" for c in sorted(codes)]
    return "exit codes:\n" + "\n".join(lines)


def formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


def verb(sub: Any, name: str, *, help: str, codes: Sequence[int]) -> argparse.ArgumentParser:
    """A sub-command with its help, its exit codes in the epilog and --stack after the verb."""
    p = sub.add_parser(name, help=help, description=help, epilog=exit_codes(*codes), formatter_class=formatter)
    add_stack(p)
    return p


ENV_REGISTRY = "STACKGATE_REGISTRY"  # where a pipeline's images go: host[:port][/path], e.g. registry.lan:5000/ci
_REGISTRY = re.compile(r"[a-z0-9]([a-z0-9.\-]*[a-z0-9])?(:[0-9]{1,5})?(/[a-z0-9]+([._\-/][a-z0-9]+)*)?")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")


def given_registry(flag: str | None) -> str | None:
    """The registry `--registry` names, else $STACKGATE_REGISTRY, checked; None where neither is given."""
    given = flag or os.environ.get(ENV_REGISTRY, "")
    return checked_registry(given, "--registry" if flag else f"${ENV_REGISTRY}") if given else None


def checked_registry(value: str, where: str) -> str:
    """`value` as a registry location (host[:port][/path]), or a UsageError naming `where` it came from. The error
    never repeats a user or password written into the value (an URL's userinfo): it is printed, and CI logs it."""
    registry = value.strip().rstrip("/")
    if _REGISTRY.fullmatch(registry):
        return registry
    shown = without_secret(value)
    if shown != value:
        raise UsageError(
            f"{where} {shown!r} holds a user and password: a registry location is host[:port][/path], and the "
            "credentials were not used",
            hint="give the location alone, and log in once where the images are pushed and pulled: docker login HOST",
        )
    if _SCHEME.match(registry):
        raise UsageError(
            f"{where} {shown!r} is a URL: a registry location is host[:port][/path], without a scheme",
            hint=f"for example {_SCHEME.sub('', registry, count=1)}",
        )
    raise UsageError(
        f"{where} {shown!r} is not a registry location (host[:port][/path], lower case)",
        hint="for example registry.lan:5000/stackgate",
    )


def without_secret(text: str) -> str:
    """`text` with any userinfo (`user:password@` of a URL or a registry reference) replaced by `***@`: a
    registry location never holds an '@', so everything before the last one is a credential, whatever it spells."""
    rest = _SCHEME.sub("", text, count=1)
    scheme = text[: len(text) - len(rest)]
    return f"{scheme}***@{rest.rpartition('@')[2]}" if "@" in rest else text
