"""The fork's vLLM as an overlay: the `vllm/` files its commit changes against its base release, packed with a
manifest into one deterministic bundle that `harness.vllm_build.apply` lays over the base wheel's tree.

The overlay is Python-only by construction: a diff that touches compiled sources (csrc/, CMake, setup.py's
extensions, CUDA/C++ files, whatever the case of their suffix) is refused, naming the files, because the base
wheel's binaries would not be the fork's; those forks take the source-build route (`containers/source/Dockerfile`,
`ci.images.source_build`). The files are git's own blobs (`ls-tree`, `cat-file --batch`), never `git archive`'s
output, which applies the fork's attributes (`export-ignore` drops a file, `export-subst` and `core.autocrlf` change
its bytes); what an overlay cannot hold, a symlink or a submodule under `vllm/`, or a name that is not UTF-8, is
refused by name.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ci.common import files
from ci.common.errors import UsageError
from ci.common.escape import one_line
from ci.fork.ablate import Dropped
from ci.fork.bundle_read import MANIFEST, OVERLAY  # the names harness.vllm_build reads
from ci.fork.source import Fork
from ci.upstream.port.tried import Tried
from ci.upstream.release import source_build

Ported = tuple[Tried, Fork]  # a port tried, and the fork as read at its tip

PACKAGE = "vllm/"
COMPILED_DIRS = ("csrc/", "cmake/")
COMPILED_FILES = ("CMakeLists.txt", "setup.py")
COMPILED_SUFFIXES = (  # compared lower-cased: `.CU` is CUDA too
    *(".cu", ".cuh", ".cpp", ".cc", ".c", ".h", ".hpp", ".hip", ".cmake"),
    *(".cxx", ".c++", ".hh", ".hxx", ".h++", ".inl", ".ipp", ".tpp", ".tcc", ".pyx", ".pxd", ".pxi", ".s"),
)


class CompiledSources(UsageError):
    """The fork's diff changes what the base wheel compiled: an overlay would run the base's binaries."""


@dataclass(frozen=True, kw_only=True)
class Overlay:
    commit: str  # the tree built: the fork's ref, or an ablation's commit
    files: dict[str, bytes]  # path -> the fork's file, for every vllm/ file added or modified (git's blobs)
    deleted: tuple[str, ...]
    outside: tuple[str, ...]  # changed paths outside the package (tests, docs): not part of the build

    @property
    def changed(self) -> dict[str, str]:
        """path -> sha256 of each added or modified file: the bundle's manifest."""
        return {p: hashlib.sha256(data).hexdigest() for p, data in self.files.items()}


def compiled(paths: list[str]) -> list[str]:
    return [
        p
        for p in paths
        if p.startswith(COMPILED_DIRS) or p in COMPILED_FILES or PurePosixPath(p).suffix.lower() in COMPILED_SUFFIXES
    ]


def overlay(fork: Fork, commit: str) -> Overlay:
    status = touched(fork, commit)
    in_pkg = [p for p in status if p.startswith(PACKAGE)]
    kept = [p for p in in_pkg if status[p] != "D"]
    return Overlay(
        commit=commit,
        files=_blobs(fork, commit, kept),
        deleted=tuple(p for p in in_pkg if status[p] == "D"),
        outside=tuple(p for p in status if not p.startswith(PACKAGE)),
    )


def touched(fork: Fork, commit: str) -> dict[str, str]:
    """Each path the fork's diff against its base touches -> git's status letter, in path order; refused where a path
    is not UTF-8 or a compiled source (the overlay cannot carry it). One `git diff`, no file read: `ci pipeline`
    checks a fork with it before any agent builds."""
    co, base = fork.checkout, fork.base
    out = co.git("diff", "--no-renames", "--name-status", "-z", base.commit, commit, "--")
    parts = out.split("\0")
    status = dict(zip(parts[1::2], parts[0::2], strict=False))
    status.pop("", None)
    paths = sorted(status)
    undecodable = [p for p in paths if any("\udc80" <= c <= "\udcff" for c in p)]  # git's bytes, surrogate-escaped
    if undecodable:
        raise UsageError(
            f"the fork's diff against its base names files that are not UTF-8: {', '.join(map(ascii, undecodable))}",
            hint="rename them in the fork: a bundle's manifest names every file in UTF-8",
        )
    bad = compiled(paths)
    if bad:
        shown = ", ".join(map(one_line, bad[:8])) + (f" and {len(bad) - 8} more" if len(bad) > 8 else "")
        raise CompiledSources(
            f"the fork's diff against its base {base.version} ({base.commit[:12]}..{commit[:12]}) "
            f"changes compiled sources: {shown}; a Python overlay over the base wheel would run the base's binaries",
            hint=f"build those from source: {source_build(co, commit)} (containers/source/Dockerfile, "
            "TORCH_CUDA_ARCH_LIST from the target); or drop the compiled change",
        )
    return {p: status[p] for p in paths}


