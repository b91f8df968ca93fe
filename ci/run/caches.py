"""The bake as a portable artefact, for hosts without docker (`ci bake TARGET --host --out DIR`) and the
runs that use it (`ci run ... --host --caches ARTEFACT`).

Every JIT cache a run writes (Triton, inductor, vLLM's compile cache with DeepGEMM's, FlashInfer, numba,
CUDA's compute cache) lives under one root per target, at the same absolute path when baking and when
running: cache keys embed paths. The bake runs the suites' warm-up (`harness.warmup`) there after the
host AOT bake, then packs the root as one tarball named by the hash of its key and of its content, with
a manifest: the key (what invalidates the caches: vLLM, torch, triton, Python, driver, GPU, target, the
root's path) and every file with its sha256. A run installs an artefact only where its key is this
host's, field by field, and says which field differs otherwise.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import subprocess
import sys
import tarfile
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from ci.errors import UsageError
from ci.run import host
from ci.stack.model import Target

MANIFEST = "stackgate-caches.json"
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


def _driver() -> str:
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20)  # fmt: skip
        return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else "none"
    except (OSError, subprocess.SubprocessError):
        return "none"


AOT_FILES = ("triton", "aot-manifest.json", "aot-key", "aot-bake-jit.jsonl")  # what the AOT bake writes


def key(target: Target, kind: str = "warm") -> dict[str, str]:
    """What invalidates the caches on this host. A warm-run bake ("warm") holds inductor's and vLLM's caches,
    made on this GPU and driver; the AOT bake alone ("aot") is Triton's cache for the target's triton
    targets, made with a stand-in driver, so no GPU or driver is part of its key."""
    common = {
        "kind": kind,
        "target": target.id,
        "root": str(root(target)),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "vllm": _version("vllm"),
        "torch": _version("torch"),
        "triton": _version("triton"),
    }
    if kind == "aot":
        return {**common, "triton_targets": ",".join(target.triton_targets)}
    return {**common, "driver": _driver(), "gpu": host.describe()}


def pack(target: Target, out: Path, kind: str = "warm") -> Path:
    """The root as one tarball (for "aot", only what the AOT bake wrote); its name carries the kind, the
    key's hash and the content's."""
    top = root(target)
    files = sorted(p for p in top.rglob("*") if p.is_file())
    if kind == "aot":
        files = [p for p in files if p.relative_to(top).parts[0] in AOT_FILES]
    entries = [{"path": str(p.relative_to(top)), "sha256": _sha256(p), "bytes": p.stat().st_size} for p in files]
    doc = {"schema": 1, "key": key(target, kind), "files": entries}
    blob = json.dumps(doc, indent=1, sort_keys=True).encode()
    key_hash = hashlib.sha256(json.dumps(doc["key"], sort_keys=True).encode()).hexdigest()[:12]
    content_hash = hashlib.sha256(json.dumps(entries, sort_keys=True).encode()).hexdigest()[:12]
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"caches-{target.id}-{kind}-{key_hash}-{content_hash}.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo(MANIFEST)
        info.size = len(blob)
        tar.addfile(info, io.BytesIO(blob))
        for p in files:
            tar.add(p, arcname=f"root/{p.relative_to(top)}", recursive=False)
    return path


def install(target: Target, artefact: Path) -> dict[str, str]:
    """Unpack an artefact into the target's root, refusing one made for another host; the env to run with."""
    try:
        with tarfile.open(artefact, "r:gz") as tar:
            member = tar.extractfile(MANIFEST)
            if member is None:
                raise KeyError(MANIFEST)
            doc = json.loads(member.read())
            mismatch = _differences(doc["key"], key(target, doc["key"].get("kind", "warm")))
            if mismatch:
                raise UsageError(f"{artefact}: made for another host: {'; '.join(mismatch)}",
                                 hint=f"bake one here: python -m ci bake {target.id} --host --out DIR")  # fmt: skip
            top = root(target)
            top.mkdir(parents=True, exist_ok=True)
            members = [m for m in tar.getmembers() if m.name.startswith("root/") and m.isfile()]
            for m in members:
                m.name = m.name.removeprefix("root/")
            tar.extractall(top, members=members, filter="data")
    except (OSError, tarfile.TarError, KeyError, ValueError) as exc:
        raise UsageError(f"{artefact}: not a caches artefact ({type(exc).__name__}: {exc})",
                         hint=f"make one with: python -m ci bake {target.id} --host --out DIR") from None  # fmt: skip
    return env(target)


def unbaked(target: Target) -> str:
    """The condition name of a run from empty JIT caches, refusing a root that already holds files."""
    top = root(target)
    held = [p for p in top.rglob("*") if p.is_file()] if top.is_dir() else []
    if held:
        raise UsageError(f"--unbaked: {top} already holds {len(held)} cache file(s), e.g. {held[0].relative_to(top)}",
                         hint="remove it, or point $STACKGATE_RUNTIME_CACHES at an empty folder")  # fmt: skip
    return "empty"


def _differences(made: Mapping[str, Any], here: Mapping[str, Any]) -> list[str]:
    return [f"{k} {made.get(k)!r} in the artefact, {here.get(k)!r} here" for k in sorted({*made, *here})
            if made.get(k) != here.get(k)]  # fmt: skip


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def warm(target: Target, rows_json: Path, base_env: Mapping[str, str], suites: Path) -> int:
    """The suites' warm-up on this host, every cache pointed into the target's root."""
    run_env = {**base_env, **env(target), "STACKGATE_ROWS": str(rows_json),
               "STACKGATE_WARM_JIT_LOG": str(root(target) / "warm-bake-jit.jsonl")}  # fmt: skip
    argv = [sys.executable, "-m", "harness.warmup", "--rows", str(rows_json)]
    return subprocess.run(argv, env=run_env, cwd=suites, check=False).returncode
