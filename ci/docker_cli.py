"""Which docker client builds images, and the git facts a build is labelled with.

Builds need BuildKit (`--network none`, `RUN --mount`), which the docker SDK cannot drive. Client 23+
hands `docker build` to the buildx plugin and refuses BuildKit without it; the Debian docker.io 20.10
client builds with the engine's own BuildKit when DOCKER_BUILDKIT=1. So: $STACKGATE_DOCKER if set,
else the first client on the candidate list whose `buildx version` works, else a pre-23 client.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ci.errors import BuildError

ENV_CLIENT = "STACKGATE_DOCKER"
_CANDIDATES = ("docker", "/usr/bin/docker", "/usr/local/bin/docker")


@dataclass(frozen=True, kw_only=True)
class DockerCli:
    path: str
    how: str  # "buildx" or "engine BuildKit (client 20.10)": printed so a user knows which one ran

    def env(self) -> dict[str, str]:
        return {**os.environ, "DOCKER_BUILDKIT": "1"}


def _ok(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


@cache
def find() -> DockerCli:
    forced = os.environ.get(ENV_CLIENT)
    if forced:
        if not shutil.which(forced):
            raise BuildError(f"${ENV_CLIENT}={forced} is not an executable", hint="point it at a docker client")
        return DockerCli(path=forced, how=f"${ENV_CLIENT}")
    paths = list(dict.fromkeys(p for c in _CANDIDATES if (p := shutil.which(c))))
    if paths and not any(_ok([p, "info", "--format", "{{.ServerVersion}}"]) for p in paths):
        # without an engine every client check below fails too, and would blame the client
        raise BuildError(
            f"no docker engine answers ({paths[0]} info failed; DOCKER_HOST={os.environ.get('DOCKER_HOST', 'unset')})",
            hint="start it (as .ci/run does: dockerd --iptables=false --ip-masq=false &), or set DOCKER_HOST",
        )
    for path in paths:
        if _ok([path, "buildx", "version"]):
            return DockerCli(path=path, how="buildx")
    for path in paths:
        version = _ok([path, "version", "--format", "{{.Client.Version}}"]) or ""
        if version and version.split(".")[0].isdigit() and int(version.split(".")[0]) < 23:
            return DockerCli(path=path, how=f"engine BuildKit (client {version})")
    raise BuildError(
        f"no docker client that can build with BuildKit (tried {', '.join(paths) or 'none on PATH'})",
        hint="apt-get install docker.io (its 20.10 client uses the engine's BuildKit), install the buildx "
        f"plugin, or set {ENV_CLIENT} to a client that can",
    )


@dataclass(frozen=True, kw_only=True)
class GitInfo:
    revision: str
    epoch: int  # SOURCE_DATE_EPOCH: the commit time, so two builds of one commit carry one date
    source: str
    dirty: bool


def git_info(root: Path) -> GitInfo:
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
        if done.returncode != 0:
            raise BuildError(
                f"git {' '.join(args)} failed in {root}: {done.stderr.strip()}",
                hint="build from a git checkout with at least one commit",
            )
        return done.stdout.strip()

    remote = subprocess.run(["git", "-C", str(root), "remote", "get-url", "origin"], capture_output=True, text=True)
    return GitInfo(
        revision=git("rev-parse", "HEAD"),
        epoch=int(git("log", "-1", "--format=%ct")),
        source=os.environ.get("STACKGATE_SOURCE_URL") or remote.stdout.strip() or f"file://{root}",
        dirty=bool(git("status", "--porcelain", "--untracked-files=no")),
    )
