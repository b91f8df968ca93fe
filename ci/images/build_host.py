"""Whether this host can build a target's image: its hashed lock, emulation for a foreign platform, the pinned base
in the engine. Each refusal is NotHere, naming the command that makes it possible."""

from __future__ import annotations

import platform
import shutil
import subprocess
from pathlib import Path

from ci import engine
from ci.common import options
from ci.common.errors import NotHere
from ci.stack.model import Target

REPO_ROOT = options.REPO


def lock_path(target: Target, root: Path = REPO_ROOT) -> Path:
    return root / "containers" / "locks" / f"{target.id}.txt"


def _present(cli: engine.DockerCli, ref: str) -> bool:
    return engine.image_id(cli, ref) is not None


_ARCH = {"x86_64": "linux/amd64", "amd64": "linux/amd64", "aarch64": "linux/arm64", "arm64": "linux/arm64"}
_QEMU = {"linux/arm64": "qemu-aarch64", "linux/amd64": "qemu-x86_64"}
BINFMT = Path("/proc/sys/fs/binfmt_misc")


def host_platform() -> str:
    return _ARCH.get(platform.machine(), f"linux/{platform.machine()}")


def check_buildable(target: Target, *, root: Path = REPO_ROOT) -> None:
    """Raise NotHere, naming the command that makes it possible, where this host cannot build the image."""
    lock = lock_path(target, root)
    if not lock.is_file():
        raise NotHere(
            f"{lock.relative_to(root)}: no hashed lock for target {target.id}, so its image cannot be built",
            hint=f"python -m ci lock {target.id}   (on a host that reaches the target's package index)",
        )
    here = host_platform()
    if target.platform != here and not (BINFMT / _QEMU.get(target.platform, "?")).exists():
        raise NotHere(
            f"target {target.id} is {target.platform}; this host is {here} with no {target.platform} emulation",
            hint=f"apt-get install qemu-user-static binfmt-support{' arch-test' * (target.bootstrap is not None)}   "
            f"(registers the emulator{', and mmdebstrap checks it with arch-test' * (target.bootstrap is not None)}), "
            f"or build on a {target.platform} host",
        )
    if target.platform != here and target.bootstrap is not None and shutil.which("arch-test") is None:
        # mmdebstrap checks a foreign architecture with arch-test before it bootstraps the base ("E: install
        # arch-test for foreign architecture support"): say so here, before any work, as it says it
        raise NotHere(
            f"target {target.id}'s base is bootstrapped for {target.platform} on this {here} host, and mmdebstrap "
            "needs arch-test for a foreign architecture",
            hint="apt-get install arch-test   (with qemu-user-static binfmt-support), "
            f"or build on a {target.platform} host",
        )


def ensure_base(cli: engine.DockerCli, name: str) -> None:
    """The pinned base must be in the engine before a build; pull it once, or say how to bring it."""
    if _present(cli, name):
        return
    done = subprocess.run([cli.path, "pull", name], capture_output=True, text=True)
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise NotHere(
            f"base image {name} is not in the engine and cannot be pulled here ({why})",
            hint=f"docker pull {name}   (on a host that reaches the registry; then docker save | docker load)",
        )
