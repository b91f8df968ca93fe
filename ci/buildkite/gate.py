"""`python -m ci gate report.json`: fail when a change the stack marks as gating is not ready.

Readiness is the report's verdict (`changes[].ready`: the report is the one judge of the results); which changes
gate is the stack's, the one given here, never the report's own `gating` field: a report made with an older stack,
or edited, would otherwise open the gate on a change this stack gates. A report made with another stack (its digest
differs) is refused, exit 2, naming both, unless `--other-stack` says it may be judged so. `--style` prints the
annotation style the verdicts call for instead.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from ci.common import files, options, untrusted
from ci.common.errors import GATE_CLOSED, UsageError
from ci.common.tables import counted

Style = Literal["success", "warning", "error"]


@dataclass(frozen=True, kw_only=True)
class ChangeState:
    id: str
    ready: bool
    gating: bool
    verdict: str


class _Change(untrusted.Record):
    id: str
    ready: bool
    gating: bool
    verdict: str


class _Stack(untrusted.Record):
    digest: str | None = None


class _Report(untrusted.Record):
    changes: list[_Change]
    stack: _Stack | None = None


REPORT = untrusted.Kind(
    what="a report.json written by ci report",
    limit=files.REPORT_JSON_MAX,
    fix="point it at the report.json of a report folder (python -m ci report RESULTS --out DIR writes DIR/report.json)",
    depth=32,
)


def read(report: Path) -> tuple[tuple[ChangeState, ...], str | None]:
    """Each change's verdict as report.json states it, and the digest of the stack that judged them; read as data
    from elsewhere (`ci.common.untrusted`): a usage error names the file, the field and what was wrong."""
    doc = untrusted.read(report, _Report, REPORT)
    changes = tuple(ChangeState(id=c.id, ready=c.ready, gating=c.gating, verdict=c.verdict) for c in doc.changes)
    return changes, doc.stack.digest if doc.stack and doc.stack.digest else None


def style(changes: tuple[ChangeState, ...]) -> Style:
    """error: a gating change is not ready; success: every change is; warning: otherwise."""
    if any(c.gating and not c.ready for c in changes):
        return "error"
    return "success" if changes and all(c.ready for c in changes) else "warning"


def judged_here(
    report: Path, changes: tuple[ChangeState, ...], digest: str | None, stack_dir: Path, *, other_stack: bool
) -> tuple[tuple[ChangeState, ...], list[str]]:
    """Each change's verdict with `gating` as this stack says, and the changes it gates that the report gives no
    verdict for (a report filtered to other changes): the gate cannot open on a verdict that was never given."""
    from ci.stack import loader

    st = loader.load(stack_dir)
    if digest != st.digest and not other_stack:
        raise UsageError(
            f"{report} was made with another stack ({digest or 'no digest recorded'}) than {st.root} "
            f"({st.digest}): its verdicts judged other criteria",
            hint="report again with this stack (python -m ci report RESULTS --stack ... --out DIR), or add "
            "--other-stack to judge its verdicts with this stack's gating changes",
        )
    gating = {cid for cid, ch in st.changes.items() if ch.gating}
    judged = {c.id for c in changes}
    missing = [
        f"change {cid} is gating in {st.root} and {report} holds no verdict for it" for cid in sorted(gating - judged)
    ]
    return tuple(replace(c, gating=c.id in gating) for c in changes), missing


def main(args: argparse.Namespace) -> int:
    said, digest = read(args.report)
    changes, missing = judged_here(args.report, said, digest, args.stack, other_stack=args.other_stack)
    if args.style:
        print("error" if missing else style(changes))
        return 0
    for line in missing:
        print(f"NOT JUDGED: {line}")
    gating = [c for c in changes if c.gating]
    for c in gating:
        print(f"{'ready' if c.ready else 'NOT READY'}: change {c.id} (gating): {c.verdict}")
    if not gating:
        print(f"no change in {args.report} is marked gating (gating: true in stack/changes/<id>.yaml): gate open")
    closed = [c.id for c in gating if not c.ready]
    if missing:
        print(
            f"gate closed: {counted(len(missing), 'gating change')} without a verdict in {args.report}: report them "
            "(python -m ci report RESULTS --out DIR, without a --change filter leaving them out)"
        )
        return GATE_CLOSED
    if closed:
        print(f"gate closed: {counted(len(closed), 'gating change')} not ready: {', '.join(closed)}")
        return GATE_CLOSED
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = options.verb(
        sub,
        "gate",
        help="fail when a change the stack marks as gating is not ready, reading a report.json's verdicts",
        codes=(0, 2, GATE_CLOSED),
    )
    p.add_argument("report", type=Path, metavar="REPORT_JSON", help="the report.json of `python -m ci report`")
    p.add_argument(
        "--other-stack",
        action="store_true",
        help="judge a report made with another stack (its digest differs; refused by default, exit 2): its "
        "verdicts, and this stack's gating changes",
    )
    p.add_argument(
        "--style",
        action="store_true",
        help="print the annotation style the verdicts call for (error: a gating change is not ready; "
        "success: every change is; warning: otherwise) and exit 0",
    )
    p.set_defaults(func=main)
