"""Which vLLM build a row ran on: a content id of the installed `vllm/` tree, and the fork build's manifest.

The id (`stackgate.vllm_build`) is a sha256 over exactly the bytes Python imports from the package: every file's
path and content, compiled parts (`*.so`) by their content (a binary replaced by another of the same size is another
build), and sourceless bytecode. Bytecode in `__pycache__` that this interpreter would load in place of its source
is checked against that source: where it is the source's own compile (what the interpreter, or `compileall`, writes
as it goes) it adds nothing, so the id does not move as caches are written; where it is anything else (a planted
`.pyc`, an unchecked-hash one that no longer follows its source) its bytes are part of the id, and a fork build's
manifest then names another tree. Standard library only: the image and a bare GPU host run it before vLLM is
imported, and `ci fork` loads this same file to name the trees it builds.

A fork build applies a bundle (`ci fork bundle`: the fork's `vllm/` files that differ from its base, the paths it
deletes, and a manifest) over the base wheel's installed tree: `apply` here, in the image's build and on a bare host
alike, reading it within bounds (a regular file, members counted and sized from their headers, strict JSON). It
leaves `stackgate-vllm-build.json` beside the package: the fork, ref and commit it came from, its base release and
the imported changes it holds (`stackgate.fork_changes`).
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import importlib.util
import json
import marshal
import os
import stat
import sys
import tarfile
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path, PurePosixPath

MANIFEST = "stackgate-vllm-build.json"  # beside the vllm package, in the same site folder
SCHEMA = 1
_PYC_HEADER = 16  # magic, flags, then the source's mtime and size, or its hash (PEP 552)


@functools.lru_cache(maxsize=65536)
def _sha256(path: Path, _stat: tuple[int, ...]) -> str:
    """A file's sha256, once per process for each state of the file (`_stat`: size, times, inode): every row in a
    shared process asks, and the compiled parts are hundreds of MB."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _state(path: Path) -> tuple[int, ...]:
    st = path.stat()
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def tree_id(package_dir: Path) -> str:
    """The content id of an installed package tree (`.../site-packages/vllm`): "sha256:<hex>"."""

    def digest(path: Path) -> str | None:
        if path.parent.name == "__pycache__" and path.suffix == ".pyc":
            return _cached_bytecode(path)  # None: never loaded here, or its source's own compile (the source says it)
        return _sha256(path, _state(path))

    return _framed(package_dir, digest)


def _framed(package_dir: Path, digest: Callable[[Path], str | None]) -> str:
    """The id of the tree's files by path and `digest` (a file it gives None is left out): "sha256:<hex>"."""
    site = package_dir.parent
    h = hashlib.sha256()
    for path in sorted(p for p in package_dir.rglob("*") if p.is_file() or p.is_symlink()):
        found = digest(path)
        if found is None:
            continue
        rel = os.fsencode(path.relative_to(site).as_posix())  # a name may hold any byte but NUL: framed by its length
        h.update(b"%d:%s\0%s\n" % (len(rel), rel, found.encode()))
    return "sha256:" + h.hexdigest()


PYTHON_SUFFIXES = (".py", ".pyi", ".pyc")


def native_id(package_dir: Path) -> str:
    """The content id of what a tree holds beside its Python (compiled parts, kernels' sources and data: every file
    but `.py`, `.pyi` and bytecode): two builds that differ only in Python files have one. Caches made on one are
    re-used on the other where their own keys allow (`ci bake --host --from`)."""

    def digest(path: Path) -> str | None:
        python = path.suffix in PYTHON_SUFFIXES or path.parent.name == "__pycache__"
        return None if python else _sha256(path, _state(path))

    return _framed(package_dir, digest)


def _cached_bytecode(pyc: Path) -> str | None:
    """The sha256 of a `__pycache__` file this interpreter would load in place of its source where that file is not
    the source's own compile; None where it is never loaded (another interpreter's or optimisation level's, a stale
    one, one whose source is gone: PEP 3147 loads none of those) or is exactly what compiling its source gives."""
    stem, _, rest = pyc.name.partition(".")
    tag, _, level = rest.removesuffix(".pyc").partition(".opt-")
    source = pyc.parent.parent / f"{stem}.py"
    mine = level == (str(sys.flags.optimize) if sys.flags.optimize else "")
    if tag != sys.implementation.cache_tag or not mine or not source.is_file():
        return None
    data, src = pyc.read_bytes(), source.read_bytes()
    if not _loaded(data, src, source):
        return None
    try:
        own = compile(src, str(source), "exec", dont_inherit=True, optimize=sys.flags.optimize)
        same = marshal.loads(data[_PYC_HEADER:]) == own
    except (ValueError, EOFError, TypeError, SyntaxError):
        same = False
    return None if same else _sha256(pyc, _state(pyc))


