"""`python -m ci lock <target>`: resolve a target's hashed lock from its family's requirements.

The lock pins every wheel by hash for the target's Python and platform, so the image installs them with
`--no-index --require-hashes` and no network. Resolution needs the package indexes (PyPI, plus the
target's `package_indexes`, e.g. TheRock's for gfx1151) and uv.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ci import escape, files
from ci.errors import NotHere, UsageError
from ci.images.build import REPO_ROOT, lock_path
from ci.stack.model import Target

_PIN = re.compile(r"^vllm==(\S+)", re.M)
_TORCH = re.compile(r"^torch==\S+$", re.M)

_UV_PLATFORM = {"linux/amd64": "x86_64-manylinux_2_28", "linux/arm64": "aarch64-manylinux_2_28"}


def command(target: Target, *, root: Path = REPO_ROOT) -> list[str]:
    """The resolver's argv; the lock file's header repeats it so anyone can regenerate by hand."""
    argv = [
        "uv",
        "pip",
        "compile",
        f"containers/locks/{target.family}.in",
        "--python-version",
        target.python,
        "--python-platform",
        _UV_PLATFORM[target.platform],
        "--generate-hashes",
        "--no-header",
    ]
    for index in target.package_indexes:
        argv += ["--extra-index-url", index]
    if target.package_indexes:
        argv += ["--index-strategy", "unsafe-best-match"]  # torch comes from the extra index, the rest from PyPI
    return [*argv, "-o", str(lock_path(target, root).relative_to(root))]


def uv_binary() -> str:
    """uv, from PATH or the `uv` package; where there is none, a UsageError that says how to get it, raised before
    the lock verb touches any file."""
    found = shutil.which("uv")
    if found:
        return found
    try:
        import uv as uv_module  # the PyPI package ships the binary (pip install -e '.[lock]')

        return str(uv_module.find_uv_bin())
    except (ImportError, FileNotFoundError):
        raise UsageError(
            "ci lock resolves with uv, which this host lacks: no file was changed",
            hint=f"{escape.command([sys.executable, '-m', 'pip', 'install', 'uv'])}   (or pip install -e '.[lock]'; "
            "nox -s lock installs it)",
        ) from None


def lock(target: Target, *, root: Path = REPO_ROOT, vllm: str | None = None) -> list[Path]:
    """Resolve the target's lock, with its family's requirements re-pinned to `vllm` where given: both are made in a
    scratch copy of containers/locks/ and replace the originals together, or neither does (uv missing, a failed
    resolve, an interrupt). The files written."""
    uv = uv_binary()
    reqs, out = requirements(target, root), lock_path(target, root)
    text = reqs.read_text(encoding="utf-8")
    if vllm is not None:
        text = pinned(reqs, text, vllm)
    argv = command(target, root=root)
    with tempfile.TemporaryDirectory(prefix="stackgate-lock-") as tmp:
        scratch = Path(tmp)
        locks = scratch / "containers" / "locks"
        shutil.copytree(reqs.parent, locks, ignore=shutil.ignore_patterns("*.debs.txt"))
        (locks / reqs.name).write_text(text, encoding="utf-8")  # relative paths as in the repository: its annotations
        done = subprocess.run([uv, *argv[1:]], cwd=scratch, capture_output=True, text=True)
        if done.returncode != 0:
            tail = done.stderr.strip()[-1500:]
            indexes = ", ".join(target.package_indexes) or "PyPI"
            raise NotHere(
                f"resolving the lock of {target.id} failed ({indexes}); no file was changed:\n{tail}",
                hint=f"run `python -m ci lock {target.id}` on a host that reaches {indexes}",
            )
        header = (
            f"# Hashed lock for target {target.id} (python {target.python}, {target.platform}). Resolved on the host,"
            " installed in the image with\n# pip install --no-index --require-hashes. Regenerate:\n"
            f"#   python -m ci lock {target.id}   (runs: {' '.join(argv)})\n"
        )
        resolved = header + (scratch / out.relative_to(root)).read_text(encoding="utf-8")
    written = {out: resolved, **({reqs: text} if vllm is not None else {})}
    files.replace_together(written)
    return list(written)


def requirements(target: Target, root: Path = REPO_ROOT) -> Path:
    return root / "containers" / "locks" / f"{target.family}.in"


def locked_vllm(target: Target, root: Path = REPO_ROOT) -> str | None:
    """The vLLM release the target's image installs: its hashed lock's pin, else its requirements' (None: no vLLM)."""
    for path in (lock_path(target, root), requirements(target, root)):
        if path.is_file() and (m := _PIN.search(path.read_text(encoding="utf-8"))):
            return m.group(1)
    return None


def require_base(target: Target, fork: str, version: str, root: Path = REPO_ROOT) -> None:
    """A fork is laid over its base release's wheel: the target's image must install that release. Checked before
    any work (a bundle, a base bootstrap, a build), naming both versions and the command that re-locks."""
    locked = locked_vllm(target, root)
    if locked == version:
        return
    lock = lock_path(target, root)
    if locked is None:
        raise UsageError(
            f"{fork} is built on vLLM {version}, and target {target.id}'s image installs no vLLM "
            f"({lock.relative_to(root) if lock.is_relative_to(root) else lock}): there is nothing to lay it over",
            hint="build the fork for a GPU target (cuda-sm121a, rocm-gfx1151, cuda-sm90)",
        )
    raise UsageError(
        f"{fork} is built on vLLM {version}, but target {target.id}'s lock installs vllm=={locked} "
        f"({lock.relative_to(root) if lock.is_relative_to(root) else lock}): its Python would be laid over "
        "another release's compiled parts",
        hint=f"re-lock the target for the fork's base: python -m ci lock {target.id} --vllm {version} "
        "(then build again); or judge a fork built on vLLM " + locked,
    )


def pinned(path: Path, text: str, version: str) -> str:
    """`text` (the family's requirements) with vllm==`version`; torch is then vLLM's own pin (each release pins its
    torch: 0.26.0 2.11, 0.27 to 0.30 2.13), not the old release's."""
    if not _PIN.search(text):
        raise UsageError(f"{path}: no vllm== line to re-pin", hint="add vllm==X.Y.Z to it")
    return _TORCH.sub("torch", _PIN.sub(f"vllm=={version}", text))


def kernel_note(target: Target, version: str) -> str | None:
    """What the image's ahead-of-time compile covers for a fork built on `version`, where the target's kernel lists
    (containers/kernels/) were recorded on another vLLM release; None where one was recorded on it."""
    lists = target.kernel_lists
    if not lists or any(name.startswith(f"vllm-{version}-") for name in lists):
        return None
    return (
        f"note: {target.id}'s kernel lists ({', '.join(lists)}) were recorded on another vLLM release than the "
        f"fork's base {version}: the image compiles ahead of time the kernels they name wherever vLLM {version} "
        "still has them with those signatures, and no others; `ci bake` on the target's GPU compiles what each "
        "row's warm-up reaches; a kernel neither reaches compiles at run time, which the JIT sentinel reports as "
        f"a failure. Record a list on vLLM {version}: python -m ci kernels record"
    )
