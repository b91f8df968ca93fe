"""The release a fork is built on, found from its history and never guessed.

Where the fork left upstream is the merge base of its ref with upstream's main. The release it is built on is the
release line at that point: a release tag in the ref's history on that line (after the point, as a release branch's
tags are) or near it, or the version file where the tree has one. A release branch (releases/v0.27.0) says which
line the ref is on, never which release of it: its patch releases share it. A tag further
than NEAR_COMMITS commits or NEAR_DAYS days before that point is stale (a clone that lacks upstream's recent tags
still reaches its old ones through main): it is never taken, and the problem names the point, its date and what
makes the base known. A fork on upstream's main between releases is said to be so: no release wheel holds its
compiled parts.

A release line is told by its cherry-picks: commits after the point whose "(cherry picked from commit …)" line names
a commit of upstream's main (a line naming the fork's own commits is the fork's own work, not a release). Its last
commit in the ref's history is the release's tree where the tag is missing (the newest such cherry-pick, carried to
the nearest branch or tag tip holding it): the fix line names it (`--base-ref`), and `--base-version` alone takes
it. A tag named like a release on one of the fork's own commits (v1.0.0 after the point, off the release line) is
never a vLLM release: the search goes on to the next tag, and says which it passed over.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path

from ci.common.escape import command
from ci.common.tables import counted
from ci.upstream.checkout import Checkout

NEAR_COMMITS = 300  # upstream's main takes about this many commits in a week
NEAR_DAYS = 14
RELEASE = re.compile(r"^v(\d+\.\d+\.\d+(?:\.post\d+)?)$")
_BRANCH = re.compile(r"(?:^|/)releases?/v?\d+\.\d+(?:\.\d+)?$")
_VERSION_FILE = "vllm/_version.py"
_VERSION = re.compile(r"""^__version__\s*=\s*(?:version\s*=\s*)?['"](\d+\.\d+\.\d+)['"]""", re.M)
PICKED = "(cherry picked from commit "
_PICKED = re.compile(r"\(cherry picked from commit ([0-9a-f]{40})\)")
_REC = "\x01"


UPSTREAM_URL = "https://github.com/vllm-project/vllm.git"


@dataclass(frozen=True, kw_only=True)
class Base:
    """The upstream release the fork is built on: its wheel gives the compiled parts."""

    version: str
    ref: str
    commit: str  # the full id `ref` names in the checkout
    release_commit: str | None = None  # upstream's release commit, as the wheel's vllm/_version.py names it
    how: str  # how it was found: "stack/fork.yaml", "--base-ref", "v0.27.1, a release tag in …'s history, …"


@dataclass(frozen=True, kw_only=True)
class Left:
    """Where the fork's ref left upstream's main: their merge base."""

    commit: str
    date: str  # YYYY-MM-DD
    upstream_ref: str
    upstream: str = ""  # the commit upstream_ref names

    def said(self) -> str:
        return f"{self.upstream_ref} at {self.commit[:12]} ({self.date})"


@dataclass(frozen=True, kw_only=True)
class Line:
    """The release line a ref took from upstream's main after it left: its cherry-picks of upstream's commits."""

    picked: int  # commits after the point whose cherry-pick line names a commit of upstream's main
    end: str  # the line's last commit in the ref's history (full id)
    end_ref: str  # the branch or tag whose tip it is ("" where none is)

    def said(self) -> str:
        return f"{self.end[:12]}" + (f" ({self.end_ref})" if self.end_ref else "")


@dataclass(frozen=True, kw_only=True)
class Unknown:
    """Why no base was found, and what makes it known."""

    problem: str
    fix: str


def version_of(ref: str) -> str | None:
    """The release a ref's name says (v0.27.1, upstream/v0.27.1), or None."""
    m = RELEASE.match(ref.rsplit("/", 1)[-1])
    return m.group(1) if m else None


def left(co: Checkout, head: str, upstream_ref: str | None, upstream: str | None) -> Left | None:
    if not upstream or not upstream_ref:
        return None
    point = co.merge_base(head, upstream)
    return Left(commit=point, date=co.date(point), upstream_ref=upstream_ref, upstream=upstream) if point else None


def line(co: Checkout, head: str, where: Left | None) -> Line | None:
    """The release line `head` took from upstream's main after `where`, or None where no commit since then names one
    of upstream's commits in its cherry-pick line."""
    if where is None or not where.upstream:
        return None
    out = co.git(
        "log", "--fixed-strings", f"--grep={PICKED}", f"--format={_REC}%H%x02%B", head, f"^{where.commit}", "--"
    )
    named: list[tuple[str, list[str]]] = []
    for chunk in out.split(_REC)[1:]:
        commit, _, body = chunk.partition("\x02")
        named.append((commit, _PICKED.findall(body)))
    ids = co.resolve({n for _, ns in named for n in ns}) if named else {}
    held = {full for full in ids.values() if full}
    if not held:
        return None
    upstreams = set(co.git("rev-list", where.upstream, f"^{where.commit}", "--").split()) & held
    picked = [c for c, ns in named if any(ids.get(n) in upstreams for n in ns)]  # newest first
    if not picked:
        return None
    end, end_ref = _carried(co, head, picked[0])
    return Line(picked=len(picked), end=end, end_ref=end_ref)


