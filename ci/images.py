"""Hermetic image builds per target: `python -m ci build <target>`.

A build plan is data computed from the target (platform, build args, labels, tags); `build` fetches the
locked wheels on the host, stages them in the context, and runs the docker CLI with BuildKit and
`--network none`. Inspection, runs and commits go through the docker SDK (`ci.bake`, `ci.verify`),
imported only by the verbs that need it so `python -m ci plan` stays fast.
"""

from __future__ import annotations

import argparse
import fcntl
import re
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ci import docker_cli, stack, wheels
from ci.errors import BuildError, UsageError
from ci.model import Target

REPO_ROOT = Path(__file__).resolve().parent.parent
STAGE = Path(".whl/stage")  # fixed: the engine's BuildKit does not expand ARGs in RUN --mount sources
_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
LABELS = (
    "org.opencontainers.image.revision",
    "org.opencontainers.image.source",
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


@dataclass(frozen=True, kw_only=True)
class BuildPlan:
    target: str
    dockerfile: Path
    platform: str
    lock: Path
    tags: tuple[str, ...]
    build_args: Mapping[str, str]
    labels: Mapping[str, str]

    def argv(self, cli: str) -> list[str]:
        out = [
            cli,
            "build",
            "--network",
            "none",
            "--platform",
            self.platform,
            "--progress",
            "plain",
            "-f",
            str(self.dockerfile),
        ]
        for key, value in self.build_args.items():
            out += ["--build-arg", f"{key}={value}"]
        for key, value in self.labels.items():
            out += ["--label", f"{key}={value}"]
        for tag in self.tags:
            out += ["-t", tag]
        return out


def image_name(target: Target) -> str:
    return f"stackgate/{target.id}"


def image_ref(target: Target) -> str:
    """The image `ci run` uses for a target: the baked one where `ci bake` made it, else the built one."""
    cli = docker_cli.find()
    baked = f"{image_name(target)}:baked"
    return baked if _present(cli, baked) else f"{image_name(target)}:latest"


def lock_path(target: Target, root: Path = REPO_ROOT) -> Path:
    return root / "containers" / "locks" / f"{target.id}.txt"


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
    target: Target, base: Base, git: docker_cli.GitInfo, *, root: Path = REPO_ROOT, tag: str | None = None
) -> BuildPlan:
    dockerfile = root / "containers" / target.family / "Dockerfile"
    lock = lock_path(target, root)
    if not lock.is_file():
        raise BuildError(
            f"{lock.relative_to(root)}: no hashed lock for target {target.id}",
            hint=f"resolve it (see containers/locks/{target.family}.in and README.md, 'Images')",
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
        **target.env,
    }
    labels = {
        "org.opencontainers.image.revision": git.revision,
        "org.opencontainers.image.source": git.source,
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
) -> Built:
    t0 = time.monotonic()
    cli = docker_cli.find()
    git = docker_cli.git_info(root)
    chosen = resolve_base(target, base=base, allow_unpinned=allow_unpinned)
    if base is None and target.bootstrap is not None and not _present(cli, chosen.name):
        # Offline default: the pinned registry base is absent and cannot be pulled here.
        from ci import bootstrap

        pinned, image_id = bootstrap.ensure(target, cli, git.epoch)
        chosen = Base(name=pinned, digest=image_id, bootstrapped=True)
    if chosen.bootstrapped and _image_id(cli, chosen.name) != chosen.digest:
        raise BuildError(f"{chosen.name} no longer resolves to {chosen.digest}", hint="remove the tag and rebuild")
    p = plan(target, chosen, git, root=root, tag=tag)
    files = wheels.fetch(target, p.lock)
    (root / STAGE.parent).mkdir(exist_ok=True)
    with open(root / STAGE.parent / ".lock", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)  # one staged wheel set per checkout at a time
        wheels.stage(files, root / STAGE)
        with (root / ".whl" / f"build-{target.id}.log").open("w") as out:
            iidfile = root / ".whl" / f"iid-{target.id}"
            done = subprocess.run(
                [*p.argv(cli.path), "--iidfile", str(iidfile), "."],
                cwd=root,
                env=cli.env(),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
    if done.returncode != 0:
        tail = (root / ".whl" / f"build-{target.id}.log").read_text()[-3000:]
        raise BuildError(
            f"docker build of {target.id} failed ({cli.path}, {cli.how}):\n{tail}",
            hint=f"full log: .whl/build-{target.id}.log",
        )
    return Built(image_id=iidfile.read_text().strip(), tags=p.tags, seconds=time.monotonic() - t0)


def _image_id(cli: docker_cli.DockerCli, ref: str) -> str | None:
    done = subprocess.run([cli.path, "image", "inspect", "--format", "{{.Id}}", ref], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def _present(cli: docker_cli.DockerCli, ref: str) -> bool:
    return _image_id(cli, ref) is not None


def target_for(args: argparse.Namespace) -> Target:
    st = stack.load(args.stack)
    if args.target not in st.targets:
        raise UsageError(f"unknown target {args.target!r}", hint=f"one of {', '.join(st.targets)}")
    return st.targets[args.target]


def cmd_build(args: argparse.Namespace) -> int:
    target = target_for(args)
    built = build(target, base=args.base, allow_unpinned=args.allow_unpinned, tag=args.tag)
    print(f"image {built.tags[0]}\nid    {built.image_id}\n({built.seconds:.1f} s, tags: {', '.join(built.tags)})")
    return 0


def cmd_bake(args: argparse.Namespace) -> int:
    import json
    import tempfile

    from ci import bake, run
    from ci import plan as planner

    target = target_for(args)
    image = args.image or f"{image_name(target)}:latest"
    st = stack.load(args.stack)
    rows = [run.row_document(st, r) for r in planner.build(st).select(targets=[target.id]).rows]
    with tempfile.TemporaryDirectory(prefix="stackgate-bake-") as tmp:
        doc = {"schema": 1, "target": run.target_document(target), "suite": "*", "image": {"ref": image},
               "git_revision": run.git_revision(), "timeout_s": 1800, "rows": rows}  # fmt: skip
        path = Path(tmp) / "rows.json"
        path.write_text(json.dumps(doc, indent=1))
        baked = bake.bake(target, image, command=args.command, tag=args.tag, rows=path)
    print(f"image {baked.tag}\nid    {baked.image_id}")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from ci import verify

    st = stack.load(args.stack)
    ref = f"{image_name(st.targets[args.what])}:latest" if args.what in st.targets else args.what
    return verify.main(st, ref, root=REPO_ROOT)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser("build", help="build a target's image (BuildKit, --network none); prints its id")
    b.add_argument("target")
    b.add_argument("--base", help="build on this base instead of the target's pinned one")
    b.add_argument("--allow-unpinned", action="store_true", help="accept a base given by tag without a digest")
    b.add_argument("--tag", help="tag the image with this name instead of stackgate/<target>:{<rev>,latest}")
    b.set_defaults(func=cmd_build)

    k = sub.add_parser("bake", help="run the image's warm-up on the target's devices and commit the caches")
    k.add_argument("target")
    k.add_argument("--image", help="image to bake (default: stackgate/<target>:latest)")
    k.add_argument(
        "--command",
        nargs=argparse.REMAINDER,
        help="warm-up command instead of `python -m harness.warmup` (must be last)",
    )
    k.add_argument("--tag", help="tag of the baked image (default: <image repo>:baked)")
    k.set_defaults(func=cmd_bake)

    v = sub.add_parser("verify", help="check an image without a GPU: labels, pinned base, baked kernels, sentinel")
    v.add_argument("what", metavar="target|image")
    v.set_defaults(func=cmd_verify)
