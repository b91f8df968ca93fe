"""A re-run block printed from a report or a rows.json from elsewhere runs its own command and nothing else when
pasted into a shell, and drives no terminal: every value it quotes from them is escaped, every argument quoted on
one line. A test of a suite the run took from a tree of its own is refused without --suites-dir, naming both."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from ci import cli
from ci.stack import loader, plan, rows_json

BASH = shutil.which("bash") or "/bin/bash"
HOSTILE = "0.9.1\n>pwned\x1b]0;owned\x07\u2028>pwned2\x85>pwned3"


def pasted(block: str, where: Path) -> list[str]:
    """What pasting `block` into bash in `where` leaves there (no command on PATH: only the shell's own redirections
    could write anything)."""
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run([BASH], input=block, cwd=where, text=True, capture_output=True, env={"PATH": "/nonexistent"})
    return sorted(p.name for p in where.iterdir())


def _host_report(tmp_path: Path) -> tuple[str, Path]:
    """A report.json of one failing row that ran on a host's Python, its runs naming a hostile vLLM version."""
    st = loader.load()
    row = next(r for r in plan.build(st).rows if r.target == "cpu")
    doc = rows_json.document(st, st.targets["cpu"], row.suite, [row], image={"ref": "host", "digest": None,
                             "id": None}, git_revision="x", timeout_s=900)  # fmt: skip
    run = {"test": f"{row.suite}.test_x::test_y[{row.id}]", "status": "failure", "vllm_version": HOSTILE}
    entry = {"id": row.id, "status": "failure", "rows_json": doc, "runs": [run]}
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"rows": [entry]}))
    return row.id, report


def test_the_host_row_block_pasted_into_bash_runs_nothing_a_report_chose(tmp_path: Path, capsys) -> None:
    row, report = _host_report(tmp_path)
    assert cli.main(["repro", row, "--report", str(report), "--print"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u2028" not in out and "\x85" not in out
    assert len(out.strip("\n").split("\n")) == 3  # the comment, the line to paste, what it runs there
    assert "0.9.1\\n>pwned\\x1b]0;owned\\x07\\u2028>pwned2\\x85>pwned3" in out  # said, escaped, on its line
    assert pasted(out, tmp_path / "paste") == []


def test_the_rows_json_block_quotes_a_hostile_path_on_one_line(tmp_path: Path, capsys) -> None:
    """A results folder whose name holds a newline and ESC: every line of the block stays one line, and bash reads
    the path back as it is."""
    st = loader.load()
    row = next(r for r in plan.build(st).rows if r.target == "cpu")
    folder = tmp_path / "r\n>pwned\x1b[2J"
    doc = rows_json.document(st, st.targets["cpu"], row.suite, [row], image={"ref": "host", "digest": None,
                             "id": None}, git_revision="x", timeout_s=900)  # fmt: skip
    rows_json.write(folder / "rows.json", doc)
    assert cli.main(["repro", row.id, "--rows-json", str(folder / "rows.json"), "--out", str(folder / "o")]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and len(out.strip("\n").split("\n")) == 4
    assert "$'" in out  # bash's quoting for the path's escapes
    assert pasted("\n".join(line for line in out.split("\n") if line.startswith("#")), tmp_path / "paste") == []


def test_a_test_of_a_suite_of_the_runs_own_is_refused_without_suites_dir(tmp_path: Path, capsys) -> None:
    test = "mine/test_x.py::test_y"
    entry = {"test": test, "status": "failure", "target": "cpu", "suite": "mine", "image": "sha256:" + "e" * 64}
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"rows": [], "unkeyed": [entry]}))
    assert cli.main(["repro", test, "--report", str(report), "--print"]) == 2
    err = capsys.readouterr().err
    assert "suite mine" in err and "--suites-dir" in err
    (tmp_path / "suites" / "mine").mkdir(parents=True)
    argv = ["repro", test, "--report", str(report), "--print", "--suites-dir", str(tmp_path / "suites")]
    assert cli.main([*argv, "--out", str(tmp_path / "o")]) == 0
    assert f"source={tmp_path / 'suites'},target=/opt/stackgate/user-suites" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("runs", [{"test": 5}], "rows[0].runs[0].test"),
        ("rows_json", {"timeout_s": "900"}, "rows[0].rows_json.timeout_s"),
        ("runs", [{"vllm_version": ["0.9"]}], "rows[0].runs[0].vllm_version"),
    ],
)
def test_a_report_field_of_another_type_is_refused_naming_it(tmp_path: Path, field: str, value, said: str, capsys):
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"rows": [{"id": "a.b.c.d", "status": "failure", field: value}]}))
    assert cli.main(["repro", "a.b.c.d", "--report", str(report), "--print"]) == 2
    err = capsys.readouterr().err
    assert said in err and str(report) in err and "fix: point --report at the report.json" in err
