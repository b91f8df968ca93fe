"""The plan as the seed table: one line per row, the columns of the spec-decode support RFC."""

from __future__ import annotations

from ci.stack.model import Stack
from ci.stack.plan import Plan, history_for

PLAN_HEADERS = (
    "Row",
    "Model",
    "Hardware",
    "GPUs",
    "Spec Decode",
    "k",
    "TP",
    "DP",
    "EP Enabled?",
    "CUDA Graph Mode",
    "DCP Size",
    "DBO Enabled?",
    "KV Cache DType",
    "Attn Backend",
    "Context",
    "Batch",
    "Change",
    "Seen",
)
_SEEN = {"ok": "✔", "fail": "✘", "partial": "⚠", "unknown": "?"}


def change_label(change_id: str) -> str:
    """Upstream PR numbers read as #48804; other changes (the self-test) by their id."""
    return f"#{change_id}" if change_id.isdigit() else change_id


def _yn(value: bool) -> str:
    return "Y" if value else "N"


def plan_table_rows(st: Stack, p: Plan) -> list[list[object]]:
    out = []
    for r in p.rows:
        model, target = st.models[r.model], st.targets[r.target]
        spec = model.drafter.type.upper() if r.spec_method and model.drafter else "-"
        seen = history_for(st, r)
        out.append(
            [
                r.id,
                model.seed_name or model.id,
                target.short,
                r.gpus,
                spec,
                r.num_speculative_tokens or "-",
                r.tp,
                r.dp,
                _yn(r.ep),
                r.cudagraph_mode,
                r.dcp,
                _yn(r.dbo),
                r.kv_cache_dtype,
                r.backend,
                r.context,
                r.batch,
                change_label(r.change),
                f"{_SEEN[seen.runs]} {seen.score or ''}".strip() if seen else "",
            ]
        )
    return out


def counts(p: Plan) -> list[str]:
    """'target/suite: n' for each scope of the plan, in plan order."""
    out: dict[str, int] = {}
    for r in p.rows:
        out[f"{r.target}/{r.suite}"] = out.get(f"{r.target}/{r.suite}", 0) + 1
    return [f"{k}: {v}" for k, v in out.items()] or ["none"]
