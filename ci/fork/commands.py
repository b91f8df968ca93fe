"""`python -m ci fork`: the fork under test, what it holds of each imported change, and its vLLM built for a run.

ci fork [--format json] [--record]        what the fork's ref holds of each change (one answer with ci upstream)
ci fork bundle --out F [--without X]      the fork's vllm/ over its base release, as one bundle (X removed)
ci fork build --host --base-site D --site S [--bundle F | --without X]
                                          that bundle laid over the base wheel's install, for a bare host
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ci import options, tables
from ci.errors import UsageError
from ci.escape import one_line
from ci.fork import ablate, bundle, site, source
from ci.stack import loader
from ci.stack.model import Stack
from ci.upstream import record

HEADERS = ("Change", "In the fork", "Commits that carry it", "Found")


def cmd_status(args: argparse.Namespace) -> int:
    st = loader.load(args.stack)
    fork = source.from_command(st, args)
    if args.record:
        for line in record.record(st, fork.scope, fork.snap):
            print(line)
        return 0
    changes = [c for c in fork.snap.changes if c.pr and (not args.change or c.change in args.change)]
    if args.format == "json":
        base = fork.scope.base
        doc = {
            "fork": fork.name,
            "checkout": str(fork.checkout.path),
            "ref": fork.ref,
            "commit": fork.commit,
            "own": fork.snap.own,
            "upstream_ref": fork.snap.upstream_ref or None,
            "base": {"version": base.version, "ref": base.ref, "commit": base.commit} if base else None,
            "changes": [
                {
                    "change": c.change,
                    "state": c.state,
                    "commits": list(c.carried_by),
                    "detail": c.detail,
                    "flags": list(c.flags),
                    "fix": c.fix,
                }
                for c in changes
            ],
        }
        print(json.dumps(doc, indent=2))
        return 0
    print(one_line(fork.describe()))  # every name a fork supplies (its refs, paths, subjects) printed escaped
    if fork.scope.base is None:
        print(
            one_line(
                f"  base: not known ({fork.scope.base_problem}); a bundle needs --base-ref REF --base-version X.Y.Z"
            )
        )
    print(one_line(f"  its own commits: {fork.snap.own} ({fork.snap.fork_commits})") + "\n")
    rows = [
        [f"#{c.change}", c.state, ", ".join(x[:12] for x in c.carried_by) or "—", one_line(c.detail)] for c in changes
    ]
    print(tables.text(HEADERS, rows), end="")
    for c in changes:
        for line in (*c.flags, *([f"fix: {c.fix}"] if c.fix else [])):
            print(one_line(f"  #{c.change}: {line}"))
    return 0


def make_bundle(st: Stack, fork: source.Fork, out: Path, without: str | None) -> Path:
    dropped = ablate.without(st, fork, without) if without else None
    commit = dropped.commit if dropped else fork.commit
    ov = bundle.overlay(fork, commit)
    path = bundle.write(fork, ov, out, dropped=dropped)
    what = f"{fork.ref} without #{without} ({dropped.how} reverted)" if dropped else fork.ref
    held = ", ".join(f"#{c} {fork.state(c).state}" for c in fork.present if c != without) or "none"
    print(
        one_line(
            f"bundle {path}: {fork.name} {what} ({commit[:12]}) over vLLM {fork.base.version}: {len(ov.changed)} "
            f"files changed, {len(ov.deleted)} deleted; holds {held}"
        )
    )
    return path


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
    print(
        one_line(
            f"run with: PYTHONPATH={args.site}:{args.base_site}:$PYTHONPATH python -m ci run TARGET SUITE --host ..."
        )
    )
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
    verbs = f.add_subparsers(dest="fork_verb", metavar="{bundle,build}", help="without one: what the fork holds")
    b = verbs.add_parser("bundle", help="the fork's vllm/ over its base, as one bundle")
    b.add_argument("--out", type=Path, required=True, help="the bundle file (.tar.gz)")
    b.set_defaults(func=cmd_bundle)
    h = verbs.add_parser("build", help="lay a bundle over the base wheel's install, for a host without docker")
    h.add_argument("--host", action="store_true", help="build a site folder on this host (no docker)")
    h.add_argument("--bundle", type=Path, help="a bundle made by `ci fork bundle` (default: make one from the fork)")
    h.add_argument("--base-site", type=Path, required=True, help="the site folder holding the base vLLM release")
    h.add_argument("--site", type=Path, required=True, help="the new site folder for the fork's vLLM")
    h.set_defaults(func=cmd_build)
    for p in (b, h):
        options.add_stack(p)
        for action in f._actions:  # the fork options again after the sub-verb, as --stack is
            if action.dest in ("fork", "ref", "upstream_ref", "base_ref", "base_version"):
                p.add_argument(
                    *action.option_strings,
                    type=action.type,
                    default=argparse.SUPPRESS,
                    metavar=action.metavar,
                    help=action.help,
                )
        p.add_argument("--without", metavar="CHANGE", help="the fork without this imported change (reverted)")
