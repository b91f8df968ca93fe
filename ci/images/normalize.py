"""The same inputs give the same image bytes: an image's own layers and config rewritten deterministically.

The engine's BuildKit (0.8) stamps every file a build step writes with the time it ran, and the config's
`created` and history with the time of the build, so two builds of one commit differ in every layer they
make. Newer BuildKit rewrites timestamps itself (`rewrite-timestamp`); this engine cannot. So a build's
image is saved (`docker save`), each layer above the base is rewritten as a tar that depends on its
contents only, and the result is loaded back (`docker load`) as a normal image:

- every member's mtime is the base's time (its `created`; the lock's time for a bootstrapped base), clamped
  to SOURCE_DATE_EPOCH, the commit time: one time for every file, since a file COPY'd from a checkout carries
  the checkout's time, older than the commit in one clone and newer in another; and not the commit time
  itself, which would make every commit's layers new ones, where an unchanged step's layer is shared now;
- members in name order, a hard-linked group's data under its first name; user and group names dropped
  (the numeric ids stay); of the PAX records only extended attributes are kept (no atime, ctime);
- the config's `created` and the times of the history entries the build added set to SOURCE_DATE_EPOCH (a
  step BuildKit answered from its cache keeps the time of the build that ran it), keys sorted.

The base's layers are kept as they are (`ci.images.debian.bootstrap` makes a bootstrapped one deterministic
itself) and not sent back with `docker load`: the engine holds them, and finds a layer by its chain of ids
before it reads the file. The file contents are the build's: a step that writes a time or a random name
into a file still differs, and `ci verify --rebuild` names it.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from ci.common import files
from ci.common.errors import BuildError
from ci.engine import DockerCli, image_id

_KEEP_PAX = "SCHILY.xattr."  # file capabilities and other extended attributes are content
RULES = 2  # bump when the rewrite changes: `finish` remembers the images made under these rules only


@dataclass(frozen=True, kw_only=True)
class Saved:
    """An image as `docker save` wrote it: the archive, its config and its layer members in order."""

    archive: tarfile.TarFile
    config: dict[str, Any]
    layers: tuple[str, ...]

    def layer(self, index: int) -> IO[bytes]:
        member = self.archive.extractfile(self.layers[index])
        if member is None:
            raise BuildError(f"docker save: layer {self.layers[index]} is not a file")
        return member


@contextmanager
def saved(cli: DockerCli, ref: str, workdir: Path) -> Iterator[Saved]:
    path = workdir / f"saved-{hashlib.sha256(ref.encode()).hexdigest()[:12]}.tar"
    with path.open("wb") as out:
        done = subprocess.run([cli.path, "save", ref], stdout=out, stderr=subprocess.PIPE, text=False)
    if done.returncode != 0:
        raise BuildError(f"docker save {ref} failed: {done.stderr.decode(errors='replace').strip()[-800:]}")
    with tarfile.open(path) as archive:
        manifest = _json(archive, "manifest.json")
        if not isinstance(manifest, list) or len(manifest) != 1:
            raise BuildError(f"docker save {ref}: manifest.json holds {len(manifest)} images, not one")
        yield Saved(archive=archive, config=_json(archive, manifest[0]["Config"]), layers=tuple(manifest[0]["Layers"]))
    path.unlink()


def _json(archive: tarfile.TarFile, name: str) -> Any:
    member = archive.extractfile(name)
    if member is None:
        raise BuildError(f"docker save: {name} is missing from the archive")
    return json.load(member)


class _Hashing(io.RawIOBase):
    """A write-only file that hashes what passes through it on its way to `out`."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out, self.sha = out, hashlib.sha256()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.sha.update(data)
        self.out.write(data)
        return len(data)


