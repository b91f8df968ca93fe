"""An image built once and run anywhere: pushed to a registry, pulled back by its digest (`repo@sha256:…`).

A pipeline's build step pushes the image `ci run` would use (the baked one where the bake is current) and records
the reference; every run step pulls exactly that reference and never builds. A registry answers a pull by digest
only with the manifest of that digest, and the engine checks the content it is given against it, so a pulled
image is the pushed one or no image at all.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from ci import engine
from ci.common import files
from ci.common.errors import BuildError, RunError, UsageError
from ci.common.options import ENV_REGISTRY, without_secret
from ci.images import build
from ci.stack.model import Target

_BY_DIGEST = re.compile(r"(?P<repo>[a-z0-9][a-z0-9.:/_\-]*)@(?P<digest>sha256:[0-9a-f]{64})")
_PUSHED = re.compile(r"digest: (sha256:[0-9a-f]{64})")


def repository(target: Target, registry: str) -> str:
    return f"{registry}/{build.image_name(target).rsplit('/', 1)[-1]}"


def push(target: Target, registry: str, ref: str | None = None) -> str:
    """Push `ref` (default: the image `ci run` would use for `target`) and return it as `repo@sha256:…`."""
    cli = engine.find()
    local = ref or build.image_ref(target)
    image_id = engine.image_id(cli, local)
    if image_id is None:
        raise BuildError(f"no image {local} here to push", hint=f"python -m ci build {target.id} first")
    remote = f"{repository(target, registry)}:{image_id.removeprefix('sha256:')[:12]}"  # one tag per image content
    _docker(cli, ["tag", local, remote], f"tag {local} as {remote}")
    said = _docker(cli, ["push", remote], f"push {remote}")
    found = _PUSHED.findall(said)
    if not found:
        raise BuildError(f"docker push {remote} named no digest", hint="see its output above; retry the step")
    return f"{repository(target, registry)}@{found[-1]}"


def pull(ref: str) -> str:
    """Pull exactly `ref` (`repo@sha256:…`) and return the local image id; anything else is refused, naming it."""
    m = _BY_DIGEST.fullmatch(ref)  # not .match: `$` would let a ref ending in a newline through
    if not m:
        raise UsageError(
            f"{without_secret(ref)!r} is not an image pinned by digest (repo@sha256:<64 hex>)",
            hint="pass the reference the build step recorded (buildkite-agent meta-data get …)",
        )
    pinned = f"{untagged(m['repo'])}@{m['digest']}"  # REPO:TAG@DIGEST: the engine pulls the digest, lists it so
    cli = engine.find()
    done = subprocess.run([cli.path, "pull", ref], capture_output=True, text=True, env=cli.env())
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise RunError(
            f"cannot pull {ref}: {said[-1] if said else f'docker pull exited {done.returncode}'}",
            hint=f"is the registry reachable from this agent, and does it hold {m['digest']}? "
            "The build step of this pipeline pushes it",
        )
    inspect = subprocess.run(
        [cli.path, "image", "inspect", "--format", "{{.Id}} {{json .RepoDigests}}", ref], capture_output=True, text=True
    )
    image_id, _, listed = inspect.stdout.strip().partition(" ")
    digests = json.loads(listed or "null") or [] if inspect.returncode == 0 else []
    if pinned not in digests:
        raise RunError(
            f"the image pulled for {ref} carries other digests ({', '.join(digests) or 'none'}, not {pinned})",
            hint="the registry served another image: check it, and run the build step again",
        )
    return image_id


def untagged(repo: str) -> str:
    """`repo` without its tag (`host:5000/name:tag` -> `host:5000/name`): a port's colon comes before a '/'."""
    name, colon, tag = repo.rpartition(":")
    return name if colon and "/" not in tag else repo


def record(ref: str, path: Path) -> None:
    files.replace(path, ref + "\n")


def _docker(cli: engine.DockerCli, args: list[str], what: str) -> str:
    done = subprocess.run([cli.path, *args], capture_output=True, text=True, env=cli.env())
    if done.returncode != 0:
        raise BuildError(
            f"cannot {what}: {done.stderr.strip() or done.stdout.strip()}",
            hint=f"is the registry reachable, and may this agent push to it? (${ENV_REGISTRY})",
        )
    print(done.stdout, end="")
    return done.stdout
