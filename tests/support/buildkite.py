"""Buildkite as the tests meet it: its schema (check-jsonschema's bundled copy, no network), the registry an org
names, and an agent stood in for by two scripts on PATH, so that a pipeline step's own commands run here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.paths import REPO


def check_schema(path: Path) -> None:
    """Buildkite's schema, as check-jsonschema bundles it (no network)."""
    argv = [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.buildkite", str(path)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


REGISTRY = "registry.test:5000/stackgate"  # what an org sets as $STACKGATE_REGISTRY


# Stand-ins for what an agent has, so that the steps' own commands run here: `buildkite-agent` serves artifacts
# from a folder and records annotations; `nox -s S -- ARGS` calls the noxfile's session S on this interpreter,
# installs skipped, failing (exit 1) where a command failed, as nox does.
FAKE_AGENT = """\
import glob, json, os, shutil, sys
args = sys.argv[1:]
store = os.environ["FAKE_ARTIFACTS"]
if args[:2] == ["artifact", "download"]:
    found = [p for p in glob.glob(args[2], root_dir=store) if os.path.isfile(os.path.join(store, p))]
    if not found:
        sys.exit(f"no artifact matches {args[2]}")
    for p in found:
        os.makedirs(os.path.join(args[3], os.path.dirname(p)), exist_ok=True)
        shutil.copy(os.path.join(store, p), os.path.join(args[3], p))
elif args[:2] == ["meta-data", "set"]:
    path = os.path.join(store, "meta-data.json")
    data = json.load(open(path)) if os.path.exists(path) else {}
    data[args[2]] = args[3] if len(args) > 3 else sys.stdin.read()
    json.dump(data, open(path, "w"))
elif args[:2] == ["meta-data", "get"]:
    path = os.path.join(store, "meta-data.json")
    data = json.load(open(path)) if os.path.exists(path) else {}
    if args[2] not in data:
        sys.exit(f"no meta-data {args[2]}")
    print(data[args[2]], end="")
elif args[0] == "annotate":
    with open(os.environ["FAKE_ANNOTATIONS"], "a") as f:
        f.write(json.dumps({"args": args[1:], "body": sys.stdin.read()}) + "\\n")
else:
    sys.exit(f"unexpected: {args}")
"""
FAKE_NOX = """\
import os, runpy, subprocess, sys
import nox.registry
repo = os.environ["STACKGATE_REPO"]
args = sys.argv[1:]
assert args[0] == "-s", args
if "--install-only" in args:  # the session's venv, as nox leaves it: its python runs this checkout's ci
    os.makedirs(f".nox/{args[1]}/bin", exist_ok=True)
    with open(f".nox/{args[1]}/bin/python", "w") as fh:
        fh.write(f'#!/bin/sh\\nPYTHONPATH="{repo}" exec {sys.executable} "$@"\\n')
    os.chmod(f".nox/{args[1]}/bin/python", 0o755)
    sys.exit(0)
posargs = args[3:] if args[2:3] == ["--"] else []
runpy.run_path(os.path.join(repo, "noxfile.py"))

class Session:
    def __init__(self):
        self.posargs = posargs
    def install(self, *args, **kwargs):
        pass
    def run(self, *cmd, **kwargs):
        cmd = [sys.executable if c == "python" else c for c in cmd]
        if subprocess.run(cmd, env={**os.environ, "PYTHONPATH": repo}).returncode:
            sys.exit(1)

nox.registry.get()[args[1]](Session())
"""


def stand_in_agent(tmp_path: Path, store: Path) -> tuple[Path, dict[str, str]]:
    """A checkout-like working folder whose .buildkite/tools.sh puts the stand-ins on PATH."""
    work, fakes = tmp_path / "checkout", tmp_path / "bin"
    (work / ".buildkite").mkdir(parents=True)
    fakes.mkdir()
    for name, text in (("buildkite-agent", FAKE_AGENT), ("nox", FAKE_NOX)):
        (fakes / name).write_text(f"#!{sys.executable}\n{text}")
        (fakes / name).chmod(0o755)
    (work / ".buildkite" / "tools.sh").write_text(f'export PATH="{fakes}:$PATH"\n')
    env = {"PATH": f"{fakes}:/usr/bin:/bin", "HOME": str(tmp_path), "STACKGATE_REPO": str(REPO),
           "FAKE_ARTIFACTS": str(store), "FAKE_ANNOTATIONS": str(tmp_path / "annotations.jsonl")}  # fmt: skip
    return work, env


def run_step(step: dict, work: Path, env: dict[str, str], store: Path, log: Path | None = None) -> int:
    """The step's commands as an agent runs them: `$$` interpolated to `$`, one `bash -e` script (its output into
    `log` where given); its artifact_paths then uploaded to the store."""
    script = "\n".join(c.replace("$$", "$") for c in step["commands"])
    with open(log or os.devnull, "w") as out:
        code = subprocess.run(["bash", "-e", "-c", script], cwd=work, env=env, check=False,
                              **({"stdout": out, "stderr": subprocess.STDOUT} if log else {})).returncode  # fmt: skip
    for pattern in step.get("artifact_paths", []):
        for path in work.glob(pattern):
            (store / path.relative_to(work)).parent.mkdir(parents=True, exist_ok=True)
            (store / path.relative_to(work)).write_bytes(path.read_bytes())
    return code
