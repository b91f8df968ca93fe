"""The stack digest: what every row of the plan means (`ci.stack.meaning`) and what judges the results, each change's
acceptance criteria, whether it gates, the targets it must cover. rows.json and every JUnit carry it, report.json
records it, and `ci gate` refuses a report of another. A stack edited elsewhere (prose, upstream facts, what a fork
carries, a resource) keeps its digest: results and reports made before the edit are still its own."""

from __future__ import annotations

from dataclasses import asdict

from ci.stack import meaning, plan, rows_json
from ci.stack.model import Stack


def of(st: Stack) -> str:
    planned = plan.build(st).rows
    rows = {r.id: meaning.of_row(d) for r, d in zip(planned, rows_json.row_documents(st, planned), strict=True)}
    targets = {
        t.id: {**meaning.of_target(rows_json.target_document(t)), "required": t.required} for t in st.targets.values()
    }
    judged = {
        c.id: {"acceptance": asdict(c.acceptance), "gating": c.gating, "waived": dict(c.waived_targets)}
        for c in st.changes.values()
    }
    return meaning.digest(meaning.plain({"rows": rows, "targets": targets, "judged": judged}))
