"""Port readiness and `ci fork port`, on an upstream and a fork made from scratch by git, nothing mocked.

Upstream (main, after the release v0.26.0): a prerequisite #47000 (a line of pre.py), #48407, #46514 (clean.py),
#46849 (three.py, line 13), #49903 (the line #47000 changed), #50001 (a new file; stacked on #49903), #52512 (a
follow-up of #48407); #48804 never merged, its two commits on a PR ref (a new module, then line 3 of own.py).
The fork (branch `fork`, off v0.26.0, checked out): its own edit of three.py's line 10 (in #46849's context, not its
lines), its own edit of own.py's line 3 (the line #48804 changes), and #48407 cherry-picked.

So: #46514 ports cleanly; #46849 only by a three-way merge; #49903 conflicts because the fork lacks #47000 (named as
the possible prerequisite; with it first it is clean); #48804 conflicts with the fork's own edit (named); #50001 is
stacked on the absent #49903; #48407 is carried without its follow-up #52512, which ports cleanly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.git_repos import ENV, Repo, copy_change, set_change
from support.paths import REPO

from ci.upstream.checkout import Checkout

BASE = {
    "vllm/__init__.py": "__version__ = '0.26.0'\n",
    "vllm/clean.py": "A = 1\n",
    "vllm/three.py": "".join(f"L{i} = {i}\n" for i in range(1, 21)),
    "vllm/pre.py": "".join(f"P{i} = {i}\n" for i in range(1, 11)),
    "vllm/own.py": "".join(f"O{i} = {i}\n" for i in range(1, 11)),
    "vllm/dense.py": "DENSE = False\nTOPK = 1\n",
}
FORK = ("--fork", "", "--ref", "fork")


def _edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1
    return text.replace(old, new)


@pytest.fixture
def world(tmp_path: Path, stack_copy: Path) -> tuple[Repo, dict[str, str], Path]:
    return make_world(tmp_path / "vllm", stack_copy)


def make_world(path: Path, stack_copy: Path) -> tuple[Repo, dict[str, str], Path]:
    """The upstream and the fork above, in one repository at `path`; the stack's change files name its commits."""
    r = Repo(path)
    ids = {"base": r.commit("vLLM 0.26.0", BASE)}
    r.git("tag", "v0.26.0")
    pre = _edit(BASE["vllm/pre.py"], "P5 = 5\n", "P5 = 50\n")
    ids["prereq"] = r.commit("[Core] Raise the fifth knob (#47000)", {"vllm/pre.py": pre})
    dense = {"vllm/dense.py": "DENSE = True\nTOPK = 1\n", "tests/test_dense.py": "def test(): pass\n"}
    ids["48407"] = r.commit("[Attention] Skip sparse indexer scoring for dense short prefills (#48407)", dense)
    ids["46514"] = r.commit("[Attention][MLA] FlashMLA sparse DCP (#46514)", {"vllm/clean.py": "A = 2\n"})
    three = _edit(BASE["vllm/three.py"], "L13 = 13\n", "L13 = 130\n")
    ids["46849"] = r.commit("[MRV2][Spec] Fuse AR speculator decodes (#46849)", {"vllm/three.py": three})
    ids["49903"] = r.commit(
        "[Core] Warm up runner-owned kernels (#49903)", {"vllm/pre.py": _edit(pre, "P5 = 50\n", "P5 = 500\n")}
    )
    ids["50001"] = r.commit("[Spec] Build on the warm-up (#50001)", {"vllm/stacked.py": "S = 1\n"})
    ids["52512"] = r.commit("[Bugfix][MLA] Do not use Dense MHA for GLM-5.2 (#52512)",
                            {"vllm/dense.py": "DENSE = True\nTOPK = 2\n"})  # fmt: skip
    r.upstream()
    r.git("checkout", "-q", "-b", "pr-48804", "v0.26.0")
    ids["pr1"] = r.commit("[Spec Decode] Add the warm-up module", {"vllm/warm.py": "def warm(): ...\n"})
    ids["pr2"] = r.commit(
        "[Spec Decode] Warm with the block size", {"vllm/own.py": _edit(BASE["vllm/own.py"], "O3 = 3\n", "O3 = 30\n")}
    )
    r.git("update-ref", "refs/pull/48804/head", "HEAD")
    r.git("checkout", "-q", "-b", "fork", "v0.26.0")
    r.git("branch", "-D", "pr-48804")
    ids["ten"] = r.commit(
        "fork: renumber L10", {"vllm/three.py": _edit(BASE["vllm/three.py"], "L10 = 10\n", "L10 = 100\n")}
    )
    ids["tune"] = r.commit(
        "fork: tune the block size", {"vllm/own.py": _edit(BASE["vllm/own.py"], "O3 = 3\n", "O3 = 4096\n")}
    )
    r.git("cherry-pick", "-x", ids["48407"])
    co = Checkout.open(r.path)
    copy_change(stack_copy, "46514", "50001", "Build on the warm-up")
    for change in ("48407", "46514", "46849", "49903", "50001"):
        merge = ids[change]
        set_change(stack_copy, change, upstream={
            "merge_commit": merge[:12], "commits": None, "merged_on": "2023-11-15", "first_release": None,
            "patch_id": co.patch_ids(merge, walk=False)[merge], "file_ids": co.file_ids([merge])[merge],
            "stacked_on": [49903] if change == "50001" else [], "follow_ups": []})  # fmt: skip
    set_change(stack_copy, "48407", upstream={"follow_ups": [
        {"ref": "vllm-project/vllm#52512", "what": "GLM-5.2 degenerated into repeated tokens",
         "merge_commit": ids["52512"][:12], "merged_on": "2023-11-16"}]})  # fmt: skip
    set_change(stack_copy, "48804", upstream={"commits": [ids["pr1"][:12], ids["pr2"][:12]], "adds": None})
    return r, ids, stack_copy


