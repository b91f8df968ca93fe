"""A bare GPU host (torch and pytest, none of stackgate's own dependencies) is told in one line what `ci` needs and
the command that installs it, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support.paths import REPO

# a Python that cannot import pydantic or junitparser, as the H200 host could not: a meta path finder refuses them
BLOCK = """
import importlib.abc, runpy, sys
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pydantic", "junitparser"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Refuse())
sys.argv = ["ci", *sys.argv[1:]]
runpy.run_module("ci", run_name="__main__")
"""


def test_a_host_without_the_runtime_dependencies_is_told_which_and_how(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "STACKGATE_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", BLOCK, "plan", "--target", "cpu"], cwd=REPO, capture_output=True,
                          text=True, env=env)  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2 and "Traceback" not in done.stderr
    assert lines[0].startswith("error: stackgate needs pydantic, junitparser, which this Python")
    assert lines[1].startswith(f"  fix: {sys.executable} -m pip install pydantic junitparser")
