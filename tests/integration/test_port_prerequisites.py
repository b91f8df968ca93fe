"""A fork far from upstream, made from scratch by git: a port's missing files are prerequisites, named in order with the
chain's outcome, never "unknown" with git's words.

Upstream (main, after the release v0.26.0 where the fork left it): #47327 creates vllm/nvidia/attention.py, #46808
edits it; #46750 creates vllm/warm/runner.py and changes line 5 of vllm/ctx.py; then #48407 edits the NVIDIA module
and line 13 of vllm/keep.py, and #49903 edits the warm-up runner and line 3 of vllm/keep.py. The fork (branch
`fork`, off v0.26.0, checked out) moved vllm/keep.py to vllm/kept.py and made line 5 of vllm/ctx.py its own.

So #48407 needs #47327 and #46808 first, which apply cleanly: it ports after them. #49903 needs #46750 first, which
conflicts with the fork's ctx.py: the chain stops there, and nothing is made; past it, #47002 (which #49903 needs
too) needs #47001 (the extras it edits), found all the same so that the port by hand is whole. Both follow keep.py to
kept.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.git_repos import ENV, Repo, set_change
from support.paths import REPO

from ci.upstream.checkout import Checkout

KEEP = "".join(f"K{i} = {i}\n" for i in range(1, 21))
CTX = "".join(f"C{i} = {i}\n" for i in range(1, 11))
NVIDIA = "".join(f"N{i} = {i}\n" for i in range(1, 11))
RUNNER = "def warm():\n    return 1\n"
SUBJECTS = {
    "47327": "[Model] Add the NVIDIA attention module (#47327)",
    "46808": "[Model] Tune the NVIDIA attention module (#46808)",
    "46750": "[Core] Add the warm-up runner (#46750)",
    "47001": "[Core] Add the warm-up extras (#47001)",
    "47002": "[Core] Tune the warm-up (#47002)",
    "48407": "[Attention] Skip sparse indexer scoring for dense short prefills (#48407)",
    "49903": "[Core] Warm up runner-owned Triton kernels (#49903)",
}


def _edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1
    return text.replace(old, new)


@pytest.fixture
def far(tmp_path: Path, stack_copy: Path) -> tuple[Repo, dict[str, str], Path]:
    r = Repo(tmp_path / "vllm")
    ids = {"base": r.commit("vLLM 0.26.0", {"vllm/__init__.py": "__version__ = '0.26.0'\n", "vllm/keep.py": KEEP,
                                            "vllm/ctx.py": CTX})}  # fmt: skip
    r.git("tag", "v0.26.0")
    ids["47327"] = r.commit(SUBJECTS["47327"], {"vllm/nvidia/attention.py": NVIDIA})
    tuned = _edit(NVIDIA, "N3 = 3\n", "N3 = 30\n")
    ids["46808"] = r.commit(SUBJECTS["46808"], {"vllm/nvidia/attention.py": tuned})
    ids["46750"] = r.commit(
        SUBJECTS["46750"], {"vllm/warm/runner.py": RUNNER, "vllm/ctx.py": _edit(CTX, "C5 = 5\n", "C5 = 50\n")}
    )
    ids["47001"] = r.commit(SUBJECTS["47001"], {"vllm/warm/extra.py": "EXTRA = 1\n"})
    faster = _edit(RUNNER, "return 1", "return 10")
    ids["47002"] = r.commit(SUBJECTS["47002"], {"vllm/warm/runner.py": faster, "vllm/warm/extra.py": "EXTRA = 10\n"})
    keep = _edit(KEEP, "K13 = 13\n", "K13 = 130\n")
    ids["48407"] = r.commit(SUBJECTS["48407"], {"vllm/nvidia/attention.py": _edit(tuned, "N3 = 30\n", "N3 = 300\n"),
                                                "vllm/keep.py": keep})  # fmt: skip
    ids["49903"] = r.commit(SUBJECTS["49903"], {"vllm/warm/runner.py": _edit(faster, "return 10", "return 2"),
                                                "vllm/keep.py": _edit(keep, "K3 = 3\n", "K3 = 30\n")})  # fmt: skip
    r.upstream()
    r.git("checkout", "-q", "-b", "fork", "v0.26.0")
    r.git("mv", "vllm/keep.py", "vllm/kept.py")
    r.git("commit", "-q", "-m", "fork: keep.py is kept.py")
    ids["moved"] = r.git("rev-parse", "HEAD")
    ids["ctx"] = r.commit("fork: its own fifth context", {"vllm/ctx.py": _edit(CTX, "C5 = 5\n", "C5 = 5000\n")})
    co = Checkout.open(r.path)
    for change in ("48407", "49903"):
        merge = ids[change]
        set_change(stack_copy, change, upstream={
            "merge_commit": merge[:12], "commits": None, "merged_on": "2023-11-15", "first_release": None,
            "patch_id": co.patch_ids(merge, walk=False)[merge], "file_ids": co.file_ids([merge])[merge],
            "stacked_on": [], "follow_ups": []})  # fmt: skip
    (stack_copy / "fork.yaml").unlink()
    return r, ids, stack_copy


def _ci(stack: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ci", "--stack", str(stack), *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env=ENV)  # fmt: skip


def _fork(repo: Repo) -> tuple[str, ...]:
    return ("--fork", str(repo.path), "--ref", "fork")


def _ports(stack: Path, repo: Repo, ref: str = "fork") -> dict[str, dict]:
    done = _ci(stack, "fork", "--fork", str(repo.path), "--ref", ref, "--format", "json")
    assert done.returncode == 0, done.stderr
    return {c["change"]: c for c in json.loads(done.stdout)["changes"]}


def test_missing_files_are_prerequisites_named_in_order_with_the_chains_outcome(far) -> None:
    repo, ids, stack = far
    held = _ports(stack, repo)
    clean, stops = held["48407"]["port"], held["49903"]["port"]
    assert (held["48407"]["state"], held["49903"]["state"]) == ("absent", "absent")

    assert clean["verdict"] == "needs prerequisites"
    [missing] = clean["missing"]
    assert missing["file"] == "vllm/nvidia/attention.py" and missing["removed_by"] is None
    assert [(p["commit"], p["pr"], p["held"]) for p in missing["commits"]] == [
        (ids["47327"], 47327, False), (ids["46808"], 46808, False)]  # fmt: skip
    assert clean["moved"] == [["vllm/keep.py", "vllm/kept.py"]]  # the file the fork moved is followed, not missing
    assert [p["commit"] for p in clean["prerequisites"]] == [ids["47327"], ids["46808"]]
    assert clean["after_prerequisites"] == "clean"
    assert clean["chain"] == "ports after 2 prerequisites (#47327, #46808): all clean"
    assert "--with-prerequisites" in clean["command"]

    assert stops["verdict"] == "needs prerequisites"
    [runner] = stops["missing"]
    assert runner["file"] == "vllm/warm/runner.py"
    assert [p["commit"] for p in runner["commits"]] == [ids["46750"], ids["47002"]]
    # past the stop, #47002 needs #47001 (a file #49903 does not change): the chain is whole all the same
    assert [p["commit"] for p in stops["prerequisites"]] == [ids["46750"], ids["47001"], ids["47002"]]
    assert stops["after_prerequisites"] == "conflicts" and stops["stopped_at"] == ids["46750"]
    assert (stops["stops"], stops["cut"]) == ([ids["46750"]], False)
    assert stops["chain"] == "the chain stops at #46750: conflicts in vllm/ctx.py"
    assert "--with-prerequisites" not in stops["command"]

    table = _ci(stack, "fork", *_fork(repo))
    assert table.returncode == 0, table.stderr
    said = table.stdout
    assert "  #48407: needs prerequisites: upstream's vllm/ diff of" in said
    assert "  #49903: needs prerequisites: upstream's vllm/ diff of" in said
    assert "does not exist in index" not in said and "git apply --3way of" not in said  # never git's words
    assert "needs prerequisites: attention.py (not in the fork); ports after 2 prerequisites (#47327, #46808)" in said
    assert (
        f"vllm/nvidia/attention.py: not in the fork; upstream created it in {ids['47327'][:12]} #47327 "
        f"'{SUBJECTS['47327']}' (not in the fork) and changed it in {ids['46808'][:12]} #46808" in said
    )
    assert "the chain: the chain stops at #46750: conflicts in vllm/ctx.py" in said


def test_the_port_with_prerequisites_makes_the_chain_and_the_change_or_nothing(far, tmp_path) -> None:
    repo, ids, stack = far
    done = _ci(stack, "fork", "port", "48407", "--with-prerequisites", *_fork(repo))
    assert done.returncode == 0, done.stdout + done.stderr
    picked = repo.git("log", "--reverse", "--format=%s%n%b", "fork..stackgate/port-48407")
    assert [line for line in picked.splitlines() if line.startswith("[")] == [
        SUBJECTS["47327"], SUBJECTS["46808"], SUBJECTS["48407"]]  # fmt: skip
    assert all(f"(cherry picked from commit {ids[c]})" in picked for c in ("47327", "46808", "48407"))
    tip = "stackgate/port-48407"
    assert repo.git("show", f"{tip}:vllm/kept.py").count("K13 = 130") == 1  # followed to the fork's name
    assert "vllm/keep.py" not in repo.git("ls-tree", "-r", "--name-only", tip)
    assert "N3 = 300" in repo.git("show", f"{tip}:vllm/nvidia/attention.py")
    assert _ports(stack, repo, tip)["48407"]["state"] in ("ported", "ported, edited")

    before = repo.git("for-each-ref")
    stopped = _ci(stack, "fork", "port", "49903", "--with-prerequisites", *_fork(repo))
    assert stopped.returncode == 2, stopped.stdout + stopped.stderr
    assert repo.git("for-each-ref") == before  # nothing made: no branch
    said = stopped.stdout
    assert f"upstream's {ids['46750'][:12]} '{SUBJECTS['46750']}' conflicts (a prerequisite)" in said
    assert "the chain stops at #46750: conflicts in vllm/ctx.py" in said

    # the recipe, run verbatim in a shell anywhere, ends with the change committed on the branch
    recipe = said.split("To reproduce it and finish the port by hand (in a worktree of your own):\n", 1)[1]
    work = tmp_path / "elsewhere"
    work.mkdir()
    ran = subprocess.run(["bash", "-c", recipe], cwd=work, capture_output=True, text=True, env=ENV)
    assert "UU vllm/ctx.py" in ran.stdout, ran.stdout + ran.stderr
    made = repo.git("log", "--format=%s", "fork..stackgate/port-49903").splitlines()
    assert made == [SUBJECTS["49903"], SUBJECTS["47002"], SUBJECTS["47001"], SUBJECTS["46750"]]
    assert repo.git("show", "stackgate/port-49903:vllm/warm/extra.py") == "EXTRA = 10"  # every commit took
    assert f"(cherry picked from commit {ids['49903']})" in repo.git("log", "-1", "--format=%b", "stackgate/port-49903")
    kept = repo.git("show", "stackgate/port-49903:vllm/kept.py")
    assert "K3 = 30" in kept  # followed to the fork's name by the recipe too
    assert "return 2" in repo.git("show", "stackgate/port-49903:vllm/warm/runner.py")


def test_a_port_without_its_prerequisites_says_which_files_it_needs(far) -> None:
    repo, _, stack = far
    done = _ci(stack, "fork", "port", "48407", *_fork(repo))
    assert done.returncode == 2, done.stdout + done.stderr
    said = done.stdout
    assert "changes vllm/nvidia/attention.py, which the fork lacks; nothing was made" in said
    assert "port them first: add --with-prerequisites" in said
    assert "does not exist in index" not in said + done.stderr


def test_the_answer_is_kept_per_fork_tip_and_upstream_commit_in_a_folder_the_user_can_delete(far, tmp_path) -> None:
    repo, _, stack = far
    cache = tmp_path / "cache"
    env = {**ENV, "STACKGATE_CACHE": str(cache)}

    def ask() -> dict:
        done = subprocess.run([sys.executable, "-m", "ci", "--stack", str(stack), "fork", *_fork(repo), "--format",
                               "json"], cwd=REPO, capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    first = ask()
    [kept] = list((cache / "fork").glob("*.json"))
    doc = json.loads(kept.read_text())
    for c in doc["answer"]["changes"]:
        if c["change"] == "48407":
            c["port"]["chain"] = "read back from the cache"
    kept.write_text(json.dumps(doc))
    said = {c["change"]: c for c in ask()["changes"]}
    assert said["48407"]["port"]["chain"] == "read back from the cache"  # the same two commits: the kept answer

    kept.write_text("{not json")  # a kept answer that does not read is a miss, never an error
    assert ask() == first
    repo.commit("fork: one more", {"vllm/other.py": "O = 1\n"})  # a new fork tip: another key
    assert {c["change"]: c["port"]["chain"] for c in ask()["changes"] if c["change"] == "48407"} == {
        "48407": "ports after 2 prerequisites (#47327, #46808): all clean"}  # fmt: skip
    assert len(list((cache / "fork").glob("*.json"))) == 2
    for path in (cache / "fork").glob("*.json"):
        path.unlink()
    ask()  # deleted: made again
    assert len(list((cache / "fork").glob("*.json"))) == 1


def test_upstreams_renames_deletions_and_kinds_are_read_as_git_reads_them(tmp_path, stack_copy) -> None:
    """A change that moves a file the fork changed (merged three ways at its new name, as git cherry-pick does), deletes
    a file the fork changed, and edits a file the fork holds as a symlink: the last two conflict, each named, never
    'unknown' nor the files that merge cleanly."""
    r = Repo(tmp_path / "vllm")
    lines = "".join(f"M{i} = {i}\n" for i in range(1, 21))
    r.commit("vLLM 0.26.0", {"vllm/__init__.py": "V = 1\n", "vllm/old_name.py": lines, "vllm/dropped.py": "D = 1\n",
                             "vllm/link.py": "L = 1\n", "vllm/target.py": "T = 1\n"})  # fmt: skip
    r.git("tag", "v0.26.0")
    r.git("mv", "vllm/old_name.py", "vllm/new_name.py")
    (r.path / "vllm/new_name.py").write_text(_edit(lines, "M2 = 2\n", "M2 = 20\n"))
    r.git("rm", "-q", "vllm/dropped.py")
    (r.path / "vllm/link.py").write_text("L = 2\n")
    r.git("add", "-A")
    r.git("commit", "-q", "-m", SUBJECTS["48407"])
    merge = r.git("rev-parse", "HEAD")
    r.upstream()
    r.git("checkout", "-q", "-b", "fork", "v0.26.0")
    r.commit("fork: its own lines", {"vllm/old_name.py": _edit(lines, "M19 = 19\n", "M19 = 190\n"),
                                     "vllm/dropped.py": "D = 2\n"})  # fmt: skip
    (r.path / "vllm/link.py").unlink()
    (r.path / "vllm/link.py").symlink_to("target.py")
    r.git("add", "-A")
    r.git("commit", "-q", "-m", "fork: link.py is target.py")
    co = Checkout.open(r.path)
    set_change(stack_copy, "48407", upstream={
        "merge_commit": merge[:12], "commits": None, "merged_on": "2023-11-15", "first_release": None,
        "patch_id": co.patch_ids(merge, walk=False)[merge], "file_ids": co.file_ids([merge])[merge],
        "stacked_on": [], "follow_ups": []})  # fmt: skip
    (stack_copy / "fork.yaml").unlink()
    port = _ports(stack_copy, r)["48407"]["port"]
    assert port["verdict"] == "conflicts", port["detail"]
    assert sorted(c["file"] for c in port["conflicts"]) == ["vllm/dropped.py", "vllm/link.py"]
    assert "vllm/new_name.py" in port["files"]  # moved and merged, the fork's line 19 with upstream's line 2
