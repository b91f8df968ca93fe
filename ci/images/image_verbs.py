"""The image verbs: `python -m ci build|verify|lock|push|pull <target>` (`ci bake` is the run stage's)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ci.common import options
from ci.common.errors import NotHere, UsageError
from ci.images import build, lock, rebuild, verify
from ci.images.debian import debs
from ci.stack import loader
from ci.stack.model import Stack, Target

if TYPE_CHECKING:
    from ci.fork.source import Fork
    from ci.upstream.port.tried import Tried


def cmd_build(args: argparse.Namespace) -> int:
    target = build.target_for(args)
    bundle = None
    if args.fork or args.without:
        from ci.fork import source

        st = loader.load(args.stack)
        out = build.REPO_ROOT / ".whl" / "fork.tar.gz"
        bundle = fork_bundle(st, target, source.from_command(st, args), args.without, out)
    built = build.build(target, base=args.base, allow_unpinned=args.allow_unpinned, tag=args.tag, fork_bundle=bundle)
    print(f"image {built.tags[0]}\nid    {built.image_id}\n({built.seconds:.1f} s, tags: {', '.join(built.tags)})")
    return 0


def fork_bundle(
    st: Stack, target: Target, fork: Fork, without: str | None, out: Path, tried: Tried | None = None
) -> Path:
    """The fork's bundle for `target`'s image (`without`: the fork without that change; `tried`: with a port tried on
    a scratch ref), once its base release is checked against the target's lock: a mismatch stops here, before any
    bundle, bootstrap or build."""
    from ci.fork import fork_verbs

    lock.require_base(target, f"{fork.name} {fork.ref}", fork.base.version, build.REPO_ROOT)
    if note := lock.kernel_note(target, fork.base.version):
        print(note, flush=True)
    return fork_verbs.make_bundle(st, fork, out, without, tried)


def cmd_verify(args: argparse.Namespace) -> int:
    st = loader.load(args.stack)
    target = st.targets[args.target]
    image = args.image or f"{build.image_name(target)}:latest"
    if args.rebuild:
        return rebuild.main(target, image, root=build.REPO_ROOT)
    return verify.main(st, target, image, root=build.REPO_ROOT)


def cmd_lock(args: argparse.Namespace) -> int:
    target = build.target_for(args)
    if args.base:
        if target.bootstrap is None:
            raise NotHere(
                f"target {target.id} has no bootstrap recipe: its base is pulled, pinned by digest",
                hint=f"python -m ci lock {target.id}   (the wheels' lock)",
            )
        print(f"wrote {debs.resolve(target, build.REPO_ROOT).relative_to(build.REPO_ROOT)}")
        return 0
    if args.index_url:
        target = replace(target, package_indexes=(*target.package_indexes, *args.index_url))
    for path in lock.lock(target, vllm=args.vllm):  # the lock and the re-pinned requirements together, or neither
        print(f"wrote {path.relative_to(build.REPO_ROOT)}" + (f" (vllm=={args.vllm})" if path.suffix == ".in" else ""))
    return 0


def cmd_source_build(args: argparse.Namespace) -> int:
    from ci.images import source_build

    return source_build.main(
        args.target, args.source, base=args.base, tag=args.tag, build_command=args.build_command, stack_dir=args.stack
    )


def cmd_push(args: argparse.Namespace) -> int:
    from ci.images import push_pull

    target = build.target_for(args)
    to = options.given_registry(args.registry)
    if to is None:
        raise UsageError(
            f"no registry: pass --registry or set ${options.ENV_REGISTRY}",
            hint="for example --registry registry.lan:5000/stackgate",
        )
    ref = push_pull.push(target, to, args.image)
    if args.digest_file:
        push_pull.record(ref, args.digest_file)
    print(f"pushed {ref}")
    return 0


def cmd_pull(args: argparse.Namespace) -> int:
    from ci.images import push_pull

    print(f"pulled {args.ref}\nid     {push_pull.pull(args.ref)}")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    ps = options.verb(
        sub,
        "push",
        help="push a target's image (the one ci run uses) to a registry and print it "
        "as repo@sha256:…, the reference a pipeline's run steps pull",
        codes=(0, 2, 3),
    )
    ps.add_argument("target", help="a target id, e.g. cuda-sm121a")
    ps.add_argument("--registry", help="host[:port][/path] to push to (default: $STACKGATE_REGISTRY)")
    ps.add_argument("--image", help="the local image to push (default: the one ci run would use)")
    ps.add_argument("--digest-file", type=Path, metavar="FILE", help="also write the pushed reference to FILE")
    ps.set_defaults(func=cmd_push)

    pl = options.verb(
        sub,
        "pull",
        help="pull an image pinned by digest (repo@sha256:…) and check that the engine holds exactly it",
        codes=(0, 2, 4),
    )
    pl.add_argument("ref", help="repo@sha256:<64 hex>, as ci push printed it")
    pl.set_defaults(func=cmd_pull)

    b = options.verb(
        sub, "build", help="build a target's image (BuildKit, --network none); prints its id", codes=(0, 2, 3, 6)
    )
    b.add_argument("target", help="a target id, e.g. cpu, cuda-sm121a")
    b.add_argument("--base", help="build on this base instead of the target's pinned one")
    b.add_argument("--allow-unpinned", action="store_true", help="accept a base given by tag without a digest")
    b.add_argument("--tag", help="tag the image with this name instead of stackgate/<target>:{<rev>,latest}")
    options.add_fork(b, switch=True)
    b.add_argument("--without", metavar="CHANGE", help="the fork without this imported change (implies --fork)")
    b.set_defaults(func=cmd_build)

    v = options.verb(
        sub,
        "verify",
        help="check a target's image without a GPU: labels, pinned base, baked kernels, sentinel",
        codes=(0, 2, 3),
    )
    v.add_argument("target", help="a target id, e.g. cpu")
    v.add_argument("--image", help="the image to check against the target (default: stackgate/<target>:latest)")
    v.add_argument(
        "--rebuild",
        action="store_true",
        help="bootstrap the base and build the image again from nothing (no cache) beside it, as "
        "<image>-rebuild, and compare: the same image id, or the layers and files that differ",
    )
    v.set_defaults(func=cmd_verify)

    lk = options.verb(
        sub,
        "lock",
        help="resolve a target's hashed lock (containers/locks/<target>.txt) with uv, or "
        "with --base its base's Debian package lock (<target>.debs.txt)",
        codes=(0, 2, 3, 6),
    )
    lk.add_argument(
        "--base",
        action="store_true",
        help="bootstrap the target's recipe (stack/targets.yaml bootstrap) and pin every Debian package "
        "it installs, by version, in containers/locks/<target>.debs.txt",
    )
    lk.add_argument("target", help="a target id, e.g. rocm-gfx1151")
    lk.add_argument(
        "--index-url",
        action="append",
        default=[],
        metavar="URL",
        help="one more extra index to resolve against (repeatable), beside package_indexes",
    )
    lk.add_argument(
        "--vllm",
        metavar="X.Y.Z",
        help="lock this vLLM release (a fork's base): re-pins vllm in containers/locks/<family>.in, torch left to "
        "vLLM's own pin, then resolves",
    )
    lk.set_defaults(func=cmd_lock)

    sb = options.verb(
        sub,
        "source-build",
        help="compile a source tree's CUDA extensions for a target's arch list "
        "(containers/source/Dockerfile, --network none, no GPU) and check every file's SASS",
        codes=(0, 2, 3, 6),
    )
    sb.add_argument("target", help="a CUDA target id, e.g. cuda-sm121a")
    sb.add_argument("source", type=Path, help="the source tree (a fork's checkout, or a small extension)")
    sb.add_argument(
        "--build-command",
        default="./build.sh",
        help="run in the source tree (default: %(default)s); vLLM's: pip wheel --no-build-isolation .",
    )
    sb.add_argument("--base", help="build on this base instead of the one made with mmdebstrap")
    sb.add_argument("--tag", help="tag of the image (default: stackgate/source-build-<target>:latest)")
    sb.set_defaults(func=cmd_source_build)