def _loaded(data: bytes, src: bytes, source: Path) -> bool:
    """Whether the import system would take this bytecode for `source` (importlib's own checks, PEP 552)."""
    if len(data) < _PYC_HEADER or data[:4] != importlib.util.MAGIC_NUMBER:
        return False
    flags = int.from_bytes(data[4:8], "little")
    if flags & 0b1:  # hash-based: checked ones must match the source; unchecked ones are loaded as they are
        return not flags & 0b10 or data[8:16] == importlib.util.source_hash(src)
    st = source.stat()
    return data[8:12] == (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") and data[12:16] == (
        st.st_size & 0xFFFFFFFF
    ).to_bytes(4, "little")


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
    out["fork"], out["base"] = doc.get("fork", {}), doc.get("base", {})
    out["fork_changes"] = list(doc.get("changes", []))
    if isinstance(doc.get("held"), dict):
        out["fork_held"] = {str(c): str(h.get("state", "")) for c, h in doc["held"].items() if isinstance(h, dict)}
    if doc.get("without"):
        out["without"] = doc["without"]
    if isinstance(doc.get("port"), dict) and doc["port"].get("change"):  # the fork with a port tried on it
        out["port"] = str(doc["port"]["change"])
    if doc.get("vllm_build") != built:
        out["mismatch"] = (
            f"the vLLM tree at {package_dir} is not the build {package_dir.parent / MANIFEST} names "
            f"({doc.get('vllm_build')}; the tree is {built}): rebuild it with `python -m ci fork build`"
        )
    return out


def properties(built: dict) -> list[tuple[str, str]]:
    """What a row records of the build it ran on (`describe`'s answer), each a `stackgate.` property's name and value:
    the tree's id and, for a fork build, the changes it holds, the fork and base it was built from (the same for a
    build, its ablations and the ports tried on it: what a comparison pairs), the change an ablation dropped or a
    port tried, and each change as the fork holds it ("48407:converged;46849:ported, edited")."""
    out = [("vllm_build", built["vllm_build"])]
    if "fork_changes" not in built:
        return out
    fork, base = built.get("fork", {}), built.get("base", {})
    out += [
        ("fork_changes", ",".join(built["fork_changes"])),
        ("fork", f"{fork.get('name')} {fork.get('ref')} {str(fork.get('built', ''))[:12]}"),
        ("fork_source", f"{fork.get('name')}@{fork.get('commit')} over {base.get('version')}@{base.get('commit')}"),
    ]
    if built.get("without"):
        out.append(("fork_without", built["without"]))
    if built.get("port"):
        out.append(("fork_port", built["port"]))
    if built.get("fork_held"):
        out.append(("fork_held", ";".join(f"{c}:{s}" for c, s in sorted(built["fork_held"].items()))))
    return out


