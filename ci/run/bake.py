"""`python -m ci bake <target>`: warm the target's caches on its devices, once, for every row after it.

Two routes, one verb: in the target's image, committing the caches as a new image (`ci.images.bake`), or with
`--host` on this host's Python and GPU, packing them as a portable artefact that `ci run --host --caches` installs
(`ci.run.caches`). Both warm the same rows (the target's, narrowed by --suite, --change and --rows) under one
timeout.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from ci import options, revision
from ci.errors import StackgateError, UsageError
from ci.images import bake as image_bake
from ci.images import build
from ci.run import caches, execute, host_aot
from ci.stack import loader, plan, rows_json
from ci.stack.model import Stack, Target

BAKE_TIMEOUT_S = 1800.0  # the warm-up starts every row's engine once: far longer than one test item


def cmd_bake(args: argparse.Namespace) -> int:
    if args.aot_only and not args.host:
        raise UsageError("--aot-only packs a host bake", hint="add --host (an image's AOT layer is its build)")
    if args.host and args.out is None:
        raise UsageError("ci bake --host needs --out DIR", hint="python -m ci bake TARGET --host --out DIR")
    st = loader.load(args.stack)
    target = st.targets[args.target]
    rows = bake_rows(st, target.id, args)
    return _on_host(target, st, rows, args) if args.host else _in_image(target, st, rows, args)


def bake_rows(st: Stack, target: str, args: argparse.Namespace) -> tuple[plan.Row, ...]:
    """The rows a bake warms: the target's, narrowed by --suite, --change and --rows."""
    chosen = plan.build(st).select(targets=[target], suites=args.suite, changes=args.change)
    return chosen.pick(args.rows, where=f"{target}/{','.join(args.suite) or '*'}")


def _in_image(target: Target, st: Stack, rows: tuple[plan.Row, ...], args: argparse.Namespace) -> int:
    image = args.image or f"{build.image_name(target)}:latest"
    with tempfile.TemporaryDirectory(prefix="stackgate-bake-") as tmp:
        path = _rows_json(st, target, rows, Path(tmp), {"ref": image})
        baked = image_bake.bake(target, image, command=args.command, tag=args.tag, rows=path)
    print(f"image {baked.tag}\nid    {baked.image_id}")
    return 0


def _on_host(target: Target, st: Stack, rows: tuple[plan.Row, ...], args: argparse.Namespace) -> int:
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="stackgate-bake-") as tmp:
        path = _rows_json(st, target, rows, Path(tmp), {"ref": "host", "digest": None})
        spec = execute.RunSpec(
            target=target, suite="*", rows=rows, out=Path(tmp), suites_dir=None, timeout_s=BAKE_TIMEOUT_S
        )
        env = execute.host_env(spec)
        baked = host_aot.bake(target, env, execute.DEFAULT_SUITES)
        if args.aot_only and not baked:
            where = f"stack/targets.yaml [targets: {target.id}].kernel_lists"
            raise StackgateError(
                f"the AOT bake of {target.id} wrote nothing: no artefact written",
                hint=f"{where} names what to bake; the bake's error is above",
            )
        env.update(baked)
        code = 0 if args.aot_only else caches.warm(target, path, env, execute.DEFAULT_SUITES)
    if code != 0:
        raise StackgateError(
            f"the warm-up of {target.id} exited {code}: no artefact written", hint="see its output above"
        )
    artefact = caches.pack(target, args.out, "aot" if args.aot_only else "warm", env)
    print(f"artefact {artefact} ({artefact.stat().st_size / 1e6:.1f} MB, {time.monotonic() - start:.1f} s)")
    return 0


def _rows_json(st: Stack, target: Target, rows: tuple[plan.Row, ...], folder: Path, image: dict) -> Path:
    doc = rows_json.document(
        st, target, "*", rows, image=image, git_revision=revision.git_revision(), timeout_s=BAKE_TIMEOUT_S
    )
    return rows_json.write(folder / "rows.json", doc)


def add_parser(sub: argparse._SubParsersAction) -> None:
    k = options.verb(
        sub, "bake", help="run the image's warm-up on the target's devices and commit the caches", codes=(0, 2, 3)
    )
    k.add_argument("target", help="a target id, e.g. cuda-sm90")
    k.add_argument("--image", help="image to bake (default: stackgate/<target>:latest)")
    k.add_argument(
        "--command",
        nargs=argparse.REMAINDER,
        help="warm-up command instead of `python -m harness.warmup` (must be last)",
    )
    k.add_argument("--tag", help="tag of the baked image (default: <image repo>:baked)")
    k.add_argument(
        "--host",
        action="store_true",
        help="no docker: warm this host's caches for the target's rows, pack them into --out",
    )
    k.add_argument("--out", type=Path, help="with --host: the folder for the caches artefact")
    k.add_argument(
        "--aot-only",
        action="store_true",
        help="with --host: pack only the AOT bake of the target's kernel lists (no warm-up, no GPU "
        "used; its key names no driver or GPU)",
    )
    options.add_filters(k, "suite", "change", "rows")
    k.set_defaults(func=cmd_bake)
