"""`python -m ci fork`: the fork under test, what it holds of each imported change, and its vLLM built for a run.

ci fork [--format json] [--record]        what the fork's ref holds of each change (one answer with ci upstream)
ci fork bundle --out F [--without X]      the fork's vllm/ over its base release, as one bundle (X removed)
ci fork build --host --base-site D --site S [--bundle F | --without X]
                                          that bundle laid over the base wheel's install, for a bare host
ci fork port X [--with-prerequisites]     X ported onto a new branch (stackgate/port-X), or why it cannot be
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from ci.common import options, signals, tables
from ci.common.errors import BuildError, StoppedError, UsageError, os_said
from ci.common.escape import one_line, quote
from ci.common.tables import counted
from ci.fork import ablate, bundle, port, site, source
from ci.stack import loader
from ci.stack.model import Stack
from ci.upstream import carries_write, kept, scope
from ci.upstream.port import words
from ci.upstream.port.tried import Tried

if TYPE_CHECKING:
    from ci.fork import ablate, bundle

HEADERS = ("Change", "In the fork", "Commits that carry it", "Found", "Port")


def cmd_status(args: argparse.Namespace) -> int:
    st = loader.load(args.stack)
    at = scope.from_args(st, args)
    if args.record:
        fork = source.of(st, at)
        for line in carries_write.record(st, fork.scope, fork.snap):
            print(line)
        return 0
    snap = kept.answer(st, at)  # the states and port readiness, kept per (fork tip, upstream commit)
    fork = source.Fork(scope=at, snap=snap)
    changes = [c for c in snap.changes if c.pr and (not args.change or c.change in args.change)]
    if args.format == "json":
        base = fork.scope.base
        doc = {
            "fork": fork.name,
            "checkout": str(fork.checkout.path),
            "ref": fork.ref,
            "commit": fork.commit,
            "own": fork.snap.own,
            "upstream_ref": fork.snap.upstream_ref or None,
            "upstream_found": fork.scope.upstream_how or None,
            "left_upstream": _left(fork),
            "base": {"version": base.version, "ref": base.ref, "commit": base.commit, "how": base.how}
            if base
            else None,
            "base_unknown": {"problem": fork.scope.base_problem, "fix": fork.scope.base_fix} if not base else None,
            "changes": [
                {
                    "change": c.change,
                    "state": c.state,
                    "commits": list(c.carried_by),
                    "detail": c.detail,
                    "flags": list(c.flags),
                    "follow_ups_missing": list(c.follow_ups_missing),
                    "fix": c.fix,
                    "port": c.port.to_json() if c.port else None,
                    "follow_up_ports": [f.to_json() for f in c.follow_up_ports],
                }
                for c in changes
            ],
        }
        print(json.dumps(doc, indent=2))
        return 0
    print(one_line(fork.describe()))  # every name a fork supplies (its refs, paths, subjects) printed escaped
    for line in where(fork):
        print(one_line(f"  {line}"))
    print(one_line(f"  its own commits: {fork.snap.own} ({fork.snap.fork_commits})") + "\n")
    rows = [
        [f"#{c.change}", c.state, ", ".join(x[:12] for x in c.carried_by) or "—", one_line(c.detail), words.cell(c)]
        for c in changes
    ]
    print(tables.text(HEADERS, rows), end="")
    for c in changes:
        for line in (*c.flags, *([f"fix: {c.fix}"] if c.fix else [])):
            print(one_line(f"  #{c.change}: {line}"))
    ports = [one_line(line) for c in changes for line in words.lines(c)]
    if ports:
        print("\nTo port:\n" + "\n".join(f"  {line}" for line in ports))
    return 0


def where(fork: source.Fork) -> list[str]:
    """How upstream and the base were found, or why the base is not known and what makes it known."""
    sc = fork.scope
    lines = [f"upstream: {sc.upstream_ref} ({sc.upstream_how})"] if sc.upstream_ref else []
    if sc.left:
        lines.append(f"left upstream's main at {sc.left.commit[:12]} ({sc.left.date})")
    if sc.base:
        lines.append(f"base: vLLM {sc.base.version}, found as {sc.base.how}")
    else:
        lines += [f"base: not known: {sc.base_problem}", f"  fix: {sc.base_fix}"]
    return lines


def _left(fork: source.Fork) -> dict[str, str] | None:
    left = fork.scope.left
    return {"commit": left.commit, "date": left.date, "upstream_ref": left.upstream_ref} if left else None


def check_bundle(fork: source.Fork) -> None:
    """Refuse, before any build, the fork `make_bundle` would refuse for what its diff touches (compiled sources, a
    path that is not UTF-8): one `git diff`, no file read (`ci pipeline`, at upload rather than in each build step)."""
    from ci.fork import bundle  # the bundle's modules (and the validation of bundles from elsewhere) load where used

    bundle.touched(fork, fork.commit)


def make_bundle(st: Stack, fork: source.Fork, out: Path, without: str | None, tried: Tried | None = None) -> Path:
    """The fork's bundle; `without`: the fork without that change; `tried`: the fork with a port tried on a scratch
    ref (ci.fork.port_trial), its tree the port's tip."""
    from ci.fork import ablate, bundle

    if tried is not None:
        return _port_bundle(st, fork, out, tried)
    dropped = ablate.without(st, fork, without) if without else None
    commit = dropped.commit if dropped else fork.commit
    ov = bundle.overlay(fork, commit)
    path = _write(fork, ov, out, dropped)
    what = f"{fork.ref} without #{without} ({dropped.how} reverted)" if dropped else fork.ref
    held = ", ".join(f"#{c} {fork.state(c).state}" for c in fork.present if c != without) or "none"
    print(
        one_line(
            f"bundle {path}: {fork.name} {what} ({commit[:12]}) over vLLM {fork.base.version}: {len(ov.changed)} "
            f"files changed, {len(ov.deleted)} deleted; holds {held}"
        )
    )
    return path


