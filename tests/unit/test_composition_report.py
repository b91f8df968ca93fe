"""The composition rows reported in the seed table's shape, from JUnit as the harness writes it: a row runs,
crashes (with the assertion or illegal memory access from its log), hangs (its timeout), or was not run."""

from __future__ import annotations

from pathlib import Path
from xml.sax.saxutils import quoteattr

from ci import cli
from ci.stack import loader as stack
from ci.stack import plan

ROWS = {r.model + "/" + r.backend + f"/tp{r.tp}/dp{r.dp}/dcp{r.dcp}/{r.cudagraph_mode}": r
        for r in plan.build(stack.load()).select(changes=["composition"]).rows}  # fmt: skip


def _case(row: plan.Row, result: str = "", cause: str = "") -> str:
    props = {"stackgate.row": row.id, "stackgate.change": row.change, "stackgate.track": row.track,
             "stackgate.target": row.target, "stackgate.suite": row.suite}  # fmt: skip
    if cause:
        props["stackgate.cause"] = cause
    body = "".join(f"<property name={quoteattr(k)} value={quoteattr(v)}/>" for k, v in props.items())
    return (f'<testcase classname="composition.test_composition" name="test_composition[{row.id}]" time="1.0">'
            f"<properties>{body}</properties>{result}</testcase>")  # fmt: skip


def _junit(path: Path, cases: list[str]) -> Path:
    path.write_text('<?xml version="1.0" encoding="utf-8"?><testsuites>'
                    f'<testsuite name="stackgate.cuda-sm90.composition.0" tests="{len(cases)}">'
                    + "".join(cases) + "</testsuite></testsuites>")  # fmt: skip
    return path


def test_runs_crashes_hangs_and_rows_needing_more_gpus(tmp_path: Path):
    ok = ROWS["tiny-llama-eagle/FLASH_ATTN/tp2/dp1/dcp1/FULL_AND_PIECEWISE"]
    ima = ROWS["tiny-llama-eagle/TRITON_ATTN/tp2/dp1/dcp1/FULL_AND_PIECEWISE"]
    assertion = ROWS["tiny-llama-eagle/FLASH_ATTN/tp1/dp2/dcp1/PIECEWISE"]
    hang = ROWS["tiny-llama-eagle/FLASH_ATTN/tp1/dp2/dcp1/NONE"]
    wrong = ROWS["tiny-deepseek-v32-mtp/FLASHMLA_SPARSE/tp2/dp1/dcp1/FULL_AND_PIECEWISE"]
    skipped = ROWS["tiny-deepseek-v32-mtp/FLASHMLA_SPARSE/tp2/dp1/dcp2/FULL_AND_PIECEWISE"]
    junit = _junit(tmp_path / "junit-cuda-sm90-composition-0.xml", [
        _case(ok),
        _case(ima, '<failure message="RuntimeError: Worker failed with error \'EngineCore died\'">tb</failure>',
              "illegal memory access: CUDA error: an illegal memory access was encountered"),
        _case(assertion, '<failure message="engine.dp.RankFailed: DP rank process 1 exited 1">tb</failure>',
              "assertion: AssertionError: should_attempt_dp_padding == should_dp_pad"),
        _case(hang, '<error message="timeout after 240 s">tail</error>'),
        _case(wrong, '<failure message="greedy_token_mismatches 3 tokens &gt; 0 vs row">x</failure>'),
        _case(skipped, '<skipped message="hardware absent: row needs 2 GPUs (NVIDIA GPU with compute capability'
                       ' 9.0); 1 present"/>'),
    ])  # fmt: skip
    out = tmp_path / "report"
    assert cli.main(["report", str(junit), "--out", str(out)]) == 1  # crashes and hangs: in the report, and exit 1
    md = (out / "report.md").read_text().replace("\\_", "_")  # markdown escapes underscores
    section = md.split("## Composition: ", 1)[1].split("\n## ", 1)[0]
    lines = {line.split(" | ")[0].lstrip("| "): line for line in section.splitlines() if line.startswith("| ")}
    assert "✔ runs" in lines[ok.id]
    assert "✘ crash" in lines[ima.id] and "illegal memory access was encountered" in lines[ima.id]
    assert lines[ima.id].endswith("| ✘ IMA (L3-8B) |")  # the seed table's finding for the model it stands in for
    assert "✘ crash" in lines[assertion.id] and "should_attempt_dp_padding == should_dp_pad" in lines[assertion.id]
    assert "◷ hang" in lines[hang.id] and "timeout after 240 s" in lines[hang.id]
    assert "⚠ runs, wrong" in lines[wrong.id] and "greedy_token_mismatches" in lines[wrong.id]
    assert "not run" in lines[skipped.id] and "needs 2 GPUs" in lines[skipped.id]
    eight = next(r for r in ROWS.values() if r.gpus == 8)
    assert "not run" in lines[eight.id] and "needs 8 GPUs" in lines[eight.id]  # planned, never run
    assert "| 2 | EAGLE |" in lines[ok.id]  # the GPU count beside the seed table's columns
    assert "1 ✔ runs, 2 ✘ crash, 1 ◷ hang, 1 ⚠ runs, wrong" in section
    assert "Composition: " in (out / "report.html").read_text()
