"""The source-build route: a fork's compiled extensions built from source for a target's arch list, with no GPU.

When a change touches compiled sources (csrc/, CMakeLists.txt, setup.py extensions), a Python overlay over the
base wheel is not enough. `containers/source/Dockerfile` compiles the source tree with the CUDA compiler from
wheels (containers/source/cuda13.txt: downloaded here into a content-addressed cache, installed `--no-index`),
for the target's TORCH_CUDA_ARCH_LIST mapped to nvcc `-gencode` flags, under `docker build --network none`, and
fails unless every shared object and cubin with device code holds SASS for each arch (`cuobjdump --list-elf`).
"""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ci import engine
from ci.common import options
from ci.common.errors import BuildError, NotHere, UsageError
from ci.images import build as images
from ci.images import normalize, wheels
from ci.stack import loader as stack
from ci.stack.model import Target

HERE = options.REPO / "containers" / "source"
LOCK = HERE / "cuda13.txt"
LISTING = "/opt/stackgate/source-build/cuobjdump.txt"  # in the image: every checked file's ELF and PTX
BUILD_COMMAND = "./build.sh"  # run in the source tree; vLLM's would be a `pip wheel --no-build-isolation .`
BASE_PACKAGES = ("python3", "python3-venv", "g++", "python3-dev")  # g++: nvcc's host compiler
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_DEBIAN_ARCH = {"linux/amd64": "amd64", "linux/arm64": "arm64"}
_ARCH = re.compile(r"(\d+)\.(\d)([af]?)(\+PTX)?")  # TORCH_CUDA_ARCH_LIST's spelling: 12.1a, 9.0a, 12.0f, 8.0+PTX
_CHECK = re.compile(r"^#\d+ [\d.]+ source-build check: (.+)$", re.M)  # a step's output, not its echoed command
_UNSAFE = re.compile(r"[^\w.-]")  # a tag as a file name
# stale binaries in a checkout would be checked as if this build had made them
_NOT_COPIED = shutil.ignore_patterns(".git", "__pycache__", "*.o", "*.so", "*.so.*", "*.cubin")


def gencode(arch: str, *, where: str = "TORCH_CUDA_ARCH_LIST") -> tuple[list[str], str]:
    """One TORCH_CUDA_ARCH_LIST entry as its nvcc flags and the ELF name cuobjdump must list: '12.1a' ->
    (['-gencode=arch=compute_121a,code=sm_121a'], 'sm_121a'). '+PTX' adds the PTX too (which no image JITs)."""
    m = _ARCH.fullmatch(arch.strip())
    if not m:
        raise BuildError(
            f"{where}: {arch!r} is not a CUDA arch",
            hint="write it as TORCH_CUDA_ARCH_LIST does: 12.1a, 9.0a, 12.0f, 8.0+PTX",
        )
    major, minor, suffix, ptx = m.groups()
    cc = f"{major}{minor}{suffix}"
    flags = [f"-gencode=arch=compute_{cc},code=sm_{cc}"]
    return [*flags, f"-gencode=arch=compute_{cc},code=compute_{cc}"] if ptx else flags, f"sm_{cc}"


def arch_flags(target: Target) -> tuple[list[str], list[str]]:
    """The target's nvcc -gencode flags and the SASS (ELF names) every built file must hold."""
    where = f"stack/targets.yaml [targets: {target.id}].arch_list"
    if target.family != "cuda" or not target.arch_list:
        raise UsageError(
            f"{where}: target {target.id} ({target.family}) has no CUDA arch list; the source-build "
            "route compiles CUDA only",
            hint="pick a cuda target: cuda-sm121a, cuda-sm90",
        )
    flags: list[str] = []
    sass: list[str] = []
    for arch in target.arch_list:
        more, name = gencode(arch, where=where)
        flags += more
        sass.append(name)
    return flags, sass


def fetch_wheels(target: Target, cache: Path | None = None) -> list[Path]:
    """The compiler wheels for the target's platform, from `cache` (~/.cache/stackgate/cuda-wheels by default)."""
    return wheels.fetch(target, LOCK, cache or wheels.cache_root().parent / "cuda-wheels")


def local_base(cli: engine.DockerCli, platform: str) -> str:
    """A Debian bookworm base with BASE_PACKAGES for `platform`, made once with mmdebstrap (no registry here).
    Its packages are Debian's of the day it is made, not a lock's: the locked target bases have no g++."""
    arch = _DEBIAN_ARCH[platform]
    tag = f"localhost/stackgate-source-base:bookworm-{arch}"
    if engine.image_id(cli, tag):
        return tag
    if not shutil.which("mmdebstrap"):
        raise NotHere(
            f"no base for the source build of {platform} and no mmdebstrap to make one",
            hint="apt-get install mmdebstrap, or pass a base with python3-venv and g++",
        )
    with tempfile.TemporaryDirectory(prefix="stackgate-source-base-") as tmp:
        rootfs = Path(tmp) / "rootfs.tar"
        argv = [
            "mmdebstrap",
            "--quiet",
            "--variant=apt",
            f"--architectures={arch}",
            f"--include={','.join(BASE_PACKAGES)}",
            "bookworm",
            str(rootfs),
        ]
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            raise BuildError(
                f"making the source-build base {tag} failed:\n{done.stderr.strip()[-2000:]}",
                hint=f"run it by hand to see why: {' '.join(argv)}",
            )
        # `docker import --platform` is ignored by an engine without experimental features: write the config
        config = {
            "architecture": arch,
            **({"variant": "v8"} if arch == "arm64" else {}),
            "os": "linux",
            "config": {"Env": [f"PATH={PATH}"], "Cmd": ["bash"]},
            "history": [{"created_by": " ".join(argv[:-1])}],
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{wheels.file_digest(rootfs)}"]},
        }
        normalize.load(cli, json.dumps(config, sort_keys=True).encode(), [rootfs], (tag,))
    return tag