def _port_bundle(st: Stack, fork: source.Fork, out: Path, t: Tried) -> Path:
    from ci.fork import bundle, port_trial

    at = port_trial.at_tip(st, fork, t)
    ov = bundle.overlay(at, t.tip)
    path = _write(fork, ov, out, None, ported=(t, at))
    held = ", ".join(f"#{c} {at.state(c).state}" for c in at.present) or "none"
    print(
        one_line(
            f"bundle {path}: {fork.name} {fork.ref} with the port of #{t.change} ({t.said}: "
            f"{counted(len(t.commits), 'commit')} onto {t.onto[:12]}, tip {t.tip[:12]}) over vLLM {fork.base.version}: "
            f"{len(ov.changed)} files changed, {len(ov.deleted)} deleted; holds {held}"
        )
    )
    return path


def _write(
    fork: source.Fork,
    ov: bundle.Overlay,
    out: Path,
    dropped: ablate.Dropped | None,
    ported: bundle.Ported | None = None,
) -> Path:
    """The bundle written whole over `out`, or not at all: a stop (SIGTERM, SIGINT, SIGHUP) or a full disk meanwhile
    leaves what `out` held before and no temporary file beside it, and says so."""
    from ci.fork import bundle

    kept = f"{out} holds what it held before" if out.exists() else f"no file was written at {out}"
    try:
        with signals.raising():
            return bundle.write(fork, ov, out, dropped=dropped, ported=ported)
    except signals.Stopped as stop:
        raise StoppedError(
            stop.signum, f"stopped by {stop.name} while writing the bundle: {kept}; no temporary file is left"
        ) from None
    except OSError as exc:
        raise BuildError(
            f"the bundle could not be written to {out}: {os_said(exc)}; {kept}; no temporary file is left",
            hint="free space there or pass another --out",
        ) from None


