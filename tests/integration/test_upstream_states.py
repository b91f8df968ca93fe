"""`ci upstream` on real git repositories, one history per case: converged, ported (cherry-picked and rebased),
partially ported, diverged, a stacked change whose base is missing, port commits a rebase took away; and bad input."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.git_repos import Repo, clone, copy_change, record_fork, set_change
from support.paths import REPO

from ci.cli import main
from ci.common.errors import UsageError
from ci.stack import loader
from ci.upstream import carries_write, scope
from ci.upstream.checkout import Checkout
from ci.upstream.holds import classify
from ci.upstream.state import ChangeState, Snapshot


def survey(stack: Path, fork: Path, ref: str | None = None) -> Snapshot:
    st = loader.load(stack)
    return classify.survey(st, scope.open_scope(st, fork=fork, upstream_ref=ref))


def state(snap: Snapshot, change: str) -> ChangeState:
    return next(c for c in snap.changes if c.change == change)


@pytest.fixture
def stack_copy(stack_copy: Path) -> Path:
    """The stack without the real upstream commit facts of the three merged changes: each test's history makes its
    own (stack/fork.yaml names the demo fork's checkout, so its records apply to none of these repositories)."""
    for change in ("48407", "46514", "46849"):
        set_change(stack_copy, change, upstream={"merge_commit": None, "commits": None, "patch_id": None,
                                                 "file_ids": None})  # fmt: skip
    return stack_copy


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    """upstream main at `base` (tagged), the fork's branch checked out at it."""
    r = Repo(tmp_path / "vllm")
    r.commit("base", {"vllm/attention.py": "attention\n", "vllm/runner.py": "runner\n", "README": "vllm\n"})
    r.git("tag", "base")
    r.upstream()
    r.git("checkout", "-q", "-b", "fork")
    return r


def pr_branch(r: Repo, name: str, commits: dict[str, dict[str, str]]) -> list[str]:
    """An upstream PR's branch off `base`, its commits in order; the fork's branch is checked out again after."""
    r.git("checkout", "-q", "-b", name, "base")
    made = [r.commit(msg, files) for msg, files in commits.items()]
    r.git("checkout", "-q", "fork")
    return made


WARMUP = {
    "Warm spec-decode kernels at startup": {"vllm/warmup.py": "def warm():\n    pass\n"},
    "Call the warm-up from the runner": {"vllm/runner.py": "runner\nwarm()\n"},
}


def test_a_change_merged_upstream_and_reached_by_the_forks_head_is_converged(repo, stack_copy):
    (skip,) = pr_branch(repo, "pr-48407", {"Skip indexer scoring for short prefills": {"vllm/sparse.py": "dense\n"}})
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--no-ff", "-m", "Merge pull request #48407", "pr-48407")
    merge = repo.git("rev-parse", "HEAD")
    repo.upstream()
    repo.git("checkout", "-q", "fork")
    repo.commit("the fork's own fix", {"fork.txt": "ours\n"})
    set_change(stack_copy, "48407", upstream={"merge_commit": merge[:10], "commits": [skip[:9]]})
    before = state(survey(stack_copy, repo.path), "48407")
    assert before.state == "absent" and "it is on upstream/main: the next rebase brings it" in before.detail
    repo.git("merge", "-q", "-m", "Merge upstream/main", "upstream/main")
    after = state(survey(stack_copy, repo.path), "48407")
    assert after.state == "converged" and after.detail == f"merge commit {merge[:10]} is an ancestor of HEAD"
    assert after.flags == ()


def test_a_port_cherry_picked_then_rebased_is_still_ported(repo, stack_copy):
    p1, p2 = pr_branch(repo, "pr-48804", WARMUP)
    repo.git("cherry-pick", p1, p2)
    f1, f2 = repo.git("rev-parse", "HEAD~1"), repo.git("rev-parse", "HEAD")
    repo.git("checkout", "-q", "main")
    repo.commit("unrelated upstream work", {"vllm/other.py": "other\n"})
    repo.upstream()
    repo.git("checkout", "-q", "fork")
    repo.git("rebase", "-q", "upstream/main")
    g1, g2 = repo.git("rev-parse", "HEAD~1"), repo.git("rev-parse", "HEAD")
    assert {g1, g2}.isdisjoint({f1, f2})  # new commits; the old ones live on in the reflog
    record_fork(stack_copy, repo.path, {"48804": [f1[:9], f2[:9]]})
    s = state(survey(stack_copy, repo.path), "48804")
    assert s.state == "ported" and s.present == ((f1[:9], g1), (f2[:9], g2))
    assert s.recorded == "closed unmerged (as of 2026-11-29)" and s.flags == ()


def test_a_port_with_one_of_its_two_commits_dropped_is_partially_ported(repo, stack_copy):
    p1, p2 = pr_branch(repo, "pr-48804", WARMUP)
    repo.git("cherry-pick", p1, p2)
    f1, f2 = repo.git("rev-parse", "HEAD~1"), repo.git("rev-parse", "HEAD")
    repo.git("reset", "-q", "--hard", "HEAD~1")  # a rebase that dropped the conflict repair
    record_fork(stack_copy, repo.path, {"48804": [f1[:9], f2[:9]]})
    s = state(survey(stack_copy, repo.path), "48804")
    assert s.state == "partially ported" and s.missing == (f2[:9],) and s.present == ((f1[:9], f1),)
    assert s.detail == f"present: {f1[:9]} as {f1[:12]}; missing: {f2[:9]}"


def test_a_port_whose_files_upstream_changed_afterwards_is_diverged(repo, stack_copy):
    p1, p2 = pr_branch(repo, "pr-48804", WARMUP)
    repo.git("cherry-pick", p1, p2)
    f1, f2 = repo.git("rev-parse", "HEAD~1"), repo.git("rev-parse", "HEAD")
    repo.git("checkout", "-q", "main")
    repo.commit("unrelated upstream work", {"vllm/other.py": "other\n"})
    runner = repo.commit("Rework the model runner", {"vllm/runner.py": "runner v2\n", "vllm/attention.py": "v2\n"})
    repo.upstream()
    repo.git("checkout", "-q", "fork")
    record_fork(stack_copy, repo.path, {"48804": [f1[:9], f2[:9]]})
    s = state(survey(stack_copy, repo.path), "48804")
    assert s.state == "diverged" and s.diverged_files == ("vllm/runner.py",)
    assert [(u.commit, u.subject) for u in s.diverged] == [(runner, "Rework the model runner")]
    assert any(f.startswith("upstream changed vllm/runner.py since the port's base: ") for f in s.flags)
    # rebased onto that work through a conflict: the repaired commit's patch changed, so it no longer matches
    repo.git("rebase", "-q", "upstream/main", "-X", "theirs")
    again = state(survey(stack_copy, repo.path), "48804")
    assert again.state == "partially ported" and again.missing == (f2[:9],) and again.diverged == ()
    assert again.flags[0].startswith(f"{f2[:9]} is missing, but {repo.git('rev-parse', 'HEAD')[:12]} has its subject")


def test_a_stacked_change_whose_base_is_missing_is_flagged(repo, stack_copy):
    (base_port,) = pr_branch(repo, "pr-46076", {"DCP on the mixed batch": {"vllm/dcp.py": "dcp\n"}})
    (port,) = pr_branch(repo, "pr-46514", {"fp8_ds_mla with MTP": {"vllm/fp8.py": "fp8\n"}})
    repo.git("cherry-pick", port)
    copy_change(stack_copy, "46514", "46076", "FlashMLA sparse: DCP (the base #46514 is stacked on)")
    unmerged = {"state": "open", "merged_on": None, "first_release": None}
    set_change(stack_copy, "46076", upstream=unmerged)
    set_change(stack_copy, "46514", upstream=unmerged)
    record_fork(stack_copy, repo.path, {"46076": [base_port[:9]], "46514": [port[:9]]})
    snap = survey(stack_copy, repo.path)
    assert state(snap, "46076").state == "absent"
    s = state(snap, "46514")
    assert s.state == "ported" and s.flags == ("stacked on #46076, which is absent here",)


def test_a_port_merged_upstream_but_only_carried_as_a_port_is_flagged_for_convergence(repo, stack_copy):
    p1, p2 = pr_branch(repo, "pr-46849", WARMUP)
    repo.git("cherry-pick", p1, p2)
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--no-ff", "-m", "Merge pull request #46849", "pr-46849")
    merge = repo.git("rev-parse", "HEAD")
    repo.upstream()
    repo.git("checkout", "-q", "fork")
    set_change(stack_copy, "46849", upstream={"merge_commit": merge[:12], "commits": [p1[:9], p2[:9]]})
    s = state(survey(stack_copy, repo.path), "46849")
    assert s.state == "ported" and s.detail.startswith("the PR's commits present: ")
    assert s.flags == ("merged upstream: converge, dropping the port at the next rebase onto upstream/main",)


def test_port_commits_a_rebase_took_away_are_unknown_until_their_patch_ids_are_recorded(repo, stack_copy, tmp_path):
    p1, p2 = pr_branch(repo, "pr-48804", WARMUP)
    repo.git("cherry-pick", p1, p2)
    f1, f2 = repo.git("rev-parse", "HEAD~1"), repo.git("rev-parse", "HEAD")
    repo.git("checkout", "-q", "main")
    repo.commit("unrelated upstream work", {"vllm/other.py": "other\n"})
    repo.git("checkout", "-q", "fork")
    repo.git("rebase", "-q", "main")
    rebased = clone(repo, tmp_path / "rebased")  # its own clone: f1 and f2 never travelled
    rebased.git("checkout", "-q", "fork")
    record_fork(stack_copy, repo.path, {"48804": [f1[:9], f2[:9]]})
    s = state(survey(stack_copy, rebased.path, "origin/main"), "48804")  # the clone's origin is upstream here
    assert s.state == "unknown" and s.detail == f"port commits not in this checkout: {f1[:9]}, {f2[:9]}"
    assert s.unchecked == (f1[:9], f2[:9]) and "--record" in s.fix
    said = _record(stack_copy, repo.path)  # from the checkout that still has them
    assert said == [f"#48804: refreshed {f1[:9]}, {f2[:9]} (ported)"]
    assert loader.load(stack_copy).fork.carries["48804"].patch_ids.keys() == {f1[:9], f2[:9]}
    again = state(survey(stack_copy, rebased.path, "origin/main"), "48804")
    assert again.state == "ported" and again.detail.endswith(f"(by recorded patch-id: {f1[:9]}, {f2[:9]})")
    assert _record(stack_copy, repo.path) == [f"#48804: kept {f1[:9]}, {f2[:9]} (ported)"]


def _record(stack: Path, fork: Path) -> list[str]:
    st = loader.load(stack)
    where = scope.open_scope(st, fork=fork)
    return carries_write.record(st, where, classify.survey(st, where))


def test_record_writes_with_the_fork_and_keeps_its_comments(repo, stack_copy):
    """`--record` writes into stack/fork.yaml (carries), never a change file: a change found by its patches gets the
    commits that carry it; an entry already there keeps its lines, comments too."""
    p1, p2 = pr_branch(repo, "pr-48804", WARMUP)
    repo.git("cherry-pick", p1, p2)
    f1, f2 = repo.git("rev-parse", "HEAD~1")[:9], repo.git("rev-parse", "HEAD")[:9]
    (pick,) = pr_branch(repo, "pr-46514", {"fp8_ds_mla with MTP": {"vllm/fp8.py": "fp8\n"}})
    set_change(stack_copy, "46514", upstream={"commits": [pick[:9]], "state": "open", "merged_on": None,
                                              "first_release": None})  # fmt: skip
    repo.git("cherry-pick", pick)
    record_fork(stack_copy, repo.path, {"48804": [f1, f2]})
    path = stack_copy / "fork.yaml"
    text = path.read_text().replace("    '48804':\n", "    '48804':\n      # the port and its repair\n")
    path.write_text(text)
    changes = {p.name: p.read_text() for p in (stack_copy / "changes").iterdir()}
    said = _record(stack_copy, repo.path)
    assert said[0] == f"#46514: recorded {repo.git('rev-parse', 'HEAD')[:12]} (ported)"
    assert said[1] == f"#48804: refreshed {f1}, {f2} (ported)"
    lines = path.read_text().splitlines()
    assert "      # the port and its repair" not in lines  # refreshed: written anew
    st = loader.load(stack_copy)
    assert st.fork.carries["46514"].commits == (repo.git("rev-parse", "HEAD")[:12],)
    assert st.fork.carries["48804"].patch_ids.keys() == {f1, f2}
    text = (
        path.read_text()
        .replace("  carries:", "  # what it carries\n  carries:")
        .replace('    "46514":\n', '    "46514":\n      # by hand\n')
    )
    path.write_text(text)
    assert _record(stack_copy, repo.path)[0].startswith("#46514: kept")
    assert "      # by hand" in path.read_text().splitlines() and "  # what it carries" in path.read_text()
    assert {p.name: p.read_text() for p in (stack_copy / "changes").iterdir()} == changes  # no change file written


def test_the_real_stack_on_a_checkout_says_what_it_cannot_know(repo, stack_copy, capsys):
    repo.git("checkout", "-q", "main")
    squash = repo.commit("[Attention] Skip sparse indexer scoring for dense short prefills (#48407)", {"s.py": "x\n"})
    repo.upstream()
    repo.git("checkout", "-q", "fork")
    assert main(["--stack", str(stack_copy), "upstream", "--fork", str(repo.path), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "stackgate.upstream" and doc["upstream_ref"] == "upstream/main"
    got = {c["change"]: c for c in doc["changes"]}
    assert {k: c["state"] for k, c in got.items()} == {
        "46514": "unknown", "46849": "unknown", "48407": "unknown", "48804": "absent", "49903": "absent",
        "selftest": "not imported", "composition": "not imported",
    }  # fmt: skip
    # closed unmerged, no commit of it anywhere: the files it adds say it is not here
    assert got["48804"]["detail"] == (
        "none of the files it adds is in HEAD: vllm/model_executor/warmup/eagle_spec_decode_warmup.py, "
        "vllm/model_executor/warmup/dflash_spec_decode_warmup.py"
    )
    assert got["48407"]["detail"] == "merge commit not recorded, and no port commits to compare"
    assert got["48407"]["fix"].startswith(f"upstream/main has {squash[:12]} '[Attention] Skip sparse indexer")
    assert "stacked on #46076, which no change file tracks: its presence is not checked" in got["46514"]["flags"]
    file = stack_copy / "changes" / "46849.yaml"
    assert got["46849"]["fix"] == f"record upstream.merge_commit (the commit that merged #46849) in {file}"
    assert Snapshot.from_json(doc).to_json() == doc


def _ci(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ci", *args], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_the_command_lists_every_change_as_json_and_refuses_a_non_repository(repo, tmp_path):
    done = _ci("upstream", "--fork", str(repo.path), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert [c["change"] for c in json.loads(done.stdout)["changes"]] == list(loader.load().changes)
    plain = tmp_path / "not-a-repo"
    plain.mkdir()
    refused = _ci("upstream", "--fork", str(plain), "--format", "json")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.startswith(f"error: {plain} is not a git repository\n  fix: pass --fork the path of a git")
    table = _ci("upstream", "--fork", str(repo.path))
    assert table.returncode == 0 and re.search(r"\nChange +Upstream ", table.stdout)
    assert re.search(r"\n#48804 +closed unmerged .* absent +none of the files it adds is in HEAD", table.stdout)


def test_a_folder_inside_a_repository_is_not_taken_for_the_repository(repo):
    (repo.path / "vllm").mkdir(exist_ok=True)
    with pytest.raises(UsageError, match="it is a folder inside the repository"):
        Checkout.open(repo.path / "vllm")


def test_an_upstream_ref_that_does_not_exist_is_refused(repo, stack_copy):
    with pytest.raises(UsageError) as info:
        survey(stack_copy, repo.path, "upstream/mian")
    assert "--upstream-ref 'upstream/mian' names no commit" in str(info.value) and "upstream/main" in info.value.hint
    repo.git("update-ref", "-d", "refs/remotes/upstream/main")
    with pytest.raises(UsageError, match="remote 'upstream' is vllm-project/vllm, but none of its branches is fetched"):
        survey(stack_copy, repo.path)


def test_a_fork_without_vllms_remote_is_refused_not_compared_with_its_own_origin(repo, stack_copy, tmp_path):
    """A fork cloned from its own repository: its origin/main is the fork, and comparing with it would call three of
    its commits "own" where it carries 78. Upstream is vLLM's remote, or --upstream-ref; nothing else."""
    fork = clone(repo, tmp_path / "fork-clone")
    fork.git("checkout", "-q", "fork")
    with pytest.raises(UsageError) as info:
        survey(stack_copy, fork.path)
    assert info.value.message.startswith(f"{fork.path}: nothing says which commits of HEAD are the fork's own: no ")
    assert "no remote is vllm-project/vllm (remotes: origin (file://" in info.value.message
    assert "and no release tag (vX.Y.Z) is in HEAD's history" in info.value.message
    assert info.value.hint.startswith(
        f"git -C {fork.path} remote add upstream https://github.com/vllm-project/vllm.git"
    )
    done = _ci("--stack", str(stack_copy), "upstream", "--fork", str(fork.path))
    assert done.returncode == 2 and "\n  fix: git -C" in done.stderr and not done.stdout
    fork.git("remote", "add", "vllm", "git@github.com:vllm-project/vllm.git")  # ssh, scp-like: vLLM's all the same
    fork.git("update-ref", "refs/remotes/vllm/main", repo.git("rev-parse", "main"))
    assert survey(stack_copy, fork.path).upstream_ref == "vllm/main"


def test_a_repository_that_is_not_vllm_is_refused(stack_copy, tmp_path):
    other = Repo(tmp_path / "strix-halo-dockerfiles")
    other.commit("Dockerfiles and patches", {"Dockerfile": "FROM rocm\n", "patches/vllm.patch": "--- a\n"})
    other.upstream()
    done = _ci("--stack", str(stack_copy), "upstream", "--fork", str(other.path))
    assert done.returncode == 2 and not done.stdout
    assert (
        f"error: {other.path} is not a vLLM checkout: HEAD (" in done.stderr and "has no vllm/ package" in done.stderr
    )
    assert "\n  fix: pass --fork a checkout of the fork of vllm-project/vllm under test" in done.stderr


def test_a_bare_clone_works(repo, stack_copy, tmp_path):
    p1, p2 = pr_branch(repo, "pr-48804", WARMUP)
    repo.git("cherry-pick", p1, p2)
    bare = clone(repo, tmp_path / "fork.git", "--bare")
    bare.git("symbolic-ref", "HEAD", "refs/heads/fork")
    record_fork(
        stack_copy, bare.path, {"48804": [repo.git("rev-parse", "HEAD~1")[:9], repo.git("rev-parse", "HEAD")[:9]]}
    )
    snap = survey(stack_copy, bare.path, "main")
    assert state(snap, "48804").state == "ported" and snap.fork_commits == 2


def test_a_merge_commit_the_checkout_lacks_is_absent_and_the_fix_names_the_file_line(repo, stack_copy):
    """Not in the checkout, so not in HEAD's history: judged by its patches (none here: absent). An upstream ref as new
    as the merge that lacks it is a release line, or the id is wrong: the fix names both, with the file's line."""
    set_change(stack_copy, "48407", upstream={"merge_commit": "0123abcd4", "merged_on": "2023-01-01"})
    s = state(survey(stack_copy, repo.path), "48407")
    path = stack_copy / "changes" / "48407.yaml"
    line = path.read_text().splitlines().index("  merge_commit: 0123abcd4") + 1
    assert s.state == "absent" and "as 0123abcd4, which this checkout does not hold (nor upstream/main)" in s.detail
    assert s.fix.startswith("upstream/main (") and "fetch https://github.com/vllm-project/vllm.git main" in s.fix
    assert s.fix.endswith(f"else check upstream.merge_commit in {path}:{line}")
    set_change(stack_copy, "48407", upstream={"merged_on": "2030-01-01"})  # after upstream/main's tip: nothing to fix
    assert state(survey(stack_copy, repo.path), "48407").fix == ""


def test_a_shallow_clone_missing_history_is_refused_with_the_fetch_that_fixes_it(repo, stack_copy, tmp_path):
    repo.commit("the fork's own work", {"fork.txt": "1\n"})
    repo.commit("more of it", {"fork.txt": "2\n"})
    repo.git("checkout", "-q", "main")
    repo.commit("upstream moves on", {"vllm/other.py": "1\n"})
    repo.commit("and on", {"vllm/other.py": "2\n"})
    repo.git("checkout", "-q", "fork")
    shallow = clone(repo, tmp_path / "shallow", "--depth", "1", "--no-single-branch")
    shallow.git("checkout", "-q", "fork")
    with pytest.raises(UsageError) as info:
        survey(stack_copy, shallow.path, "origin/main")
    assert "is a shallow clone: HEAD and origin/main share no commit in the history it holds" in info.value.message
    assert info.value.hint == f"fetch more history: git -C {shallow.path} fetch --unshallow"
    shallow.git("fetch", "-q", "--unshallow")
    assert survey(stack_copy, shallow.path, "origin/main").merge_base == repo.git("rev-parse", "base")


def test_the_benchmarks_history_gives_each_state(stack_copy, tmp_path):
    """The 20,000-commit benchmark's history, small: the states it reports are the ones it was built to give."""
    from ci.bench import upstream as bench

    for own_only, port in ((False, "diverged"), (True, "ported")):
        root = tmp_path / f"own-{own_only}"
        ids = bench.build(root, own_only, commits=400, fork_own=60)
        stack = tmp_path / f"stack-{own_only}"
        bench.stack_for(stack_copy, stack, ids, root)
        snap = survey(stack, root, "upstream/main")
        assert {c.change: c.state for c in snap.changes} == {
            "46514": "partially ported", "46849": "absent", "48407": "converged", "48804": port, "49903": "absent",
            "selftest": "not imported", "composition": "not imported",
        }  # fmt: skip
        assert int(Repo(root, init=False).git("rev-list", "--all", "--count")) == 400


def test_the_real_stacks_demo_fork_ports_are_absent_from_another_history(repo):
    """The stack as committed names the demo fork's port commits and their patch-ids (stack/fork.yaml): a checkout
    without the commits is judged by the recorded patches, and none of them is in its history."""
    from ci.stack.loader import DEFAULT_STACK

    snap = survey(DEFAULT_STACK, repo.path)
    for change in ("48407", "46514", "46849"):
        assert state(snap, change).state == "absent", state(snap, change)


SKIP = "[Attention] Skip sparse indexer scoring for dense short prefills (#48407)"
SKIP_FILES = {"vllm/sparse.py": "dense\nshort\n", "vllm/indexer.py": "skip\n", "tests/test_skip.py": "ok\n"}


def _squash_upstream(repo: Repo) -> str:
    """Upstream squash-merges #48407 onto main after `base`; the fork's branch is checked out again after."""
    repo.git("checkout", "-q", "main")
    repo.commit("upstream moves on", {"vllm/other.py": "1\n"})
    squash = repo.commit(SKIP, SKIP_FILES)
    repo.upstream()
    repo.git("checkout", "-q", "fork")
    return squash


def _record_merge(stack: Path, repo: Repo, squash: str, merged_on: str = "2023-01-01") -> None:
    co = Checkout.open(repo.path)
    set_change(stack, "48407", upstream={"merge_commit": squash[:12], "merged_on": merged_on,
                                         "patch_id": co.patch_ids(squash, walk=False)[squash],
                                         "file_ids": co.file_ids([squash])[squash]})  # fmt: skip


def test_a_cherry_pick_of_upstreams_merge_is_ported_and_the_rebase_flag_only_where_true(repo, stack_copy):
    """The fork carries upstream's own patch (a cherry-pick of the squash merge), not the recorded port: ported, by
    upstream's patch. Converging at the next rebase is said only where the upstream ref holds the merge."""
    squash = _squash_upstream(repo)
    repo.git("cherry-pick", squash)
    picked = repo.git("rev-parse", "HEAD")
    _record_merge(stack_copy, repo, squash)
    s = state(survey(stack_copy, repo.path), "48407")
    assert s.state == "ported" and s.detail == f"upstream's merge commit {squash[:12]}'s patch present as {picked[:12]}"
    assert s.flags == ("merged upstream: converge, dropping the port at the next rebase onto upstream/main",)
    repo.upstream("base")  # an upstream ref from before the merge: a rebase onto it converges nothing
    s = state(survey(stack_copy, repo.path), "48407")
    assert s.state == "ported"
    assert s.flags == ("merged upstream on 2023-01-01, but upstream/main does not hold the merge yet: fetch upstream; "
                       "a rebase onto it then converges",)  # fmt: skip


def test_a_port_edited_to_resolve_a_conflict_reads_ported_edited_also_on_a_fresh_clone(repo, stack_copy, tmp_path):
    squash = _squash_upstream(repo)
    repo.git("cherry-pick", "--no-commit", squash)
    (repo.path / "vllm" / "indexer.py").write_text("skip\nresolved against the fork's indexer\n")
    repo.git("commit", "-q", "-am", SKIP)
    edited = repo.git("rev-parse", "HEAD")
    _record_merge(stack_copy, repo, squash)
    s = state(survey(stack_copy, repo.path), "48407")
    assert s.state == "ported, edited"
    assert s.detail == (f"{edited[:12]} carries upstream's merge commit {squash[:12]} with edits (2 of 3 files as in "
                        "it; edited: vllm/indexer.py)")  # fmt: skip
    # a CI clone of the fork alone, its upstream ref from before the merge: the merge commit is not there, and only
    # what the change file records (file patch-ids) is left to compare with
    repo.upstream("base")
    fresh = clone(repo, tmp_path / "fresh", "--single-branch", "--branch", "fork")
    fresh.upstream(fresh.git("rev-parse", "HEAD~1"))
    assert Checkout.open(fresh.path).commit(squash) is None
    _record_merge(stack_copy, repo, squash, merged_on="2030-01-01")
    s = state(survey(stack_copy, fresh.path), "48407")
    assert s.state == "ported, edited" and "edited: vllm/indexer.py" in s.detail
    cut = state(survey(stack_copy, fresh.path, "upstream/main"), "46514")
    assert cut.state != "ported, edited"  # another change's files are not this one's


def test_a_long_list_in_a_flag_is_folded_and_whole_in_json(repo, stack_copy):
    (skip,) = pr_branch(repo, "pr-48407", {"Skip indexer scoring": {"vllm/sparse.py": "dense\n"}})
    repo.git("cherry-pick", skip)
    record_fork(stack_copy, repo.path, {"48407": [repo.git("rev-parse", "HEAD")[:9]]})
    repo.git("checkout", "-q", "main")
    made = [repo.commit(f"upstream edit {n}", {"vllm/sparse.py": f"dense {n}\n"}) for n in range(12)]
    repo.upstream()
    repo.git("checkout", "-q", "fork")
    s = state(survey(stack_copy, repo.path), "48407")
    assert s.state == "diverged" and len(s.diverged) == 12
    (flag,) = [f for f in s.flags if f.startswith("upstream changed")]
    assert flag.endswith("and 9 more (all in --format json)") and len(flag) < 300
    assert {u.commit for u in s.diverged} == set(made)
