"""The bootstrapped base pinned by content: a lock of the exact Debian package versions it holds.

`python -m ci lock <target> --base` bootstraps the target's recipe (stack/targets.yaml `bootstrap`) once,
reads the versions that went in, and writes `containers/locks/<target>.debs.txt`: one `name=version` a line,
under a header with the recipe's hash, the mirror and the base's SOURCE_DATE_EPOCH (the time of the lock).
The base is then made from the lock alone (`mmdebstrap --variant=custom --include=name=version,...`, that
epoch), so two bootstraps of one lock give one image, on any day. A version the mirror no longer has fails
naming it (Debian keeps one version per suite; a snapshot mirror in the recipe keeps old ones); a recipe
edited since the lock was resolved fails too. Neither drifts to what the archive holds that day.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ci.common import files
from ci.common.errors import BuildError, NotHere
from ci.stack.model import Target

SUFFIX = ".debs.txt"
_LINE = re.compile(r"^([a-z0-9][a-z0-9+.-]+)=([A-Za-z0-9.+~:-]+)\Z")
_GONE = re.compile(r"E: Version '([^']+)' for '([^']+)' was not found")


@dataclass(frozen=True, kw_only=True)
class DebLock:
    path: Path
    where: str  # the path as errors name it: containers/locks/<target>.debs.txt
    digest: str  # sha256:<hex> of the file: the base's tag and the images' stackgate.base_lock label
    epoch: int  # the base's SOURCE_DATE_EPOCH
    packages: tuple[tuple[str, str, int], ...]  # name, version, line

    def include(self) -> str:
        return ",".join(f"{name}={version}" for name, version, _ in self.packages)


def lock_path(target: Target, root: Path) -> Path:
    return root / "containers" / "locks" / f"{target.id}{SUFFIX}"


def recipe_hash(target: Target) -> str:
    """What the lock was resolved from: editing the recipe in stack/targets.yaml calls for a new lock."""
    assert target.bootstrap is not None
    b = target.bootstrap
    recipe = {
        "suite": b.suite,
        "variant": b.variant,
        "include": sorted(b.include),
        "mirror": b.mirror,
        "platform": target.platform,
    }
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def _relock(target: Target) -> str:
    return f"python -m ci lock {target.id} --base   (resolves the recipe again: a new base, newer packages)"


def read(target: Target, root: Path) -> DebLock:
    path = lock_path(target, root)
    where = path.relative_to(root) if path.is_relative_to(root) else path
    if not path.is_file():
        raise NotHere(f"{where}: no Debian package lock for the base of {target.id}", hint=_relock(target))
    text = path.read_text()
    fields: dict[str, str] = {}
    packages = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("#"):
            key, sep, value = line[1:].strip().partition(": ")
            if sep and key in ("recipe", "source-date-epoch"):
                fields[key] = value.strip()
        elif line.strip():
            m = _LINE.match(line.strip())
            if not m:
                raise BuildError(f"{where}:{n}: {line.strip()!r} is not name=version", hint=_relock(target))
            packages.append((m.group(1), m.group(2), n))
    if not packages or not fields.get("source-date-epoch", "").isdigit():
        raise BuildError(f"{where}: no packages or no '# source-date-epoch: N' line", hint=_relock(target))
    if fields.get("recipe") != recipe_hash(target):
        raise BuildError(
            f"{where}: resolved for recipe {fields.get('recipe')}, but stack/targets.yaml [targets: {target.id}]"
            f".bootstrap is now recipe {recipe_hash(target)}",
            hint=_relock(target),
        )
    digest = "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    epoch = int(fields["source-date-epoch"])
    return DebLock(path=path, where=str(where), digest=digest, epoch=epoch, packages=tuple(packages))


def _mmdebstrap(target: Target) -> str:
    found = shutil.which("mmdebstrap")
    if not found:
        raise BuildError(
            f"the base of {target.id} is bootstrapped and mmdebstrap is not installed",
            hint="apt-get install mmdebstrap   (or docker load the pinned base image)",
        )
    return found


def _arch(target: Target) -> str:
    return target.platform.split("/")[1]


# What of the caller's environment reaches mmdebstrap: only how to reach the mirror, never what changes the bytes
# (PYTHONDONTWRITEBYTECODE, say, decides whether the maintainer scripts' own imports leave timestamped .pyc files).
_PASSED = ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "TMPDIR", "HOME")


def bootstrap_env(epoch: int) -> dict[str, str]:
    """The one environment a base is bootstrapped in, whoever runs it (a shell, a CI agent with a bare PATH): the
    lock's time, which mmdebstrap clamps what it writes to, and the same locale, zone, PATH and byte-code setting."""
    fixed = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "PYTHONDONTWRITEBYTECODE": "1",  # py3compile writes the .pyc files, hash-checked under SOURCE_DATE_EPOCH
        "SOURCE_DATE_EPOCH": str(epoch),
    }
    return {**{k: os.environ[k] for k in _PASSED if k in os.environ}, **fixed}


