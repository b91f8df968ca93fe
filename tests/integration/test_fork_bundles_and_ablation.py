"""The fork under test: a small synthetic fork repository (git builds it; nothing is mocked) with a base release
tree, port commits for three changes and a later commit that builds on one of them; a base "wheel install" with a
dist-info RECORD and a compiled part (support/fork_site.py); the bundle, the ablation and the host build that lay
the fork over it. The fork layer built into an image is test_fork_layer_in_image.py's."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from support.fork_site import make_base_site, stack_for_fork
from support.git_repos import set_change
from support.paths import SUITES

from ci import cli
from ci.common.errors import UsageError
from ci.fork import ablate, bundle, fork_verbs, site, source
from ci.stack import loader
from ci.upstream import scope


def test_holdings_name_present_and_absent(stack_copy: Path, fork_repo) -> None:
    repo, ids = fork_repo
    st = loader.load(stack_for_fork(stack_copy, repo, ids))
    fork = source.open_fork(st)
    assert fork.present == ("46514", "46849", "48407")
    held = fork.state("48804")
    assert held.state == "absent" and "none of the files it adds is in main" in held.detail
    assert fork.state("46849").carried_by == (ids["46849"],) and fork.state("46849").state == "ported"
    assert st.fork is not None and fork.base.version == "0.26.0" and fork.base.how == "stack/fork.yaml"


def test_fork_checkout_from_env_and_missing(stack_copy: Path, fork_repo, monkeypatch) -> None:
    repo, ids = fork_repo
    st = loader.load(stack_for_fork(stack_copy, repo, ids))
    monkeypatch.setenv(scope.ENV_FORK, str(repo.path.parent / "nowhere"))
    with pytest.raises(UsageError, match="nowhere does not exist"):
        source.open_fork(st)


def test_two_bundles_of_one_ref_are_the_same_bytes_and_build(stack_copy: Path, fork_repo, tmp_path: Path) -> None:
    repo, ids = fork_repo
    st = loader.load(stack_for_fork(stack_copy, repo, ids))
    fork = source.open_fork(st)
    ov = bundle.overlay(fork, fork.commit)
    assert sorted(ov.changed) == ["vllm/attention.py", "vllm/mla.py", "vllm/spec.py"] and ov.deleted == ("vllm/old.py",)
    a = bundle.write(fork, ov, tmp_path / "a.tar.gz")
    b = bundle.write(fork, bundle.overlay(source.open_fork(st), fork.commit), tmp_path / "b.tar.gz")
    assert a.read_bytes() == b.read_bytes()
    base = make_base_site(tmp_path)
    one = site.build(a, base, tmp_path / "site-1")
    two = site.build(b, base, tmp_path / "site-2")
    assert one["vllm_build"] == two["vllm_build"] and one["changes"] == ["46514", "46849", "48407"]
    assert (tmp_path / "site-1" / "vllm" / "spec.py").read_text() == "STEPS = 3\n"
    assert not (tmp_path / "site-1" / "vllm" / "old.py").exists()
    assert (base / "vllm" / "spec.py").read_text() == "STEPS = 1\n"  # the base install is never written
    vb = site.vllm_build()
    assert vb.tree_id(base / "vllm") != one["vllm_build"]  # the stock tree is another build


def test_a_row_records_the_build_and_an_edited_tree_says_so(stack_copy: Path, fork_repo, tmp_path: Path) -> None:
    repo, ids = fork_repo
    st = loader.load(stack_for_fork(stack_copy, repo, ids))
    fork = source.open_fork(st)
    built = site.build(
        bundle.write(fork, bundle.overlay(fork, fork.commit), tmp_path / "f.tar.gz"),
        make_base_site(tmp_path),
        tmp_path / "site",
    )
    suites = SUITES
    probe = [sys.executable, "-m", "harness.vllm_build", str(tmp_path / "site" / "vllm")]
    seen = json.loads(subprocess.run(probe, cwd=suites, capture_output=True, text=True, check=True).stdout)
    assert seen["vllm_build"] == built["vllm_build"] and seen["fork_changes"] == ["46514", "46849", "48407"]
    assert "mismatch" not in seen
    (tmp_path / "site" / "vllm" / "spec.py").write_text("STEPS = 9\n")
    seen = json.loads(subprocess.run(probe, cwd=suites, capture_output=True, text=True, check=True).stdout)
    assert "is not the build" in seen["mismatch"]


def test_ablation_drops_one_change_and_keeps_the_rest(stack_copy: Path, fork_repo, tmp_path: Path) -> None:
    repo, ids = fork_repo
    st = loader.load(stack_for_fork(stack_copy, repo, ids))
    fork = source.open_fork(st)
    dropped = ablate.without(st, fork, "46849")
    commit = dropped.commit
    assert commit == ablate.without(st, source.open_fork(st), "46849").commit  # same inputs, same commit
    assert dropped.reverted == (ids["46849"],) and dropped.how == "1 fork commit"
    ov = bundle.overlay(fork, commit)
    assert "vllm/spec.py" not in ov.changed and "vllm/mla.py" in ov.changed
    built = site.build(
        bundle.write(fork, ov, tmp_path / "w.tar.gz", dropped=dropped), make_base_site(tmp_path), tmp_path / "without"
    )
    assert built["changes"] == ["46514", "48407"] and built["without"] == "46849"
    assert built["held"]["46849"] == {"state": "removed", "commits": [ids["46849"]]}
    assert built["removed"] == {
        "change": "46849",
        "state": "ported",
        "reverted": [ids["46849"]],
        "how": "1 fork commit",
    }
    assert repo.git("rev-parse", ablate.ref_name("46849")) == commit


def test_ablation_refuses_a_change_a_later_commit_builds_on(stack_copy: Path, fork_repo) -> None:
    repo, ids = fork_repo
    st = loader.load(stack_for_fork(stack_copy, repo, ids))
    with pytest.raises(ablate.Dependent) as err:
        ablate.without(st, source.open_fork(st), "48407")
    text = str(err.value)
    assert "cannot drop #48407" in text and "vllm/attention.py" in text and ids["52512"][:12] in text
    assert "#52512" in text


def test_ablation_refuses_a_change_another_is_stacked_on(stack_copy: Path, fork_repo) -> None:
    repo, ids = fork_repo
    path = stack_for_fork(stack_copy, repo, ids)
    set_change(path, "46514", upstream={"stacked_on": [46849]})
    st = loader.load(path)
    with pytest.raises(ablate.Dependent, match="#46514, which test-fork holds, is stacked on it"):
        ablate.without(st, source.open_fork(st), "46849")


def test_compiled_sources_refuse_the_overlay_naming_the_files(stack_copy: Path, fork_repo, tmp_path: Path) -> None:
    repo, ids = fork_repo
    repo.commit("a kernel of our own", {"csrc/kernel.cu": "// fork kernel\n", "CMakeLists.txt": "project(x)\n"})
    st = loader.load(stack_for_fork(stack_copy, repo, ids))
    fork = source.open_fork(st)
    with pytest.raises(bundle.CompiledSources) as err:
        bundle.overlay(fork, fork.commit)
    assert "CMakeLists.txt, csrc/kernel.cu" in str(err.value) and "source-build" in str(err.value)
    # the fix line's first command makes the work tree its source build compiles, from wherever the user stands
    fix = err.value.hint.split("build those from source: ", 1)[1]
    worktree, build = fix.split(", then ", 1)
    subprocess.run(shlex.split(worktree), cwd=tmp_path, check=True, capture_output=True)
    tree = repo.path.resolve().parent / f"build-{fork.commit[:12]}"
    assert (tree / "csrc" / "kernel.cu").is_file() and build.startswith(f"python -m ci source-build TARGET {tree} ")


def test_a_pipeline_for_a_fork_with_compiled_sources_is_refused_at_upload(stack_copy: Path, fork_repo, capsys) -> None:
    """Each build step would refuse its bundle: the pipeline is refused where it is made, not on every agent."""
    repo, ids = fork_repo
    stack = stack_for_fork(stack_copy, repo, ids)
    argv = ["--stack", str(stack), "pipeline", "--one-agent", "--target", "cuda-sm90", "--fork"]
    assert cli.main(argv) == 0 and "build-cuda-sm90" in capsys.readouterr().out
    repo.commit("a kernel of our own", {"csrc/kernel.cu": "// fork kernel\n"})
    assert cli.main(argv) == 2
    said = capsys.readouterr()
    assert "changes compiled sources: csrc/kernel.cu" in said.err and said.out == "", said


def test_a_bundle_for_another_base_release_is_refused(stack_copy: Path, fork_repo, tmp_path: Path) -> None:
    repo, ids = fork_repo
    st = loader.load(stack_for_fork(stack_copy, repo, ids))
    fork = source.open_fork(st)
    made = bundle.write(fork, bundle.overlay(fork, fork.commit), tmp_path / "f.tar.gz")
    base = make_base_site(tmp_path)
    (base / "vllm-0.26.0.dist-info").rename(base / "vllm-0.27.0.dist-info")
    with pytest.raises(
        UsageError, match=r"test-fork main is built on vLLM 0\.26\.0, but --base-site .* holds vLLM 0\.27\.0"
    ):
        site.build(made, base, tmp_path / "site")
    assert not (tmp_path / "site").exists()


def test_the_command_line_builds_a_site(stack_copy: Path, fork_repo, tmp_path: Path, capsys) -> None:
    repo, ids = fork_repo
    path = stack_for_fork(stack_copy, repo, ids)
    base = make_base_site(tmp_path)
    assert cli.main(["fork", "--stack", str(path)]) == 0
    assert re.search(r"#48804 +absent", capsys.readouterr().out)
    code = cli.main(
        [
            "fork",
            "build",
            "--stack",
            str(path),
            "--host",
            "--base-site",
            str(base),
            "--site",
            str(tmp_path / "s"),
            "--without",
            "46514",
        ]
    )
    assert code == 0 and "changes: 46849, 48407" in capsys.readouterr().out
    assert (
        cli.main(["fork", "bundle", "--stack", str(path), "--out", str(tmp_path / "x.tgz"), "--without", "48407"]) == 2
    )
    assert "cannot drop #48407" in capsys.readouterr().err


def test_the_bundle_names_match_the_harness() -> None:
    vb = site.vllm_build()
    assert (vb.BUNDLE_MANIFEST, vb.OVERLAY) == (bundle.MANIFEST, bundle.OVERLAY)


def test_the_flow_takes_the_fork_only_into_images(stack_copy, fork_repo, capsys) -> None:
    """`ci main --fork` lays the fork into the target's image; a run on this host's Python says how instead, and the
    cpu image, which holds no vLLM, has no fork layer to take it."""
    from ci.images import build as images
    from ci.images import fork_layer

    repo, ids = fork_repo
    path = stack_for_fork(stack_copy, repo, ids)
    assert cli.main(["main", "--stack", str(path), "--host", "--fork", "--target", "cpu"]) == 2
    assert "ci fork build --host" in capsys.readouterr().err
    st = loader.load(path)
    git = images.revision.git_info(images.REPO_ROOT)
    base = images.Base(name="local/base", digest="")
    forked = images.plan(st.targets["cuda-sm90"], base, git, fork=True)
    assert forked.build_args["FORK_BUNDLE"] == fork_layer.FORK_BUNDLE
    assert images.plan(st.targets["cuda-sm90"], base, git).build_args["FORK_BUNDLE"] == ""
    with pytest.raises(UsageError, match=r"Dockerfile of cpu has no fork layer"):
        images.plan(st.targets["cpu"], base, git, fork=True)


def test_bundles_of_two_fork_commits_are_refused_before_anything_is_built(
    stack_copy: Path, fork_repo, tmp_path: Path
) -> None:
    """`ci main --compare-without X --bundles DIR` compares X alone: the fork's bundle and the one without X must come
    from one fork commit over one base, and the fork's must hold X; else each differing commit would be timed too."""
    from ci.fork import bundle_pair

    repo, ids = fork_repo
    repo.git("branch", "older", ids["46514"])
    repo.git("branch", "before", ids["48407"])  # #46849 not yet ported
    mixed, same, lacking = tmp_path / "mixed", tmp_path / "same", tmp_path / "lacking"
    st = loader.load(stack_for_fork(stack_copy, repo, ids))
    fork_verbs.make_bundle(st, source.open_fork(st), mixed / "fork.tar.gz", None)
    fork_verbs.make_bundle(st, source.open_fork(st), same / "fork.tar.gz", None)
    fork_verbs.make_bundle(st, source.open_fork(st), same / "without-46849.tar.gz", "46849")
    fork_verbs.make_bundle(st, source.open_fork(st), lacking / "without-46849.tar.gz", "46849")
    st = loader.load(stack_for_fork(stack_copy, repo, ids, ref="older"))
    fork_verbs.make_bundle(st, source.open_fork(st), mixed / "without-46849.tar.gz", "46849")
    st = loader.load(stack_for_fork(stack_copy, repo, ids, ref="before"))
    fork_verbs.make_bundle(st, source.open_fork(st), lacking / "fork.tar.gz", None)

    assert bundle_pair.paired(same, "46849") == {
        "fork": same / "fork.tar.gz",
        "without-46849": same / "without-46849.tar.gz",
    }
    with pytest.raises(UsageError) as err:
        bundle_pair.paired(mixed, "46849")
    assert f"main ({ids['52512'][:12]})" in str(err.value) and f"older ({ids['46514'][:12]})" in str(err.value)
    assert "their fork commits differ, so the comparison would not be #46849 alone" in str(err.value)
    with pytest.raises(UsageError) as err:
        bundle_pair.paired(lacking, "46849")
    assert f"fork.tar.gz does not hold #46849 (absent in test-fork before ({ids['48407'][:12]})" in str(err.value)
