"""Hermetic, reproducible image builds per target: `python -m ci build <target>`.

A build plan is data computed from the target (platform, build args, labels, tags); `build` fetches the
locked wheels on the host, stages them in the context, runs the docker CLI with BuildKit and
`--network none`, and rewrites the result so one commit gives one image id (`ci.images.normalize`).
Inspection, runs and commits go through the docker SDK (`ci.images.baked_layer`, `ci.images.verify`), imported only by
the verbs that need it so `python -m ci plan` stays fast."""

from __future__ import annotations

import argparse
import fcntl
import json
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO

from ci import engine
from ci.common import options, revision
from ci.common.errors import BuildError, NotHere
from ci.images import fork_layer, normalize, wheels

# what other modules and tests name through this one
from ci.images.build_host import BINFMT, check_buildable, ensure_base, host_platform, lock_path  # noqa: F401
from ci.images.debian import bootstrap
from ci.stack import loader as stack
from ci.stack.model import Target

REPO_ROOT = options.REPO
STAGE = Path(".whl/stage")  # fixed: the engine's BuildKit does not expand ARGs in RUN --mount sources
_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}\Z")
LABELS = (  # every image has these; org.opencontainers.image.source only where $STACKGATE_SOURCE_URL names it
    "org.opencontainers.image.revision",
    "org.opencontainers.image.created",
    "org.opencontainers.image.base.name",
    "org.opencontainers.image.base.digest",
    "stackgate.target",
    "stackgate.arch",
    "stackgate.lock",
)


@dataclass(frozen=True, kw_only=True)
class Base:
    name: str  # what FROM receives
    digest: str  # "" when built from a tag with --allow-unpinned
    bootstrapped: bool = False
    lock: str = ""  # a bootstrapped base: the sha256 of its Debian package lock


@dataclass(frozen=True, kw_only=True)
class BuildPlan:
    target: str
    dockerfile: Path
    platform: str
    lock: Path
    tags: tuple[str, ...]
    build_args: Mapping[str, str]
    labels: Mapping[str, str]

    def argv(self, cli: str, *, no_cache: bool = False) -> list[str]:
        """The build; untagged, since the tags go to its rewritten image (`ci.images.normalize`)."""
        out = [
            cli,
            "build",
            "--network",
            "none",
            "--platform",
            self.platform,
            "--progress",
            "plain",
            *(["--no-cache"] if no_cache else []),
            "-f",
            str(self.dockerfile),
        ]
        for key, value in self.build_args.items():
            out += ["--build-arg", f"{key}={value}"]
        for key, value in self.labels.items():
            out += ["--label", f"{key}={value}"]
        return out


def image_name(target: Target) -> str:
    return f"stackgate/{target.id}"


def image_ref(target: Target) -> str:
    """The image `ci run` uses for a target: the baked one where `ci bake` made it from the current build, else
    the built one (a bake of an earlier build is stale: it would run old code)."""
    cli = engine.find()
    built, baked = f"{image_name(target)}:latest", f"{image_name(target)}:baked"
    current = engine.image_id(cli, built)
    source = _baked_from(cli, baked)
    if source is None:
        return built
    if current is None or source == current:
        return baked
    print(
        f"{baked} was baked from another build ({source[:19] or 'unknown'}); running {built} "
        f"({current[:19]}) unbaked: python -m ci bake {target.id} bakes it",
        file=sys.stderr,
    )
    return built


def image_for(target: Target, built_id: str) -> str:
    """The image id to verify and run after building `built_id`: the bake of that very build where there is one,
    else the build itself. By id, never by tag: another checkout sharing the engine retags `:latest` (or prunes
    what it untagged) between this build and its run."""
    cli = engine.find()
    baked = f"{image_name(target)}:baked"
    if _baked_from(cli, baked) == built_id:
        return engine.image_id(cli, baked) or built_id
    return built_id


