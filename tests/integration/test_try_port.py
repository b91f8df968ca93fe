"""`ci main --try-port` and `ci pipeline --try-ports`: a change the fork lacks, ported on a scratch ref and judged by
its own rows on the fork's build, on an upstream and a fork made from scratch by git
(tests/support/try_port_world.py), the rows run on the cpu target with the builds laid over a base install (--host
--base-site), nothing mocked: #61001 ports cleanly after one prerequisite and is judged; #61002 conflicts and stops the
command before anything is built. The demo fork's pipeline (evidence/try-port) is read as committed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support.buildkite import check_schema
from support.git_repos import ENV, clone
from support.paths import REPO
from support.try_port_world import World, make
from test_fork_subject import _session_call

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
    assert change["ready"], [(c["id"], c["status"], c["evidence"]) for c in change["criteria"] if c["status"] != "pass"]
    assert {c["id"]: c["status"] for c in change["criteria"]} == {
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
    lead = "#61001: not in the fork; tried as a port (clean, 1 prerequisite): ready on CPU"
    assert f"**{lead}.** Next: `{command}`" in md
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
    assert tried["next"]["command"].startswith("python -m ci repro 61001.cpu.")  # what failed, not the port
    (target,) = [t for t in change["targets"] if t["target"] == "cpu"]
    assert target["state"] == "fails" and "tolerance" in target["text"]
    md = (out / "report" / "report.md").read_text()
    assert "tried as a port (clean, 1 prerequisite): not ready: CPU fails:" in md


def test_a_list_of_ports_each_runs_its_rows_on_its_own_build_and_leads_the_report(tmp_path, stack_copy, capsys):
    """`--try-port 61001,61003`: counted together; each port on a scratch ref and a build of its own, each change's
    rows on its build only (side `port` holds both), the same rows on the fork; the report leads with both."""
    _needs_triton()
    w = make(tmp_path, stack_copy, extra=True)
    before = _state(w)
    out = tmp_path / "out"
    assert main(_try(w, out, "--try-port", "61001,61003", "--runs", "1", "--no-warm-up")) == 0
    said = capsys.readouterr().out
    assert "2 candidates, 2 rows on CPU" in said
    for change in ("61001", "61003"):
        ran = _props(out / "arms" / "port" / "run-1" / change)
        assert len(ran) == 1 and ran[0]["stackgate.fork_port"] == change and ran[0]["stackgate.change"] == change
        assert (out / "builds" / f"port-{change}" / "site").is_dir()
    assert sorted(p["stackgate.change"] for p in _props(out / "arms" / "fork")) == ["61001", "61003"]
    doc = json.loads((out / "report" / "report.json").read_text())
    tried = {c["id"]: c["tried"] for c in doc["changes"]}
    assert tried["61003"]["said"] == "clean" and tried["61003"]["prerequisites"] == []
    assert tried["61001"]["said"] == "clean, 1 prerequisite"
    assert tried["61003"]["upstream_commits"] == [w.ids["61003"]] and tried["61003"]["onto"] == w.ids["head"]
    md = (out / "report" / "report.md").read_text()
    assert "**#61001: not in the fork; tried as a port (clean, 1 prerequisite)" in md
    assert "**#61003: not in the fork; tried as a port (clean)" in md
    assert _state(w) == before


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


def test_a_generated_nox_session_passes_try_port_to_ci_main(world, tmp_path, capsys) -> None:
    """`nox -s cpu_selftest -- --try-port X ...` is `ci main --target cpu --suite selftest ... --try-port X`."""
    argv = _session_call("cpu", "selftest", ["--stack", str(world.stack), "--fork", str(world.path), "--ref", "fork",
                                             "--try-port", "61002", "--out", str(tmp_path / "o")])  # fmt: skip
    assert argv[:5] == ["main", "--target", "cpu", "--suite", "selftest"] and "--try-port" in argv
    assert main(argv) == 2 and "#61002 is not tried as a port: conflicts" in capsys.readouterr().out


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


def _pipeline(w: World, *more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ci", "--stack", str(w.stack), "pipeline", "--one-agent", *more],
                          cwd=REPO, capture_output=True, text=True, env=ENV, timeout=300)  # fmt: skip


def test_the_pipeline_tries_each_clean_port_in_a_group_and_says_why_not_of_the_others(world, tmp_path) -> None:
    """`ci pipeline --fork --try-ports`: the clean candidate's group runs `ci main --try-port` carrying the fork and the
    port by commit id (the port's pinned tip, found at upload); the conflicting one's step says why and soft-fails on
    exit 2; counted at upload; Buildkite's schema; nothing made in the checkout."""
    before = _state(world)
    done = _pipeline(world, "--fork", str(world.path), "--ref", "fork", "--try-ports")
    assert done.returncode == 0, done.stderr
    assert "ports tried: 2 candidates, 1 row on CPU; 1 does not port cleanly: #61002" in done.stderr
    path = tmp_path / "pipeline.yml"
    path.write_text(done.stdout)
    check_schema(path)
    assert done.stdout.splitlines()[2].startswith("# Ports tried (ci main --try-port, each on its target's queue): 2 ")
    items = yaml.safe_load(done.stdout)["steps"]
    (group,) = [s for s in items if "group" in s]
    assert group["key"] == "try-port-61001"
    st = loader.load(world.stack)
    fork = source.open_fork(st, world.path, ref="fork")
    tip = port_trial.make(fork, port_trial.readiness(kept.answer(st, fork.scope), "61001"), keep=False).tip
    (step,) = group["steps"]
    run = next(c for c in step["commands"] if " -m ci main " in c)
    assert step["agents"]["queue"] == "cpu" and f"--ref {world.ids['head']} " in run
    assert f"--try-port 61001 --port-tip {tip} --runs 5 --aa --rows 61001.cpu." in run
    (refused,) = [s for s in items if s.get("key") == "try-port-61002"]
    assert refused["soft_fail"] == [{"exit_status": 2}] and refused["agents"]["queue"] == "cpu"
    assert any("--try-port 61002 > try-port-61002.txt" in c for c in refused["commands"])
    assert _state(world) == before
    no_fork = _pipeline(world, "--try-ports")
    assert no_fork.returncode == 2 and "--try-ports tries the ports of the changes a fork lacks" in no_fork.stderr


DEMO = REPO / "evidence" / "try-port" / "pipeline.yml"


def test_the_demo_forks_pipeline_tries_46514_and_says_why_not_of_46849_and_49903() -> None:
    """evidence/try-port: the demo fork at a400177 (after #48407's port, before #46514's): #46514 ports cleanly and
    is tried on GB10 and H200, each step pinned to one fork commit and one port tip; #46849 and #49903 conflict."""
    check_schema(DEMO)
    text = DEMO.read_text()
    counted = re.search(r"^# Ports tried .*?: (\d+) candidates, (\d+) rows on GB10, (\d+) on H200;", text, re.M)
    assert counted is not None and counted.group(1) == "3"
    items = yaml.safe_load(text)["steps"]
    (group,) = [s for s in items if "group" in s]
    assert group["key"] == "try-port-46514"
    queues = {}
    tips = set()
    for step in group["steps"]:
        words = next(c for c in step["commands"] if " -m ci main " in c).split()
        target = words[words.index("--target") + 1]
        rows = words[words.index("--rows") + 1].split(",")
        assert words[words.index("--ref") + 1] == "a400177597d082812eeee85175020e0a0edecfde"
        assert words[words.index("--try-port") + 1] == "46514" and "--aa" in words
        tips.add(words[words.index("--port-tip") + 1])
        assert all(r.startswith(f"46514.{target}.") for r in rows)
        queues[step["agents"]["queue"]] = len(rows)
    assert len(tips) == 1 and SHA.fullmatch(tips.pop())
    assert queues == {"gpu-gb10": int(counted.group(2)), "gpu-h200": int(counted.group(3))}
    for change in ("46849", "49903"):
        (step,) = [s for s in items if s.get("key") == f"try-port-{change}"]
        assert step["soft_fail"] == [{"exit_status": 2}] and not any("--port-tip" in c for c in step["commands"])
