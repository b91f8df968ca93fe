"""`python -m ci verify <target|image>`: prove an image's promises without a GPU.

Checks, each a row of the printed table: the labels a build sets; the base pinned by digest (and, for a
bootstrapped base, the Debian lock it was made from: `stackgate.base_lock`); the JIT sentinel loaded at
interpreter start; every kernel of the target's lists baked for every triton target (entry present, binary
for the right arch: `cuobjdump --list-elf` names sm_<cc>a, the hsaco names gfx<id>); for cuda images,
every shared object with device code carries SASS for the target arch.
The image is inspected with the docker SDK and probed by running `ci/images/image_probe.py` inside it.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ci import engine as container
from ci.common import tables
from ci.common.errors import BuildError
from ci.images.build import LABELS
from ci.images.debian import bootstrap
from ci.stack.model import Stack, Target

PROBE = Path(__file__).with_name("image_probe.py")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}\Z")


@dataclass(frozen=True, kw_only=True)
class Check:
    what: str
    item: str
    ok: bool
    detail: str


def expected_kernels(target: Target, root: Path) -> list[tuple[str, str, int]]:
    """(kernel name, triton target, number of specialisations) the image must hold."""
    out = []
    for name in target.kernel_lists:
        doc = yaml.safe_load((root / "containers" / "kernels" / name).read_text())
        for k in doc["kernels"]:
            for tt in target.triton_targets:
                out.append((k["name"], tt, len(k.get("specialisations") or [{}])))
    return out


def _arch_of(triton_target: str) -> str:
    backend, _, arch = triton_target.partition(":")
    if backend == "hip":
        return arch
    cc = int(arch)
    return f"sm_{cc}a" if cc >= 90 else f"sm_{cc}"  # Triton compiles >= sm_90 for the "a" variant


def _sass_names(arch_list: tuple[str, ...]) -> set[str]:
    """ELF names whose SASS runs on the target, by CUDA's binary compatibility: a cubin for X.y runs on X.z
    for every z >= y, so '12.1a' takes sm_121a (arch-specific: that exact chip), sm_121 and sm_120, and the
    family cubins sm_120f and sm_121f; never another major version."""
    names = set()
    for a in arch_list:
        major, _, minor = a.rstrip("af").partition(".")
        names.add(f"sm_{major}{minor}a")
        for m in range(int(minor or 0) + 1):
            names |= {f"sm_{major}{m}", f"sm_{major}{m}f"}
    return names


def check_kernels(target: Target, probe: dict[str, Any], root: Path) -> list[Check]:
    out = []
    for kernel, tt, count in expected_kernels(target, root):
        arch = _arch_of(tt)
        found = [e for e in probe["entries"] if e["kernel"] == kernel and e["target"] == tt]
        good = [e for e in found if e["binary"] and arch in e["arch"]]
        item = f"{kernel} [{tt}]"
        if len(good) >= count:
            shown = sorted({line.split(":")[-1].strip() for e in good for line in e["arch"].splitlines()})
            out.append(
                Check(what="kernel baked", item=item, ok=True, detail=f"{len(good)} entries, {', '.join(shown)}")
            )
        elif found:
            out.append(
                Check(
                    what="kernel baked",
                    item=item,
                    ok=False,
                    detail=f"{len(good)}/{count} entries with {arch} code: {[e['arch'] for e in found]}",
                )
            )
        else:
            out.append(
                Check(
                    what="kernel baked",
                    item=item,
                    ok=False,
                    detail=f"0/{count} entries: not in the Triton cache {probe['triton_cache_dir']}",
                )
            )
    return out


def check_cuda_objects(target: Target, probe: dict[str, Any]) -> list[Check]:
    if target.family != "cuda":
        return [Check(what="CUDA SASS", item="shared objects", ok=True, detail=f"n/a ({target.family} image)")]
    wanted = _sass_names(target.arch_list)
    out = []
    for obj in probe["cuda_objects"]:
        name = Path(obj["path"]).name
        elf = {m.group(0) for line in obj["elf"] for m in [re.search(r"sm_\d+[af]?", line)] if m}
        if not elf and not obj["ptx"]:
            continue  # a fatbin section with no kernel in it (nvJitLink, cutlass's IR bindings): no device code
        ok = bool(elf & wanted)
        detail = f"SASS {', '.join(sorted(elf))}" + ("" if ok else f"; no {'/'.join(sorted(wanted)[:2])}…")
        if not ok and obj["ptx"]:
            detail += f", {len(obj['ptx'])} PTX (refused at run time: CUDA_DISABLE_PTX_JIT)"
        why = target.sass_exempt.get(name)
        if not ok and why:
            out.append(Check(what="CUDA SASS", item=name, ok=True, detail=f"exempt: {why} ({detail})"))
            continue
        out.append(Check(what="CUDA SASS", item=name, ok=ok, detail=detail))
    if not probe["cuda_objects"]:
        # a stand-in lock (CI's small cuda build) installs no CUDA library; a real one (torch) must have some
        detail = "no .so with device code found" + ("" if probe.get("torch") else ": the lock installs no CUDA library")
        out.append(Check(what="CUDA SASS", item="shared objects", ok=not probe.get("torch"), detail=detail))
    return out


def checks(target: Target, labels: dict[str, str], probe: dict[str, Any], root: Path) -> list[Check]:
    out = [
        Check(what="label", item=k, ok=bool(labels.get(k)), detail=labels.get(k) or "missing")
        for k in LABELS
        if k != "org.opencontainers.image.base.digest"
    ]
    digest = labels.get("org.opencontainers.image.base.digest", "")
    base = labels.get("org.opencontainers.image.base.name", "?")
    out.append(
        Check(
            what="base pinned",
            item=base,
            ok=bool(_DIGEST.match(digest)),
            detail=digest or "no digest: built from a tag with --allow-unpinned",
        )
    )
    if base.startswith(bootstrap.REPO.partition("{")[0]):  # a bootstrapped base: its Debian lock is what went in
        lock = labels.get(bootstrap.BASE_LOCK, "")
        detail = lock or "missing: the image does not name the Debian lock its base was made from"
        out.append(Check(what="label", item=bootstrap.BASE_LOCK, ok=bool(_DIGEST.match(lock)), detail=detail))
    s = probe["sentinel"]
    ok = s["pth"] and s["loaded_at_start"] and not s["triton_imported_at_start"]
    out.append(
        Check(
            what="JIT sentinel",
            item="stackgate_jit_sentinel.pth",
            ok=ok,
            detail=f".pth {'present' if s['pth'] else 'missing'}, loaded at start: {s['loaded_at_start']}, "
            f"triton imported at start: {s['triton_imported_at_start']}, log {s['log'] or 'unset'}",
        )
    )
    return out + check_env(target, probe) + check_kernels(target, probe, root) + check_cuda_objects(target, probe)


def check_env(target: Target, probe: dict[str, Any]) -> list[Check]:
    """The target's runtime env (the switches that refuse JIT: CUDA_DISABLE_PTX_JIT, FLASHINFER_DISABLE_JIT)
    is what a process in the image sees."""
    seen = probe.get("env") or {}
    out = []
    for key, want in target.env.items():
        got = seen.get(key)
        out.append(
            Check(what="env", item=key, ok=got == want, detail=repr(got) + ("" if got == want else f", want {want!r}"))
        )
    return out


def inspect_labels(ref: str, target: Target) -> tuple[dict[str, str], str]:
    from docker.errors import ImageNotFound

    try:
        image = container.client(BuildError).images.get(ref)
    except ImageNotFound:
        raise BuildError(f"image {ref!r} not found", hint=f"python -m ci build {target.id}") from None
    return dict(image.labels or {}), image.id


def run_probe(image_id: str, scan_so: bool, env_keys: tuple[str, ...] = ()) -> dict[str, Any]:
    argv = ["python", "-c", PROBE.read_text(), *(["--scan-so"] if scan_so else []), "--env", ",".join(env_keys)]
    ran = container.capture(image_id, argv)
    if ran.code != 0:
        raise BuildError(
            f"image {image_id}: the probe failed inside it (exit {ran.code}):\n{ran.stderr[-2000:]}",
            hint="the image needs `python` on PATH",
        )
    return json.loads(ran.stdout)


def main(st: Stack, target: Target, ref: str, *, root: Path) -> int:
    labels, image_id = inspect_labels(ref, target)
    if labels.get("stackgate.target") != target.id:
        raise BuildError(
            f"image {ref}: label stackgate.target is {labels.get('stackgate.target')!r}, not {target.id!r}",
            hint=f"python -m ci build {target.id}, or pass the image built for {target.id} with --image",
        )
    probe = run_probe(image_id, scan_so=target.family == "cuda", env_keys=tuple(target.env))
    result = checks(target, labels, probe, root)
    rows = [("ok" if c.ok else "MISSING", c.what, c.item, c.detail) for c in result]
    sys.stdout.write(tables.text(("", "check", "item", "detail"), rows))
    failed = [c for c in result if not c.ok]
    if failed:
        names = "; ".join(f"{c.what}: {c.item} ({c.detail})" for c in failed[:5])
        raise BuildError(f"verify {ref}: {len(failed)} of {len(result)} checks failed: {names}")
    print(f"verify {ref}: all {len(result)} checks passed")
    return 0
