"""The source-build route (ci/images/source_build.py, containers/source/Dockerfile): TORCH_CUDA_ARCH_LIST entries as
nvcc -gencode flags, and tests/data/cuda-ext built for real for cuda-sm121a (linux/arm64: under QEMU on an x86_64
builder) with no GPU and --network none; a build whose code lacks the target's arch fails naming the file."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from support.paths import DATA

from ci.common.errors import BuildError, UsageError
from ci.images import build as images
from ci.images import source_build as sb
from ci.stack import loader

EXT = DATA / "cuda-ext"
TAG = f"stackgate-test-srcbuild-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize(
    ("arch", "flags", "sass"),
    [
        ("12.1a", ["-gencode=arch=compute_121a,code=sm_121a"], "sm_121a"),
        ("9.0a", ["-gencode=arch=compute_90a,code=sm_90a"], "sm_90a"),
        ("12.0f", ["-gencode=arch=compute_120f,code=sm_120f"], "sm_120f"),
        ("10.0", ["-gencode=arch=compute_100,code=sm_100"], "sm_100"),
        (" 8.0+PTX", ["-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_80,code=compute_80"], "sm_80"),
    ],
)
def test_an_arch_list_entry_gives_its_gencode_flags(arch: str, flags: list[str], sass: str) -> None:
    assert sb.gencode(arch) == (flags, sass)


@pytest.mark.parametrize("arch", ["gfx1151", "12", "12.1b", "sm_121a", "121a", "", "12.10", "9.0a+ptx"])
def test_an_entry_that_is_no_cuda_arch_is_refused_naming_where(arch: str) -> None:
    with pytest.raises(BuildError, match=r"^stack/targets.yaml \[targets: x\]\.arch_list: .* is not a CUDA arch") as e:
        sb.gencode(arch, where="stack/targets.yaml [targets: x].arch_list")
    assert "fix: write it as TORCH_CUDA_ARCH_LIST does: 12.1a" in str(e.value)


def test_the_targets_arch_lists_map_to_their_sass() -> None:
    targets = loader.load().targets
    assert sb.arch_flags(targets["cuda-sm121a"]) == (["-gencode=arch=compute_121a,code=sm_121a"], ["sm_121a"])
    assert sb.arch_flags(targets["cuda-sm90"]) == (["-gencode=arch=compute_90a,code=sm_90a"], ["sm_90a"])
    two = replace(targets["cuda-sm90"], arch_list=("9.0a", "12.1a"))
    assert sb.arch_flags(two)[1] == ["sm_90a", "sm_121a"]


@pytest.mark.parametrize("target", ["rocm-gfx1151", "cpu"])
def test_a_target_without_a_cuda_arch_list_is_refused(target: str) -> None:
    with pytest.raises(UsageError, match=rf"\[targets: {target}\]\.arch_list: .*compiles CUDA only"):
        sb.arch_flags(loader.load().targets[target])


def test_a_bad_arch_in_the_stack_names_the_target(stack_copy: Path, edit) -> None:
    edit(stack_copy / "targets.yaml", 'arch_list: ["9.0a"]', 'arch_list: ["9.0a", "hopper"]')
    with pytest.raises(BuildError, match=r"\[targets: cuda-sm90\]\.arch_list: 'hopper' is not a CUDA arch"):
        sb.main("cuda-sm90", EXT, stack_dir=stack_copy)


def test_an_unknown_target_and_a_missing_source_are_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unknown target 'gb10'"):
        sb.main("gb10", EXT)
    with pytest.raises(UsageError, match="no such source tree"):
        sb.main("cuda-sm121a", tmp_path / "absent")


def test_the_compiler_lock_pins_every_wheel_for_both_platforms() -> None:
    text = sb.LOCK.read_text()
    for name in ("nvidia-cuda-nvcc", "nvidia-nvvm", "nvidia-cuda-runtime", "nvidia-cuda-crt", "nvidia-cuda-cuobjdump"):
        block = text.split(f"\n{name}==", 1)[1].split("\nnvidia-", 1)[0]
        assert block.count("--hash=sha256:") == 2, name  # aarch64 and x86_64


# stand-ins for the check script: a "binary" names its ELF and PTX entries in its text ("ELF sm_90a", "PTX sm_80")
FAKE_CUOBJDUMP = """#!/bin/sh
case $1 in --version) echo "stand-in, release 0.0"; exit 0;; --list-elf) kind=ELF;; *) kind=PTX;; esac
grep -q "^$kind " "$2" || { echo "cuobjdump info    : File '$2' does not contain device code" >&2; exit 255; }
grep "^$kind " "$2" | while read -r _ sm; do echo "$kind file    1: $(basename "$2" .so).1.$sm.cubin"; done
"""


def check(tmp_path: Path, files: dict[str, str], *sms: str) -> tuple[int, str, str]:
    """containers/source/check-sass.sh over `files` (relative name: content), with stand-in nvcc and cuobjdump."""
    bin_dir, top = tmp_path / "bin", tmp_path / "src"
    for name, text in {"cuobjdump": FAKE_CUOBJDUMP, "nvcc": "#!/bin/sh\necho stand-in, release 0.0\n"}.items():
        (bin_dir / name).parent.mkdir(exist_ok=True)
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    for name, text in files.items():
        (top / name).parent.mkdir(parents=True, exist_ok=True)
        (top / name).write_text(text)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    done = subprocess.run(["sh", str(sb.HERE / "check-sass.sh"), str(top), str(tmp_path / "listing.txt"), *sms],
                          capture_output=True, text=True, env=env)  # fmt: skip
    return done.returncode, done.stdout, (tmp_path / "listing.txt").read_text()


def test_the_check_passes_sass_for_every_arch_and_skips_host_code(tmp_path: Path) -> None:
    files = {"a/lib x.so": "ELF sm_121a\nELF sm_90a\nPTX sm_90a\n", "k.cubin": "ELF sm_121a\nELF sm_90a\n",
             "host.so.1": "no device code", "README": "ELF sm_80"}  # fmt: skip
    code, out, listing = check(tmp_path, files, "sm_121a", "sm_90a")
    assert (code, out) == (0, "")
    head = "nvcc: stand-in, release 0.0\ncuobjdump: stand-in, release 0.0\nrequested SASS: sm_121a sm_90a\n"
    assert listing.startswith(head)
    assert "== a/lib x.so\nELF file    1: lib x.1.sm_121a.cubin" in listing
    assert "== host.so.1: no device code" in listing and "README" not in listing


def test_the_check_names_each_file_that_lacks_an_arch(tmp_path: Path) -> None:
    files = {"fa2.so": "ELF sm_80\nPTX sm_80\n", "ptx_only.so": "PTX sm_121a\n", "good.so": "ELF sm_121a\n"}
    code, out, _ = check(tmp_path, files, "sm_121a")
    assert code == 1
    assert out.splitlines() == [
        "source-build check: fa2.so: no SASS for sm_121a (ELF: sm_80; PTX entries: 1)",
        "source-build check: ptx_only.so: no SASS for sm_121a (ELF: none; PTX entries: 1)",
    ]


def test_the_check_fails_where_the_build_made_no_device_code(tmp_path: Path) -> None:
    code, out, _ = check(tmp_path, {"host.so": "no device code"}, "sm_121a")
    assert code == 1 and "source-build check: no shared object or cubin with device code under" in out


@pytest.fixture(scope="module")
def sm121a(docker_client):
    """cuda-sm121a's arch list, built for this host's platform: the device code (sm_121a SASS) is the same whatever
    the host code's ISA, and no emulator is needed; the arm64 build itself is recorded in evidence/source-build/."""
    return replace(loader.load().targets["cuda-sm121a"], platform=images.host_platform())


