"""One decision per question, on a fork made from scratch (fork_world): a one-file port is "partially ported", naming
the files that carry the change's edit and those that do not; a fork holding #48407 without its follow-up #52512 is
flagged, with what the follow-up fixes, in `ci fork`, `ci upstream` and their JSON; `ci pipeline --without X` refuses
what `ci fork bundle --without X` refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.fork_world import STATES, World, make

from ci.cli import main


@pytest.fixture
def world(tmp_path: Path, stack_copy: Path) -> World:
    return make(tmp_path, stack_copy)


def _ci(w: World, *args: str) -> int:
    return main(["--stack", str(w.stack), *args])


def test_a_one_file_port_is_partially_ported_naming_the_files(world, capsys) -> None:
    assert _ci(world, "fork", "--fork", str(world.path), "--ref", "fork", "--format", "json") == 0
    doc = {c["change"]: c for c in json.loads(capsys.readouterr().out)["changes"]}
    assert {c: doc[c]["state"] for c in STATES} == STATES
    part = doc["46514"]
    assert part["commits"] == [world.ids["part"]]
    assert part["detail"] == (
        f"{world.ids['part'][:12]} carries upstream's merge commit {world.ids['46514'][:12]}'s edit of "
        "vllm/mla/flashmla_sparse.py alone; not the edit of tests/test_sparse_mla.py, vllm/mla/flashmla.py"
    )
    assert doc["46849"]["state"] == "absent"  # none of its files carries its edit


def test_a_fork_without_a_follow_up_is_flagged_with_what_it_fixes(world, capsys) -> None:
    fix = "GLM-5.2 repeated tokens read from an all -1 top-k buffer"
    flag = (
        f"follow-up vllm-project/vllm#52512 (merged 2023-11-14) missing: the fork carries this change without the "
        f"fix of {fix} (port it: git cherry-pick -x {world.ids['52512'][:12]})"
    )
    assert _ci(world, "fork", "--fork", str(world.path), "--ref", "fork") == 0
    assert f"#48407: {flag}" in capsys.readouterr().out
    assert _ci(world, "upstream", "--fork", str(world.path), "--ref", "fork", "--format", "json") == 0
    c = next(c for c in json.loads(capsys.readouterr().out)["changes"] if c["change"] == "48407")
    assert flag in c["flags"] and c["follow_ups_missing"] == ["vllm-project/vllm#52512"]

    world.repo.git("merge", "-q", "--no-ff", "-m", "Merge upstream up to #52512", world.ids["52512"])
    assert _ci(world, "upstream", "--fork", str(world.path), "--ref", "fork", "--format", "json") == 0
    c = next(c for c in json.loads(capsys.readouterr().out)["changes"] if c["change"] == "48407")
    assert c["follow_ups_missing"] == [] and not any("follow-up" in f for f in c["flags"])


def test_pipeline_and_bundle_refuse_the_same_without(world, tmp_path, capsys) -> None:
    fork = ["--fork", str(world.path), "--ref", "fork"]
    world.repo.git("checkout", "-q", "-b", "later", "fork")
    world.repo.commit("fork: builds on the dense path", {"vllm/attention.py": "DENSE = 'always'\n"})
    fork = ["--fork", str(world.path), "--ref", "later"]
    said = {}
    for change in ("48407", "46849"):
        for verb in (["fork", "bundle", "--out", str(tmp_path / "b.tar.gz")], ["pipeline", "--one-agent"]):
            assert _ci(world, *verb, *fork, "--without", change) == 2, (verb, change)
            said[(verb[0], change)] = capsys.readouterr().err
        assert said[("fork", change)] == said[("pipeline", change)], change
    assert "cannot drop #48407 alone: reverting" in said[("fork", "48407")]
    assert "#46849 is absent in" in said[("fork", "46849")]
    assert _ci(world, "pipeline", "--one-agent", *fork, "--without", "46514") == 0  # its one fork commit reverts