def rewrite_layer(src: IO[bytes], dst: Path, epoch: int) -> str:
    """Write the layer tar `src` to `dst` deterministically (module docstring); returns its diff id."""
    with tarfile.open(fileobj=src, mode="r:") as tar:
        by_name = {m.name: m for m in tar.getmembers()}
        # A hard link may sort before the file it names: each group's first name then holds the data.
        data_of: dict[str, tarfile.TarInfo] = {}  # every name of a hard-linked group -> the member with the data
        for m in by_name.values():
            target = m
            while target.islnk() and target.linkname in by_name:
                target = by_name[target.linkname]
            if target is not m and target.isreg():
                data_of[m.name] = data_of[target.name] = target
        first = {}
        for name, target in sorted(data_of.items(), reverse=True):
            first[target.name] = name  # ends holding the smallest name of the group
        with dst.open("wb") as raw, _Hashing(raw) as out:
            with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as dest:  # type: ignore[arg-type]
                for name in sorted(by_name):
                    if name not in data_of:
                        m = by_name[name]
                        dest.addfile(_clean(m, name, epoch), tar.extractfile(m) if m.isreg() else None)
                        continue
                    target = data_of[name]
                    info = _clean(target, name, epoch)
                    if first[target.name] == name:
                        dest.addfile(info, tar.extractfile(target))
                    else:
                        info.type, info.linkname, info.size = tarfile.LNKTYPE, first[target.name], 0
                        dest.addfile(info)
            return out.sha.hexdigest()