@dataclass(frozen=True, kw_only=True)
class SourceBuilt:
    image_id: str
    tag: str
    listing: str  # the image's LISTING: nvcc's version, the requested SASS, each file's ELF and PTX entries
    seconds: float


def stage(ctx: Path, source: Path, files: list[Path]) -> None:
    """The build context: this folder, the wheels (hard links where possible) and the source tree as src/."""
    shutil.copytree(HERE, ctx / "containers" / "source")
    wheels.stage(files, ctx / "cuda-wheels")
    shutil.copytree(source, ctx / "src", symlinks=True, ignore=_NOT_COPIED)


def build(
    target: Target,
    source: Path,
    *,
    base: str | None = None,
    tag: str | None = None,
    build_command: str = BUILD_COMMAND,
    cache: Path | None = None,
    no_cache: bool = False,
) -> SourceBuilt:
    """Build `source` for the target's arch list in containers/source/Dockerfile (`no_cache`: every step again);
    raise BuildError naming every file that lacks SASS for an arch."""
    t0 = time.monotonic()
    flags, sass = arch_flags(target)
    if not source.is_dir():
        raise UsageError(f"{source}: no such source tree", hint="pass the fork's checkout (or tests/data/cuda-ext)")
    images.check_buildable(target)  # a foreign platform needs QEMU user emulation
    cli = engine.find()
    base = base or local_base(cli, target.platform)
    files = fetch_wheels(target, cache)
    tag = tag or f"stackgate/source-build-{target.id}:latest"
    log = options.REPO / ".whl" / f"source-build-{_UNSAFE.sub('_', tag)}.log"
    log.parent.mkdir(exist_ok=True)
    scratch = (cache or wheels.cache_root().parent / "cuda-wheels") / "tmp"  # beside the cache: hard links work
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch, prefix="context-") as tmp, log.open("w") as out:
        ctx = Path(tmp)
        stage(ctx, source, files)
        args = {
            "BASE_IMAGE": base,
            "ARCH_LIST": ";".join(target.arch_list),
            "NVCC_GENCODE": " ".join(flags),
            "SASS": " ".join(sass),
            "BUILD_COMMAND": build_command,
        }
        labels = {
            "stackgate.target": target.id,
            "stackgate.arch": ",".join(target.arch_list),
            "org.opencontainers.image.base.name": base,
        }
        argv = [
            cli.path,
            "build",
            "--network",
            "none",
            "--platform",
            target.platform,
            "--progress",
            "plain",
            *(["--no-cache"] if no_cache else []),
            "-f",
            "containers/source/Dockerfile",
            "-t",
            tag,
            "--iidfile",
            str(ctx / "iid"),
            *(f"--build-arg={k}={v}" for k, v in args.items()),
            *(f"--label={k}={v}" for k, v in labels.items()),
            ".",
        ]
        done = subprocess.run(argv, cwd=ctx, env=cli.env(), stdout=out, stderr=subprocess.STDOUT)
        image_id = (ctx / "iid").read_text().strip() if done.returncode == 0 else ""
    if done.returncode != 0:
        text = log.read_text()
        lacking = list(dict.fromkeys(m.strip() for m in _CHECK.findall(text)))
        if lacking:
            raise BuildError(
                f"source build of {source} for {target.id}: " + "; ".join(lacking),
                hint=f"build every extension with the arch list (TORCH_CUDA_ARCH_LIST="
                f"{';'.join(target.arch_list)}, or $NVCC_GENCODE: {' '.join(flags)}); "
                f"log: {log}",
            )
        raise BuildError(
            f"source build of {source} for {target.id} failed ({cli.path}, {cli.how}):\n{text[-3000:]}",
            hint=f"full log: {log}",
        )
    return SourceBuilt(
        image_id=image_id, tag=tag, listing=read_listing(cli, tag, target.platform), seconds=time.monotonic() - t0
    )


def read_listing(cli: engine.DockerCli, image: str, platform: str) -> str:
    """The image's LISTING, copied out of a created (never started) container."""
    made = subprocess.run(
        [cli.path, "create", "--platform", platform, image, "/bin/true"], capture_output=True, text=True, check=True
    )
    box = made.stdout.strip()
    try:
        tar = subprocess.run([cli.path, "cp", f"{box}:{LISTING}", "-"], capture_output=True, check=True).stdout
    finally:
        subprocess.run([cli.path, "rm", box], capture_output=True)
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        member = archive.extractfile(Path(LISTING).name)
        assert member is not None
        return member.read().decode()


def main(
    target_id: str,
    source: Path,
    *,
    base: str | None = None,
    tag: str | None = None,
    build_command: str = BUILD_COMMAND,
    cache: Path | None = None,
    stack_dir: Path | None = None,
    no_cache: bool = False,
) -> int:
    """`ci source-build <target> <source>`: build, print the cuobjdump listing and the image; errors are raised."""
    targets = stack.load(stack_dir).targets
    if target_id not in targets:
        raise UsageError(f"unknown target {target_id!r}", hint=f"one of: {', '.join(sorted(targets))}")
    built = build(
        targets[target_id], source, base=base, tag=tag, build_command=build_command, cache=cache, no_cache=no_cache
    )
    print(built.listing, end="")
    print(f"image {built.tag}\nid    {built.image_id}\n({built.seconds:.1f} s; the listing is {LISTING} in it)")
    return 0
