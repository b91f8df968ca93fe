"""The bake as a portable artefact, for hosts without docker (`ci bake TARGET --host --out DIR`) and the
runs that use it (`ci run ... --host --caches ARTEFACT`).

Every JIT cache a run writes (Triton, inductor, vLLM's compile cache with DeepGEMM's, FlashInfer, numba,
CUDA's compute cache) lives under one root per target, at the same absolute path when baking and when
running: cache keys embed paths. The bake runs the suites' warm-up (`harness.warm_run`) there after the
host AOT bake, then packs the root as one tarball named by the hash of its key and of its content, with
a manifest: the key (what invalidates the caches: vLLM and its tree's content id, torch, triton, Python,
driver, GPU, target, the root's path) and every file with its sha256. A run installs an artefact only where
its key is this host's, field by field, and says which field differs otherwise.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import shutil
import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from ci.common import untrusted
from ci.common.errors import UsageError
from ci.common.escape import one_line
from ci.common.files import staged
from ci.run import host, smi
from ci.run.artefact import read
from ci.stack.model import Target

MANIFEST = read.MANIFEST
# each cache's environment variable and its folder under the root
CACHE_ENV = {
    "TRITON_CACHE_DIR": "triton",
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
    "VLLM_CACHE_ROOT": "vllm",  # DeepGEMM's JIT cache lives below it
    "FLASHINFER_WORKSPACE_BASE": "flashinfer",
    "NUMBA_CACHE_DIR": "numba",
    "CUDA_CACHE_PATH": "nv",
    "AITER_JIT_DIR": "aiter",
    "MIOPEN_USER_DB_PATH": "miopen",
    "TILELANG_CACHE_DIR": "tilelang",  # DeepSeek-V4's mHC kernels (vllm/model_executor/kernels/mhc)
    "CUTE_DSL_CACHE_DIR": "cute-dsl",  # CuTe DSL kernels: DeepSeek-V4's KV compressor, FlashInfer's GDN prefill
}  # the same names as the JIT sentinel's CACHE_ENV (it watches them; a test holds the two together)


def root(target: Target) -> Path:
    base = os.environ.get("STACKGATE_RUNTIME_CACHES") or Path.home() / ".cache" / "stackgate" / "runtime"
    return Path(base) / target.id


def env(target: Target) -> dict[str, str]:
    """The runtime env that points every JIT cache into the target's root."""
    top = root(target)
    return {name: str(top / sub) for name, sub in CACHE_ENV.items()}


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "absent"


def vllm_build_here() -> str | None:
    """The content id of the vLLM tree this host's Python imports, or None where it has none."""
    made = _vllm_build()
    return None if made == "absent" else made


def _vllm_build(part: str = "tree_id") -> str:
    """The content id of the vLLM tree this host's Python imports (harness.vllm_build), found without importing it;
    with `part` "native_id", of what it holds beside its Python files."""
    import importlib.util

    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return "absent"
    from ci.fork import site

    return str(getattr(site.vllm_build(), part)(Path(next(iter(spec.submodule_search_locations)))))


# the key's fields a bake's seed may differ in (`seed`): the build's Python files, where all beside them is the same
# (vllm_native). Every runtime cache keys its entries by what made them (Triton by kernel source, vLLM's compile cache
# by the files it traced, inductor by the graph): an entry a Python edit makes stale is never hit, only kept.
SEEDABLE = ("vllm_build",)


def _driver() -> str:
    found = smi.rows(["driver_version"])
    return found[0][0] if found and found[0][0] else "none"


AOT_FILES = ("triton", "aot-manifest.json", "aot-key", "aot-bake-jit.jsonl")  # what the AOT bake writes


# vLLM names its compiled-graph folder by a hash of every VLLM_* variable but these (paths, logging, ports,
# telemetry: vllm/envs.py, compile_factors): one switch set in a run and not in its bake sends every graph to
# a folder the bake never filled (seen on the H200: VLLM_FLASHINFER_ALLREDUCE_BACKEND, set by one side only)
_NOT_COMPILE_ENV = (
    "VLLM_CACHE_ROOT",
    "VLLM_LOGGING_",
    "VLLM_CONFIGURE_LOGGING",
    "VLLM_NO_USAGE_STATS",
    "VLLM_DO_NOT_TRACK",
    "VLLM_USAGE_",
    "VLLM_PORT",
    "VLLM_HOST_IP",
    "VLLM_RPC_BASE_PATH",
    "VLLM_DP_MASTER_",
)


