"""`ci main --try-port`: a change the fork lacks, ported on a scratch ref and judged by its own rows on the fork's build,
on an upstream and a fork made from scratch by git (tests/try_port_world.py), the rows run on the cpu target with the
builds laid over a base install (--host --base-site), nothing mocked: #61001 ports cleanly after one prerequisite and is
judged; #61002 conflicts and stops the command before anything is built."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from git_repos import ENV, clone
from try_port_world import World, make

from ci.cli import main
from ci.fork import port_trial, source
from ci.report.json_doc import SCHEMA
from ci.stack import loader
from ci.upstream import kept

SHA = re.compile(r"[0-9a-f]{40}")


@pytest.fixture
def world(tmp_path: Path, stack_copy: Path) -> World:
    return make(tmp_path, stack_copy)


def _needs_triton() -> None:
    """The cpu rows load the kernels the host's AOT bake compiled, with triton (`nox -s tests` installs it from
    containers/locks/cpu.in); without it every row skips, and nothing is judged."""
    pytest.importorskip("triton", reason="the cpu rows' AOT bake needs triton (nox -s tests installs it)")


def _state(w: World) -> dict[str, object]:
    """What the user holds: every ref, HEAD, the index and each file of the work tree, byte for byte."""
    git = w.path / ".git"
    refs = subprocess.run(["git", "-C", str(w.path), "for-each-ref", "--format=%(refname) %(objectname)"],
                          capture_output=True, text=True, check=True, env=ENV).stdout  # fmt: skip
    tree = {str(p.relative_to(w.path)): p.read_bytes() for p in sorted(w.path.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(w.path).parts}  # fmt: skip
    return {"refs": refs, "HEAD": (git / "HEAD").read_bytes(), "index": (git / "index").read_bytes(), "tree": tree}


def _try(w: World, out: Path, *more: str) -> list[str]:
    return ["--stack", str(w.stack), "main", "--target", "cpu", "--host", "--fork", str(w.path), "--ref", "fork",
            "--base-site", str(w.base_site), "--out", str(out), *more]  # fmt: skip


def _props(folder: Path) -> list[dict[str, str]]:
    from lxml import etree

    return [{p.get("name"): p.get("value") for p in case.iter("property")}
            for f in sorted(folder.rglob("junit-*.xml")) for case in etree.parse(str(f)).iter("testcase")
            if case.get("name", "").startswith("test_selftest_row")]  # fmt: skip


def test_a_clean_port_is_made_on_a_scratch_ref_built_and_judged_by_its_rows(world, tmp_path, capsys) -> None:
    _needs_triton()
    before = _state(world)
    out = tmp_path / "out"
    assert main(_try(world, out, "--try-port", "61001", "--runs", "4", "--aa")) == 0
    said = capsys.readouterr().out
    # counted before anything runs; both sides built: the fork with the port and the fork as it is
    assert said.index("1 candidate, 1 row on CPU") < said.index("== the port of #61001 (clean, 1 prerequisite)")
    assert (out / "builds" / "port-61001" / "site").is_dir() and (out / "builds" / "fork" / "site").is_dir()
    # the rows ran on the port build there, and on the fork as it is here, which lacks the change
    port, fork = _props(out / "arms" / "port"), _props(out / "arms" / "fork")
    assert len(port) == 4 and all(p["stackgate.fork_port"] == "61001" for p in port)
    assert all(p["stackgate.change_present"] == "true" for p in port)
    assert len(fork) == 4 and all(p["stackgate.change_present"] == "false" and "stackgate.fork_port" not in p
                                  for p in fork)  # fmt: skip
    assert {p["stackgate.fork_source"] for p in port} == {p["stackgate.fork_source"] for p in fork}  # one fork
    doc = json.loads((out / "report" / "report.json").read_text())
    import jsonschema

    jsonschema.validate(doc, json.loads(SCHEMA.read_text()))
    (change,) = doc["changes"]
    assert change["ready"] and {c["id"]: c["status"] for c in change["criteria"]} == {
        "tied": "pass", "cold_warm": "pass", "no_jit": "pass", "matrix": "pass", "tolerance": "pass",
        "graph_replay": "pass", "effect": "pass", "allowed_regression": "pass"}  # fmt: skip
    tried = change["tried"]
    ids = world.ids
    assert tried["onto"] == ids["head"] and tried["upstream_commits"] == [ids["61000"], ids["61001"]]
    assert tried["prerequisites"] == [{"commit": ids["61000"], "pr": 61000}]
    assert len(tried["commits"]) == 2 and all(SHA.fullmatch(c) for c in tried["commits"])
    assert tried["tip"] == tried["commits"][-1] and not set(tried["commits"]) & set(ids.values())
    assert tried["ref"].startswith("refs/stackgate/try-port/61001-") and tried["kept"] is False
    command = f"python -m ci fork port 61001 --with-prerequisites --fork {world.path} --ref fork"
    assert tried["lead"] == "#61001: not in the fork; tried as a port (clean, 1 prerequisite): ready on CPU"
    assert tried["ready"] and tried["next"] == {"command": command, "note": tried["next"]["note"]}
    (built,) = tried["builds"]
    assert built["port_side"] == "port" and built["fork_side"] == "fork" and built["aa_side"] == "aa"
    assert built["isolated"] and built["port_build"] != built["fork_build"]
    md = (out / "report" / "report.md").read_text()
    assert f"**#61001: not in the fork; tried as a port (clean, 1 prerequisite): ready on CPU.** Next: `{command}`" in md
    assert "| #61001 | not in the fork; tried as a port (clean, 1 prerequisite) | ✔ ready |" in md
    html = (out / "report" / "report.html").read_text()
    assert "tried as a port (clean, 1 prerequisite): ready on CPU" in html
    # the user's branches, index and work tree as they were; no scratch ref left
    assert _state(world) == before and "refs/stackgate/" not in str(before["refs"])


def test_the_ports_rows_failing_say_which_criterion_failed_on_the_port(tmp_path, stack_copy, capsys) -> None:
    _needs_triton()
    w = make(tmp_path, stack_copy, tolerance=0.0)  # no float32 workload meets a bound of 0
    out = tmp_path / "out"
    assert main(_try(w, out, "--try-port", "61001", "--runs", "1", "--no-warm-up")) == 1
    doc = json.loads((out / "report" / "report.json").read_text())
    (change,) = doc["changes"]
    tried = change["tried"]
    assert not change["ready"] and not tried["ready"]
    assert {c["id"]: c["status"] for c in change["criteria"]}["tolerance"] == "fail"
    lead = tried["lead"]
    assert lead.startswith("#61001: not in the fork; tried as a port (clean, 1 prerequisite): not ready: CPU fails:")
    assert "tolerance: max_abs_err" in lead and "wants <= 0" in lead
    assert tried["next"]["command"].startswith("python -m ci repro 61001.cpu.") and "fork port" not in str(tried["next"])
    (target,) = [t for t in change["targets"] if t["target"] == "cpu"]
    assert target["state"] == "fails" and "tolerance" in target["text"]
    md = (out / "report" / "report.md").read_text()
    assert "tried as a port (clean, 1 prerequisite): not ready: CPU fails:" in md


def test_a_conflicting_port_stops_before_anything_is_built_with_its_readiness_and_fix(world, tmp_path, capsys) -> None:
    before = _state(world)
    for wanted in ("61002", "61001,61002"):  # with a clean one beside it: nothing of either is made
        out = tmp_path / f"out-{wanted}"
        assert main(_try(world, out, "--try-port", wanted)) == 2
        said = capsys.readouterr()
        assert "#61002 is not tried as a port: conflicts: own.py (1 hunk)" in said.out
        assert f"the fork edited them in {world.ids['own'][:12]} 'fork: our block size'" in said.out
        assert "error: --try-port: #61002 does not port cleanly onto vllm-fork fork" in said.err
        assert "nothing was made or built" in said.err
        assert f"python -m ci fork port 61002 --fork {world.path} --ref fork" in said.err  # the fix
        assert not out.exists()  # no build, no bundle, no run
        assert "== the port of" not in said.out
        assert _state(world) == before


def test_a_tried_port_is_pinned_and_kept_as_a_branch_only_when_asked(world, tmp_path, capsys) -> None:
    """The same fork commit and upstream commits make the same port commits in any clone (a pipeline carries the
    port by its tip); --keep-port-branch keeps it as a new branch, the scratch ref going all the same."""
    st = loader.load(world.stack)
    tips = []
    copy = clone(world.repo, tmp_path / "clone", "--no-checkout").path  # upstream's main there: origin/main
    for path, upstream in ((world.path, "upstream/main"), (copy, "origin/main")):
        fork = source.open_fork(st, path, ref=world.ids["head"], upstream_ref=upstream)
        r = port_trial.readiness(kept.answer(st, fork.scope), "61001")
        t = port_trial.make(fork, r)
        tips.append(t.tip)
        kept_as = port_trial.finish(fork, t, "tried/61001" if path == world.path else None)
        assert not fork.checkout.commit(t.ref)
    assert tips[0] == tips[1]
    assert kept_as.kept is False and kept_as.ref.startswith("refs/stackgate/try-port/")
    assert world.repo.git("rev-parse", "refs/heads/tried/61001") == tips[0]
    # a branch that exists already is never moved: refused before anything is made; without --try-port, nothing to keep
    before = _state(world)
    argv = _try(world, tmp_path / "o", "--try-port", "61001", "--keep-port-branch", "tried/61001")
    assert main(argv) == 2 and "branch tried/61001 already exists" in capsys.readouterr().err
    assert main(_try(world, tmp_path / "o", "--keep-port-branch", "x")) == 2
    assert "--keep-port-branch keeps the port --try-port makes" in capsys.readouterr().err
    assert _state(world) == before and not (tmp_path / "o").exists()
