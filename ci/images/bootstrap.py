"""An offline base image from Debian packages, for builders that cannot pull the pinned base.

mmdebstrap writes the root filesystem as a tar, and a `FROM scratch` + `ADD rootfs.tar /` build with
`--platform` makes it an image of the target's platform (`docker import` labels every image with the
host's platform, so an arm64 base would be taken for amd64). Tagged by its recipe so it is made once
and reused; a foreign architecture is bootstrapped under QEMU user emulation (binfmt). BuildKit
in the engine cannot resolve `name@sha256:<id>` for an imported image (it has no repository digest and
BuildKit then asks a registry), so the base is referred to by a tag that embeds its full image id, and
`ci.images` checks that the tag still resolves to that id before every build.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

from ci.engine import DockerCli, image_id
from ci.errors import BuildError
from ci.stack.model import Target

REPO = "localhost/stackgate-base-{suite}"
_HOST_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


def recipe_tag(target: Target) -> str:
    assert target.bootstrap is not None
    b = target.bootstrap
    recipe = {
        "suite": b.suite,
        "variant": b.variant,
        "include": sorted(b.include),
        "mirror": b.mirror,
        "platform": target.platform,
    }
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]
    return f"{REPO.format(suite=b.suite)}:recipe-{digest}"


def ensure(target: Target, cli: DockerCli, epoch: int) -> tuple[str, str]:
    """(tag embedding the image id, image id) of the bootstrapped base; built only when absent."""
    if target.bootstrap is None:
        raise BuildError(f"target {target.id} has no bootstrap recipe in stack/targets.yaml")
    tag = recipe_tag(target)
    found = image_id(cli, tag) or _make(target, cli, tag, epoch)
    pinned = f"{REPO.format(suite=target.bootstrap.suite)}:id-{found.removeprefix('sha256:')}"
    subprocess.run([cli.path, "tag", found, pinned], check=True, capture_output=True)
    return pinned, found


def _make(target: Target, cli: DockerCli, tag: str, epoch: int) -> str:
    assert target.bootstrap is not None
    b = target.bootstrap
    if not shutil.which("mmdebstrap"):
        raise BuildError(
            f"the base of {target.id} must be bootstrapped and mmdebstrap is not installed",
            hint="apt-get install mmdebstrap   (or docker load the pinned base image)",
        )
    arch = target.platform.split("/")[1]
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(epoch)}  # mmdebstrap then writes reproducible timestamps
    with tempfile.TemporaryDirectory(prefix="stackgate-base-") as tmp:
        context = Path(tmp)
        argv = ["mmdebstrap", "--quiet", f"--variant={b.variant}", f"--architectures={arch}",
                f"--include={','.join(b.include)}", b.suite, str(context / "rootfs.tar"), b.mirror]  # fmt: skip
        strap = subprocess.run(argv, capture_output=True, env=env)
        if strap.returncode != 0:
            err = strap.stderr.decode(errors="replace")
            raise BuildError(
                f"bootstrapping {tag} failed: {' '.join(argv)}\n{err[-1500:]}",
                hint=f"check that {b.mirror} is reachable and mmdebstrap runs as root"
                + ("" if arch == _HOST_ARCH else f"; an {arch} root needs QEMU (apt-get install qemu-user-static)"),
            )
        (context / "Dockerfile").write_text('FROM scratch\nADD rootfs.tar /\nCMD ["bash"]\n')
        done = subprocess.run(
            [cli.path, "build", "--network", "none", "--platform", target.platform, "-t", tag, str(context)],
            capture_output=True, text=True, env=cli.env(),
        )  # fmt: skip
    if done.returncode != 0:
        raise BuildError(f"making {tag} from the bootstrapped root failed:\n{done.stderr[-1500:]}")
    made = image_id(cli, tag)
    if made is None:
        raise BuildError(f"docker build reported success but {tag} is not there")
    return made
