"""Real git repositories for the `ci upstream` tests: git itself builds every history, nothing is mocked."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

# The tests' own commits must not depend on the user's git config (signing, hooks, default branch).
ENV = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "t",
       "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@example.invalid"}  # fmt: skip


class Repo:
    """A repository whose commits get increasing dates, so log order is the order they were made."""

    def __init__(self, path: Path, *, init: bool = True) -> None:
        self.path = path
        self._clock = 1_700_000_000
        if init:
            path.mkdir(parents=True)
            self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        self._clock += 60
        env = {**ENV, "GIT_AUTHOR_DATE": f"@{self._clock} +0000", "GIT_COMMITTER_DATE": f"@{self._clock} +0000"}
        done = subprocess.run(["git", "-C", str(self.path), *args], capture_output=True, text=True, env=env)
        assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
        return done.stdout.strip()

    def commit(self, message: str, files: Mapping[str, str]) -> str:
        for name, text in files.items():
            (self.path / name).parent.mkdir(parents=True, exist_ok=True)
            (self.path / name).write_text(text)
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")

    def upstream(self, at: str = "main") -> None:
        """A remote `upstream` whose URL is vLLM's, its main at `at`, as `git fetch upstream` would leave it."""
        if "upstream" not in self.git("remote").split():
            self.git("remote", "add", "upstream", "https://github.com/vllm-project/vllm.git")
        self.git("update-ref", "refs/remotes/upstream/main", at)


def clone(src: Repo, dest: Path, *args: str) -> Repo:
    """A clone by git's transport (only reachable objects travel: a reflog's commits stay behind)."""
    url = src.path.resolve().as_uri()
    done = subprocess.run(["git", "clone", "-q", "--no-local", *args, url, str(dest)], capture_output=True,
                          text=True, env=ENV)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return Repo(dest, init=False)


def set_change(stack: Path, change: str, *, upstream: Mapping[str, Any] = {}, **kw: Any) -> None:
    """Update a change file's upstream block (comments are lost; the test's copy only). A change file holds no fork
    facts: `record_fork` writes those into the stack's fork.yaml."""
    assert not kw, f"a change file takes upstream facts only, not {sorted(kw)}"
    path = stack / "changes" / f"{change}.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["upstream"] = {k: v for k, v in {**doc["upstream"], **upstream}.items() if v is not None}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def record_fork(
    stack: Path,
    checkout: Path,
    carries: Mapping[str, Any] = {},
    *,
    ref: str = "HEAD",
    base: Mapping[str, str] | None = None,
    name: str = "test-fork",
) -> None:
    """The stack's fork.yaml names `checkout` (so its records apply there): `carries` maps a change to the fork
    commits recorded carrying it (a list, or {"commits": [...], "patch_ids": {...}})."""
    fork: dict[str, Any] = {"name": name, "checkout": str(checkout), "ref": ref}
    if base is not None:
        fork["base"] = dict(base)
    fork["carries"] = {c: (v if isinstance(v, Mapping) else {"commits": list(v)}) for c, v in carries.items()}
    (stack / "fork.yaml").write_text(yaml.safe_dump({"fork": fork}, sort_keys=False))


def copy_change(stack: Path, change: str, new: str, title: str) -> None:
    """Another change file made from `change`: id and PR `new`, stacked on nothing."""
    doc = yaml.safe_load((stack / "changes" / f"{change}.yaml").read_text())
    doc["id"], doc["title"] = new, title
    doc["upstream"] = {**doc["upstream"], "pr": int(new), "title": title, "stacked_on": []}
    (stack / "changes" / f"{new}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


def bash_argv(command: str) -> list[str]:
    """The argv bash reads from a printed command line (its words as bash splits, unquotes and expands them)."""
    done = subprocess.run(["bash", "-c", f"printf '%s\\0' {command}"], capture_output=True, text=True, env=ENV)
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\0")[:-1]
