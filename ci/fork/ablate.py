"""The fork without one imported change, whatever way the fork holds it: the fork commits that carry a port (as
ci.upstream.classify found them, or as the fork records them) reverted, or, for a change the fork has by upstream's
merge (through its base release or a merge of upstream), that merge's patch reverted. The result is a commit of the
fork's own repository (`refs/stackgate/without/<change>`) on top of the ref, built with git plumbing on a scratch
index, so no work tree is touched and bare clones work; the same inputs give the same commit id.

Dropping a change that later work builds on would judge a fork nobody has, so it is refused, naming both: a later
commit whose lines depend on it (its revert no longer applies), or another imported change the stack records as
stacked on it.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ci.errors import UsageError
from ci.fork.source import Fork
from ci.stack.model import Stack
from ci.tables import counted
from ci.upstream import release

_FAILED = re.compile(r"^error: (?:patch failed: (.+?):\d+|(.+?): patch does not apply)$", re.M)


class Dependent(UsageError):
    """The change cannot be dropped alone: later commits or changes depend on it."""


@dataclass(frozen=True, kw_only=True)
class Dropped:
    change: str
    state: str  # what the fork held: "converged", "ported", "ported, edited", ...
    reverted: tuple[str, ...]  # the commits whose patches were reverted, newest first
    how: str  # "upstream's merge commit ba702e978e3b" or "3 fork commits"
    commit: str  # the new commit: the fork's ref without the change


def ref_name(change: str) -> str:
    return f"refs/stackgate/without/{change}"


def without(st: Stack, fork: Fork, change: str) -> Dropped:
    """The fork's ref with `change` reverted; same inputs, same commit id."""
    state = fork.state(change)
    if state.state in ("absent", "not imported"):
        raise UsageError(
            f"#{change} is {state.state} in {fork.name} {fork.ref} ({state.detail}): there is nothing to drop",
            hint="its rows on the fork already judge the fork without it",
        )
    if state.state == "unknown":
        raise UsageError(
            f"whether {fork.name} {fork.ref} holds #{change} is not known ({state.detail}): nothing to drop",
            hint=state.fix or "python -m ci fork says why",
        )
    _refuse_stacked(st, fork, change)
    co, tip = fork.checkout, fork.commit
    if state.state == "converged":
        if not state.merge:
            raise UsageError(
                f"cannot drop #{change}: {state.detail}, and the checkout does not hold upstream's merge commit to "
                "revert",
                hint=f"fetch upstream's history into {co.path} "
                f"({co.command('fetch', release.UPSTREAM_URL, 'main')}), then ablate again",
            )
        reverted, how = (state.merge,), f"upstream's merge commit {state.merge[:12]}"
    else:
        order = co.git("rev-list", *fork.scope.own).split()
        carried = set(state.carried_by)
        reverted = tuple(c for c in order if c in carried) + tuple(c for c in state.carried_by if c not in order)
        how = counted(len(reverted), "fork commit")
    with tempfile.TemporaryDirectory(prefix="stackgate-ablate-") as tmp:
        index = Path(tmp) / "index"
        co.with_index(index, "read-tree", tip)
        for commit in reverted:  # newest first: each revert applies on the tree the later ones left
            patch = co.git("diff", "--binary", "--full-index", "--no-renames", f"{commit}^1", commit, "--")
            done = co.with_index(index, "apply", "--cached", "-R", "-", stdin=patch, ok=(0, 1))
            if done.returncode != 0:
                _refuse_conflict(fork, change, commit, reverted, done.stderr)
        tree = co.with_index(index, "write-tree").stdout.strip()
    when = co.git("log", "-1", "--format=%cI", tip).strip()  # fixed identity and time: one id per input
    message = f"stackgate: {fork.ref} without #{change}\n\nReverts {', '.join(c[:12] for c in reverted)} ({how}).\n"
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
    return Dropped(change=change, state=state.state, reverted=reverted, how=how, commit=commit)


def _refuse_stacked(st: Stack, fork: Fork, change: str) -> None:
    up = st.changes[change].upstream
    if up is None:
        return
    for other in fork.present:
        o = st.changes[other].upstream
        if other != change and o is not None and up.pr in o.stacked_on:
            raise Dependent(
                f"cannot drop #{change} alone: #{other}, which {fork.name} holds, is stacked on it "
                f"(stack/changes/{other}.yaml upstream.stacked_on)",
                hint=f"judge #{other} first, or drop both by hand on a branch of the fork",
            )


def _refuse_conflict(fork: Fork, change: str, commit: str, reverted: tuple[str, ...], stderr: str) -> None:
    files = sorted({a or b for a, b in _FAILED.findall(stderr)})
    co = fork.checkout
    later = co.touching((f"{commit}..{fork.commit}",), files) if files else []
    names = [f"{t.commit[:12]} {t.subject!r}" for t in later if t.commit not in reverted]
    raise Dependent(
        f"cannot drop #{change} alone: reverting {commit[:12]} conflicts in {', '.join(files) or 'its files'}, "
        f"which later commit(s) changed: {'; '.join(names) if names else 'none found by path'}",
        hint="those commits build on it: drop them with it on a branch of the fork, or judge them together",
    )
