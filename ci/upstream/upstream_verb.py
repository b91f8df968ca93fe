"""`python -m ci upstream`: every change's state in a fork checkout, as a table, Markdown or JSON (upstream.json,
which `ci report --upstream` shows beside each verdict); `--record` writes the port commits' patch-ids."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from ci.common import options, tables
from ci.common.escape import one_line
from ci.stack import loader
from ci.stack.seed_table import change_label
from ci.upstream import carries_write, kept, scope
from ci.upstream.holds import classify
from ci.upstream.port import words
from ci.upstream.state import ChangeState, Snapshot

HEADERS = ("Change", "Upstream", "State", "Found", "Flags", "Port")


def rows(snap: Snapshot) -> list[list[str]]:
    return [
        [f"{change_label(c.change)}", c.recorded, c.state, c.detail, "; ".join(c.flags), words.cell(c)]
        for c in snap.changes
    ]


def header(snap: Snapshot) -> str:
    shallow = ", a shallow clone" if snap.shallow else ""
    left = f"; it left main at {snap.merge_base[:12]}, {snap.left_date}" if snap.left_date else ""
    over = [f"{snap.upstream_ref} ({snap.upstream[:12]}{left})"] if snap.upstream else []
    over += [f"its base vLLM {snap.base_version} ({snap.base_ref} = {snap.base[:12]})"] if snap.base else []
    base = f"; base found as {snap.base_how}" if snap.base_how else f"; base not known: {snap.base_unknown}"
    return (
        f"{snap.name or snap.fork} ({snap.fork}{shallow}): {snap.ref} = {snap.head[:12]}, {snap.fork_commits} own "
        f"commits ({snap.own}) over {' and '.join(over)}{base}"
    )


def fixes(states: tuple[ChangeState, ...]) -> list[str]:
    return [f"{change_label(c.change)}: {c.fix}" for c in states if c.fix]


def _md(line: str) -> str:
    """A line under the table in Markdown: its command a code span (pasted as it is), the rest escaped."""
    said, sep, command = line.partition("next: ")
    return tables.md_cell(said) + sep + tables.code(command) if sep and not said else tables.md_cell(line)


def cmd_upstream(args: argparse.Namespace) -> int:
    st = loader.load(args.stack)
    where = scope.from_args(st, args)
    if args.record:
        for line in carries_write.record(st, where, classify.survey(st, where)):
            print(line)
        return 0
    snap = kept.answer(st, where)  # the states and port readiness, kept per (fork tip, upstream commit)
    if args.change:
        snap = replace(snap, changes=tuple(c for c in snap.changes if c.change in args.change))
    if args.format == "json":
        print(json.dumps(snap.to_json(), indent=2))
        return 0
    render = tables.markdown if args.format == "markdown" else tables.text
    print(one_line(header(snap)) if args.format == "table" else tables.md_cell(header(snap)), end="\n\n")
    sys.stdout.write(render(HEADERS, rows(snap)))
    ports = [line for c in snap.changes for line in words.lines(c)]
    if ports:
        print("\nTo port:" if args.format == "table" else "\n**To port:**\n")
        for line in ports:
            nest = "  " * ((len(line) - len(line.lstrip())) // 2)
            print(f"  {one_line(line)}" if args.format == "table" else f"{nest}- {_md(line.strip())}")
    todo = fixes(snap.changes)
    if todo:
        title = "To make an unknown state known:"
        print(f"\n{title}" if args.format == "table" else f"\n**{title}**\n")
        for line in todo:
            print(f"  fix {one_line(line)}" if args.format == "table" else f"- {tables.md_cell(line)}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    u = options.verb(
        sub,
        "upstream",
        codes=(0, 2),
        help="each imported change's state in a fork checkout (converged, ported, partially ported, "
        "diverged, absent, unknown), from git alone",
    )
    options.add_fork(u, switch=False)
    u.add_argument(
        "--format",
        choices=("table", "json", "markdown"),
        default="table",
        help="table (terminal), json (upstream.json, for ci report --upstream) or markdown (default: %(default)s)",
    )
    u.add_argument(
        "--record",
        action="store_true",
        help="write the fork commits that carry each change, with their patch-ids, into stack/fork.yaml (carries), "
        "so a checkout a rebase took the commits from can still be compared (the same as ci fork --record)",
    )
    options.add_filters(u, "change")
    u.set_defaults(func=cmd_upstream)
