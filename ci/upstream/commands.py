"""`python -m ci upstream`: every change's state in a fork checkout, as a table, Markdown or JSON (upstream.json,
which `ci report --upstream` shows beside each verdict); `--record` writes the port commits' patch-ids."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from ci import options, tables
from ci.stack import loader
from ci.stack.table import change_label
from ci.upstream import classify, record
from ci.upstream.checkout import Checkout
from ci.upstream.state import ChangeState, Snapshot

HEADERS = ("Change", "Upstream", "State", "Found", "Flags")


def rows(snap: Snapshot) -> list[list[str]]:
    return [[f"{change_label(c.change)}", c.recorded, c.state, c.detail, "; ".join(c.flags)] for c in snap.changes]


def header(snap: Snapshot) -> str:
    shallow = ", a shallow clone" if snap.shallow else ""
    return (
        f"{snap.fork}{shallow}: HEAD {snap.head[:12]}, {snap.fork_commits} own commits over {snap.upstream_ref} "
        f"({snap.upstream[:12]}; merge base {snap.merge_base[:12]})"
    )


def fixes(states: tuple[ChangeState, ...]) -> list[str]:
    return [f"{change_label(c.change)}: {c.fix}" for c in states if c.fix]


def cmd_upstream(args: argparse.Namespace) -> int:
    st = loader.load(args.stack)
    co = Checkout.open(args.fork)
    if args.record:
        for line in record.record(st, co, args.change):
            print(line)
        return 0
    snap = classify.survey(st, co, args.upstream_ref)
    if args.change:
        snap = replace(snap, changes=tuple(c for c in snap.changes if c.change in args.change))
    if args.format == "json":
        print(json.dumps(snap.to_json(), indent=2))
        return 0
    render = tables.markdown if args.format == "markdown" else tables.text
    print(header(snap) if args.format == "table" else tables.md_cell(header(snap)), end="\n\n")
    sys.stdout.write(render(HEADERS, rows(snap)))
    todo = fixes(snap.changes)
    if todo:
        title = "To make an unknown state known:"
        print(f"\n{title}" if args.format == "table" else f"\n**{title}**\n")
        for line in todo:
            print(f"  fix {line}" if args.format == "table" else f"- {tables.md_cell(line)}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    u = options.verb(
        sub,
        "upstream",
        codes=(0, 2),
        help="each imported change's state in a fork checkout (converged, ported, partially ported, "
        "diverged, absent, unknown), from git alone",
    )
    u.add_argument("--fork", type=Path, required=True, metavar="CHECKOUT", help="the fork's git checkout (its HEAD)")
    u.add_argument(
        "--upstream-ref",
        metavar="REF",
        help="upstream's main branch in the checkout (default: <remote>/main of the remote whose URL is "
        "the change files' upstream repository, github.com/vllm-project/vllm)",
    )
    u.add_argument(
        "--format",
        choices=("table", "json", "markdown"),
        default="table",
        help="table (terminal), json (upstream.json, for ci report --upstream) or markdown (default: %(default)s)",
    )
    u.add_argument(
        "--record",
        action="store_true",
        help="write each port commit's patch-id into its change file (fork.patch_ids) from this checkout, "
        "so a checkout a rebase took the commits from can still be compared",
    )
    options.add_filters(u, "change")
    u.set_defaults(func=cmd_upstream)