@pytest.mark.docker
def test_the_extension_builds_for_sm121a_without_a_gpu(sm121a, docker_client) -> None:
    tag = f"{TAG}:sm121a"
    try:
        built = sb.build(sm121a, EXT, tag=tag)
        assert "requested SASS: sm_121a" in built.listing
        assert "== libsaxpy.so" in built.listing
        assert ".sm_121a.cubin" in built.listing  # cuobjdump --list-elf: the ELF of sm_121a
        assert "nvcc: Cuda compilation tools, release 13.5" in built.listing
        image = docker_client.images.get(tag)
        assert image.id == built.image_id and f"linux/{image.attrs['Architecture']}" == images.host_platform()
        assert image.labels["stackgate.target"] == "cuda-sm121a" and image.labels["stackgate.arch"] == "12.1a"
    finally:
        with contextlib.suppress(Exception):
            docker_client.images.remove(tag, force=True)


@pytest.mark.docker
def test_code_built_for_another_arch_fails_naming_the_file(sm121a, docker_client, tmp_path) -> None:
    """A sub-build that ignores the arch list (as FlashAttention 2's 8.0+PTX did, vllm#47397) is caught."""
    src = tmp_path / "cuda-ext"
    shutil.copytree(EXT, src)
    script = src / "build.sh"
    script.write_text(script.read_text().replace("$NVCC_GENCODE", "-gencode=arch=compute_90a,code=sm_90a"))
    tag = f"{TAG}:wrong-arch"
    try:
        with pytest.raises(BuildError, match=r"libsaxpy\.so: no SASS for sm_121a \(ELF: sm_90a") as e:
            sb.build(sm121a, src, tag=tag)
        assert "TORCH_CUDA_ARCH_LIST=12.1a" in str(e.value)
    finally:
        with contextlib.suppress(Exception):
            docker_client.images.remove(tag, force=True)
