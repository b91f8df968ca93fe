"""Resolve a hashed lock into wheels on the host, kept in a content-addressed cache.

The image build has no network (`--network none`): the host downloads every wheel the lock pins
(`pip download --require-hashes`, for the target's python and platform), and the build installs them
with `--no-index`. Files are stored as `<cache>/sha256/<hash>/<file>`, and `<cache>/locks/<lock hash>.json`
records which files a lock needs, so a lock already fetched costs no pip run at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ci.common import files, options
from ci.common.errors import BuildError
from ci.stack.model import Target

_MACHINE = {"linux/amd64": "x86_64", "linux/arm64": "aarch64"}
GLIBC_MINOR = 36  # the bases' glibc: Debian bookworm has 2.36 (the locks list every file; some are manylinux_2_31)


def platform_tags(platform: str) -> list[str]:
    """Every wheel tag the image's glibc accepts, newest first: pip matches --platform tags exactly, so a
    wheel published as manylinux2014 (manylinux_2_17) is found only when that tag is named too."""
    machine = _MACHINE[platform]
    tags = [f"manylinux_2_{minor}_{machine}" for minor in range(GLIBC_MINOR, 16, -1)]
    return [*tags, f"manylinux2014_{machine}"] + (
        [f"manylinux2010_{machine}", f"manylinux1_{machine}"] if machine == "x86_64" else []
    )


def cache_root() -> Path:
    return options.cache_home() / "wheels"


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch(target: Target, lock: Path, cache: Path | None = None) -> list[Path]:
    """The cached wheel files `lock` needs, downloading whatever is missing."""
    cache = cache or cache_root()
    index = cache / "locks" / f"{file_digest(lock)}-{target.python}-{target.platform.replace('/', '_')}.json"
    if index.is_file():
        kept = [cache / "sha256" / e["sha256"] / e["file"] for e in json.loads(index.read_text())]
        if all(f.is_file() for f in kept):
            return kept
    (cache / "tmp").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache / "tmp") as tmp:
        argv = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--disable-pip-version-check",
            "--require-hashes",
            "--no-deps",
            "--only-binary=:all:",
            "-r",
            str(lock),
            "-d",
            tmp,
            "--python-version",
            target.python,
            "--implementation",
            "cp",
            *(arg for tag in platform_tags(target.platform) for arg in ("--platform", tag)),
        ]
        # A site-wide pip config (constraints, another index) can only contradict a lock that pins
        # every file by hash; ignore it.
        env = {**os.environ, "PIP_CONFIG_FILE": os.devnull}
        done = subprocess.run(argv, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise BuildError(
                f"{lock}: pip could not download the locked wheels for {target.id} "
                f"(python {target.python}, {target.platform}):\n{done.stderr.strip()[-2000:]}",
                hint="check network access to the index, or regenerate the lock (its header says how)",
            )
        entries = []
        for wheel in sorted(Path(tmp).iterdir()):
            digest = file_digest(wheel)
            dest = cache / "sha256" / digest / wheel.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            if not dest.exists():
                shutil.move(str(wheel), dest)
            entries.append({"file": wheel.name, "sha256": digest})
    files.replace(index, json.dumps(entries, indent=1) + "\n")
    return [cache / "sha256" / e["sha256"] / e["file"] for e in entries]


def stage(files: list[Path], dest: Path) -> None:
    """Make `dest` hold exactly `files` (hard links where possible: the triton wheel is 188 MB)."""
    dest.mkdir(parents=True, exist_ok=True)
    wanted = {f.name: f for f in files}
    for old in dest.iterdir():
        if old.name not in wanted or old.stat().st_ino != wanted[old.name].stat().st_ino:
            old.unlink()
    for name, src in wanted.items():
        if not (dest / name).exists():
            try:
                os.link(src, dest / name)
            except OSError:  # another filesystem
                shutil.copy2(src, dest / name)
