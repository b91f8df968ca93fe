"""An offline base image from Debian packages, for builders that cannot pull the pinned base.

The base is made from the target's Debian package lock (`ci.images.debian.debs`): mmdebstrap writes a root
filesystem holding exactly the locked versions, with the lock's SOURCE_DATE_EPOCH, as a tar; that tar is
the image's one layer, and the config is written here (the target's platform, the lock's time), then
`docker load`ed. So the base is a function of its lock's bytes (never of the lock file's name: two targets
locking the same packages share one base): tagged by the lock's hash, made once and reused, and made again
elsewhere it has the same id. A foreign architecture is bootstrapped under QEMU user
emulation (binfmt). BuildKit in the engine cannot resolve `name@sha256:<id>` for a loaded image (it has no
repository digest and BuildKit then asks a registry), so the base is referred to by a tag that embeds its
full image id, and `ci.images` checks that the tag still resolves to that id before every build.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ci.common.errors import BuildError
from ci.engine import DockerCli, image_id
from ci.images import normalize
from ci.images.debian import debs
from ci.stack.model import Target

REPO = "localhost/stackgate-base-{suite}"
BASE_LOCK = "stackgate.base_lock"  # the label naming the Debian lock a base (and every image on it) came from
_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True, kw_only=True)
class Bootstrapped:
    name: str  # the tag embedding the image id, for FROM
    image_id: str
    lock: debs.DebLock


def lock_tag(target: Target, lock: debs.DebLock) -> str:
    """The tag a base made from `lock` is found by: the lock's hash and the hash of the config written for it, so a
    base an older stackgate made with another config (its id differs) is never taken for this one."""
    assert target.bootstrap is not None
    recipe = hashlib.sha256(config(target, lock, "")).hexdigest()
    return f"{REPO.format(suite=target.bootstrap.suite)}:lock-{lock.digest[7:23]}-{recipe[:8]}"


def ensure(target: Target, cli: DockerCli, root: Path, *, again: str | None = None) -> Bootstrapped:
    """The bootstrapped base of `target`, made from its lock where absent. `again`: make it anew under that
    tag even where the lock's base is present (`ci verify --rebuild`: the same lock must give the same id)."""
    if target.bootstrap is None:
        raise BuildError(f"target {target.id} has no bootstrap recipe in stack/targets.yaml")
    lock = debs.read(target, root)
    tag = again or lock_tag(target, lock)
    found = (None if again else image_id(cli, tag)) or make(target, cli, lock, tag)
    pinned = f"{REPO.format(suite=target.bootstrap.suite)}:id-{found.removeprefix('sha256:')}"
    subprocess.run([cli.path, "tag", found, pinned], check=True, capture_output=True)
    return Bootstrapped(name=pinned, image_id=found, lock=lock)


def config(target: Target, lock: debs.DebLock, diff_id: str) -> bytes:
    """The base's image config: the target's platform, the lock's time and hash, nothing of this host and nothing of
    where the lock lies (a base found by the lock's hash may have been made from another target's lock file)."""
    os_, arch = target.platform.split("/")[:2]
    created = normalize.rfc3339(lock.epoch)
    doc = {
        "architecture": arch,
        **({"variant": "v8"} if arch == "arm64" else {}),
        "os": os_,
        "created": created,
        "config": {"Env": [_PATH], "Cmd": ["bash"], "WorkingDir": "/", "Labels": {BASE_LOCK: lock.digest}},
        "history": [
            {
                "created": created,
                "created_by": f"mmdebstrap --variant=custom --include=<the {len(lock.packages)} packages of "
                f"the Debian lock {lock.digest[:19]}> (SOURCE_DATE_EPOCH={lock.epoch})",
            }
        ],
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def make(target: Target, cli: DockerCli, lock: debs.DebLock, tag: str) -> str:
    with tempfile.TemporaryDirectory(prefix="stackgate-base-") as tmp:
        rootfs = Path(tmp) / "rootfs.tar"
        debs.bootstrap(target, lock, rootfs)
        sha = hashlib.sha256()
        with rootfs.open("rb") as fh:
            while block := fh.read(1 << 20):
                sha.update(block)
        made = normalize.load(cli, config(target, lock, f"sha256:{sha.hexdigest()}"), [rootfs], (tag,))
    if image_id(cli, tag) != made:
        raise BuildError(f"docker load reported success but {tag} is not {made}")
    return made
