"""An offline base image from Debian packages, for builders that cannot pull the pinned base.

`mmdebstrap <suite> - | docker import -`, tagged by its recipe so it is made once and reused. BuildKit
in the engine cannot resolve `name@sha256:<id>` for an imported image (it has no repository digest and
BuildKit then asks a registry), so the base is referred to by a tag that embeds its full image id, and
`ci.images` checks that the tag still resolves to that id before every build.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess

from ci.engine import DockerCli, image_id
from ci.errors import BuildError
from ci.stack.model import Target

REPO = "localhost/stackgate-base-{suite}"


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
    argv = [
        "mmdebstrap",
        "--quiet",
        f"--variant={b.variant}",
        f"--architectures={arch}",
        f"--include={','.join(b.include)}",
        b.suite,
        "-",
        b.mirror,
    ]
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(epoch)}  # mmdebstrap then writes reproducible timestamps
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as strap:
        imp = subprocess.run([cli.path, "import", "-", tag], stdin=strap.stdout, capture_output=True, text=True)
        err = strap.stderr.read().decode(errors="replace") if strap.stderr else ""
    if strap.returncode != 0 or imp.returncode != 0:
        raise BuildError(
            f"bootstrapping {tag} failed: {' '.join(argv)}\n{err[-1500:]}{imp.stderr[-500:]}",
            hint=f"check that {b.mirror} is reachable and mmdebstrap runs as root",
        )
    made = image_id(cli, tag)
    if made is None:
        raise BuildError(f"docker import reported success but {tag} is not there")
    return made