def _carried(co: Checkout, head: str, last: str) -> tuple[str, str]:
    """`last` carried to the nearest branch or tag tip that holds it in `head`'s history (head's own excepted): a
    release branch's last commits need not be cherry-picks (its CI fixes)."""
    out = co.git(
        "for-each-ref",
        "--format=%(objectname) %(*objectname) %(refname:short)",
        f"--contains={last}",
        f"--merged={head}",
        "refs/heads",
        "refs/remotes",
        "refs/tags",
    )
    best: tuple[int, str, str] | None = None
    for entry in out.splitlines():
        parts = entry.split(" ")
        tip, name = (parts[1] or parts[0]), parts[-1]
        if tip == head or name.endswith("/HEAD"):
            continue
        far = int(co.git("rev-list", "--count", f"{last}..{tip}").strip() or 0)
        if best is None or (far, name) < best[:2]:
            best = (far, name, tip)
    return (best[2], best[1]) if best else (last, "")


def find(co: Checkout, ref: str, head: str, where: Left | None, on: Line | None = None) -> Base | Unknown:
    """The base release of `ref` (`head`), from history alone (`on`: the release line it took); else why it is not
    known."""
    tag, passed = _newest_tag(co, head, where, on)
    stale = f"no release tag (vX.Y.Z) is in {ref}'s history"
    if passed:
        stale += f" but the fork's own ({passed}: on its own commits, not vLLM releases)"
    if tag is not None:
        name, commit = tag
        version = version_of(name)
        assert version is not None  # _newest_tag matches release names only
        mine = f" (passing over the fork's own {passed})" if passed else ""
        if where is not None and co.is_ancestor(where.commit, commit):
            how = f"{name}, the newest release tag in {ref}'s history, on the line {ref} took from {where.said()}{mine}"
            return Base(version=version, ref=name, commit=commit, how=how)
        point, at = (where.commit, f"where {ref} left {where.said()}") if where else (head, ref)
        commits = int(co.git("rev-list", "--count", f"{commit}..{point}").strip() or 0)
        days = _days(co.date(commit), co.date(point))
        far = f"{counted(commits, 'commit')} and {counted(days, 'day')}"
        if commits <= NEAR_COMMITS and days <= NEAR_DAYS:
            how = f"{name}, the newest release tag in {ref}'s history, {far} before {at}{mine}"
            return Base(version=version, ref=name, commit=commit, how=how)
        stale = (
            f"the newest release tag in {ref}'s history, {name} ({co.date(commit)}), is {far} before {at}: too far to "
            f"be its release (a tag is taken within {NEAR_COMMITS} commits and {NEAR_DAYS} days)"
        )
    if found := _version_file(co, ref, head):
        return found
    return _unknown(co, ref, head, where, stale, on, passed)


def source_build(co: Checkout, commit: str) -> str:
    """The source-build route for a fork's `commit`: a work tree of it beside the checkout, its CUDA extensions
    compiled for a target (TARGET: the user's) by vLLM's own build command."""
    tree = str(Path(co.path).resolve().parent / f"build-{commit[:12]}")
    build = command(
        ["python", "-m", "ci", "source-build", "TARGET", tree, "--build-command", "pip wheel --no-build-isolation ."]
    )
    return f"{co.command('worktree', 'add', '--detach', tree, commit[:12])}, then {build}"


def _fetch_tags(co: Checkout, where: Left | None) -> str:
    """The command that brings upstream's release tags: from the remote upstream's main was found on (where it was
    given as a commit, or not found at all, no remote may be upstream: from upstream's URL)."""
    remote = where.upstream_ref.split("/", 1)[0] if where else ""
    source = remote if remote in co.remotes() else UPSTREAM_URL
    return co.command("fetch", "--tags", "--", source)


