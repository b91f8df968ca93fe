"""The composition rows' outcomes in the seed table's shape: each combination runs, crashes (with the assertion
or illegal memory access that ended it) or hangs (the row's timeout), or was not run and why.

A crash or a hang is the row's outcome, recorded with its cause, not a failure of the run that found it.
"""

from __future__ import annotations

import re

from ci.report.view import Report, Table, short
from ci.results.merge import RowResult
from ci.stack.plan import Row, history_for

TRACK = "composition"
HEADERS = (
    "Row",
    "Model",
    "Hardware",
    "GPUs",
    "Spec Decode",
    "TP",
    "DP",
    "EP Enabled?",
    "CUDA Graph Mode",
    "DCP Size",
    "DBO Enabled?",
    "KV Cache DType",
    "Attn Backend",
    "Runs?",
    "Cause / notes",
    "Seed table",
)
RUNS, WRONG, CRASH, HANG, NOT_RUN = "✔ runs", "⚠ runs, wrong", "✘ crash", "◷ hang", "not run"
# pytest's crash line for an exception ("RuntimeError: ...", "engine.dp.RankFailed: ..."): the engine died
_EXCEPTION = re.compile(r"^[\w.]*(Error|Exception|Failed|Interrupt|Dead\w*)\b")
_SEED = {"ok": "✔", "fail": "✘", "partial": "⚠", "unknown": "?"}


def outcome(r: RowResult) -> tuple[str, str]:
    """(Runs?, cause) of one row: what the seed table's status column and notes would say."""
    needs = r.planned.gpus if r.planned is not None else 0
    if r.status == "pass":
        return RUNS, ""
    if r.status in ("skipped", "not run"):
        why = r.message or r.note
        if needs > 1 and f"needs {needs} GPUs" in why:
            return NOT_RUN, short(why)
        if needs > 1 and (not why or "GPU" in why):
            return NOT_RUN, f"needs {needs} GPUs" + (f" ({short(why, 120)})" if why else "")
        return NOT_RUN, short(why)
    case = next((c for c in r.cases if c.status in ("failure", "error")), None)
    message = case.message if case else r.message
    cause = case.cause if case and case.cause else ""
    if message.startswith("timeout after"):
        return HANG, message + (f"; last sign: {cause}" if cause else "")
    if (case is not None and case.status == "error") or _EXCEPTION.match(message):
        return CRASH, short(cause or message)
    return WRONG, short(message)


def table(report: Report) -> Table:
    rows = []
    for r in report.results.rows:
        p = r.planned
        if p is None or p.track != TRACK:
            continue
        model, target = report.stack.models[p.model], report.stack.targets[p.target]
        spec = model.drafter.type.upper() if p.spec_method and model.drafter else "-"
        seen = _seed(report, r)
        runs, cause = outcome(r)
        rows.append(
            (
                p.id,
                model.seed_name or model.id,
                target.short,
                str(p.gpus),
                spec,
                str(p.tp),
                str(p.dp),
                "Y" if p.ep else "N",
                p.cudagraph_mode,
                str(p.dcp),
                "Y" if p.dbo else "N",
                p.kv_cache_dtype,
                p.backend,
                runs,
                cause,
                seen,
            )
        )
    return Table(headers=HEADERS, rows=tuple(rows))


def tally(t: Table) -> str:
    """'2 run, 1 crash, ...' over the table's Runs? column."""
    col = HEADERS.index("Runs?")
    counts: dict[str, int] = {}
    for row in t.rows:
        counts[row[col]] = counts.get(row[col], 0) + 1
    return ", ".join(f"{n} {k}" for k, n in counts.items()) or "no rows"


def _seed(report: Report, r: RowResult) -> str:
    """What the seed table said of this combination: of the row's own model, or, for a tiny stand-in, of the
    seed model whose row in this plan has the same axes (named, since it is another model's finding)."""
    p = r.planned
    if p is None:
        return ""
    h = history_for(report.stack, p)
    if h:
        return f"{_SEED[h.runs]} {h.notes}".strip()
    axes = _axes(p)
    for other in report.plan.rows:
        if other.track == TRACK and other.model != p.model and _axes(other) == axes:
            h = history_for(report.stack, other)
            if h:
                return f"{_SEED[h.runs]} {h.notes} ({h.model})".replace("  ", " ").strip()
    return ""


def _axes(p: Row) -> tuple[object, ...]:
    return (p.target, p.backend, p.tp, p.dp, p.ep, p.cudagraph_mode, p.dcp, p.dbo, p.kv_cache_dtype, p.spec_method)


def heading(report: Report) -> str:
    change = report.stack.changes.get(TRACK)
    return f"Composition: {change.title}" if change else "Composition"
