"""The git facts every image and every result is labelled with: revision, commit time, source, dirtiness."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ci.errors import BuildError
from ci.git import run as run_git

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True, kw_only=True)
class GitInfo:
    revision: str
    epoch: int  # SOURCE_DATE_EPOCH: the commit time, so two builds of one commit carry one date
    source: str
    dirty: bool


def git_info(root: Path) -> GitInfo:
    def git(*args: str) -> str:
        done = run_git(root, *args)
        if done.returncode != 0:
            raise BuildError(
                f"git {' '.join(args)} failed in {root}: {done.stderr.strip()}",
                hint="build from a git checkout with at least one commit",
            )
        return done.stdout.strip()

    return GitInfo(
        revision=git("rev-parse", "HEAD"),
        epoch=int(git("log", "-1", "--format=%ct")),
        source=source_url(),
        dirty=bool(git("status", "--porcelain", "--untracked-files=no")),
    )


def source_url() -> str:
    """Where the source is published, as $STACKGATE_SOURCE_URL says (without any user or password), else "". Never
    the checkout's origin: a clone of a path and a clone of its file:// URL name one commit two ways, and an image
    labelled so would be two images of one commit."""
    given = os.environ.get("STACKGATE_SOURCE_URL", "").strip()
    scheme, sep, rest = given.partition("://")
    # userinfo is a credential, and a password may hold any character: all before the last '@' goes
    kept = (rest if sep else given).rpartition("@")[2]
    return f"{scheme}{sep}{kept}" if sep else kept


def git_revision(repo: Path = REPO) -> str:
    """HEAD, marked +dirty where tracked files differ from it: a result must not claim a clean commit."""
    try:
        git = git_info(repo)
    except BuildError:  # not a checkout with a commit: results still run, and say so
        return "unknown"
    return git.revision + ("+dirty" if git.dirty else "")