def cmd_bundle(args: argparse.Namespace) -> int:
    st = loader.load(args.stack)
    make_bundle(st, source.from_command(st, args), args.out, args.without)
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    if not args.host:
        raise UsageError(
            "ci fork build builds a site folder for a host without docker",
            hint="add --host --base-site DIR --site DIR; images take the fork with ci build TARGET --fork",
        )

    if args.bundle is None:
        st = loader.load(args.stack)
        fork = source.from_command(st, args)
        site.require_base(args.base_site, fork.name, fork.base.version)  # before any work
        args.bundle = make_bundle(st, fork, args.site.with_name(f"{args.site.name}.bundle.tar.gz"), args.without)
    elif args.without:
        raise UsageError("--without makes a bundle; --bundle takes one already made", hint="give one of them")
    built = site.build(args.bundle, args.base_site, args.site)
    print(
        one_line(
            f"site {args.site}: vllm_build {built['vllm_build']} (changes: {', '.join(built['changes']) or 'none'})"
        )
    )
    path = quote(f"{args.site}:{args.base_site}")
    print(f'run with: PYTHONPATH={path}:"$PYTHONPATH" python -m ci run TARGET SUITE --host ...')
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    f = options.verb(
        sub,
        "fork",
        help="the fork under test: what it holds of each imported change; its vLLM built over its base release",
        codes=(0, 2),
    )
    options.add_fork(f, switch=False)
    options.add_filters(f, "change")
    f.add_argument("--format", choices=("table", "json"), default="table", help="a table, or JSON for scripts")
    f.add_argument(
        "--record",
        action="store_true",
        help="write the fork commits that carry each change, with their patch-ids, into stack/fork.yaml (carries)",
    )
    f.set_defaults(func=cmd_status)
    verbs = f.add_subparsers(dest="fork_verb", metavar="{bundle,build,port}", help="without one: what the fork holds")
    b = verbs.add_parser("bundle", help="the fork's vllm/ over its base, as one bundle")
    b.add_argument("--out", type=Path, required=True, help="the bundle file (.tar.gz)")
    b.set_defaults(func=cmd_bundle)
    h = verbs.add_parser("build", help="lay a bundle over the base wheel's install, for a host without docker")
    h.add_argument("--host", action="store_true", help="build a site folder on this host (no docker)")
    h.add_argument("--bundle", type=Path, help="a bundle made by `ci fork bundle` (default: make one from the fork)")
    h.add_argument("--base-site", type=Path, required=True, help="the site folder holding the base vLLM release")
    h.add_argument("--site", type=Path, required=True, help="the new site folder for the fork's vLLM")
    h.set_defaults(func=cmd_build)
    o = verbs.add_parser(
        "port",
        help="port a change the fork lacks (or a follow-up it lacks) onto a new branch from its ref; exit 2, making "
        "nothing, where it conflicts",
        description="Exit 0: the branch is made, and read as ci fork reads it. Exit 2: the port conflicts (nothing "
        "is made; the files, hunks, possible prerequisites and the commands to finish it by hand are printed), or "
        "the input is bad (an unknown change, one with nothing to port, a branch that exists).",
    )
    o.add_argument("change_id", metavar="CHANGE", help="the change (or the follow-up's PR number) to port")
    o.add_argument("--branch", metavar="NAME", help="the new branch (default: stackgate/port-CHANGE)")
    o.add_argument(
        "--with-prerequisites",
        action="store_true",
        help="port its prerequisite chain first, as ci fork names it (the PRs it is stacked on, the upstream commits "
        "that bring the files it lacks and those behind its conflicts, each the fork lacks; theirs too), oldest first: "
        "that chain then the change, or nothing where any of it conflicts",
    )
    o.set_defaults(func=port.cmd_port)
    for p in (b, h, o):
        options.add_stack(p)
        for action in f._actions:  # the fork options again after the sub-verb, as --stack is
            if action.dest == "fetch_missing":
                p.add_argument(*action.option_strings, action="store_true", default=argparse.SUPPRESS, help=action.help)
            elif action.dest in ("fork", "ref", "upstream_ref", "base_ref", "base_version"):
                p.add_argument(
                    *action.option_strings,
                    type=action.type,
                    default=argparse.SUPPRESS,
                    metavar=action.metavar,
                    help=action.help,
                )
        if p is not o:
            p.add_argument("--without", metavar="CHANGE", help="the fork without this imported change (reverted)")
