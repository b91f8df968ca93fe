"""`python -m ci verify <target> --rebuild`: build the image again from nothing and compare, layer by layer.

The base is bootstrapped again from its Debian lock under a side tag and must get the id the image's
label names; then every build step runs again (`--no-cache`) into `<image>-rebuild` (for
`stackgate/cpu:latest`, `stackgate/cpu:latest-rebuild`), beside the image being checked. Same commit, same
image id, or it fails naming each layer that differs (the build step that made it, from the image's
history) and the first files in it that differ, comparing the two layer tars member by member (content,
mode, owner, time, size, link target); where Debian's diffoscope is installed, its report of the two
layers follows (`apt-get install diffoscope`: it shows inside binaries, archives and bytecode).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ci import engine
from ci.common import revision, tables
from ci.common.errors import BuildError
from ci.images import build, normalize
from ci.images.debian import bootstrap
from ci.stack.model import Target

FILES_SHOWN = 8
DIFFOSCOPE_LINES = 40


@dataclass(frozen=True, kw_only=True)
class Layer:
    index: int  # 1-based, as a user counts them
    total: int
    step: str  # the build step that made it (the image history's created_by)
    ours: str
    theirs: str
    files: tuple[str, ...] = ()

    def name(self) -> str:
        return f"layer {self.index} of {self.total} ({self.step[:100]})"


def _inspect(cli: engine.DockerCli, ref: str, fmt: str) -> str:
    done = subprocess.run([cli.path, "image", "inspect", "--format", fmt, ref], capture_output=True, text=True)
    if done.returncode != 0:
        raise BuildError(f"image {ref!r} not found: {done.stderr.strip()}", hint="python -m ci build TARGET first")
    return done.stdout.strip()


def _steps(config: dict) -> list[str]:
    """The build step that made each layer, in layer order: the history's created_by, less BuildKit's
    prefix of build arguments (`|3 TARGET=cpu ... /bin/sh -c `)."""
    out = []
    for h in config.get("history") or []:
        if not h.get("empty_layer"):
            by = h.get("created_by", "?").removesuffix(" # buildkit")
            if "/bin/sh -c " in by:
                by = "RUN " + by.rpartition("/bin/sh -c ")[2]
            out.append(" ".join(by.split()))
    return out


def member_diffs(ours: IO[bytes], theirs: IO[bytes], limit: int = FILES_SHOWN) -> list[str]:
    """The first members (by name) in which two layer tars differ, and how."""
    a, b = _members(ours), _members(theirs)
    out = []
    for name in sorted(a.keys() | b.keys()):
        if name not in b or name not in a:
            out.append(f"{name}: only in the {'image' if name in a else 'rebuild'}")
        elif a[name] != b[name]:
            what = [f"{k} {x!r} vs {y!r}" for k, x, y in zip(_FIELDS, a[name], b[name], strict=True) if x != y]
            out.append(f"{name}: {'; '.join(what)}")
        if len(out) >= limit:
            break
    return out


_FIELDS = ("type", "mode", "uid", "gid", "mtime", "link", "size", "content")


def _members(fh: IO[bytes]) -> dict[str, tuple]:
    out = {}
    with tarfile.open(fileobj=fh, mode="r:") as tar:
        for m in tar:
            content = ""
            if m.isreg():
                data = tar.extractfile(m).read()  # type: ignore[union-attr]
                small = len(data) <= 80 and data.isascii()
                content = data.decode() if small else "sha256:" + hashlib.sha256(data).hexdigest()[:16]
            out[m.name] = (
                m.type.decode(errors="replace"),
                oct(m.mode),
                m.uid,
                m.gid,
                m.mtime,
                m.linkname,
                m.size,
                content,
            )
    return out


def _diffoscope(ours: Path, theirs: Path) -> list[str]:
    tool = shutil.which("diffoscope")
    if not tool:
        return []
    done = subprocess.run(
        [tool, "--text", "-", "--no-progress", str(ours), str(theirs)], capture_output=True, text=True, timeout=600
    )
    lines = done.stdout.splitlines()
    shown = [f"  {line}" for line in lines[:DIFFOSCOPE_LINES]]
    return ["diffoscope:", *shown, *(["  ..."] if len(lines) > DIFFOSCOPE_LINES else [])]


def compare(cli: engine.DockerCli, ours: str, theirs: str) -> list[Layer]:
    """Each layer in which the two images differ, with the first files that do (empty: same layers)."""
    if _inspect(cli, ours, "{{json .RootFS.Layers}}") == _inspect(cli, theirs, "{{json .RootFS.Layers}}"):
        return []
    out = []
    with (
        tempfile.TemporaryDirectory(prefix="stackgate-rebuild-") as tmp,
        normalize.saved(cli, ours, Path(tmp)) as x,
        normalize.saved(cli, theirs, Path(tmp)) as y,
    ):
        ids_x, ids_y = x.config["rootfs"]["diff_ids"], y.config["rootfs"]["diff_ids"]
        steps, total = _steps(x.config), max(len(ids_x), len(ids_y))
        for i in range(total):
            mine, other = (ids_x[i] if i < len(ids_x) else "none"), (ids_y[i] if i < len(ids_y) else "none")
            if mine == other:
                continue
            files: list[str] = []
            if i < len(ids_x) and i < len(ids_y):
                pair = (Path(tmp) / "ours.tar", Path(tmp) / "theirs.tar")
                for path, image in zip(pair, (x, y), strict=True):
                    with path.open("wb") as dest, image.layer(i) as src:
                        shutil.copyfileobj(src, dest, 1 << 20)
                with pair[0].open("rb") as a, pair[1].open("rb") as b:
                    files = member_diffs(a, b) + _diffoscope(*pair)
            step = steps[i] if i < len(steps) else "?"
            out.append(Layer(index=i + 1, total=total, step=step, ours=mine, theirs=other, files=tuple(files)))
    return out


def side_tag(ref: str) -> str:
    """Where the rebuild of `ref` goes: beside it, `stackgate/cpu:latest` -> `stackgate/cpu:latest-rebuild`."""
    name, _, tag = ref.rpartition(":")
    return f"{name}:{tag}-rebuild" if name and "/" not in tag else f"{ref}:rebuild"


def main(target: Target, ref: str, *, root: Path, base_again: bool = True) -> int:
    """Rebuild `ref` from nothing and compare; 0 when the rebuild is the same image, else BuildError naming
    what differs. `base_again=False` keeps the base as it is (a test that checks only the image's steps)."""
    cli = engine.find()
    image_id = engine.image_id(cli, ref)
    if image_id is None:
        raise BuildError(
            f"image {ref} not found: nothing to rebuild and compare",
            hint=f"python -m ci build {target.id}   (or pass the image with --image)",
        )
    labels = json.loads(_inspect(cli, ref, "{{json .Config.Labels}}") or "{}") or {}
    head = revision.git_info(root).revision
    if labels.get("org.opencontainers.image.revision") != head:
        raise BuildError(
            f"image {ref} was built from {labels.get('org.opencontainers.image.revision') or 'an unknown revision'}, "
            f"and this checkout is at {head}: a rebuild could only differ",
            hint=f"python -m ci build {target.id}   (then python -m ci verify {target.id} --rebuild)",
        )
    rows, problems = [], []
    if base_again and target.bootstrap is not None and labels.get(bootstrap.BASE_LOCK):
        side = f"{bootstrap.REPO.format(suite=target.bootstrap.suite)}:rebuild-{os.getpid()}"
        again = bootstrap.ensure(target, cli, root, again=side)
        subprocess.run([cli.path, "image", "rm", side], capture_output=True)
        want = labels.get("org.opencontainers.image.base.digest", "")
        verdict = "same" if again.image_id == want else "DIFFERS"
        rows.append((verdict, "base", f"bootstrapped from {again.lock.path.name}", again.image_id))
        if again.image_id != want:
            problems.append(
                f"the base bootstrapped again from {again.lock.path.name} is {again.image_id}, the image's is {want}"
            )
    side = side_tag(ref)
    rebuilt = build.build(target, tag=side, root=root, no_cache=True)
    layers = compare(cli, ref, side)
    for layer in layers:
        rows.append(("DIFFERS", f"layer {layer.index}/{layer.total}", layer.step[:60], "; ".join(layer.files[:2])))
        problems.append(layer.name() + ":\n    " + "\n    ".join(layer.files or ("(no member differs)",)))
    same = rebuilt.image_id == image_id
    rows.append(("same" if same else "DIFFERS", "image id", f"rebuilt {side}", rebuilt.image_id))
    sys.stdout.write(tables.text(("", "check", "item", "detail"), rows))
    if not same and not layers:
        problems.append(f"the layers are the same and the configs differ ({image_id} vs {rebuilt.image_id})")
    if problems:
        raise BuildError(
            f"verify --rebuild {ref}: the rebuild {side} differs:\n  " + "\n  ".join(problems),
            hint="make the step write the same bytes on every run (README.md, Reproducible images), then "
            f"python -m ci build {target.id} && python -m ci verify {target.id} --rebuild",
        )
    subprocess.run([cli.path, "image", "rm", side], capture_output=True)  # the same image: the tag adds nothing
    print(f"verify --rebuild {ref}: rebuilt from nothing in {rebuilt.seconds:.0f} s, the same image {image_id}")
    return 0
