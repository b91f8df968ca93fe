"""rows.json, as the container reads it (schema in docs/boundary.md). Pure Python: no pytest here."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import boundary

ENV_ROWS = boundary.ENV_ROWS
SCHEMA = 1


class RowsFileError(Exception):
    """rows.json is missing or not what the host writes; the message says which and what to do."""


@dataclass(frozen=True, kw_only=True)
class Row:
    """One planned row. The fields a harness needs by name; everything else is in `data`."""

    id: str
    change: str
    track: str
    suite: str
    target: str
    gpus: int
    data: Mapping[str, Any] = field(repr=False)

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    @property
    def acceptance(self) -> Mapping[str, Any]:
        return self.data.get("acceptance") or {}

    @property
    def model_info(self) -> Mapping[str, Any]:
        return self.data.get("model_info") or {}

    @property
    def engine(self) -> str:
        """What the row's engine is built from: every field but its workload. Rows equal here run against one engine
        in a shared process (built for the largest context and batch among them: engine.config.engine_size)."""
        built_from = {k: v for k, v in self.data.items() if k not in boundary.OWN}
        return json.dumps(built_from, sort_keys=True, default=str)


@dataclass(frozen=True, kw_only=True)
class RowsDoc:
    path: Path
    target: Mapping[str, Any]
    suite: str
    image_ref: str | None
    image_digest: str | None
    git_revision: str
    timeout_s: float
    rows: tuple[Row, ...]
    stack_digest: str = ""

    @property
    def target_id(self) -> str:
        return str(self.target.get("id", "unknown"))


def _row(d: Mapping[str, Any], where: str) -> Row:
    try:
        return Row(
            id=str(d["id"]),
            change=str(d["change"]),
            track=str(d["track"]),
            suite=str(d["suite"]),
            target=str(d["target"]),
            gpus=int(d.get("tp", 1)) * int(d.get("dp", 1)),
            data=d,
        )
    except KeyError as exc:
        raise RowsFileError(
            f"{where}: row without {exc.args[0]!r}; rows.json is written by `python -m ci run`"
        ) from None


def load(path: str | os.PathLike[str]) -> RowsDoc:
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise RowsFileError(
            f"{path}: rows file not found; write it with `python -m ci run` or set ${ENV_ROWS}"
        ) from None
    except json.JSONDecodeError as exc:
        raise RowsFileError(f"{path}: not JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise RowsFileError(
            f"{path}: expected schema {SCHEMA}, got {doc.get('schema') if isinstance(doc, dict) else doc!r}"
        )
    image = doc.get("image") or {}
    if not isinstance(doc.get("timeout_s"), (int, float)):
        raise RowsFileError(f"{path}: timeout_s (seconds per item) is missing or not a number")
    return RowsDoc(
        path=path,
        target=doc.get("target") or {},
        suite=str(doc.get("suite", "")),
        image_ref=image.get("ref"),
        image_digest=image.get("digest"),
        git_revision=str(doc.get("git_revision", "")),
        timeout_s=float(doc["timeout_s"]),
        stack_digest=str(doc.get("stack_digest", "")),
        rows=tuple(_row(r, f"{path}: rows[{i}]") for i, r in enumerate(doc.get("rows", []))),
    )