def compile_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables of `env` that vLLM hashes into its compile cache's key."""
    return {k: v for k, v in sorted(env.items()) if k.startswith("VLLM_") and not k.startswith(_NOT_COMPILE_ENV)}


def key(target: Target, kind: str = "warm", rows_env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What invalidates the caches on this host. A warm-run bake ("warm") holds inductor's and vLLM's caches,
    made on this GPU and driver, with the rows' env (`rows_env`: vLLM keys its graphs by its switches); the AOT bake
    alone ("aot") is Triton's cache for the target's triton targets, made with a stand-in driver, so no GPU,
    driver or switch is part of its key."""
    common = {
        "kind": kind,
        "target": target.id,
        "root": str(root(target)),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "vllm": _version("vllm"),
        "vllm_build": _vllm_build(),  # the fork and the fork without a change share the release, not the tree
        "vllm_native": _vllm_build("native_id"),  # the same for two builds that differ in Python files alone
        "torch": _version("torch"),
        "triton": _version("triton"),
    }
    if kind == "aot":
        return {**common, "triton_targets": ",".join(target.triton_targets)}
    switches = compile_env(os.environ if rows_env is None else rows_env)
    return {**common, "driver": _driver(), "gpu": host.describe(), "compile_env": switches}


def pack(
    target: Target,
    out: Path,
    kind: str = "warm",
    rows_env: Mapping[str, str] | None = None,
    rows: Mapping[str, str] | None = None,
) -> Path:
    """The root as one tarball (for "aot", only what the AOT bake wrote); its name carries the kind, the
    key's hash and the content's. `rows_env` is the one the warm-up ran with; `rows`, the rows it ran to a result
    and their outcome there (what a run from it can expect to find warm: `ci run --rows-baked`)."""
    top = root(target)
    files = sorted(p for p in top.rglob("*") if p.is_file())
    if kind == "aot":
        files = [p for p in files if p.relative_to(top).parts[0] in AOT_FILES]
    entries = [{"path": str(p.relative_to(top)), "sha256": _sha256(p), "bytes": p.stat().st_size} for p in files]
    doc: dict[str, Any] = {"schema": 1, "key": key(target, kind, rows_env), "files": entries}
    if rows is not None:
        doc["rows"] = dict(sorted(rows.items()))
    blob = json.dumps(doc, indent=1, sort_keys=True).encode()
    key_hash = hashlib.sha256(json.dumps(doc["key"], sort_keys=True).encode()).hexdigest()[:12]
    content_hash = hashlib.sha256(json.dumps(entries, sort_keys=True).encode()).hexdigest()[:12]
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"caches-{target.id}-{kind}-{key_hash}-{content_hash}.tar.gz"
    with staged(path) as fh, tarfile.open(fileobj=fh, mode="w:gz") as tar:  # a name only a whole artefact has
        info = tarfile.TarInfo(MANIFEST)
        info.size = len(blob)
        tar.addfile(info, io.BytesIO(blob))
        for p in files:
            tar.add(p, arcname=f"root/{p.relative_to(top)}", recursive=False)
    return path


@dataclass(frozen=True)
class Installed:
    env: dict[str, str]  # what points every JIT cache into the root
    came: str  # the rows' caches condition: the artefact, and how many files the root held beside it
    rows: Mapping[str, str] | None  # the rows its bake ran to a result, and their outcome (None: not recorded)
    files: Mapping[str, str]  # the files it put into the root, by path: their sha256
    same_build: bool  # made from the very vLLM build this host imports (a seed may differ in SEEDABLE fields)


def install(
    target: Target, artefact: Path, rows_env: Mapping[str, str] | None = None, *, seed: bool = False
) -> Installed:
    """Unpack an artefact into the target's root, refusing one made for another host or with other switches
    than the rows' env (`rows_env`); what it installed (the rows start from it and from what earlier runs there
    compiled). Every member is
    checked against the manifest (name, size, sha256) in a folder beside the root before anything moves into it: a
    member the manifest does not list, one that differs, or an archive cut short is refused, and the root is left
    as it was. `seed`: the artefact seeds a bake (`ci bake --host --from`): its key may differ in SEEDABLE fields."""
    fix = f"make one with: python -m ci bake {target.id} --host --out DIR"
    top = root(target)
    top.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{top.name}.install-", dir=top.parent))
    try:
        try:
            with read.opened(artefact, fix) as (tar, members, made):
                listed, same_build = _for_here(made, target, rows_env, artefact, seed)
                rows = made.rows
                read.check_members(listed, members, artefact)
                for m in members:
                    m.name = m.name.removeprefix("root/")
                tar.extractall(staging, members=members, filter="data")
                assert tar.fileobj is not None
                while tar.fileobj.read(1 << 20):  # to the gzip trailer: its length and CRC are checked there
                    pass
        except (*untrusted.DAMAGED, KeyError, ValueError) as exc:
            raise UsageError(
                f"{one_line(artefact)}: not a caches artefact ({type(exc).__name__}: {one_line(exc)})", hint=fix
            ) from None
        for rel, (size, digest) in listed.items():
            got = staging / rel
            if got.stat().st_size != size or _sha256(got) != digest:
                raise UsageError(f"{artefact}: {rel} is not the file its manifest names (size or sha256)", hint=fix)
        for rel in listed:  # all checked: into place
            dest = top / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / rel, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    beside = sum(1 for p in top.rglob("*") if p.is_file() and str(p.relative_to(top)) not in listed)
    found = f", beside {beside} files earlier runs left there" if beside else ""
    print(f"caches: installed {artefact} ({len(listed)} files, checked against its manifest) into {top}{found}")
    came = f"artefact:{artefact.name}" + (f" + {beside} files found in the root" if beside else "")
    files = {rel: digest for rel, (_, digest) in listed.items()}
    return Installed(env(target), came, rows, files, same_build)


def _for_here(
    made: read.Manifest, target: Target, rows_env: Mapping[str, str] | None, artefact: Path, seed: bool
) -> tuple[dict[str, tuple[int, str]], bool]:
    """The artefact's files by path: (bytes, sha256), after its key is found to be this host's; and whether it was
    made from this host's very build (a seed's SEEDABLE fields may differ)."""
    kind = made.key.get("kind", "warm")
    here = key(target, kind if isinstance(kind, str) else "warm", rows_env)
    same_build = all(made.key.get(k) == here[k] for k in SEEDABLE)
    if seed and made.key.get("vllm_native") == here["vllm_native"]:
        here = {**here, **{k: made.key.get(k) for k in SEEDABLE}}
    mismatch = _differences(made.key, here)
    if mismatch:
        raise UsageError(
            f"{one_line(artefact)}: made for another host: {one_line('; '.join(mismatch))}",
            hint=f"bake one here: python -m ci bake {target.id} --host --out DIR",
        )
    return made.listed, same_build


def unbaked(target: Target, *, keep: bool = False) -> str:
    """The condition name of a run without AOT bake or artefact: "empty", refusing a root that already holds files;
    with `keep`, "as found" where it holds what earlier such runs compiled."""
    top = root(target)
    held = [p for p in top.rglob("*") if p.is_file()] if top.is_dir() else []
    if held and keep:
        return f"as found ({len(held)} files kept, no AOT bake)"
    if held:
        raise UsageError(
            f"--unbaked: {top} already holds {len(held)} cache file(s), e.g. {held[0].relative_to(top)}",
            hint="remove it, or point $STACKGATE_RUNTIME_CACHES at an empty folder",
        )
    return "empty"


def _differences(made: Mapping[str, Any], here: Mapping[str, Any], within: str = "") -> list[str]:
    found = []
    for k in sorted({*made, *here}):
        a, b = made.get(k), here.get(k)
        if isinstance(a, Mapping) and isinstance(b, Mapping):  # one line per differing switch, unset named so
            found += _differences(a, b, f"{within}{k} ")
        elif a != b:
            shown = [repr(v) if v is not None or not within else "unset" for v in (a, b)]
            found.append(f"{within}{k} {shown[0]} in the artefact, {shown[1]} here")
    return found


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