def _blobs(fork: Fork, commit: str, paths: list[str]) -> dict[str, bytes]:
    """The files at `commit` as git stores them, read in two processes (`ls-tree` of the package, then one
    `cat-file --batch` of their blobs): no attribute or filter applies. A path that is a symlink or a submodule there
    is refused by name: the overlay holds regular files only, and leaving one out would build another tree."""
    if not paths:
        return {}
    co = fork.checkout
    listed = co.raw("ls-tree", "-r", "-z", "--full-tree", commit, "--", PACKAGE)
    entries = {}
    for line in listed.split(b"\0"):
        meta, _, name = line.partition(b"\t")
        if meta:
            mode, _kind, oid = meta.split()
            entries[os.fsdecode(name)] = (mode.decode(), oid.decode())
    wanted = {p: entries.get(p) for p in paths}
    odd = [
        f"{one_line(p)} ({_KINDS.get(e[0], e[0]) if e else 'not in the tree'})"
        for p, e in wanted.items()
        if not e or e[0] not in _FILES
    ]
    if odd:
        raise UsageError(
            f"the fork's {commit[:12]} holds under {PACKAGE} what an overlay of regular files cannot: {', '.join(odd)}",
            hint="make them regular files in the fork (a symlink's target copied, a submodule's files vendored)",
        )
    out = co.raw("cat-file", "--batch", stdin="".join(f"{e[1]}\n" for e in wanted.values() if e).encode())
    found, at = {}, 0
    for path, (_, oid) in ((p, e) for p, e in wanted.items() if e):
        header_end = out.index(b"\n", at)
        got_oid, _kind, size = out[at:header_end].split()
        if got_oid.decode() != oid:
            raise UsageError(
                f"git cat-file answered {got_oid.decode()} for {one_line(path)} ({oid})",
                hint=co.command("fsck"),
            )
        found[path] = out[header_end + 1 : header_end + 1 + int(size)]
        at = header_end + 1 + int(size) + 1
    return found


_FILES = ("100644", "100755")
_KINDS = {"120000": "a symlink", "160000": "a submodule", "040000": "a folder"}


def manifest(fork: Fork, ov: Overlay, *, dropped: Dropped | None, ported: Ported | None = None) -> dict:
    """What the bundle is: the fork, its base, and each imported change as ci.upstream.holds.classify found it (its
    state and the commits that carry it); for an ablation, the change removed and the commits reverted; for a port
    tried (`ported`: the port, and the fork read at its tip), each change as read at the port's tip and the port itself
    (the fork's commit stays the fork's: the two builds are one fork at one base, differing by the port)."""
    base = fork.base
    without = dropped.change if dropped else None
    read = ported[1] if ported else fork
    held = {
        c.change: {"state": c.state if c.change != without else "removed", "commits": list(c.carried_by)}
        for c in read.snap.changes
        if c.pr
    }
    return {
        "schema": 1,
        "fork": {"name": fork.name, "ref": fork.ref, "commit": fork.commit, "built": ov.commit},
        "base": {
            "version": base.version,
            "ref": base.ref,
            "commit": base.commit,
            "release_commit": base.release_commit,
        },
        "changes": [c for c in read.present if c != without],
        "held": held,
        "without": without,
        "removed": (
            {"change": dropped.change, "state": dropped.state, "reverted": list(dropped.reverted), "how": dropped.how}
            if dropped
            else None
        ),
        **({"port": _port(ported[0])} if ported else {}),
        "files": ov.changed,
        "deleted": list(ov.deleted),
        "outside_package": len(ov.outside),
    }


def _port(t: Tried) -> dict:
    """A port tried, as the bundle records it: ids and PR numbers only."""
    return {
        "change": t.change,
        "onto": t.onto,
        "commits": [c for c, _ in t.commits],
        "prerequisites": [p.commit for p in t.prerequisites],
    }


def write(fork: Fork, ov: Overlay, out: Path, *, dropped: Dropped | None = None, ported: Ported | None = None) -> Path:
    """The bundle, byte for byte the same for the same fork commit (fixed member order, times and owners)."""
    doc = manifest(fork, ov, dropped=dropped, ported=ported)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _add(tar, MANIFEST, json.dumps(doc, indent=1, sort_keys=True).encode())
        for path in sorted(ov.files):
            _add(tar, OVERLAY + path, ov.files[path])
    return files.replace(out, gzip.compress(raw.getvalue(), mtime=0))  # never through a planted X.tmp symlink


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, 0
    tar.addfile(info, io.BytesIO(data))
