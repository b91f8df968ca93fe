"""The image's fork layer (containers/fork-layer.sh, in the cuda and rocm Dockerfiles): the fork's bundle staged in
the build context as `.fork/bundle.tar.gz`, named to the layer by the FORK_BUNDLE build arg. The folder is always
there (a bind mount needs its source), empty for an image that keeps the locked vLLM release as it is."""

from __future__ import annotations

import shutil
from pathlib import Path

from ci.common.errors import UsageError
from ci.stack.model import Target

FORK = Path(".fork")
FORK_BUNDLE = "bundle.tar.gz"


def build_arg(dockerfile: Path, target: Target, fork: bool) -> str:
    """FORK_BUNDLE's value; a Dockerfile without the layer refuses a fork instead of silently ignoring it."""
    if fork and "ARG FORK_BUNDLE" not in dockerfile.read_text():
        raise UsageError(
            f"{dockerfile.name} of {target.family} has no fork layer: target {target.id}'s image holds no vLLM",
            hint="lay the fork over a GPU target's image, e.g. python -m ci build cuda-sm121a --fork",
        )
    return FORK_BUNDLE if fork else ""


def stage(root: Path, bundle: Path | None) -> None:
    (root / FORK).mkdir(exist_ok=True)
    (root / FORK / FORK_BUNDLE).unlink(missing_ok=True)
    if bundle is not None:
        shutil.copyfile(bundle, root / FORK / FORK_BUNDLE)