def _baked_from(cli: engine.DockerCli, baked: str) -> str | None:
    """The build the image `baked` was baked from, or None where there is no such image."""
    from ci.images.baked_layer import BAKED_FROM

    done = subprocess.run(
        [cli.path, "image", "inspect", "--format", "{{json .Config.Labels}}|{{.Parent}}", baked],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        return None
    labels, _, parent = done.stdout.strip().rpartition("|")
    return (json.loads(labels or "null") or {}).get(BAKED_FROM) or parent  # an older bake: the committed parent


def resolve_base(target: Target, *, base: str | None = None, allow_unpinned: bool = False) -> Base:
    """The pinned base from stack/targets.yaml (or --base); a bare tag is refused unless allowed."""
    name = base or target.base_image
    match = _DIGEST.search(name)
    if match:
        return Base(name=name, digest=match.group(0)[1:])
    if not allow_unpinned:
        where = "--base" if base else f"stack/targets.yaml [targets: {target.id}].base_image"
        raise BuildError(
            f"{where}: base image {name!r} is a tag without a digest",
            hint="pin it as name:tag@sha256:<digest>, or pass --allow-unpinned to build anyway "
            "(verify then reports the image as unpinned)",
        )
    return Base(name=name, digest="")


def plan(
    target: Target,
    base: Base,
    git: revision.GitInfo,
    *,
    root: Path = REPO_ROOT,
    tag: str | None = None,
    fork: bool = False,
) -> BuildPlan:
    dockerfile = root / "containers" / target.family / "Dockerfile"
    lock = lock_path(target, root)
    if not lock.is_file():
        raise NotHere(
            f"{lock.relative_to(root)}: no hashed lock for target {target.id}",
            hint=f"python -m ci lock {target.id}   (on a host that reaches the target's package index)",
        )
    for name in target.kernel_lists:
        if not (root / "containers" / "kernels" / name).is_file():
            raise BuildError(
                f"stack/targets.yaml [targets: {target.id}].kernel_lists: containers/kernels/{name} does not exist",
                hint="add the list or fix the name",
            )
    declared = set(re.findall(r"^ARG\s+(\w+)", dockerfile.read_text(), re.M))
    for key in target.env:
        if key not in declared:
            raise BuildError(
                f"stack/targets.yaml [targets: {target.id}].env.{key}: "
                f"{dockerfile.relative_to(root)} does not declare ARG {key}",
                hint="add `ARG {key}` and `ENV {key}=${{{key}}}` so the image's runtime env carries it",
            )
    lock_digest = "sha256:" + wheels.file_digest(lock)
    args = {
        "BASE_IMAGE": base.name,
        "TARGET": target.id,
        "PYTHON": target.python,
        "ARCH_LIST": ";".join(target.arch_list),
        "TRITON_TARGETS": ",".join(target.triton_targets),
        "KERNEL_LISTS": " ".join(target.kernel_lists),
        "SOURCE_DATE_EPOCH": str(git.epoch),
        "FORK_BUNDLE": fork_layer.build_arg(dockerfile, target, fork),
        **target.env,
    }
    labels = {
        "org.opencontainers.image.revision": git.revision,
        **({"org.opencontainers.image.source": git.source} if git.source else {}),
        "org.opencontainers.image.created": datetime.fromtimestamp(git.epoch, timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        ),
        "org.opencontainers.image.base.name": base.name,
        "org.opencontainers.image.base.digest": base.digest,
        "stackgate.target": target.id,
        "stackgate.arch": ",".join(target.arch_list or target.triton_targets),
        "stackgate.lock": lock_digest,
        "stackgate.triton_targets": ",".join(target.triton_targets),
        "stackgate.kernel_lists": ",".join(target.kernel_lists),
        **({bootstrap.BASE_LOCK: base.lock} if base.lock else {}),
    }
    name = image_name(target)
    tags = (tag,) if tag else (f"{name}:{git.revision[:12]}", f"{name}:latest")
    return BuildPlan(
        target=target.id,
        dockerfile=dockerfile.relative_to(root),
        platform=target.platform,
        lock=lock,
        tags=tags,
        build_args=args,
        labels=labels,
    )


@dataclass(frozen=True, kw_only=True)
class Built:
    image_id: str
    tags: tuple[str, ...]
    seconds: float


def build(
    target: Target,
    *,
    base: str | None = None,
    allow_unpinned: bool = False,
    tag: str | None = None,
    root: Path = REPO_ROOT,
    no_cache: bool = False,
    fork_bundle: Path | None = None,
) -> Built:
    """Build the target's image; `no_cache` runs every step again (`ci verify --rebuild`); `fork_bundle` (`ci fork
    bundle`) lays the fork's vLLM over the locked release."""
    t0 = time.monotonic()
    cli = engine.find()
    git = revision.git_info(root)
    chosen = resolve_base(target, base=base, allow_unpinned=allow_unpinned)
    check_buildable(target, root=root)  # before any work: a base bootstrap for a foreign platform needs what it names
    if base is None and target.bootstrap is not None and engine.image_id(cli, chosen.name) is None:
        # Offline default: the pinned registry base is absent and cannot be pulled here.
        made = bootstrap.ensure(target, cli, root)
        chosen = Base(name=made.name, digest=made.image_id, bootstrapped=True, lock=made.lock.digest)
    if chosen.bootstrapped and engine.image_id(cli, chosen.name) != chosen.digest:
        raise BuildError(f"{chosen.name} no longer resolves to {chosen.digest}", hint="remove the tag and rebuild")
    p = plan(target, chosen, git, root=root, tag=tag, fork=fork_bundle is not None)
    fork_layer.stage(root, fork_bundle)
    if not chosen.bootstrapped:
        ensure_base(cli, chosen.name)
    files = wheels.fetch(target, p.lock)
    (root / STAGE.parent).mkdir(exist_ok=True)
    with open(root / STAGE.parent / ".lock", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)  # one staged wheel set per checkout at a time
        wheels.stage(files, root / STAGE)
        with (root / ".whl" / f"build-{target.id}.log").open("w") as out:
            iidfile = root / ".whl" / f"iid-{target.id}"
            returncode = _build_logged(
                [*p.argv(cli.path, no_cache=no_cache), "--iidfile", str(iidfile), "."], root, cli.env(), out
            )
    if returncode != 0:
        tail = (root / ".whl" / f"build-{target.id}.log").read_text()[-3000:]
        raise BuildError(
            f"docker build of {target.id} failed ({cli.path}, {cli.how}):\n{tail}",
            hint=f"full log: .whl/build-{target.id}.log",
        )
    raw, memo = iidfile.read_text().strip(), root / ".whl" / "normalized"
    final = normalize.finish(cli, raw, base=chosen.name, epoch=git.epoch, tags=p.tags, memo=memo)
    return Built(image_id=final, tags=p.tags, seconds=time.monotonic() - t0)


_STEP = re.compile(r"^#\d+ \[(?:[^\]]*\s)?(\d+/\d+)\] (.*)$")  # BuildKit's plain progress: "#7 [stage 3/6] RUN ..."


def _build_logged(argv: list[str], root: Path, env: Mapping[str, str], log: IO[str]) -> int:
    """Run the build with its whole output in `log`, and each Dockerfile step said once on stderr as it starts, with
    the seconds since the build began: a build of minutes shows where it is (stdout stays the image's id)."""
    t0, seen = time.monotonic(), set()
    with subprocess.Popen(
        argv, cwd=root, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            step = _STEP.match(line.rstrip("\n"))
            if step and step.group(1) not in seen:
                seen.add(step.group(1))
                said = re.sub(r"\s+", " ", step.group(2))[:100]
                print(f"  [{step.group(1)}] {said}  ({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)
    return proc.returncode


def target_for(args: argparse.Namespace) -> Target:
    return stack.load(args.stack).targets[args.target]  # the name was checked by ci.cli