def _ci(stack: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ci", "--stack", str(stack), *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env=ENV)  # fmt: skip


def _fork(repo: Repo) -> tuple[str, ...]:
    return ("--fork", str(repo.path), "--ref", "fork")


def _held(stack: Path, repo: Repo, ref: str = "fork") -> dict[str, dict]:
    done = _ci(stack, "fork", "--fork", str(repo.path), "--ref", ref, "--format", "json")
    assert done.returncode == 0, done.stderr
    return {c["change"]: c for c in json.loads(done.stdout)["changes"]}


def _bytes(root: Path) -> dict[str, bytes]:
    """Every file of the checkout, its .git folder included: refs, index, objects, worktrees."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_ci_fork_says_how_each_lacking_change_would_port(world) -> None:
    repo, ids, stack = world
    held = _held(stack, repo)
    assert {c: h["state"] for c, h in held.items()} == {
        "48407": "ported", "46514": "absent", "46849": "absent", "49903": "absent", "50001": "absent",
        "48804": "absent"}  # fmt: skip
    port = {c: h["port"] for c, h in held.items()}
    assert port["48407"] is None
    assert port["46514"]["verdict"] == "clean" and port["46514"]["files"] == ["vllm/clean.py"]
    assert port["46849"]["verdict"] == "clean by three-way merge" and port["46849"]["three_way"] == ["vllm/three.py"]

    prereq = port["49903"]
    assert prereq["verdict"] == "conflicts"
    [conflict] = prereq["conflicts"]
    [hunk] = conflict["hunks"]
    assert conflict["file"] == "vllm/pre.py" and hunk["upstream_lines"] == [5, 5] and hunk["fork_lines"] == [5, 5]
    assert [(p["commit"], p["pr"], p["held"]) for p in hunk["prerequisites"]] == [(ids["prereq"], 47000, False)]
    assert hunk["fork_edits"] == []
    assert [p["commit"] for p in prereq["prerequisites"]] == [ids["prereq"]]
    assert prereq["after_prerequisites"] == "clean" and "--with-prerequisites" in prereq["command"]

    own = port["48804"]
    assert own["verdict"] == "conflicts" and own["patch"] == [ids["pr1"], ids["pr2"]]
    [conflict] = own["conflicts"]
    assert conflict["file"] == "vllm/own.py" and conflict["commit"] == ids["pr2"]
    [hunk] = conflict["hunks"]
    assert hunk["prerequisites"] == []
    assert hunk["fork_edits"] == [{"commit": ids["tune"], "subject": "fork: tune the block size", "own": True}]
    assert own["stability"]["upstream"].startswith("closed unmerged")

    stacked = port["50001"]
    assert stacked["verdict"] == "clean"
    assert stacked["stacked_on"] == [{"pr": 49903, "change": "49903", "state": "absent", "commit": ids["49903"]}]
    assert [p["commit"] for p in stacked["prerequisites"]] == [ids["prereq"], ids["49903"]]  # oldest first
    assert stacked["after_prerequisites"] == "clean"

    [follow] = held["48407"]["follow_up_ports"]
    assert (follow["pr"], follow["follow_up"], follow["verdict"]) == (52512, True, "clean")
    assert follow["patch"] == [ids["52512"]] and follow["command"].startswith("python -m ci fork port 52512 ")
    assert port["46514"]["stability"] == {"upstream": f"merged on 2023-11-15 as {ids['46514'][:12]}, on upstream/main",
                                          "follow_ups": [], "reverted": "", "stable": True}  # fmt: skip

    table = _ci(stack, "fork", *_fork(repo))
    assert table.returncode == 0, table.stderr
    assert any(line.startswith("Change") and "Port" in line for line in table.stdout.splitlines())  # a column
    assert "conflicts: pre.py (1 hunk); ports after 2" not in table.stdout  # the prerequisite is #47000 alone
    assert "clean; ports after 2 prerequisites (#47000, #49903): all clean; stacked on #49903 absent" in table.stdout
    assert "conflicts: pre.py (1 hunk); ports after 1 prerequisite (#47000): all clean" in table.stdout
    assert "follow-up #52512: clean" in table.stdout
    assert f"the fork edited them in {ids['tune'][:12]} 'fork: tune the block size'" in table.stdout
    up = _ci(stack, "upstream", *_fork(repo), "--format", "json")
    assert {c["change"]: (c.get("port") or {}).get("verdict") for c in json.loads(up.stdout)["changes"]} == {
        **{c: p and p["verdict"] for c, p in port.items()}, "composition": None, "selftest": None}  # fmt: skip


def test_the_port_is_made_where_it_applies_and_ci_fork_then_reads_it_ported(world) -> None:
    repo, ids, stack = world
    for change, state in (("46514", "ported"), ("46849", "ported"), ("50001", "ported")):
        done = _ci(stack, "fork", "port", change, *_fork(repo))
        assert done.returncode == 0, done.stdout + done.stderr
        branch = f"stackgate/port-{change}"
        tip = repo.git("rev-parse", branch)
        assert repo.git("rev-parse", f"{branch}^") == repo.git("rev-parse", "fork")  # one commit, on the fork's ref
        message = repo.git("log", "-1", "--format=%B", tip)
        assert message.splitlines()[0] == repo.git("log", "-1", "--format=%s", ids[change])
        assert message.endswith(f"(cherry picked from commit {ids[change]})")
        assert repo.git("log", "-1", "--format=%an %aI", tip) == repo.git("log", "-1", "--format=%an %aI", ids[change])
        assert _held(stack, repo, branch)[change]["state"] == state
        assert f"ci fork --ref {branch}: #{change} {state}" in done.stdout
    follow = _ci(stack, "fork", "port", "52512", *_fork(repo))
    assert follow.returncode == 0, follow.stdout + follow.stderr
    [after] = _held(stack, repo, "stackgate/port-52512")["48407"]["follow_up_ports"]
    assert after["verdict"] == "in the fork"
    assert repo.git("rev-parse", "--abbrev-ref", "HEAD") == "fork"  # the user's branch stays checked out
    again = _ci(stack, "fork", "port", "46514", *_fork(repo))
    assert again.returncode == 2 and "already exists" in again.stderr


def test_a_conflicting_port_exits_2_naming_why_and_leaves_the_checkout_as_it_was(world, tmp_path) -> None:
    repo, ids, stack = world
    before = _bytes(repo.path)
    done = _ci(stack, "fork", "port", "49903", *_fork(repo))
    assert done.returncode == 2, done.stdout + done.stderr
    said = done.stdout
    assert "nothing was made (no branch stackgate/port-49903, no worktree)" in said
    assert "vllm/pre.py: upstream lines 5-5, fork lines 5-5" in said
    assert f"{ids['prereq'][:12]} #47000 '[Core] Raise the fifth knob (#47000)' (not in the fork)" in said
    assert "port them first: add --with-prerequisites" in said
    mine = _ci(stack, "fork", "port", "48804", *_fork(repo))
    assert mine.returncode == 2
    assert f"the fork edited them in {ids['tune'][:12]} 'fork: tune the block size'" in mine.stdout
    assert _bytes(repo.path) == before  # no branch, no worktree, no object, the index and work tree untouched
    assert "stackgate/port" not in repo.git("for-each-ref")

    # the printed commands reproduce the conflict in a worktree of the user's own
    lines = said.split("To reproduce it and finish the port by hand (in a worktree of your own):\n", 1)[1]
    steps = []
    for line in lines.splitlines():
        steps.append(line.strip())
        if line.strip().startswith("git status --short"):
            break
    work = tmp_path / "elsewhere" / "deeper"  # a shell anywhere but beside the fork: the worktree's path is absolute
    work.mkdir(parents=True)
    shown = subprocess.run(["bash", "-c", "\n".join(steps)], cwd=work, capture_output=True, text=True, env=ENV)
    assert "UU vllm/pre.py" in shown.stdout, shown.stdout + shown.stderr
    assert (repo.path.parent / f"port-{repo.git('rev-parse', 'fork')[:12]}" / "vllm" / "pre.py").is_file()

    first = _ci(stack, "fork", "port", "49903", "--with-prerequisites", *_fork(repo))
    assert first.returncode == 0, first.stdout + first.stderr
    subjects = repo.git("log", "--format=%s", "fork..stackgate/port-49903").splitlines()
    assert subjects == ["[Core] Warm up runner-owned kernels (#49903)", "[Core] Raise the fifth knob (#47000)"]
    assert _held(stack, repo, "stackgate/port-49903")["49903"]["state"] == "ported"


def test_ci_plan_fork_says_how_many_rows_each_port_would_add(world) -> None:
    repo, _, stack = world
    done = _ci(stack, "plan", *_fork(repo), "--format", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    rows = {}
    for r in doc["absent_in_fork"]:
        rows[r["change"]] = rows.get(r["change"], 0) + 1
    said = {p["change"]: p for p in doc["if_ported"]}
    assert {c: p["rows"] for c, p in said.items()} == rows and set(rows) >= {"46514", "46849", "49903", "48804"}
    assert said["46514"]["port"] == "clean" and said["46514"]["command"].startswith("python -m ci fork port 46514")
    text = _ci(stack, "plan", *_fork(repo))
    assert f"porting it would add these {rows['46849']} rows; its port: clean by three-way merge" in text.stdout


def test_the_reports_first_screen_gives_each_lacking_change_its_port(world, tmp_path) -> None:
    repo, _, stack = world
    up = _ci(stack, "upstream", *_fork(repo), "--format", "json")
    (tmp_path / "upstream.json").write_text(up.stdout)
    assert _ci(stack, "plan", *_fork(repo), "--not-run", str(tmp_path / "results")).returncode == 0
    done = _ci(stack, "report", str(tmp_path / "results"), "--upstream", str(tmp_path / "upstream.json"),
               "--out", str(tmp_path / "report"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    first = (tmp_path / "report" / "report.md").read_text().split("## Verdicts", 1)[0]
    row = {line.split(" | ")[0].lstrip("| "): line for line in first.splitlines() if line.startswith("| #")}
    assert (
        f"`python -m ci fork port 46514 --fork {repo.path} --ref fork` absent in the fork; its port: clean"
        in row["#46514"]
    )
    assert (
        "port 49903 --with-prerequisites" in row["#49903"]
        and "conflicts: pre.py (1 hunk); ports after 1 prerequisite (#47000): all clean" in row["#49903"]
    )
    assert "port 52512" in row["#48407"] and "ported in the fork without its follow-up #52512: clean" in row["#48407"]
    assert "fork port" not in row["#selftest"]


def test_a_change_reverted_upstream_is_said_unsettled(world) -> None:
    repo, ids, stack = world
    repo.git("checkout", "-q", "main")
    repo.git("revert", "--no-edit", ids["46514"])
    revert = repo.git("rev-parse", "HEAD")
    repo.upstream()
    repo.git("checkout", "-q", "fork")
    port = _held(stack, repo)["46514"]["port"]
    assert port["verdict"] == "clean"
    subject = 'Revert "[Attention][MLA] FlashMLA sparse DCP (#46514)"'
    assert port["stability"]["reverted"] == f"reverted upstream by {revert[:12]} {subject!r}"
    assert port["stability"]["stable"] is False
    table = _ci(stack, "fork", *_fork(repo)).stdout
    assert f"clean; reverted upstream by {revert[:12]}" in table


def test_the_follow_ups_offered_for_porting_are_those_listed_missing(world) -> None:
    """One rule says a follow-up is missing, and the port offers exactly those: a cherry-pick of it whose conflict was
    resolved (its subject kept, its patch changed) holds it for both."""
    repo, ids, stack = world

    def agree(ref: str) -> tuple[list[str], list[tuple[int, str]]]:
        c = _held(stack, repo, ref)["48407"]
        offered = [(f["pr"], f["verdict"]) for f in c["follow_up_ports"]]
        missing = [r.rsplit("#", 1)[1] for r in c["follow_ups_missing"]]
        assert sorted(str(pr) for pr, verdict in offered if verdict != "in the fork") == sorted(missing)
        return missing, offered

    assert agree("fork") == (["52512"], [(52512, "clean")])
    repo.git("checkout", "-q", "-b", "edited", "fork")
    repo.commit(repo.git("log", "-1", "--format=%s", ids["52512"]), {"vllm/dense.py": "DENSE = True\nTOPK = 3\n"})
    repo.git("checkout", "-q", "fork")
    assert agree("edited") == ([], [(52512, "in the fork")])
    table = _ci(stack, "fork", "--fork", str(repo.path), "--ref", "edited").stdout
    assert "follow-up #52512" not in table


def test_an_upstream_given_by_the_environment_is_a_flag_in_the_next_step(world) -> None:
    repo, _, stack = world
    repo.git("remote", "rename", "upstream", "vllm")
    repo.git("remote", "set-url", "vllm", "https://example.com/a/mirror.git")  # no URL says it is upstream
    env = {**ENV, "STACKGATE_UPSTREAM_REF": "vllm"}
    done = subprocess.run([sys.executable, "-m", "ci", "--stack", str(stack), "fork", *_fork(repo), "--format", "json"],
                          cwd=REPO, capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    port = {c["change"]: c["port"] for c in json.loads(done.stdout)["changes"]}["46514"]
    assert port["command"] == f"python -m ci fork port 46514 --fork {repo.path} --ref fork --upstream-ref vllm"
