"""The fork's vLLM on a host without docker (a bare GPU host): a new site folder holding the base install's
`vllm/` as hard links (copies across file systems) and its dist-info, with the bundle laid over it. The base
install is never written: every overlaid file is a new inode. Rows then run with the site first on PYTHONPATH.

The bundle is applied by `harness.vllm_build` (the same code the image's fork layer runs), loaded here from the
suites folder so both sides name a tree by one implementation.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path
from types import ModuleType

from ci import options
from ci.errors import UsageError
from ci.escape import command, one_line
from ci.fork import bundle_read

VLLM_BUILD = options.REPO / "suites" / "harness" / "vllm_build.py"


@functools.cache  # one module object: the caches key asks for it at every bake and install
def vllm_build() -> ModuleType:
    spec = importlib.util.spec_from_file_location("stackgate_vllm_build", VLLM_BUILD)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def installed(base_site: Path) -> str | None:
    """The vLLM release installed in a site folder, by its dist-info's name (None: none, or several)."""
    infos = sorted(base_site.glob("vllm-*.dist-info"))
    return infos[0].name.removeprefix("vllm-").removesuffix(".dist-info") if len(infos) == 1 else None


def require_base(base_site: Path, fork: str, version: str) -> None:
    """The fork's base release is the one the site holds: checked before a bundle is made."""
    there = installed(base_site)
    if there is not None and there != version:
        pip = command(["pip", "install", "--no-deps", "--target", "SITE", f"vllm=={version}"])
        raise UsageError(
            f"{fork} is built on vLLM {version}, but --base-site {base_site} holds vLLM {there}: the fork's Python "
            "would be laid over another release's compiled parts",
            hint=f"install its base there ({pip}), or pass the site that holds it; an image takes the base from the "
            f"target's lock ({command(['python', '-m', 'ci', 'lock', 'TARGET', '--vllm', version])})",
        )


def build(bundle: Path, base_site: Path, out: Path) -> dict:
    """`out`/vllm = base_site/vllm + the bundle; returns the build manifest (with its `vllm_build`). The new site is
    built beside `out` and swapped in only once the bundle laid whole: a bundle refused, or a stop, leaves the
    previous site as it was."""
    vb = vllm_build()
    if not (base_site / "vllm").is_dir():
        raise UsageError(
            f"--base-site {one_line(base_site)}: no vllm package there",
            hint="the site folder the base vLLM wheel is installed in (pip install --target DIR)",
        )
    infos = sorted(base_site.glob("vllm-*.dist-info"))
    if len(infos) != 1:
        raise UsageError(
            f"--base-site {one_line(base_site)}: {len(infos)} vllm dist-info folders, expected one",
            hint="install exactly one vLLM release there",
        )
    _replaceable(out, vb.MANIFEST)
    made = bundle_read.read(bundle, "make one with python -m ci fork bundle --out FILE")  # checked before any work
    require_base(base_site, f"the bundle's fork {made.fork.name} {made.fork.ref}", made.base.version)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".building"))  # never a planted name
    try:
        shutil.copytree(
            base_site / "vllm", tmp / "vllm", copy_function=_link, ignore=shutil.ignore_patterns("__pycache__")
        )
        shutil.copytree(infos[0], tmp / infos[0].name)
        built = vb.apply(bundle, tmp)
        _swap(tmp, out)
    except (ValueError, OSError, KeyError) as exc:
        raise UsageError(
            f"--site {one_line(out)} not built ({one_line(exc)}); the previous site, if any, is as it was",
            hint="a bundle made for this base: python -m ci fork bundle --out FILE",
        ) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return built


def _replaceable(out: Path, manifest: str) -> None:
    """`out` names a folder a fork build may replace: none yet, an empty one, or an earlier fork build; never a file,
    a symlink (its target would be replaced) or a folder of something else."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        what = "a symlink" if out.is_symlink() else "a file"
        raise UsageError(f"--site {one_line(out)} is {what}, not a folder", hint="name a folder (a new one, or a site)")
    if out.is_dir() and any(out.iterdir()) and not (out / manifest).is_file():
        raise UsageError(
            f"--site {one_line(out)} exists and is not a fork build: refusing to replace it", hint="name a new folder"
        )


def _swap(new: Path, out: Path) -> None:
    """`new` in place of `out`: the old site moved aside, the new one renamed in, then the old one removed; where the
    rename fails, the old site goes back."""
    if not out.exists():
        os.rename(new, out)
        return
    old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".previous"))
    os.rename(out, old / "site")
    try:
        os.rename(new, out)
    except OSError:
        os.rename(old / "site", out)
        raise
    finally:
        shutil.rmtree(old, ignore_errors=True)


def _link(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
