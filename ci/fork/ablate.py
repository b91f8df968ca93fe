"""The fork without one imported change: its port commits reverted on top of the fork's ref, as a commit of the
fork's own repository (`refs/stackgate/without/<change>`), built with git plumbing on a scratch index so no work
tree is touched and bare clones work.

Dropping a change that later work builds on would judge a fork nobody has, so it is refused, naming both: a
later commit whose patch no longer applies once the change is reverted (it changes the change's own lines), or
another imported change the stack records as stacked on it.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from ci.errors import UsageError
from ci.fork.source import Fork
from ci.stack.model import Stack

_FAILED = re.compile(r"^error: (?:patch failed: (.+?):\d+|(.+?): patch does not apply)$", re.M)


class Dependent(UsageError):
    """The change cannot be dropped alone: later commits or changes depend on it."""


def ref_name(change: str) -> str:
    return f"refs/stackgate/without/{change}"


def without(st: Stack, fork: Fork, change: str) -> str:
    """The commit of the fork's ref with `change`'s port commits reverted (newest first); same inputs, same id."""
    held = fork.held.get(change)
    if held is None:
        raise UsageError(f"unknown change {change!r}", hint=f"one of {', '.join(fork.held)}")
    if held.state != "present":
        raise UsageError(
            f"#{change} is {held.state} in the fork ({held.why}): there is nothing to drop",
            hint="its rows on the fork already judge the fork without it",
        )
    _refuse_stacked(st, fork, change)
    co, tip = fork.checkout, fork.commit
    ordered = [c for c in co.git("rev-list", "--reverse", f"{fork.base_commit}..{tip}").split() if c in held.commits]
    with tempfile.TemporaryDirectory(prefix="stackgate-ablate-") as tmp:
        index = Path(tmp) / "index"
        co.with_index(index, "read-tree", tip)
        for commit in reversed(ordered):
            patch = co.git("diff", "--binary", "--full-index", "--no-renames", f"{commit}^", commit, "--")
            done = co.with_index(index, "apply", "--cached", "-R", "-", stdin=patch, ok=(0, 1))
            if done.returncode != 0:
                _refuse_conflict(fork, change, commit, done.stderr)
        tree = co.with_index(index, "write-tree").stdout.strip()
    when = co.git("log", "-1", "--format=%cI", tip).strip()  # fixed identity and time: one id per input
    message = f"stackgate: {fork.source.ref} without #{change}\n\nReverts {', '.join(c[:12] for c in ordered)}.\n"
    ident = {
        "GIT_AUTHOR_NAME": "stackgate",
        "GIT_AUTHOR_EMAIL": "stackgate@localhost",
        "GIT_AUTHOR_DATE": when,
        "GIT_COMMITTER_NAME": "stackgate",
        "GIT_COMMITTER_EMAIL": "stackgate@localhost",
        "GIT_COMMITTER_DATE": when,
    }
    commit = co.commit_tree(tree, tip, message, ident)
    co.git("update-ref", ref_name(change), commit)
    return commit


def _refuse_stacked(st: Stack, fork: Fork, change: str) -> None:
    up = st.changes[change].upstream
    if up is None:
        return
    for other in fork.present:
        o = st.changes[other].upstream
        if other != change and o is not None and up.pr in o.stacked_on:
            raise Dependent(
                f"cannot drop #{change} alone: #{other}, present in the fork, is stacked on it "
                f"(stack/changes/{other}.yaml upstream.stacked_on)",
                hint=f"judge #{other} first, or drop both by hand on a branch of the fork",
            )


def _refuse_conflict(fork: Fork, change: str, commit: str, stderr: str) -> None:
    files = sorted({a or b for a, b in _FAILED.findall(stderr)})
    co = fork.checkout
    later = co.touching(commit, fork.commit, files) if files else []
    own = set(fork.held[change].commits)  # the change's own later commits are reverted with it
    names = [f"{t.commit[:12]} {t.subject!r}" for t in later if t.commit not in own]
    raise Dependent(
        f"cannot drop #{change} alone: reverting {commit[:12]} conflicts in {', '.join(files) or 'its files'}, "
        f"which later commit(s) changed: {'; '.join(names) or 'none found by path'}",
        hint="those commits build on it: drop them with it on a branch of the fork, or judge them together",
    )
