"""Hostile stack data: every attack ends as exit 2 naming the file and line, quickly, never a traceback."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ci.cli import main

C = "changes/48407.yaml"
T = "targets.yaml"
# (name, file, old text, new text, what the error must say, the line it must name: that many lines after the old
# text's first line, counted in the file as it is; None: no line)
EDITS = [
    ("custom tag", C, "  state: merged\n", "  state: !foo merged\n", "tag '!foo'", 0),
    ("python tag", C, "  state: merged\n", "  state: !!python/name:os.system\n", "python/name:os.system", 0),
    ("tag on a key", C, "  state: merged\n", "  !foo state: merged\n", "tag '!foo'", 0),
    ("merge key", C, "  state: merged\n", "  state: merged\n  <<: {pr: 1}\n", "merge keys (<<)", 1),
    ("impossible date", C, "  as_of: 2026-11-29\n", "  as_of: 2024-13-45\n", "'2024-13-45' is not a valid", 0),
    ("int tag on text", C, "  pr: 48407\n", "  pr: !!int abc\n", "'abc' is not a valid int", 0),
    ("duplicate matrix value", C, "  context: [512, 2048, 8192]\n", "  context: [512, 2048, 512]\n",
     "context value 512 listed twice", 0),
    ("empty axis", C, "  context: [512, 2048, 8192]\n", "  context: []\n", "at least 1 item", 0),
    ("negative tolerance", C, "    max: 0.02\n", "    max: -1\n", "greater than or equal to 0", 0),
    ("NaN tolerance", C, "    max: 0.02\n", "    max: .nan\n", "finite number", 0),
    ("infinite tolerance", C, "    max: 0.02\n", "    max: .inf\n", "finite number", 0),
    ("NaN regression bound", C, "    max_pct: 10\n", "    max_pct: .nan\n", "finite number", 0),
    ("zero effect bound", C, "      min_gain_pct: 10\n", "      min_gain_pct: 0\n", "greater than 0", 0),
    ("NaN effect bound", C, "      min_gain_pct: 10\n", "      min_gain_pct: .nan\n", "finite number", 0),
    ("zero context", C, "  context: [512, 2048, 8192]\n", "  context: [0, 2048]\n", "greater than 0", 0),
    ("gating not a boolean", C, "  speculative: [false]\n", "  speculative: [false]\ngating: \"yes\"\n",
     "valid boolean", 1),
    ("gating as a number", C, "  speculative: [false]\n", "  speculative: [false]\ngating: 1\n", "valid boolean", 1),
    ("shell in an env key", T, "      PYTORCH_ROCM_ARCH: gfx1151\n",
     "      PYTORCH_ROCM_ARCH: gfx1151\n      \"-Ssh -c 'touch /tmp/pwned' #\": x\n", "not an environment variable",
     None),
]  # fmt: skip


@pytest.mark.parametrize(("name", "file", "old", "new", "says", "line"), EDITS, ids=[e[0] for e in EDITS])
def test_bad_stack_data_exits_2_with_file_and_line(stack_copy, edit, capsys, name, file, old, new, says, line) -> None:
    at = (stack_copy / file).read_text().split(old, 1)[0].count("\n") + 1 + (line or 0)
    edit(stack_copy / file, old, new)
    assert main(["--stack", str(stack_copy), "plan"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and says in err and "Traceback" not in err
    where = f"{stack_copy / file}:{at}:" if line is not None else f"{stack_copy / file}:"
    assert err.startswith(f"error: {where}"), err


def _write(stack: Path, name: str, data: bytes) -> Path:
    path = stack / "changes" / name
    path.write_bytes(data)
    return path


def test_an_alias_bomb_stops_at_the_budget_quickly(stack_copy, capsys) -> None:
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    path = _write(stack_copy, "bomb.yaml", ("\n".join(levels) + "\n").encode())
    start = time.monotonic()
    assert main(["--stack", str(stack_copy), "plan"]) == 2
    assert time.monotonic() - start < 10
    assert f"error: {path}:" in capsys.readouterr().err


@pytest.mark.parametrize(("data", "says", "line"), [
    (b"id: x\ntitle: \xff\n", "byte 0xff is not UTF-8", 2),
    (b"id: x\n\ntitle: a\x00b\n", "a NUL character", 3),
])  # fmt: skip
def test_bytes_that_are_not_text_name_their_line(stack_copy, capsys, data: bytes, says: str, line: int) -> None:
    path = _write(stack_copy, "broken.yaml", data)
    assert main(["--stack", str(stack_copy), "plan"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}:{line}:") and says in err


def test_a_change_file_with_another_extension_is_not_ignored(stack_copy, capsys) -> None:
    (stack_copy / "changes" / "48407.yaml").rename(stack_copy / "changes" / "48407.yml")
    assert main(["--stack", str(stack_copy), "plan"]) == 2
    err = capsys.readouterr().err
    assert "48407.yml" in err and "rename it to 48407.yaml" in err
