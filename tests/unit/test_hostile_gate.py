"""The gate judges with the stack it is given: which changes gate is never taken from report.json."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from support.report_helpers import rows, write_rows

from ci import cli
from ci.common.errors import GATE_CLOSED


def _failing_report(tmp_path: Path, stack: Path, capsys) -> Path:
    """selftest's rows failing, reported with `stack`: change selftest is not ready."""
    [junit] = write_rows(tmp_path / "j", rows("selftest"), lambda r, c: replace(c, status="failure", message="no"))
    out = tmp_path / "r"
    assert cli.main(["--stack", str(stack), "report", str(junit), "--out", str(out)]) == 1
    capsys.readouterr()
    doc = json.loads((out / "report.json").read_text())
    assert next(c for c in doc["changes"] if c["id"] == "selftest")["ready"] is False
    return out / "report.json"


def _gating(stack: Path, edit) -> Path:
    edit(stack / "changes" / "selftest.yaml", "track: harness-selftest\n", "track: harness-selftest\ngating: true\n")
    return stack


def test_a_report_edited_to_say_not_gating_still_closes_the_gate(tmp_path: Path, stack_copy: Path, edit, capsys):
    report = _failing_report(tmp_path, _gating(stack_copy, edit), capsys)
    doc = json.loads(report.read_text())
    for c in doc["changes"]:
        c["gating"] = False  # what the report says of gating is not the gate's to believe
    report.write_text(json.dumps(doc))
    assert cli.main(["--stack", str(stack_copy), "gate", str(report)]) == GATE_CLOSED
    out = capsys.readouterr().out
    assert "NOT READY: change selftest (gating)" in out and "gate closed" in out
    assert cli.main(["--stack", str(stack_copy), "gate", str(report), "--style"]) == 0
    assert capsys.readouterr().out.strip() == "error"


def test_a_report_of_an_older_stack_is_refused_naming_both_digests(tmp_path: Path, stack_copy: Path, edit, capsys):
    """The case seen: reported with a stack where selftest did not gate, gated with one where it does: exit 0."""
    report = _failing_report(tmp_path, stack_copy, capsys)
    old = json.loads(report.read_text())["stack"]["digest"]
    _gating(stack_copy, edit)
    assert cli.main(["--stack", str(stack_copy), "gate", str(report)]) == 2
    err = capsys.readouterr().err
    from ci.stack import loader

    new = loader.load(stack_copy).digest
    assert old in err and new in err and old != new
    # told to, it judges the old report's verdicts with this stack's gating changes
    assert cli.main(["--stack", str(stack_copy), "gate", str(report), "--other-stack"]) == GATE_CLOSED
    assert "NOT READY: change selftest (gating)" in capsys.readouterr().out


@pytest.mark.parametrize("where", ["missing", "tampered"])
def test_a_report_without_the_stacks_digest_is_refused(tmp_path: Path, stack_copy: Path, capsys, where: str):
    report = _failing_report(tmp_path, stack_copy, capsys)
    doc = json.loads(report.read_text())
    if where == "missing":
        del doc["stack"]
    else:
        doc["stack"]["digest"] = "sha256:" + "0" * 64
    report.write_text(json.dumps(doc))
    assert cli.main(["--stack", str(stack_copy), "gate", str(report)]) == 2
    assert "was made with another stack" in capsys.readouterr().err
