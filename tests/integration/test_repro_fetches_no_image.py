"""`ci repro --report` on a report.json from elsewhere fetches no image the report names: one the docker engine does
not hold is refused unless asked for."""

from __future__ import annotations

import json
from pathlib import Path

from ci import cli
from ci.stack import loader, plan

IMAGE = "sha256:" + "f" * 64  # by content, and held by no engine


def _cpu_row() -> plan.Row:
    return next(r for r in plan.build(loader.load()).rows if r.target == "cpu")


def test_an_image_the_engine_does_not_hold_is_not_fetched_unless_asked(tmp_path: Path, capsys, docker_client) -> None:
    row = _cpu_row()
    entry = {"id": row.id, "status": "failure", "rows_json": {"image": {"id": IMAGE}}, "runs": []}
    (tmp_path / "report.json").write_text(json.dumps({"rows": [entry]}))
    argv = ["repro", row.id, "--report", str(tmp_path / "report.json"), "--out", str(tmp_path / "o")]
    assert cli.main(argv) == 4
    assert f"image {IMAGE} is not held by this docker engine" in capsys.readouterr().err
