"""Which vLLM build a row ran on: a content id of the installed `vllm/` tree, and the fork build's manifest.

The id (`stackgate.vllm_build`) is a sha256 over every file of the package, path and content, so two
builds of the same fork ref give the same id wherever they were made, and a tree edited after its build
gives another. Compiled parts (`*.so`) are named by the hash the wheel's RECORD gives them where their
size still matches (hashing hundreds of MB of device code at every row's start would cost seconds);
everything else is hashed as it is on disk. Standard library only: the image and a bare GPU host run it
before vLLM is imported, and `ci fork` loads this same file to name the trees it builds.

A fork build applies a bundle (`ci fork bundle`: the fork's `vllm/` files that differ from its base, the
paths it deletes, and a manifest) over the base wheel's installed tree: `apply` here, in the image's build
and on a bare host alike. It leaves `stackgate-vllm-build.json` beside the package: the fork, ref and
commit it came from, its base release and the imported changes it holds (`stackgate.fork_changes`).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import os
import sys
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

MANIFEST = "stackgate-vllm-build.json"  # beside the vllm package, in the same site folder
SCHEMA = 1


def _compiled(path: Path) -> bool:
    return path.suffix == ".so" or ".so." in path.name


def record_hashes(site: Path, package: str = "vllm") -> dict[str, tuple[str, int]]:
    """path -> (sha256 hex, size) from the installed distribution's RECORD (empty where there is none)."""
    found: dict[str, tuple[str, int]] = {}
    for record in sorted(site.glob(f"{package}-*.dist-info/RECORD")):
        with record.open(newline="") as fh:
            for row in csv.reader(fh):
                if len(row) >= 3 and row[1].startswith("sha256=") and row[2].isdigit():
                    raw = base64.urlsafe_b64decode(row[1][len("sha256=") :] + "==")
                    found[row[0]] = (raw.hex(), int(row[2]))
    return found


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def tree_id(package_dir: Path) -> str:
    """The content id of an installed package tree (`.../site-packages/vllm`): "sha256:<hex>"."""
    site, name = package_dir.parent, package_dir.name
    recorded = record_hashes(site, name)
    h = hashlib.sha256()
    for path in sorted(p for p in package_dir.rglob("*") if p.is_file() or p.is_symlink()):
        rel = path.relative_to(site).as_posix()
        if "__pycache__" in path.parts or path.suffix == ".pyc":
            continue  # bytecode follows its source; the interpreter writes it as it goes
        known = recorded.get(rel)
        compiled = _compiled(path) and known and path.stat().st_size == known[1]
        digest = known[0] if compiled and known else _sha256(path)
        h.update(f"{rel}\0{digest}\n".encode())
    return "sha256:" + h.hexdigest()


def read_manifest(package_dir: Path) -> dict | None:
    """The fork build's manifest beside the package, or None for a tree no fork build made (a stock wheel)."""
    path = package_dir.parent / MANIFEST
    if not path.is_file():
        return None
    doc = json.loads(path.read_text())
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ValueError(f"{path}: not a stackgate vLLM build manifest (schema {SCHEMA})")
    return doc


def describe(package_dir: Path) -> dict:
    """What a row records: the tree's id and, for a fork build, what it holds. A tree that is not the build its
    manifest names (edited, or another vLLM installed over it) says so in `mismatch`."""
    built = tree_id(package_dir)
    doc = read_manifest(package_dir)
    out: dict = {"vllm_build": built}
    if doc is None:
        return out
    out["fork"] = doc.get("fork", {})
    out["base"] = doc.get("base", {})
    out["fork_changes"] = list(doc.get("changes", []))
    if doc.get("without"):
        out["without"] = doc["without"]
    if doc.get("vllm_build") != built:
        out["mismatch"] = (
            f"the vLLM tree at {package_dir} is not the build {package_dir.parent / MANIFEST} names "
            f"({doc.get('vllm_build')}; the tree is {built}): rebuild it with `python -m ci fork build`"
        )
    return out


BUNDLE_MANIFEST = "stackgate-fork.json"  # the bundle's own manifest, first member
OVERLAY = "overlay/"  # the bundle's files, under their path in the package's site folder (overlay/vllm/...)


def _safe(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts or path.parts[0] != "vllm":
        raise ValueError(f"bundle path {name!r} is not inside vllm/")
    return path


def apply(bundle: Path, site: Path) -> dict:
    """Lay a fork bundle over the vLLM installed in `site` (in place), then write the build's manifest with the
    resulting tree's id. The base must be the release the bundle was made against; files are replaced by new
    inodes, never written through, so a tree of hard links to another install leaves that install as it was."""
    with tarfile.open(bundle, "r:gz") as tar:
        head = tar.extractfile(BUNDLE_MANIFEST)
        if head is None:
            raise ValueError(f"{bundle}: no {BUNDLE_MANIFEST}: not a fork bundle (make one with `ci fork bundle`)")
        doc = json.loads(head.read())
        want = doc["base"]["version"]
        have = sorted(p.name[len("vllm-") : -len(".dist-info")] for p in site.glob("vllm-*.dist-info"))
        if have != [want]:
            raise ValueError(f"{bundle} lays the fork over vLLM {want}; {site} holds vLLM {', '.join(have) or 'none'}")
        package = site / "vllm"
        for name in doc["deleted"]:
            target = site / _safe(name)
            if target.is_file() or target.is_symlink():
                target.unlink()
        for member in tar.getmembers():
            if not member.name.startswith(OVERLAY):
                continue
            rel = _safe(member.name[len(OVERLAY) :])
            if not member.isfile():
                raise ValueError(f"{bundle}: {member.name} is not a regular file")
            data = tar.extractfile(member).read()  # type: ignore[union-attr]
            if hashlib.sha256(data).hexdigest() != doc["files"].get(rel.as_posix()):
                raise ValueError(f"{bundle}: {rel} does not match the bundle's manifest (a damaged bundle)")
            _replace(site / rel, data)
    built = {
        "schema": SCHEMA,
        "vllm_build": tree_id(package),
        **{k: doc[k] for k in ("fork", "base", "changes", "without")},
        "files": {"changed": len(doc["files"]), "deleted": len(doc["deleted"])},
    }
    _replace(site / MANIFEST, (json.dumps(built, indent=1, sort_keys=True) + "\n").encode())
    return built


def _replace(target: Path, data: bytes) -> None:
    """`target` as a new inode holding `data`: made exclusively beside it (a random name), then renamed over it, so
    neither a symlink at a fixed temporary name nor a hard link at `target` is written through."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".stackgate-tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


if __name__ == "__main__":
    # python -m harness.vllm_build SITE/vllm            what a row records
    # python harness/vllm_build.py apply BUNDLE SITE     the image's fork layer
    if sys.argv[1:2] == ["apply"]:
        print(json.dumps(apply(Path(sys.argv[2]), Path(sys.argv[3])), indent=1, sort_keys=True))
    else:
        print(json.dumps(describe(Path(sys.argv[1]).resolve()), indent=1, sort_keys=True))
