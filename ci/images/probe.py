"""Runs INSIDE an image (`python -c <this file's text>`): reports what `ci.images.verify` checks, as JSON.

Standard library only: it must run in any of our images without importing ci/ or the image's harness.
"""

import importlib.util
import json
import mmap
import os
import re
import shutil
import subprocess
import sys
import sysconfig


def _cuobjdump():
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        import importlib.util

        spec = importlib.util.find_spec("triton")
    except Exception:
        spec = None
    if spec and spec.submodule_search_locations:
        path = os.path.join(spec.submodule_search_locations[0], "backends", "nvidia", "bin", "cuobjdump")
        if os.access(path, os.X_OK):
            return path
    return None


def _run(argv):
    done = subprocess.run(argv, capture_output=True, text=True)
    return done.stdout + done.stderr if done.returncode == 0 else ""


def _hsaco_target(path):
    with open(path, "rb") as fh:
        data = fh.read()
    found = re.search(rb"amdgcn-amd-amdhsa--gfx[0-9a-f]+", data)
    return found.group(0).decode() if found else ""


def cache_entries(cache, cuobjdump):
    out = []
    for key in sorted(os.listdir(cache)) if os.path.isdir(cache) else []:
        folder = os.path.join(cache, key)
        for name in os.listdir(folder):
            if not name.endswith(".json") or name.startswith("__grp__"):
                continue
            with open(os.path.join(folder, name)) as fh:
                meta = json.load(fh)
            stem = name[: -len(".json")]
            entry = {
                "key": key,
                "kernel": meta.get("name", stem),
                "hash": meta.get("hash", ""),
                "target": "{}:{}".format(meta["target"]["backend"], meta["target"]["arch"]),
                "binary": "",
                "arch": "",
            }
            cubin, hsaco = os.path.join(folder, stem + ".cubin"), os.path.join(folder, stem + ".hsaco")
            if os.path.isfile(cubin):
                entry["binary"] = cubin
                entry["arch"] = _run([cuobjdump, "--list-elf", cubin]).strip() if cuobjdump else "no cuobjdump"
            elif os.path.isfile(hsaco):
                entry["binary"], entry["arch"] = hsaco, _hsaco_target(hsaco)
            out.append(entry)
    return out


def cuda_objects(top, cuobjdump):
    """Shared objects carrying CUDA device code: the ELF (SASS) and PTX each one lists."""
    out = []
    for root, _, files in os.walk(top):
        for f in files:
            if ".so" not in f:
                continue
            path = os.path.join(root, f)
            try:
                with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                    if mm.find(b".nv_fatbin") < 0:  # libtorch_cuda is GBs: search, do not read
                        continue
            except (OSError, ValueError):
                continue
            elf = _run([cuobjdump, "--list-elf", path]) if cuobjdump else ""
            ptx = _run([cuobjdump, "--list-ptx", path]) if cuobjdump else ""
            out.append({"path": path, "elf": elf.splitlines(), "ptx": ptx.splitlines()})
    return out


def _read_json(path):
    if not os.path.isfile(path):
        return None
    with open(path) as fh:
        return json.load(fh)


def main(scan_so, env_keys=()):
    purelib = sysconfig.get_paths()["purelib"]
    cuobjdump = _cuobjdump()
    manifest_path = "/opt/stackgate/aot/manifest.json"
    report = {
        "python": sys.version.split()[0],
        "sentinel": {
            "pth": os.path.isfile(os.path.join(purelib, "stackgate_jit_sentinel.pth")),
            "loaded_at_start": "stackgate_jit_sentinel" in sys.modules,
            "triton_imported_at_start": "triton" in sys.modules,
            "log": os.environ.get("STACKGATE_JIT_LOG", ""),  # contract.ENV_JIT_LOG (it imports nothing of ci)
        },
        "triton_cache_dir": os.environ.get("TRITON_CACHE_DIR", ""),
        "cuobjdump": cuobjdump or "",
        "manifest": _read_json(manifest_path),
        "entries": cache_entries(os.environ.get("TRITON_CACHE_DIR", ""), cuobjdump),
        "cuda_objects": cuda_objects(purelib, cuobjdump) if scan_so else [],
        "torch": importlib.util.find_spec("torch") is not None,
        "env": {k: os.environ.get(k) for k in env_keys},
    }
    json.dump(report, sys.stdout)


if __name__ == "__main__":
    keys = sys.argv[sys.argv.index("--env") + 1].split(",") if "--env" in sys.argv else []
    main(scan_so="--scan-so" in sys.argv, env_keys=[k for k in keys if k])
