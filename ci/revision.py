"""The git facts every image and every result is labelled with: revision, commit time, source, dirtiness."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ci.errors import BuildError

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True, kw_only=True)
class GitInfo:
    revision: str
    epoch: int  # SOURCE_DATE_EPOCH: the commit time, so two builds of one commit carry one date
    source: str
    dirty: bool


def git_info(root: Path) -> GitInfo:
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
        if done.returncode != 0:
            raise BuildError(
                f"git {' '.join(args)} failed in {root}: {done.stderr.strip()}",
                hint="build from a git checkout with at least one commit",
            )
        return done.stdout.strip()

    remote = subprocess.run(["git", "-C", str(root), "remote", "get-url", "origin"], capture_output=True, text=True)
    return GitInfo(
        revision=git("rev-parse", "HEAD"),
        epoch=int(git("log", "-1", "--format=%ct")),
        source=os.environ.get("STACKGATE_SOURCE_URL") or remote.stdout.strip() or f"file://{root}",
        dirty=bool(git("status", "--porcelain", "--untracked-files=no")),
    )


def git_revision(repo: Path = REPO) -> str:
    """HEAD, marked +dirty where tracked files differ from it: a result must not claim a clean commit."""
    try:
        git = git_info(repo)
    except BuildError:  # not a checkout with a commit: results still run, and say so
        return "unknown"
    return git.revision + ("+dirty" if git.dirty else "")
