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
        raise UsageError(
            f"{fork} is built on vLLM {version}, but --base-site {base_site} holds vLLM {there}: the fork's Python "
            "would be laid over another release's compiled parts",
            hint=f"install its base there (pip install --no-deps --target SITE vllm=={version}), or pass the site "
            "that holds it; an image takes the base from the target's lock "
            f"(python -m ci lock TARGET --vllm {version})",
        )


def build(bundle: Path, base_site: Path, out: Path) -> dict:
    """`out`/vllm = base_site/vllm + the bundle; returns the build manifest (with its `vllm_build`)."""
    vb = vllm_build()
    if not (base_site / "vllm").is_dir():
        raise UsageError(
            f"--base-site {base_site}: no vllm package there",
            hint="the site folder the base vLLM wheel is installed in (pip install --target DIR)",
        )
    infos = sorted(base_site.glob("vllm-*.dist-info"))
    if len(infos) != 1:
        raise UsageError(
            f"--base-site {base_site}: {len(infos)} vllm dist-info folders, expected one",
            hint="install exactly one vLLM release there",
        )
    try:
        made = vb.bundle_manifest(bundle)
    except (ValueError, OSError, KeyError, EOFError) as exc:
        raise UsageError(
            f"--bundle {bundle}: {exc}", hint="make one with python -m ci fork bundle --out FILE"
        ) from None
    fork = made.get("fork", {})
    what = f"the bundle's fork {fork.get('name')} {fork.get('ref')}"
    require_base(base_site, what, str(made["base"].get("version")))
    if out.exists():
        if any(out.iterdir()) and not (out / vb.MANIFEST).is_file():
            raise UsageError(
                f"--site {out} exists and is not a fork build: refusing to replace it", hint="name a new folder"
            )
        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".building"))  # never a planted name
    shutil.copytree(base_site / "vllm", tmp / "vllm", copy_function=_link, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(infos[0], tmp / infos[0].name)
    try:
        built = vb.apply(bundle, tmp)
    except (ValueError, OSError, KeyError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise UsageError(str(exc), hint="a bundle made for this base: python -m ci fork bundle --out FILE") from None
    os.replace(tmp, out)
    return built


def _link(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
