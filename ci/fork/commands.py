"""`python -m ci fork`: the fork under test (stack/fork.yaml), what it holds, and its vLLM built for a run.

ci fork                                   which imported changes the fork's ref holds, and its base
ci fork bundle --out F [--without X]      the fork's vllm/ over its base release, as one bundle (X reverted)
ci fork build --host --base-site D --site S [--bundle F | --without X]
                                          that bundle laid over the base wheel's install, for a bare host
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ci import options, tables
from ci.errors import UsageError
from ci.fork import ablate, bundle, site, source
from ci.stack import loader
from ci.stack.model import Stack


def _open(args: argparse.Namespace) -> tuple[Stack, source.Fork]:
    st = loader.load(args.stack)
    return st, source.open_fork(st, args.fork)


def cmd_status(args: argparse.Namespace) -> int:
    _, fork = _open(args)
    src = fork.source
    if args.format == "json":
        doc = {
            "fork": src.name,
            "checkout": str(fork.checkout.path),
            "ref": src.ref,
            "commit": fork.commit,
            "base": {"version": src.base.version, "ref": src.base.ref, "commit": fork.base_commit},
            "changes": {c: {"state": h.state, "commits": list(h.commits), "why": h.why} for c, h in fork.held.items()},
        }
        print(json.dumps(doc, indent=2))
        return 0
    print(
        f"{src.name}: {src.ref} = {fork.commit[:12]} in {fork.checkout.path}, over vLLM {src.base.version} "
        f"({src.base.ref} = {fork.base_commit[:12]})\n"
    )
    rows = [[f"#{c}", h.state, ", ".join(x[:12] for x in h.commits), h.why] for c, h in fork.held.items()]
    print(tables.text(("Change", "In the fork", "Commits", "Why"), rows), end="")
    return 0


def make_bundle(st: Stack, fork: source.Fork, out: Path, without: str | None) -> Path:
    commit = ablate.without(st, fork, without) if without else fork.commit
    ov = bundle.overlay(fork, commit)
    path = bundle.write(fork, ov, out, without=without)
    what = f"{fork.source.ref} without #{without}" if without else fork.source.ref
    print(
        f"bundle {path}: {what} ({commit[:12]}) over vLLM {fork.source.base.version}: {len(ov.changed)} files "
        f"changed, {len(ov.deleted)} deleted; changes {', '.join(c for c in fork.present if c != without) or 'none'}"
    )
    return path


def cmd_bundle(args: argparse.Namespace) -> int:
    st, fork = _open(args)
    make_bundle(st, fork, args.out, args.without)
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    if not args.host:
        raise UsageError(
            "ci fork build builds a site folder for a host without docker",
            hint="add --host --base-site DIR --site DIR; images take the fork with ci build TARGET --fork",
        )
    if args.bundle is None:
        st, fork = _open(args)
        args.bundle = make_bundle(st, fork, args.site.with_name(f"{args.site.name}.bundle.tar.gz"), args.without)
    elif args.without:
        raise UsageError("--without makes a bundle; --bundle takes one already made", hint="give one of them")
    built = site.build(args.bundle, args.base_site, args.site)
    print(f"site {args.site}: vllm_build {built['vllm_build']} (changes: {', '.join(built['changes']) or 'none'})")
    print(f"run with: PYTHONPATH={args.site}:{args.base_site}:$PYTHONPATH python -m ci run TARGET SUITE --host ...")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    f = options.verb(
        sub, "fork", help="the fork under test: what it holds; its vLLM built over its base release", codes=(0, 2)
    )
    f.add_argument("--fork", type=Path, help=f"the fork's checkout (default: ${source.ENV_FORK}, else fork.yaml's)")
    f.add_argument("--format", choices=("table", "json"), default="table", help="a table, or JSON for scripts")
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
        p.add_argument("--fork", type=Path, default=argparse.SUPPRESS, help="the fork's checkout")
        p.add_argument("--without", metavar="CHANGE", help="the fork without this imported change (reverted)")
