"""`python -m ci lock <target>`: resolve a target's hashed lock from its family's requirements.

The lock pins every wheel by hash for the target's Python and platform, so the image installs them with
`--no-index --require-hashes` and no network. Resolution needs the package indexes (PyPI, plus the
target's `package_indexes`, e.g. TheRock's for gfx1151) and uv.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from ci import files
from ci.errors import BuildError, NotHere
from ci.images.build import REPO_ROOT, lock_path
from ci.stack.model import Target

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


def lock(target: Target, *, root: Path = REPO_ROOT) -> Path:
    uv = shutil.which("uv")
    argv = command(target, root=root)
    if uv is None:
        try:
            import uv as uv_module  # the PyPI package ships the binary

            uv = uv_module.find_uv_bin()
        except ImportError:
            raise BuildError("uv is not installed", hint=f"{sys.executable} -m pip install uv") from None
    done = subprocess.run([uv, *argv[1:]], cwd=root, capture_output=True, text=True)
    if done.returncode != 0:
        tail = done.stderr.strip()[-1500:]
        indexes = ", ".join(target.package_indexes) or "PyPI"
        raise NotHere(
            f"resolving the lock of {target.id} failed ({indexes}):\n{tail}",
            hint=f"run `python -m ci lock {target.id}` on a host that reaches {indexes}",
        )
    out = lock_path(target, root)
    header = (
        f"# Hashed lock for target {target.id} (python {target.python}, {target.platform}). Resolved on the host,"
        " installed in the image with\n# pip install --no-index --require-hashes. Regenerate:\n"
        f"#   python -m ci lock {target.id}   (runs: {' '.join(argv)})\n"
    )
    files.replace(out, header + out.read_text())
    return out