def bootstrap(target: Target, lock: DebLock, out: Path) -> list[str]:
    """Write the base's root filesystem, exactly the lock's packages, to the tar `out`; returns the argv."""
    assert target.bootstrap is not None
    b = target.bootstrap
    argv = [
        _mmdebstrap(target),
        "--variant=custom",
        f"--architectures={_arch(target)}",
        "--skip=output/dev",
        f"--include={lock.include()}",
        b.suite,
        str(out),
        b.mirror,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, env=bootstrap_env(lock.epoch))
    if done.returncode == 0:
        return argv
    where = lock.where
    gone = {pkg: version for version, pkg in _GONE.findall(done.stderr)}
    if gone:
        lines = "; ".join(f"{where}:{n}: {name}={v}" for name, v, n in lock.packages if gone.get(name) == v)
        raise BuildError(
            f"the base of {target.id} cannot be made from its lock any more: {b.mirror} {b.suite} no longer has "
            f"{lines}",
            hint=f"{_relock(target)}; or point the recipe's mirror at a snapshot that holds these versions",
        )
    tail = "\n".join(line for line in done.stderr.splitlines() if line.startswith(("E:", "W:")))[-1500:]
    if "arch-test" in tail or "foreign architecture" in tail:  # this host cannot: exit 6, with the report
        raise NotHere(
            f"bootstrapping the base of {target.id} ({target.platform}) needs foreign-architecture support here:\n"
            f"{tail}",
            hint=f"apt-get install arch-test qemu-user-static binfmt-support, or build on a {target.platform} host",
        )
    raise BuildError(
        f"bootstrapping the base of {target.id} failed (mmdebstrap, {b.mirror} {b.suite}):\n{tail}",
        hint=f"check that {b.mirror} is reachable, mmdebstrap runs as root, and (for a foreign "
        "architecture) that QEMU is registered: apt-get install qemu-user-static",
    )


def resolve(target: Target, root: Path) -> Path:
    """Bootstrap the recipe as the archive offers it today and write the versions it installed as the lock."""
    assert target.bootstrap is not None
    b = target.bootstrap
    with tempfile.TemporaryDirectory(prefix="stackgate-debs-") as tmp:
        listing = Path(tmp) / "packages"
        query = f'dpkg-query --admindir="$1/var/lib/dpkg" -W -f="\\${{Package}}=\\${{Version}}\\n" > {listing}'
        argv = [
            _mmdebstrap(target),
            "--quiet",
            f"--variant={b.variant}",
            f"--architectures={_arch(target)}",
            f"--include={','.join(b.include)}",
            "--format=null",
            f"--customize-hook={query}",
            b.suite,
            "/dev/null",
            b.mirror,
        ]
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0 or not listing.is_file():
            raise NotHere(
                f"resolving the Debian packages of {target.id} failed ({b.mirror} {b.suite}):\n"
                f"{done.stderr.strip()[-1500:]}",
                hint=f"run `python -m ci lock {target.id} --base` on a host that reaches {b.mirror}, as "
                "root, with mmdebstrap",
            )
        packages = sorted(line.strip() for line in listing.read_text().splitlines() if line.strip())
    out = lock_path(target, root)
    header = [
        f"# The Debian packages of the {target.id} base ({b.suite}, {target.platform}, bootstrapped from {b.mirror}),",
        "# each pinned: the base is made from exactly these with the source-date-epoch below, so two bootstraps",
        "# of this file give the same image. Resolved from stack/targets.yaml's recipe. Regenerate:",
        f"#   python -m ci lock {target.id} --base",
        f"# recipe: {recipe_hash(target)}",
        f"# source-date-epoch: {int(time.time())}",
    ]
    files.replace(out, "\n".join([*header, *packages]) + "\n")
    return out
