"""rows.json: the one document the container receives, written here and nowhere else.

Each row is self-contained (the model's details and the change's acceptance numbers travel with it), so
the container never reads stack/. docs/boundary.md is its contract; `suites/harness/rows.py` reads it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ci.common import contract
from ci.stack import meaning, plan
from ci.stack.model import Model, Stack, Target
from ci.stack.plan import Row

SCHEMA = 1
# a row's field: the context and batch its engine is built for, the largest among the plan's rows of its engine
# configuration (engine_sizes; harness engine.config.engine_size)
ENGINE_SIZE = "engine_size"
# a row's fields: the names its change file gives its presence probe and its engine options (suites/engine/tracked.py)
PROBE = "probe"
ENGINE_OPTIONS = "engine_options"


def row_document(st: Stack, row: Row) -> dict[str, Any]:
    return row_documents(st, [row])[0]


def engine_sizes(rows: Sequence[Row]) -> dict[tuple[object, ...], tuple[int, int]]:
    """Per engine configuration, the largest context and batch among its rows: what its engine is built for, in the
    bake and in every run, shared or alone, whichever of its rows a run holds (vLLM's compile cache keys the engine's
    size, so an engine sized for a run's subset of rows misses what the bake compiled)."""
    sizes: dict[tuple[object, ...], tuple[int, int]] = {}
    for r in rows:
        context, batch = sizes.get(engine(r), (0, 0))
        sizes[engine(r)] = (max(context, r.context), max(batch, r.batch))
    return sizes


def engine(row: Row) -> tuple[object, ...]:
    """What a row's engine is built from: every axis but its workload (the host side of harness Row.engine)."""
    return tuple(v for k, v in row.__dict__.items() if k not in contract.WORKLOAD)


def row_documents(st: Stack, rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Each row's document; a model's details and a change's acceptance made once for all its rows (shared: a
    reader never edits them)."""
    infos: dict[str, dict[str, Any]] = {}
    accepts: dict[str, dict[str, Any]] = {}
    tracked: dict[str, dict[str, str]] = {}
    sizes = engine_sizes([*plan.build(st).rows, *rows])  # the plan's, whichever rows this document holds
    out = []
    for row in rows:
        if row.model not in infos:
            infos[row.model] = _model_info(st.models[row.model])
        if row.change not in accepts:
            change = st.changes[row.change]
            accepts[row.change] = asdict(change.acceptance)
            tracked[row.change] = {PROBE: change.probe, ENGINE_OPTIONS: change.engine_options}
        context, batch = sizes[engine(row)]
        out.append(
            {
                **row.to_json(),
                "model_info": infos[row.model],
                "acceptance": accepts[row.change],
                **tracked[row.change],
                ENGINE_SIZE: {"context": context, "batch": batch},
            }
        )
    return out


def _model_info(model: Model) -> dict[str, Any]:
    return {
        "id": model.id,
        "weights": model.weights,
        "hf": model.hf,
        "config": model.config,
        "quantization": model.quantization,
        "attention": model.attention.layout,
        "drafter": asdict(model.drafter) if model.drafter else None,
        "shrunk_of": model.shrunk_of,
        "kv_cache_dtypes": list(model.kv_cache_dtypes) if model.kv_cache_dtypes else None,
        "env": dict(model.env),
        "kv_cache_gib": model.kv_cache_gib,
    }


def target_document(t: Target) -> dict[str, Any]:
    return {
        "id": t.id,
        "family": t.family,
        "platform": t.platform,
        "arch_list": list(t.arch_list),
        "gpus": t.gpus,
        "triton_targets": list(t.triton_targets),
        "nvidia_compute_capability": t.detect.nvidia_compute_capability,
        "amdgpu_gfx": t.detect.amdgpu_gfx,
        "devices": asdict(t.devices),
        "env": dict(t.env),
    }


def document(
    st: Stack,
    target: Target,
    suite: str,
    rows: Sequence[Row],
    *,
    image: dict[str, str | None],
    git_revision: str,
    timeout_s: float,
    suites_dir: str | None = None,
    target_env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """`suite` is "*" for a document spanning every suite (the bake's warm-up). `suites_dir`: the host folder
    `ci run --suites-dir` mounted as the suites tree (None: the image's own), for `ci repro` to mount again. Each row
    carries its content digest (`contract.ROW_CONTENT`, `content`); `target_env`: the env the rows get, where it is
    not the target's own."""
    made = target_document(target)
    if target_env is not None:
        made["env"] = dict(target_env)
    return {
        "schema": SCHEMA,
        "stack_digest": st.digest,
        "target": made,
        "suite": suite,
        "image": image,
        "git_revision": git_revision,
        "timeout_s": timeout_s,
        "suites_dir": suites_dir,
        "rows": [with_content(with_meaning(d, target), made, image) for d in row_documents(st, rows)],
    }


def with_meaning(row: dict[str, Any], target: Target) -> dict[str, Any]:
    """`row` with the digest of what it means as the stack defines it (`ci.stack.meaning`): the harness records it on
    the row's testcases, and a report over them tells a result of today's row from one of a row defined otherwise."""
    return {**row, contract.ROW_MEANING: meaning.row_digest(row, target_document(target))}


def with_content(row: dict[str, Any], target: dict[str, Any], image: Mapping[str, str | None]) -> dict[str, Any]:
    """`row` with the digest of what its result depends on: its own fields (parameters, model, acceptance numbers),
    its target's, and the image it runs in by id ("host": this host's Python, whose vLLM the row records itself).
    A result recorded under another digest is not this row's result (`ci run --resume` runs it again)."""
    ran_in = image.get("id") or image.get("digest") or image.get("ref")
    body = json.dumps({"row": row, "target": target, "image": ran_in}, sort_keys=True, separators=(",", ":"))
    return {**row, contract.ROW_CONTENT: "sha256:" + hashlib.sha256(body.encode()).hexdigest()}


def write(path: Path, doc: dict[str, Any]) -> Path:
    """Write atomically: a reader never sees half a rows.json."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".rows.", suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump(doc, fh, indent=2)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return path
