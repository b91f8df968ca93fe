"""The image's AOT layer, on this host (`ci run --host`): the target's kernel lists compiled into the
Triton cache of the target's runtime root (`ci.run.caches`, which `ci bake --host` packs), read by the rows
at the same path, so a host run is judged with a baked cache like an image run."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from ci import contract, files, options
from ci.run import caches
from ci.stack.model import Target


def bake(target: Target, env: Mapping[str, str], suites: Path) -> dict[str, str]:
    """The image's AOT layer, on this host: the target's kernel lists compiled into a Triton cache that the
    rows then read at the same path (cache entries hold absolute paths). Cached across runs, so a second
    run compiles nothing. Returns the env the rows need, or {} (saying why) where the bake failed."""
    if not target.kernel_lists:
        return {}
    if importlib.util.find_spec("triton") is None:  # the cpu target's host: nothing to compile, and no reason to try
        print(f"host AOT bake of {target.id} not run: no triton in {sys.executable}; rows run unbaked", flush=True)
        return {}
    aot = caches.root(target)  # the runtime caches' root: the bake artefact carries this cache too
    baked = {"TRITON_CACHE_DIR": str(aot / "triton"), "STACKGATE_KERNEL_LIST": str(aot / "aot-manifest.json")}
    lists = [str(options.REPO / "containers" / "kernels" / name) for name in target.kernel_lists]
    key = _key(target, lists, env, suites)
    stamp = aot / "aot-key"
    if stamp.is_file() and stamp.read_text() == key and (aot / "aot-manifest.json").is_file():
        return baked  # baked from the same lists by the same triton and Python: nothing to do
    cmd = [
        sys.executable,
        "-m",
        "harness.aot",
        "bake",
        *lists,
        "--targets",
        ",".join(target.triton_targets),
        "--manifest",
        baked["STACKGATE_KERNEL_LIST"],
    ]
    own_log = {contract.ENV_JIT_LOG: str(aot / "aot-bake-jit.jsonl")}  # the bake's compiles are not the rows'
    done = subprocess.run(cmd, env={**env, **baked, **own_log}, capture_output=True, text=True, check=False)
    if done.returncode != 0:  # one line here; the traceback, where there is one, in the log beside the cache
        said = [line for line in done.stderr.splitlines() if line.strip()]
        log = aot / "aot-bake.log"
        with contextlib.suppress(OSError):
            files.replace(log, done.stdout + done.stderr)
        print(
            f"host AOT bake of {target.id} failed (exit {done.returncode}: {said[-1] if said else 'no output'}); "
            f"rows run unbaked; its output: {log}",
            flush=True,
        )
        return {}
    files.replace(stamp, key)
    return baked


def _key(target: Target, lists: list[str], env: Mapping[str, str], suites: Path) -> str:
    """What the baked cache depends on: the lists, the triton targets, this interpreter, and which triton
    install (its version, and its path: the HIP backend's keys hash paths inside the install, so two venvs
    with the same triton bake different keys)."""
    from importlib import metadata

    try:
        triton = metadata.version("triton")
    except metadata.PackageNotFoundError:
        triton = "absent"
    spec = importlib.util.find_spec("triton")
    where = spec.origin if spec is not None else "none"
    parts = [sys.version, sys.executable, triton, str(where), ",".join(target.triton_targets), env.get("PYTHONPATH")]
    h = hashlib.sha256("|".join(map(str, parts)).encode())
    for path in lists:
        h.update(Path(path).read_bytes())
    h.update((suites / "harness" / "aot.py").read_bytes())
    return h.hexdigest()
