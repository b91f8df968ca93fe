"""Build plans, computed without building: platform, args, labels, refusals. No docker needed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ci import engine as docker_cli
from ci.common import revision
from ci.common.errors import BuildError, NotHere
from ci.engine import target_devices
from ci.images import build as images
from ci.images.build import LABELS, Base
from ci.stack import loader as stack

GIT = revision.GitInfo(revision="a" * 40, epoch=1_700_000_000, source="https://example.invalid/sg", dirty=False)


@pytest.fixture(scope="module")
def st():
    return stack.load()


def _plan(st, target_id, root=images.REPO_ROOT):
    target = st.targets[target_id]
    return images.plan(target, images.resolve_base(target), GIT, root=root)


def test_cuda_sm121a_plan_is_arm64_with_its_arch_and_env(st):
    p = _plan(st, "cuda-sm121a")
    assert p.platform == "linux/arm64"
    assert p.dockerfile == Path("containers/cuda/Dockerfile")
    assert p.build_args["BASE_IMAGE"].startswith("nvidia/cuda:13.0.1-devel-ubuntu24.04@sha256:")
    assert p.build_args["ARCH_LIST"] == "12.1a"
    assert p.build_args["TRITON_TARGETS"] == "cuda:121"
    assert p.build_args["KERNEL_LISTS"] == "vllm-0.26.0-h200.yaml"
    assert p.build_args["CUDA_DISABLE_PTX_JIT"] == "1" and p.build_args["FLASHINFER_DISABLE_JIT"] == "1"
    assert p.build_args["SOURCE_DATE_EPOCH"] == "1700000000"
    assert set(LABELS) <= set(p.labels)
    assert p.labels["org.opencontainers.image.base.digest"] == (
        "sha256:7d2f6a8c2071d911524f95061a0db363e24d27aa51ec831fcccf9e76eb72bc92"
    )
    assert p.labels["org.opencontainers.image.created"] == "2023-11-14T22:13:20Z"
    assert p.labels["stackgate.arch"] == "12.1a" and p.labels["stackgate.target"] == "cuda-sm121a"
    assert p.labels["stackgate.lock"].startswith("sha256:") and len(p.labels["stackgate.lock"]) == 71
    argv = p.argv("docker")
    assert argv[:6] == ["docker", "build", "--network", "none", "--platform", "linux/arm64"]
    assert p.tags == ("stackgate/cuda-sm121a:aaaaaaaaaaaa", "stackgate/cuda-sm121a:latest")
    assert "-t" not in argv  # the tags go to the rewritten image (ci.images.normalize), not to BuildKit's
    assert "--no-cache" not in argv and "--no-cache" in p.argv("docker", no_cache=True)


def test_cuda_sm90_plan_is_amd64_and_differs_only_where_the_targets_do(st):
    a, b = _plan(st, "cuda-sm121a"), _plan(st, "cuda-sm90")
    assert b.platform == "linux/amd64" and b.build_args["ARCH_LIST"] == "9.0a"
    assert b.build_args["TRITON_TARGETS"] == "cuda:90"
    assert a.labels["stackgate.lock"] != b.labels["stackgate.lock"]  # one lock per platform


def test_rocm_plan_needs_its_lock_and_names_it(st, tmp_path):
    with pytest.raises(NotHere, match=r"containers/locks/rocm-gfx1151.txt: no hashed lock") as missing:
        _plan(st, "rocm-gfx1151")
    assert missing.value.exit_code == 6 and missing.value.hint.startswith("python -m ci lock rocm-gfx1151")
    # With a lock in place, the plan carries the ROCm arch and env.
    root = tmp_path / "repo"
    shutil.copytree(images.REPO_ROOT / "containers", root / "containers")
    (root / "containers" / "locks" / "rocm-gfx1151.txt").write_text("pyyaml==6.0.4 --hash=sha256:" + "0" * 64 + "\n")
    p = _plan(st, "rocm-gfx1151", root=root)
    assert p.platform == "linux/amd64" and p.dockerfile == Path("containers/rocm/Dockerfile")
    assert p.build_args["ARCH_LIST"] == "gfx1151" and p.build_args["PYTORCH_ROCM_ARCH"] == "gfx1151"
    assert p.build_args["AITER_JIT_DIR"] == "/opt/stackgate/cache/aiter"
    assert p.labels["org.opencontainers.image.base.name"].startswith("rocm/dev-ubuntu-24.04:7.2.4@sha256:")


def test_tag_only_base_is_refused_unless_allowed(st):
    target = st.targets["cpu"]
    with pytest.raises(BuildError, match=r"--base: base image 'debian:bookworm' is a tag without a digest"):
        images.resolve_base(target, base="debian:bookworm")
    base = images.resolve_base(target, base="debian:bookworm", allow_unpinned=True)
    assert base == Base(name="debian:bookworm", digest="")
    assert images.plan(target, base, GIT).labels["org.opencontainers.image.base.digest"] == ""


def test_env_key_the_dockerfile_does_not_forward_is_refused(st, tmp_path):
    root = tmp_path / "repo"
    shutil.copytree(images.REPO_ROOT / "containers", root / "containers")
    df = root / "containers" / "cuda" / "Dockerfile"
    df.write_text(df.read_text().replace("ARG FLASHINFER_NO_DOWNLOAD", "ARG SOMETHING_ELSE"))
    with pytest.raises(BuildError, match=r"env.FLASHINFER_NO_DOWNLOAD: containers/cuda/Dockerfile does not declare"):
        _plan(st, "cuda-sm90", root=root)


def test_devices_come_from_the_target(st):
    nvidia = target_devices(st.targets["cuda-sm90"])
    assert nvidia["device_requests"][0]["Count"] == -1
    amd = target_devices(st.targets["rocm-gfx1151"])
    assert amd["devices"] == ["/dev/kfd:/dev/kfd:rwm", "/dev/dri:/dev/dri:rwm"]
    assert amd["group_add"] == ["video", "render"]
    assert target_devices(st.targets["cpu"]) == {}


def test_every_target_names_existing_kernel_lists(st):
    for target in st.targets.values():
        assert target.kernel_lists, target.id
        for name in target.kernel_lists:
            assert (images.REPO_ROOT / "containers" / "kernels" / name).is_file()


def test_no_engine_is_named_as_such_not_blamed_on_the_client(monkeypatch):
    from ci.common.errors import BuildError

    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    monkeypatch.delenv(docker_cli.ENV_CLIENT, raising=False)
    if not any(shutil.which(c) for c in docker_cli._CANDIDATES):
        pytest.skip("no docker client installed")
    # asked again for this engine address, whatever an earlier caller in this process found for another
    with pytest.raises(BuildError, match="no docker engine answers"):
        docker_cli.find()


def test_sass_that_runs_on_the_target_is_accepted_by_cudas_compatibility_rules() -> None:
    from ci.images.verify import _sass_names

    gb10 = _sass_names(("12.1a",))
    assert {"sm_121a", "sm_121", "sm_120", "sm_120f", "sm_121f"} <= gb10  # 12.0 SASS runs on 12.1
    assert not {"sm_120a", "sm_100", "sm_90", "sm_122"} & gb10  # arch-specific 12.0a, other majors, newer minors
    assert _sass_names(("9.0a",)) == {"sm_90a", "sm_90", "sm_90f"}
