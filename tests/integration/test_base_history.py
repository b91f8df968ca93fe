"""The base release from history, never guessed: an upstream with release branches and tags made from scratch, and
forks whose clones lack upstream's recent tags (as forks' clones mostly do).

Upstream's main: v0.9.0 tagged on main, three months of work, then the v0.27 release line cut at P (a cherry-pick of
main's fix after P, with a kernel source, tagged v0.27.1 on its branch), more work (Q), the v0.28 line cut at R
(tagged v0.28.0), and S. The fork `mine` is the v0.27.1 release plus a commit of its own; `on-main` sits on
upstream's main at Q, between the two releases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.git_repos import Repo, clone

from ci.cli import main
from ci.upstream import release
from ci.upstream.checkout import Checkout

TREE = {"vllm/__init__.py": "X = 0\n", "vllm/attention.py": "DENSE = False\n"}
DAY = 86_400


@pytest.fixture
def upstream(tmp_path: Path) -> tuple[Repo, dict[str, str]]:
    up = Repo(tmp_path / "upstream")
    ids = {"v0.9.0": up.commit("vLLM 0.9.0", TREE)}
    up.git("tag", "v0.9.0")
    up._clock += 90 * DAY  # the months a fork's clone of main walks back through to reach v0.9.0
    up.commit("[Core] work", {"vllm/core.py": "A = 1\n"})
    ids["P"] = up.commit("[Core] more work", {"vllm/core.py": "A = 2\n"})
    ids["fix"] = up.commit("[Bugfix] a fix (#50915)", {"vllm/fix.py": "F = 1\n", "csrc/fix.cu": "// F\n"})
    up.git("checkout", "-q", "-b", "releases/v0.27.0", ids["P"])
    picked = f"[Bugfix] a fix (#50915)\n\n(cherry picked from commit {ids['fix']})"
    ids["v0.27.1"] = up.commit(picked, {"vllm/fix.py": "F = 1\n", "csrc/fix.cu": "// F\n"})
    up.git("tag", "v0.27.1")
    up.git("checkout", "-q", "main")
    up._clock += 3 * DAY
    ids["Q"] = up.commit("[Core] work on main", {"vllm/core.py": "A = 3\n"})
    up._clock += 3 * DAY
    ids["R"] = up.commit("[Core] work before the next release", {"vllm/core.py": "A = 4\n"})
    up.git("checkout", "-q", "-b", "releases/v0.28.0")
    ids["v0.28.0"] = up.commit("[Release] 0.28.0", {"vllm/release.py": "R = 28\n"})
    up.git("tag", "v0.28.0")
    up.git("checkout", "-q", "main")
    ids["S"] = up.commit("[Core] after", {"vllm/core.py": "A = 5\n"})
    return up, ids


@pytest.fixture
def fork(upstream, tmp_path: Path) -> tuple[Repo, dict[str, str]]:
    """A clone of the fork: upstream's main under a remote whose URL is vLLM's, and no tag but the old v0.9.0."""
    up, ids = upstream
    f = clone(up, tmp_path / "fork", "--no-tags")
    f.git("fetch", "-q", "--no-tags", "origin", "v0.9.0:refs/tags/v0.9.0", f"{ids['v0.27.1']}:refs/heads/mine")
    f.git("remote", "add", "upstream", "git@github.com:vllm-project/vllm.git")
    f.git("update-ref", "refs/remotes/upstream/main", ids["S"])
    f.git("checkout", "-q", "mine")
    ids["own"] = f.commit("fork: a change of its own", {"vllm/mine.py": "M = 1\n"})
    f.git("branch", "on-main", ids["Q"])
    return f, ids


def _ci(stack: Path, *args: str) -> int:
    return main(["--stack", str(stack), *args])


def test_a_clone_without_the_recent_tags_never_takes_the_stale_one(fork, stack_copy, tmp_path, capsys) -> None:
    f, ids = fork
    date = Checkout.open(f.path).date(ids["P"])
    assert _ci(stack_copy, "fork", "--fork", str(f.path), "--ref", "mine", "--format", "json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["base"] is None and doc["left_upstream"]["commit"] == ids["P"]
    problem = doc["base_unknown"]["problem"]
    line = (
        "onto the release line of origin/releases/v0.27.0 (1 commit after it cherry-picked from upstream's main, its "
        f"last commit here {ids['v0.27.1'][:12]} (origin/releases/v0.27.0))"
    )
    assert f"mine left upstream/main at {ids['P'][:12]} ({date}) {line}" in problem
    assert "v0.9.0" in problem and "too far to be its release" in problem
    assert "fetch --tags -- upstream" in doc["base_unknown"]["fix"]
    assert f"--base-ref {ids['v0.27.1'][:12]} --base-version X.Y.Z" in doc["base_unknown"]["fix"]

    site = ["--base-site", str(tmp_path / "base-site"), "--site", str(tmp_path / "site")]
    needing = (["fork", "bundle", "--out", str(tmp_path / "b.tar.gz")], ["fork", "build", "--host", *site],
               ["pipeline", "--one-agent", "--target", "cuda-sm90"], ["main", "--target", "cuda-sm90", "--out",
               str(tmp_path / "out")])  # fmt: skip
    for verb in needing:
        assert _ci(stack_copy, *verb, "--fork", str(f.path), "--ref", "mine") == 2, verb
        err = capsys.readouterr().err
        assert f"the base release of mine is not known: mine left upstream/main at {ids['P'][:12]} ({date})" in err
        assert f"fix: fetch upstream's release tags (git -C {f.path} fetch --tags -- upstream)" in err
    assert not (tmp_path / "b.tar.gz").exists() and not (tmp_path / "site").exists()

    assert _ci(stack_copy, "upstream", "--fork", str(f.path), "--ref", "mine", "--format", "json") == 0
    snap = json.loads(capsys.readouterr().out)
    assert snap["base"]["commit"] == "" and "v0.9.0" not in snap["own"]


def test_the_fetch_line_for_the_tags_names_the_remote_that_is_upstream_else_its_url(fork, stack_copy, capsys) -> None:
    """Upstream found on a remote named otherwise, or given as a commit: the fix fetches from where tags can come."""
    f, ids = fork
    f.git("remote", "rename", "upstream", "vllm")  # its main is now vllm/main
    assert _ci(stack_copy, "fork", "--fork", str(f.path), "--ref", "mine", "--format", "json") == 0
    fix = json.loads(capsys.readouterr().out)["base_unknown"]["fix"]
    assert f"git -C {f.path} fetch --tags -- vllm" in fix and "-- upstream" not in fix

    f.git("remote", "remove", "vllm")
    given = ["--upstream-ref", ids["S"], "--format", "json"]
    assert _ci(stack_copy, "fork", "--fork", str(f.path), "--ref", "mine", *given) == 0
    fix = json.loads(capsys.readouterr().out)["base_unknown"]["fix"]
    assert f"git -C {f.path} fetch --tags -- https://github.com/vllm-project/vllm.git" in fix, fix


def test_with_the_tags_fetched_the_base_is_the_release_line_and_says_how(fork, upstream, stack_copy, capsys) -> None:
    f, ids = fork
    f.git("fetch", "-q", "origin", "--tags")
    assert _ci(stack_copy, "fork", "--fork", str(f.path), "--ref", "mine", "--format", "json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["base"]["version"] == "0.27.1" and doc["base"]["commit"] == ids["v0.27.1"]
    assert doc["base"]["how"].startswith("v0.27.1, the newest release tag in mine's history, on the line mine took")
    assert _ci(stack_copy, "fork", "--fork", str(f.path), "--ref", "mine") == 0
    out = capsys.readouterr().out
    assert "base: vLLM 0.27.1, found as v0.27.1, the newest release tag in mine's history" in out
    assert f"left upstream's main at {ids['P'][:12]}" in out and "upstream: upstream/main (remote upstream" in out


def test_a_fork_on_main_between_releases_is_said_to_be_so(fork, stack_copy, tmp_path, capsys) -> None:
    f, ids = fork
    f.git("fetch", "-q", "origin", "--tags")
    out = tmp_path / "b.tar.gz"
    assert _ci(stack_copy, "fork", "bundle", "--out", str(out), "--fork", str(f.path), "--ref", "on-main") == 2
    err = capsys.readouterr().err
    when = Checkout.open(f.path).date(ids["Q"])
    assert f"on-main sits on upstream's main between releases: it left upstream/main at {ids['Q'][:12]} ({when})" in err
    assert "v0.27.1 (" in err and "before it" in err and "v0.28.0 (" in err and "after it" in err
    assert "no release wheel holds its compiled parts" in err and "python -m ci source-build" in err


def test_base_version_alone_is_the_release_over_where_the_fork_left_main(fork, stack_copy, capsys) -> None:
    f, ids = fork
    args = ["fork", "--fork", str(f.path), "--ref", "on-main", "--base-version", "0.27.1", "--format", "json"]
    assert _ci(stack_copy, *args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["base"]["version"] == "0.27.1" and doc["base"]["commit"] == ids["Q"]
    assert doc["base"]["how"].startswith("--base-version, over where on-main left upstream/main")


def test_a_release_line_whose_tag_is_missing_is_named_by_its_commit_and_the_fix_works(fork, stack_copy, tmp_path,
                                                                                        capsys) -> None:  # fmt: skip
    """The release line's cherry-picks (a kernel source among them) are the release's, not the fork's: the fix line
    names the line's last commit, and --base-version alone takes it too, so the bundle is made."""
    f, ids = fork
    given = ["--fork", str(f.path), "--ref", "mine"]
    assert _ci(stack_copy, "fork", *given, "--format", "json") == 0
    fix = json.loads(capsys.readouterr().out)["base_unknown"]["fix"]
    named = f"--base-ref {ids['v0.27.1'][:12]} --base-version X.Y.Z"
    assert named in fix
    for base in (["--base-ref", ids["v0.27.1"][:12], "--base-version", "0.27.1"], ["--base-version", "0.27.1"]):
        out = tmp_path / f"{len(base)}.tar.gz"
        assert _ci(stack_copy, "fork", "bundle", "--out", str(out), *given, *base) == 0, capsys.readouterr().err
        said = capsys.readouterr().out
        assert f"({ids['own'][:12]}) over vLLM 0.27.1: 1 files changed" in said, said
    assert _ci(stack_copy, "fork", *given, "--base-version", "0.27.1", "--format", "json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["base"]["commit"] == ids["v0.27.1"]
    assert doc["base"]["how"].startswith(
        f"--base-version, over the release line's last commit {ids['v0.27.1'][:12]} (origin/releases/v0.27.0)"
    )


def test_cherry_pick_lines_naming_the_forks_own_commits_are_no_release_line(fork, stack_copy, capsys) -> None:
    """A fork on main that cherry-picks its own work between branches: no release line, and said so."""
    f, ids = fork
    f.git("fetch", "-q", "origin", "--tags")
    f.git("checkout", "-q", "-b", "work", ids["Q"])
    own = f.commit("fork: an experiment", {"vllm/x.py": "X = 1\n"})
    f.git("checkout", "-q", "-b", "private", ids["Q"])
    f.commit(f"fork: the experiment\n\n(cherry picked from commit {own})", {"vllm/x.py": "X = 1\n"})
    assert _ci(stack_copy, "fork", "--fork", str(f.path), "--ref", "private", "--format", "json") == 0
    problem = json.loads(capsys.readouterr().out)["base_unknown"]["problem"]
    assert "release line" not in problem and "cherry-picked" not in problem
    assert "private sits on upstream's main between releases" in problem


def test_a_release_like_tag_on_the_forks_own_commit_is_never_a_vllm_release(fork, stack_copy, capsys) -> None:
    f, ids = fork
    f.git("fetch", "-q", "origin", "--tags")
    f.git("tag", "v1.0.0", ids["own"])
    f.git("tag", "v0.27.1-spark1", ids["own"])
    f.commit("fork: more of its own", {"vllm/mine.py": "M = 2\n"})
    f.git("tag", "v1.0.1")
    assert _ci(stack_copy, "fork", "--fork", str(f.path), "--ref", "mine", "--format", "json") == 0
    base = json.loads(capsys.readouterr().out)["base"]
    assert (base["version"], base["commit"]) == ("0.27.1", ids["v0.27.1"])
    assert "passing over the fork's own v1.0.0, v1.0.1" in base["how"]

    f.git("checkout", "-q", "-b", "main-line", ids["Q"])  # on main, no release line: every tag after Q is its own
    f.commit("fork: on main", {"vllm/mine.py": "M = 3\n"})
    f.git("tag", "v2.0.0")
    assert _ci(stack_copy, "fork", "--fork", str(f.path), "--ref", "main-line", "--format", "json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["base"] is None, doc["base"]
    assert "v2.0.0: the fork's own tags, on its own commits, not vLLM releases" in doc["base_unknown"]["problem"]


def test_an_upstream_remote_of_the_users_own_is_never_overwritten(fork, stack_copy, capsys) -> None:
    f, _ = fork
    f.git("remote", "set-url", "upstream", "https://github.com/someone/vllm-fork.git")
    for tag in f.git("tag").split():
        f.git("tag", "-d", tag)
    assert _ci(stack_copy, "fork", "--fork", str(f.path), "--ref", "mine") == 2
    err = capsys.readouterr().err
    assert "remote add upstream" not in err
    assert (
        f"git -C {f.path} remote add vllm https://github.com/vllm-project/vllm.git && git -C {f.path} fetch vllm" in err
    )


def test_a_tag_near_where_the_fork_left_main_is_taken_and_the_distance_said(upstream, tmp_path) -> None:
    up, ids = upstream
    co = Checkout.open(up.path)
    up.git("tag", "v0.26.0", ids["P"] + "~1")
    found = release.find(co, "main", ids["Q"], release.left(co, ids["Q"], "main", ids["Q"]))
    assert isinstance(found, release.Base) and found.version == "0.26.0"
    assert "v0.26.0, the newest release tag in main's history, 3 commits and 3 days before where main left" in found.how


@pytest.mark.parametrize(
    "url",
    ["https://github.com/vllm-project/vllm", "https://github.com/vllm-project/vllm.git/",
     "git@github.com:vllm-project/vllm.git", "ssh://git@mirror.example:2222/vllm-project/vllm.git", "file:///srv/mirrors/vllm-project/vllm.git",
     "https://GitHub.com/VLLM-Project/vLLM"],
)  # fmt: skip
def test_any_remote_whose_url_ends_in_vllms_repository_is_upstream(fork, stack_copy, url, capsys) -> None:
    f, _ = fork
    f.git("remote", "set-url", "upstream", url)
    assert _ci(stack_copy, "fork", "--fork", str(f.path), "--ref", "mine", "--format", "json") == 0
    assert json.loads(capsys.readouterr().out)["upstream_ref"] == "upstream/main"


def test_upstream_is_set_once_by_the_environment_or_fork_yaml(fork, stack_copy, monkeypatch, capsys) -> None:
    f, ids = fork
    f.git("remote", "rename", "upstream", "vllm")
    f.git("remote", "set-url", "vllm", "https://example.com/some/mirror.git")  # no URL says it is upstream
    monkeypatch.setenv("STACKGATE_UPSTREAM_REF", "vllm")  # a remote's name: its main
    assert _ci(stack_copy, "fork", "--fork", str(f.path), "--ref", "mine", "--format", "json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["upstream_ref"] == "vllm/main" and doc["upstream_found"] == "$STACKGATE_UPSTREAM_REF (remote vllm)"
    monkeypatch.delenv("STACKGATE_UPSTREAM_REF")
    (stack_copy / "fork.yaml").write_text(
        f"fork:\n  name: mine\n  checkout: {f.path}\n  ref: mine\n  upstream: {ids['S']}\n"
    )
    assert _ci(stack_copy, "fork", "--format", "json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["upstream_ref"] == ids["S"] and doc["upstream_found"] == "stack/fork.yaml upstream"


def test_the_cpu_self_test_runs_as_it_is_with_no_known_base(fork, stack_copy, tmp_path, monkeypatch, capsys):
    """`nox -s main` on a laptop (the cpu self-test) with such a fork configured: the self-test runs as it is, and the
    report judges the fork, its base not known yet."""
    f, ids = fork
    monkeypatch.setenv("STACKGATE_FORK", str(f.path))
    monkeypatch.setenv("STACKGATE_FORK_REF", "mine")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    assert _ci(stack_copy, "main", "--out", str(tmp_path / "out")) != 2  # its base is needed by no row run here
    assert "cpu runs no imported change's rows: they run as they are; the report judges the fork fork mine" in (
        capsys.readouterr().out
    )
    doc = json.loads((tmp_path / "out" / "report" / "report.json").read_text())
    assert doc["judged"]["subject"] == "fork"
    assert doc["judged"]["said"].startswith(f"the fork fork mine ({ids['own'][:12]}) over a base release not known yet")


def test_a_branch_only_a_remote_has_is_taken_and_said_and_an_ambiguous_one_lists_them(fork, stack_copy, capsys):
    """A fresh clone has every branch but its default as origin/NAME only: --ref NAME takes it, as git switch does."""
    f, ids = fork
    assert _ci(stack_copy, "fork", "--fork", str(f.path), "--ref", "releases/v0.27.0", "--format", "json") == 0
    said = capsys.readouterr()
    assert json.loads(said.out)["ref"] == "origin/releases/v0.27.0"
    assert said.err.strip().splitlines() == [
        "--ref releases/v0.27.0: no branch of that name here; taking origin/releases/v0.27.0, the one remote branch "
        "of that name"
    ]
    f.git("update-ref", "refs/remotes/upstream/releases/v0.27.0", ids["v0.27.1"])
    assert _ci(stack_copy, "fork", "--fork", str(f.path), "--ref", "releases/v0.27.0") == 2
    err = capsys.readouterr().err
    assert "2 remotes have one of that name: origin/releases/v0.27.0, upstream/releases/v0.27.0" in err
    assert "--ref origin/releases/v0.27.0 or --ref upstream/releases/v0.27.0" in err
