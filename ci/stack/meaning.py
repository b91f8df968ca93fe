"""What a row means, and so what the stack digest covers: what the row runs (its parameters, its model as the engine
gets it, its target) and what its test asserts inside the container (the change's tolerance and graph-replay rule).

Not covered, because no result reads differently for them: prose and comments, upstream facts (commits, follow-ups,
what a fork carries: fork.yaml, history.yaml), the measurements a report lists and the regression bound (the report
applies today's to the recorded numbers), and resources (`kv_cache_gib`: how much memory, not what is computed; a
row's `engine_size`: what its engine is sized for).

A row's meaning is computed from its rows.json document, so a result folder's own rows.json is compared field by
field with today's plan, and a testcase records the digest (`stackgate.meaning`) where no rows.json travels with it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

# rows.json fields that are not what the row runs: derived (gpus = tp x dp; engine_size, what its engine is sized for
# from the plan's rows of its configuration: a resource, its own workload unchanged), bookkeeping of one run, or the
# names of the suites' code its test calls (probe, engine_options: code, as the test itself is, not a parameter)
_ROW_NOT = frozenset(
    {"gpus", "engine_size", "content", "meaning", "model_info", "acceptance", "probe", "engine_options"}
)
_MODEL_NOT = frozenset({"kv_cache_gib"})  # a resource: the memory given, not what is computed
_ASSERTED = ("tolerance", "graph_replay")  # the acceptance numbers the suites assert in the container
_TARGET_NOT = frozenset({"devices"})  # where the GPUs are found on a host, not what runs on them


def of_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """The meaning of one row document (rows.json's, or `rows_json.row_document`'s): a field absent is null, so a
    document written before a field existed reads the same where the field holds its default."""
    model = row.get("model_info") or {}
    acceptance = row.get("acceptance") or {}
    return plain(
        {
            "row": {k: v for k, v in row.items() if k not in _ROW_NOT},
            "model": {k: v for k, v in model.items() if k not in _MODEL_NOT and v not in (None, {}, [])},
            "asserts": {k: acceptance.get(k) for k in _ASSERTED},
        }
    )


def of_target(target: Mapping[str, Any]) -> dict[str, Any]:
    return plain({k: v for k, v in target.items() if k not in _TARGET_NOT})


def digest(meaning: Mapping[str, Any]) -> str:
    body = json.dumps(meaning, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(body.encode()).hexdigest()


def row_digest(row: Mapping[str, Any], target: Mapping[str, Any]) -> str:
    """What a testcase records: the row's meaning with its target's."""
    return digest({"row": of_row(row), "target": of_target(target)})


def differences(was: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """Where two meanings differ, as dotted field names with both values: 'model.env.VLLM_USE_DEEP_GEMM: – → "1"'."""
    out: list[str] = []
    _diff(was, now, "", out)
    return out


def _diff(a: Any, b: Any, at: str, out: list[str]) -> None:
    if isinstance(a, dict) or isinstance(b, dict):
        a, b = (a if isinstance(a, dict) else {}), (b if isinstance(b, dict) else {})
        for k in sorted(set(a) | set(b)):
            _diff(a.get(k), b.get(k), f"{at}.{k}" if at else k, out)
    elif a != b:
        out.append(f"{at}: {_said(a)} → {_said(b)}")


def _said(v: Any) -> str:
    return "–" if v is None else json.dumps(v, sort_keys=True)[:60]


def plain(value: Any) -> Any:
    """JSON's own types (a tuple is a list), so a document read back compares equal to one made here."""
    return json.loads(json.dumps(value))
