"""An image is the same wherever its commit was cloned from, and `ci main` runs the image it built, by id: another
checkout on the same engine can retag `:latest` between the build and the run."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ci import flow
from ci.common import revision
from ci.images import build, verify
from ci.run import execute
from ci.stack import loader


def _clone(src: Path, dest: Path, how: str) -> Path:
    subprocess.run(["git", "clone", "-q", how, str(dest)], check=True, capture_output=True)
    return dest


def test_the_image_labels_do_not_depend_on_how_the_checkout_was_cloned(
    committed_repo: Path, tmp_path: Path, monkeypatch
) -> None:
    """The case seen: the source label was the origin's path in one clone and its file:// URL in another."""
    monkeypatch.delenv("STACKGATE_SOURCE_URL", raising=False)
    by_path = _clone(committed_repo, tmp_path / "a", str(committed_repo))
    by_url = _clone(committed_repo, tmp_path / "b", f"file://{committed_repo}")
    st = loader.load()
    target = st.targets["cpu"]
    base = build.resolve_base(target)
    labels = [build.plan(target, base, revision.git_info(root), root=root).labels for root in (committed_repo, by_path,
                                                                                                by_url)]  # fmt: skip
    assert labels[0] == labels[1] == labels[2]
    assert "org.opencontainers.image.source" not in labels[0]


def test_a_source_url_given_is_labelled_without_its_user_or_password(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("STACKGATE_SOURCE_URL", "https://ci:s3cret/token@git.example/fork.git")
    assert revision.source_url() == "https://git.example/fork.git"


def test_ci_main_verifies_and_runs_the_image_it_built_by_id_not_by_tag(monkeypatch, tmp_path: Path) -> None:
    """The case seen: `ci main` built stackgate/<target>:<rev> and :latest, then verified and ran :latest, which a
    checkout beside it had retagged (or left untagged and pruned) in between."""
    built_id = "sha256:" + "1" * 64
    seen: dict[str, object] = {}
    tags = ("stackgate/cpu:abc", "stackgate/cpu:latest")
    monkeypatch.setattr(build, "build", lambda target, fork_bundle=None: build.Built(image_id=built_id, tags=tags,
                                                                                      seconds=0.0))  # fmt: skip
    monkeypatch.setattr(build, "image_for", lambda target, image_id: image_id, raising=False)  # no bake of it here
    monkeypatch.setattr(verify, "main", lambda st, target, ref, root: seen.setdefault("verified", ref) and 0)

    def run_rows(st, spec, *, host, image=None):
        seen["ran"] = image
        return 0

    monkeypatch.setattr(execute, "run_rows", run_rows)
    st = loader.load()
    assert flow.run_target(st, st.targets["cpu"], ["selftest"], tmp_path, use_host=False, timeout_s=60) == 0
    assert seen == {"verified": built_id, "ran": built_id}


@pytest.mark.docker
def test_the_image_to_run_after_a_build_is_its_bake_only_where_baked_from_that_build(docker_client, tmp_path) -> None:
    """`build.image_for`: the build's own id, unless `:baked` was baked from exactly that build."""
    st = loader.load()
    target = st.targets["cpu"]
    other = "sha256:" + "2" * 64
    assert build.image_for(target, other) == other  # whatever :baked this engine holds, it was not made from this