def _clean(m: tarfile.TarInfo, name: str, epoch: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.REGTYPE if m.isreg() else m.type  # AREGTYPE too
    info.mode, info.size = m.mode, m.size if m.isreg() else 0
    info.uid, info.gid, info.uname, info.gname = m.uid, m.gid, "", ""
    info.linkname, info.devmajor, info.devminor = m.linkname, m.devmajor, m.devminor
    info.mtime = epoch
    info.pax_headers = {k: v for k, v in m.pax_headers.items() if k.startswith(_KEEP_PAX)}
    return info


def rfc3339(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def config_bytes(config: dict[str, Any], diff_ids: list[str], epoch: int, *, base_history: int = 0) -> bytes:
    """The config with the rewritten layers' ids and the build's times set to `epoch`, in one canonical spelling;
    the first `base_history` history entries are the base's, kept as they are."""
    out = dict(config)
    out["created"] = rfc3339(epoch)
    history = config.get("history") or []
    out["history"] = history[:base_history] + [{**h, "created": rfc3339(epoch)} for h in history[base_history:]]
    out["rootfs"] = {"type": "layers", "diff_ids": diff_ids}
    return json.dumps(out, sort_keys=True, separators=(",", ":")).encode()


def load(cli: DockerCli, config: bytes, layers: list[Path | None], tags: tuple[str, ...]) -> str:
    """`docker load` an image made of `config` and the layer tars `layers` (None: a layer the engine holds,
    with every layer under it); returns its id."""
    image_id = "sha256:" + hashlib.sha256(config).hexdigest()
    manifest = [
        {
            "Config": f"{image_id[7:]}.json",
            "RepoTags": list(tags),
            "Layers": [f"{i:03d}/layer.tar" for i in range(len(layers))],
        }
    ]
    proc = subprocess.Popen(
        [cli.path, "load", "--quiet"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert proc.stdin is not None
    try:
        with tarfile.open(fileobj=proc.stdin, mode="w|") as tar:
            for i, layer in enumerate(layers):
                if layer is not None:
                    tar.add(layer, arcname=f"{i:03d}/layer.tar")
            for name, data in ((f"{image_id[7:]}.json", config), ("manifest.json", json.dumps(manifest).encode())):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    except BrokenPipeError:
        pass  # docker load stopped reading: its stderr below says why
    proc.stdin.close()
    err = proc.stderr.read() if proc.stderr else b""
    proc.wait()
    if proc.returncode != 0:
        raise BuildError(f"docker load of {image_id[:19]} failed: {err.decode(errors='replace').strip()[-800:]}")
    return image_id


@dataclass(frozen=True, kw_only=True)
class Base:
    """What of an image is its base's: its first `layers` layers and `history` history entries, and its time."""

    layers: int
    history: int
    created: int


def base_of(cli: DockerCli, ref: str) -> Base:
    fmt = "{{len .RootFS.Layers}} {{.Created}}"
    done = subprocess.run([cli.path, "image", "inspect", "--format", fmt, ref], capture_output=True, text=True)
    history = subprocess.run([cli.path, "history", "--quiet", ref], capture_output=True, text=True)
    if done.returncode != 0 or history.returncode != 0:
        raise BuildError(f"the base {ref} is not in the engine: {done.stderr.strip()}", hint="build again")
    layers, created = done.stdout.split()
    when = datetime.fromisoformat(created.replace("Z", "+00:00")[:19] + "+00:00")  # no fractions of a second
    return Base(layers=int(layers), history=len(history.stdout.splitlines()), created=int(when.timestamp()))


def normalize(cli: DockerCli, ref: str, *, base: Base, epoch: int, tags: tuple[str, ...]) -> str:
    """Rewrite the image `ref` above its `base`; load it under `tags`; return its id."""
    mtime = min(base.created, epoch)
    with tempfile.TemporaryDirectory(prefix="stackgate-image-") as tmp, saved(cli, ref, Path(tmp)) as image:
        layers: list[Path | None] = [None] * base.layers
        diff_ids = list(image.config["rootfs"]["diff_ids"][: base.layers])
        for i in range(base.layers, len(image.layers)):
            layers.append(Path(tmp) / f"{i:03d}.tar")
            diff_ids.append("sha256:" + rewrite_layer(image.layer(i), Path(tmp) / f"{i:03d}.tar", mtime))
        config = config_bytes(image.config, diff_ids, epoch, base_history=base.history)
        return load(cli, config, layers, tags)


def finish(cli: DockerCli, raw: str, *, base: str, epoch: int, tags: tuple[str, ...], memo: Path) -> str:
    """The reproducible image of the build `raw` (an untagged image id), under `tags`; returns its id.

    `memo` remembers what each build became, so a build that BuildKit answered from its cache is not
    rewritten again (a second build of a commit takes seconds). The raw image is removed: its layers stay
    in BuildKit's cache, which is what makes that second build fast."""
    key = memo / _key(cli, raw, epoch)
    final = key.read_text().strip() if key.is_file() else ""
    if final and image_id(cli, final) == final:
        for tag in tags:
            subprocess.run([cli.path, "tag", final, tag], check=True, capture_output=True)
    else:
        final = normalize(cli, raw, base=base_of(cli, base), epoch=epoch, tags=tags)
        files.replace(key, final + "\n")
    if raw != final:
        subprocess.run([cli.path, "image", "rm", raw], capture_output=True)  # in use elsewhere: left there
    return final


def _key(cli: DockerCli, raw: str, epoch: int) -> str:
    """What the rewritten image depends on, less the times BuildKit gives a build (they differ between a
    build that ran its steps and one answered from the cache, and the rewrite drops them anyway)."""
    fmt = "{{json .RootFS.Layers}}{{json .Config}}{{.Os}}{{.Architecture}}{{.Variant}}"
    inspect = subprocess.run([cli.path, "image", "inspect", "--format", fmt, raw], capture_output=True, text=True)
    steps = subprocess.run(
        [cli.path, "history", "--no-trunc", "--format", "{{.CreatedBy}}", raw], capture_output=True, text=True
    )
    if inspect.returncode != 0 or steps.returncode != 0:
        raise BuildError(f"docker build reported {raw} and the engine has no such image: {inspect.stderr.strip()}")
    return hashlib.sha256(f"{inspect.stdout}{steps.stdout}{epoch}{RULES}".encode()).hexdigest()
