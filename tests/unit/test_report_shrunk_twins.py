"""The report's named models: each real model's rows beside its shrunk twin's, one line per model and change,
with the twin's outcomes counted and its first failure named (a failed test by its message, a crash by the cause
line the harness found in its log)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from support.report_helpers import STACK, rows, write_rows

from ci import cli


def _section(out: Path) -> dict[tuple[str, str], str]:
    md = (out / "report.md").read_text().replace("\\_", "_")
    section = md.split("## Named models", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| Model")]
    return {(cells[0], cells[1]): line for line in lines if (cells := [c.strip() for c in line.strip("|").split("|")])}


def test_each_named_model_lists_its_rows_beside_its_shrunk_twins(tmp_path: Path) -> None:
    glm = [r for r in rows("48407", "cuda-sm90") if r.model == "glm-5.2-shrunk"]
    crashed, failed, passed = glm[0], glm[1], glm[2]

    def edit(r, c):
        if r.id == crashed.id:
            return replace(c, status="error", message="signal 11 (SIGSEGV)", metrics=())
        if r.id == failed.id:
            return replace(c, status="failure", message="#52512: sparse attention read all -1 top-k rows")
        return c

    write_rows(tmp_path / "j", [crashed, failed, passed], edit)
    junit = next((tmp_path / "j").iterdir())
    out = tmp_path / "report"
    assert cli.main(["report", str(junit), "--out", str(out)]) in (0, 1)
    lines = _section(out)
    name = STACK.models["glm-5.2"].name
    line = lines[(name, "#48407 (indexer-skip)")]
    planned = [r for r in rows("48407") if r.model == "glm-5.2-shrunk"]
    assert f"| {len(planned)} | 1 ✔ pass, 1 ✘ failure, 1 ✘ error, {len(planned) - 3} not run |" in line
    assert f"{crashed.id}: signal 11 (SIGSEGV)" in line  # the first failed of the twin's rows, in plan order
    real = [r for r in rows("48407") if r.model == "glm-5.2"]
    assert f"| {len(real)} not run |" in line  # no host has the real weights: planned, not run
    mistral = STACK.models["mistral-small-4"].name
    assert "no row planned" in lines[(mistral, "-")]  # named, though no track takes it yet
    assert {n for n, _ in lines} == {STACK.models[m.shrunk_of].name for m in STACK.models.values() if m.shrunk_of}
    assert "Named models, each beside its shrunk twin" in (out / "report.html").read_text()