def under_test() -> Path | None:
    """The `vllm` package this interpreter would import, found without importing it (None: none)."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


BUNDLE_MANIFEST = "stackgate-fork.json"  # the bundle's own manifest, first member
OVERLAY = "overlay/"  # the bundle's files, under their path in the package's site folder (overlay/vllm/...)
MEMBERS_MAX, MEMBER_BYTES_MAX = 100_000, 64 << 20  # an overlay of vllm/'s Python: no source file is near 1 MB


def _opened(bundle: Path) -> tarfile.TarFile:
    """The bundle open, where it is a regular file: tarfile would wait forever on a FIFO, and never end a device."""
    if not stat.S_ISREG(os.stat(bundle).st_mode):
        raise ValueError(f"{bundle}: not a regular file (a FIFO, a device?): not a fork bundle")
    return tarfile.open(bundle, "r:gz")


def _safe(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts or path.parts[0] != "vllm":
        raise ValueError(f"bundle path {name!r} is not inside vllm/")
    return path


def bundle_manifest(bundle: Path) -> dict:
    """A bundle's own manifest (its first member): the fork, its base release, what it holds; a ValueError naming the
    member where the bundle is not one."""
    try:
        with _opened(bundle) as tar:
            return _bundle_manifest(bundle, tar)
    except (tarfile.TarError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise ValueError(f"{bundle}: {BUNDLE_MANIFEST}: not a fork bundle, or a damaged one ({exc})") from None


def apply(bundle: Path, site: Path) -> dict:
    """Lay a fork bundle over the vLLM installed in `site` (in place), then write the build's manifest with the
    resulting tree's id. The base must be the release the bundle was made against; files are replaced by new
    inodes, never written through, so a tree of hard links to another install leaves that install as it was. A
    bundle that is not one (not gzip, cut short, its manifest of another shape, a member it does not list) is a
    ValueError naming the member."""
    member = BUNDLE_MANIFEST
    try:
        with _opened(bundle) as tar:
            doc = _bundle_manifest(bundle, tar)
            want = doc["base"]["version"]
            have = sorted(p.name[len("vllm-") : -len(".dist-info")] for p in site.glob("vllm-*.dist-info"))
            if have != [want]:
                raise ValueError(
                    f"{bundle} lays the fork over vLLM {want}; {site} holds vLLM {', '.join(have) or 'none'}"
                )
            for name in doc["deleted"]:
                target = site / _safe(name)
                if target.is_file() or target.is_symlink():
                    target.unlink()
            laid = set()
            for n, info in enumerate(tar, 1):
                member = info.name
                if n > MEMBERS_MAX or info.size > MEMBER_BYTES_MAX:  # from the header, before a byte is read
                    raise ValueError(
                        f"{bundle}: {member!r}: over {MEMBERS_MAX:,} members or {MEMBER_BYTES_MAX:,} bytes"
                    )
                if not member.startswith(OVERLAY):
                    continue
                rel = _safe(member[len(OVERLAY) :])
                if not info.isfile():
                    raise ValueError(f"{bundle}: {member} is not a regular file")
                if not _replace(site / rel, tar.extractfile(info), doc["files"].get(rel.as_posix())):  # type: ignore[arg-type]
                    raise ValueError(f"{bundle}: {member} does not match the bundle's manifest (a damaged bundle)")
                laid.add(rel.as_posix())
    except (tarfile.TarError, EOFError, gzip.BadGzipFile, zlib.error) as exc:  # a write's own OSError goes up as such
        raise ValueError(
            f"{bundle}: {member}: not a fork bundle, or a damaged one ({type(exc).__name__}: {exc})"
        ) from None
    if missing := sorted(set(doc["files"]) - laid):
        raise ValueError(f"{bundle}: its manifest lists files it does not hold: {', '.join(missing[:5])}")
    built = {
        "schema": SCHEMA,
        "vllm_build": tree_id(site / "vllm"),
        **{k: doc[k] for k in ("fork", "base", "changes", "without")},
        # each imported change as the fork holds it (state, commits), what an ablation removed, the port a try made
        **{k: doc[k] for k in ("held", "removed", "port") if k in doc},
        "files": {"changed": len(doc["files"]), "deleted": len(doc["deleted"])},
    }
    _replace(site / MANIFEST, (json.dumps(built, indent=1, sort_keys=True) + "\n").encode())
    return built


# the bundle manifest's fields apply reads, with the JSON shape each must have
_SHAPE = {"base": dict, "deleted": list, "files": dict, "fork": dict, "changes": list}


def _bundle_manifest(bundle: Path, tar: tarfile.TarFile) -> dict:
    first = tar.next()  # the manifest is the first member, its size read from its header before a byte of it
    if first is None or first.name != BUNDLE_MANIFEST or first.size > MEMBER_BYTES_MAX:
        raise ValueError(f"{bundle}: no {BUNDLE_MANIFEST} of at most {MEMBER_BYTES_MAX:,} bytes: not a fork bundle")
    try:  # bounded in size; no NaN or Infinity; a nesting too deep for the parser is no manifest
        doc = json.loads(tar.extractfile(first).read(), parse_constant=_not_a_number)  # type: ignore[union-attr]
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{bundle}: {BUNDLE_MANIFEST} is not JSON ({type(exc).__name__})") from None
    wrong = [k for k, kind in _SHAPE.items() if not isinstance(doc, dict) or not isinstance(doc.get(k), kind)]
    if not wrong and not isinstance(doc["base"].get("version"), str):
        wrong = ["base.version"]
    if not wrong and not all(isinstance(v, str) for v in (*doc["deleted"], *doc["files"].values())):
        wrong = ["deleted or files (not all strings)"]
    held = doc.get("held", {}) if not wrong else {}
    if not isinstance(held, dict) or not all(isinstance(h, dict) for h in held.values()):
        wrong = ["held (an object of objects)"]
    if wrong:
        raise ValueError(f"{bundle}: {BUNDLE_MANIFEST} is no bundle manifest: {', '.join(wrong)} missing or malformed")
    doc.setdefault("without", None)
    return doc


def _not_a_number(name: str) -> float:
    raise ValueError(f"{name} is no number JSON has")


def _replace(target: Path, src: tarfile.ExFileObject | bytes, sha256: str | None = None) -> bool:
    """A new file beside `target` (a random name), `src` streamed into it and hashed, renamed over it where `sha256`."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".stackgate-tmp")
    try:
        h = hashlib.sha256()
        with os.fdopen(fd, "wb") as fh:
            for block in [src] if isinstance(src, bytes) else iter(lambda: src.read(1 << 20), b""):
                h.update(block)
                fh.write(block)
        if sha256 is None or h.hexdigest() == sha256:
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
        return not os.path.lexists(tmp)  # renamed in: its bytes were the ones named
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