def _unknown(
    co: Checkout, ref: str, head: str, where: Left | None, stale: str, on: Line | None, passed: str
) -> Unknown:
    tags = _fetch_tags(co, where)
    by_hand = "or name it: --base-version X.Y.Z (the release it is built on), or stack/fork.yaml's base"
    if on is not None:  # the release's tree is the line's last commit: the fix names it, or the line's cherry-picks
        by_hand = (  # would count as the fork's own (and its compiled sources with them)
            f"or name it: --base-ref {on.end[:12]} --base-version X.Y.Z (the release line's last commit here, "
            f"{on.said()}, and the release it is), or stack/fork.yaml's base"
        )
    if where is None:
        return Unknown(
            problem=f"{stale}; and without upstream's main nothing says where {ref} left upstream",
            fix=f"set upstream once ($STACKGATE_UPSTREAM_REF, stack/fork.yaml's upstream, or a remote whose URL is "
            f"vllm-project/vllm), then {tags}; {by_hand}",
        )
    branch, picked = _release_branch(co, head, where), on.picked if on else 0
    if branch or picked:
        line = f"the release line of {branch}" if branch else "a release line"
        said = (
            f"{counted(picked, 'commit')} after it cherry-picked from upstream's main, its last commit here {on.said()}"
            if on
            else f"{branch} holds it"
        )
        return Unknown(
            problem=f"{ref} left {where.said()} onto {line} ({said}), and nothing here names its release: {stale}, "
            f"and the tree has no {_VERSION_FILE}",
            fix=f"fetch upstream's release tags ({tags}); {by_hand}",
        )
    around = _tags_around(co, where.date, set(passed.split(", ")))
    if around:
        mine = f"; {passed}: the fork's own tags, on its own commits, not vLLM releases" if passed else ""
        return Unknown(
            problem=f"{ref} sits on upstream's main between releases: it left {where.said()}, and no release tag or "
            f"release branch holds that point ({around}); no release wheel holds its compiled parts{mine}",
            fix=f"build it from source ({source_build(co, head)}), or rebase the fork onto a release and judge that; "
            f"{by_hand}",
        )
    return Unknown(
        problem=f"{ref} left {where.said()}; {stale}, and this checkout holds no release tag as new as that point",
        fix=f"fetch upstream's release tags ({tags}); {by_hand}",
    )


def _newest_tag(co: Checkout, head: str, where: Left | None, on: Line | None) -> tuple[tuple[str, str] | None, str]:
    """The newest release tag (vX.Y.Z, no rc or dev tag) in the history of `head` and its commit, or None; and the
    tags named like releases it passed over, being on the fork's own commits: after where it left upstream and off
    the release line it took (v1.0.0 of the fork's own numbering)."""
    fmt = "--format=%(refname:short)"
    names = [n for n in co.git("for-each-ref", fmt, f"--merged={head}", "refs/tags").split("\n") if version_of(n)]
    own: set[str] = set()
    if names and where is not None:
        after = set(co.git("for-each-ref", fmt, f"--merged={head}", f"--contains={where.commit}", "refs/tags").split())
        if after:
            line = set(co.git("for-each-ref", fmt, f"--merged={on.end}", "refs/tags").split()) if on else set()
            at = set(co.git("for-each-ref", fmt, f"--points-at={where.commit}", "refs/tags").split())
            own = {n for n in names if n in after and n not in line and n not in at}
    kept = [n for n in names if n not in own]
    passed = ", ".join(sorted(own))
    if not kept:
        return None, passed
    out = co.git("describe", "--tags", "--abbrev=0", *(f"--match={n}" for n in kept), head, ok=(0, 128))
    name = out.strip()
    found = co.commit(name) if name and version_of(name) else None
    return ((name, found) if found else None), passed


def _release_branch(co: Checkout, head: str, where: Left) -> str:
    """A release branch (releases/vX.Y.Z, a remote's too) that holds where the ref left main and shares commits with
    the ref after it: the line the ref is on ("" where none)."""
    refs = co.git("for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads", "refs/remotes").split("\n")
    for line in refs:
        name, _, tip = line.partition(" ")
        if not _BRANCH.search(name) or not tip:
            continue
        shared = co.merge_base(tip, head)
        if shared and shared != where.commit and co.is_ancestor(where.commit, shared):
            return name
    return ""


def _version_file(co: Checkout, ref: str, head: str) -> Base | None:
    """vllm/_version.py in the ref's tree naming a release (a dev version names none), and the commit that wrote it."""
    text = co.git("show", f"{head}:{_VERSION_FILE}", ok=(0, 128))
    m = _VERSION.search(text)
    if not m:
        return None
    wrote = co.git("log", "-1", "--format=%H", head, "--", _VERSION_FILE).strip()
    if not wrote:
        return None
    how = f"{_VERSION_FILE} in {ref}'s tree says {m.group(1)} (written by {wrote[:12]})"
    return Base(version=m.group(1), ref=wrote, commit=wrote, how=how)


def _tags_around(co: Checkout, date: str, own: set[str]) -> str:
    """The release tags the checkout holds just before and after `date` ("" where it holds none after it: then its
    tags are not known to be upstream's recent ones); `own`: the fork's own tags, left out."""
    out = co.git("for-each-ref", "--sort=creatordate", "--format=%(refname:short) %(creatordate:short)", "refs/tags")
    tags = [(n, d) for n, _, d in (line.partition(" ") for line in out.splitlines()) if version_of(n) and n not in own]
    before = [f"{n} ({d})" for n, d in tags if d < date][-1:]
    after = [f"{n} ({d})" for n, d in tags if d >= date][:1]
    if not after:
        return ""
    return ", ".join([*(f"{t} before it" for t in before), *(f"{t} after it" for t in after)])


def _days(a: str, b: str) -> int:
    return abs((dt.date.fromisoformat(b) - dt.date.fromisoformat(a)).days)
