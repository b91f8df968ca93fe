"""The cuda Dockerfile, built for real in CI with a stand-in lock: the same stages, base recipe, bake and
verify as cuda-sm90 (whose real build, vLLM and torch included, is `nox -s build -- cuda-sm90`: gigabytes
that CI has no time for). Verify must name a kernel the bake left out."""

from __future__ import annotations

import shutil
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from ci.common.errors import BuildError
from ci.images import build as images
from ci.images import rebuild, verify
from ci.stack import loader

pytestmark = pytest.mark.docker
TAG = f"stackgate/test-cuda-standin:{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def standin(committed_repo: Path, docker_client):
    st = loader.load()
    target = replace(st.targets["cuda-sm90"], id="cuda-standin", kernel_lists=("selftest.yaml",))
    locks = committed_repo / "containers" / "locks"
    shutil.copy(locks / "cpu.txt", locks / "cuda-standin.txt")  # pytest, junitparser, pyyaml, triton: py3.11
    shutil.copy(locks / "cuda-sm90.debs.txt", locks / "cuda-standin.debs.txt")  # cuda-sm90's base, package for package
    made = [TAG]
    built = images.build(target, tag=TAG, root=committed_repo)
    yield st, target, built
    for ref in made:
        docker_client.images.remove(ref, force=True)


def test_the_cuda_dockerfile_builds_bakes_for_sm90_and_verifies(standin, committed_repo, capsys) -> None:
    st, target, _ = standin
    assert verify.main(st, target, TAG, root=committed_repo) == 0
    out = capsys.readouterr().out
    assert "add_kernel [cuda:90]" in out and "sm_90a" in out
    assert "the lock installs no CUDA library" in out
    labels = __import__("docker").from_env().images.get(TAG).labels
    assert labels["stackgate.target"] == "cuda-standin" and labels["stackgate.arch"] == "9.0a"


def test_the_cuda_dockerfile_rebuilds_from_nothing_to_the_same_image(standin, committed_repo, capsys) -> None:
    """`ci verify --rebuild` on the stand-in: cuda-sm90's base bootstrapped again from its Debian lock, every
    step run again, the same image id (the venv, the sentinel, the bake for sm_90, suites/)."""
    _, target, built = standin
    assert rebuild.main(target, TAG, root=committed_repo) == 0
    assert f"the same image {built.image_id}" in capsys.readouterr().out


def test_verify_names_a_kernel_the_bake_left_out(standin, committed_repo, docker_client, tmp_path) -> None:
    st, target, _ = standin
    short = tmp_path / "repo"
    shutil.copytree(committed_repo, short, symlinks=True)
    kernels = short / "containers" / "kernels" / "selftest.yaml"
    text = kernels.read_text()
    start = text.index("  - name: scale_int_kernel")
    end = text.find("\n  - name:", start + 1)
    kernels.write_text(text[:start] + (text[end + 1 :] if end > 0 else ""))
    tag = f"{TAG}-short"
    images.build(target, tag=tag, root=short)
    try:
        with pytest.raises(BuildError, match=r"kernel baked: scale_int_kernel \[cuda:90\]"):
            verify.main(st, target, tag, root=committed_repo)  # the full list is what the image promised
    finally:
        docker_client.images.remove(tag, force=True)
