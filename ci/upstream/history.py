"""Which history is upstream, and what a checkout must be to be judged: the remote whose URL is the change files'
upstream repository (or --upstream-ref), a vLLM tree, a history shared with upstream; and the fix line for a recorded
merge commit the checkout lacks."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from ci.errors import UsageError
from ci.escape import redacted
from ci.stack.change import Change
from ci.stack.model import Stack
from ci.upstream import where
from ci.upstream.checkout import Checkout
from ci.upstream.state import ChangeState

ENV_UPSTREAM = "STACKGATE_UPSTREAM_REF"


@dataclass(frozen=True, kw_only=True)
class Upstream:
    ref: str | None  # upstream's main as a ref of the checkout ("upstream/main"); None where none is known
    commit: str | None
    how: str  # how it was found, for the header


def upstream_tip(co: Checkout, st: Stack, ref: str | None, recorded: str | None = None) -> Upstream:
    """Upstream's main: --upstream-ref, else $STACKGATE_UPSTREAM_REF, else stack/fork.yaml's `upstream` (a remote's
    name or a ref), else the main branch of the remote whose URL ends in the upstream repository the change files
    name (vllm-project/vllm, on any host, .git or not); none where the checkout has no such remote (the fork's base
    release then bounds its own commits). Never a guess: a fork's own origin/main would make its own history
    "upstream" and every count wrong."""
    env = os.environ.get(ENV_UPSTREAM) or None
    for given, flag in ((ref, "--upstream-ref"), (env, f"${ENV_UPSTREAM}"), (recorded, "stack/fork.yaml upstream")):
        if given:
            return _named(co, st, given, flag)
    ours = [name for name, url in co.remotes().items() if _is_upstream(url, st)]
    for name in ours:
        found = _of_remote(co, name)
        if found:
            return Upstream(ref=found[0], commit=found[1], how=f"remote {name} (its URL is {_repo(st)})")
    if ours:
        raise UsageError(
            f"remote {ours[0]!r} is {_repo(st)}, but none of its branches is fetched in {co.path}",
            hint=co.command("fetch", "--", ours[0]),
        )
    return Upstream(ref=None, commit=None, how="")


def _named(co: Checkout, st: Stack, given: str, flag: str) -> Upstream:
    """A ref, or the name of a remote (its main, else its HEAD)."""
    if given in co.remotes() and (found := _of_remote(co, given)):
        return Upstream(ref=found[0], commit=found[1], how=f"{flag} (remote {given})")
    if tip := co.commit(given):
        return Upstream(ref=given, commit=tip, how=flag)
    known = co.refs()
    shown = ", ".join(known[:12]) + (", …" if len(known) > 12 else "") if known else "none"
    raise UsageError(
        f"{flag} {given!r} names no commit or remote in {co.path}",
        hint=f"fetch it ({add_remote(co, st)}), or name a ref it has (branches here: {shown}) or a remote",
    )


def _of_remote(co: Checkout, name: str) -> tuple[str, str] | None:
    for branch in (f"{name}/main", f"{name}/HEAD"):
        if tip := co.commit(branch):
            return branch, tip
    return None


def add_remote(co: Checkout, st: Stack) -> str:
    """The commands that bring upstream's main into the checkout: a remote of vLLM's (a name no remote has: a remote
    `upstream` pointing elsewhere is the user's, never overwritten unasked), fetched."""
    url = f"https://github.com/{_repo(st)}.git"
    remotes = co.remotes()
    name = next(n for n in ("upstream", "vllm", "vllm-upstream", "vllm-project") if n not in remotes)
    if "upstream" in remotes and _is_upstream(remotes["upstream"], st):
        return co.command("fetch", "upstream")
    add = f"{co.command('remote', 'add', name, url)} && {co.command('fetch', name)}"
    if "upstream" in remotes:
        add += f" (the remote upstream is {redacted(remotes['upstream'])}; or point it at vLLM: "
        add += f"{co.command('remote', 'set-url', 'upstream', url)})"
    return add


def no_remote(co: Checkout, st: Stack) -> str:
    seen = ", ".join(f"{n} ({u})" for n, u in co.remotes().items()) or "none"
    return f"no remote is {_repo(st)} (remotes: {seen})"


def _repo(st: Stack) -> str:
    repos = sorted({ch.upstream.repo for ch in st.changes.values() if ch.upstream})
    return repos[0] if repos else "vllm-project/vllm"


def _is_upstream(url: str, st: Stack) -> bool:
    """Whether a remote URL (https, ssh, scp-like or a path, on any host, ending in .git or not) is the upstream
    repository: vllm-project/vllm, or one the change files name."""
    path = "/" + url.strip().rstrip("/").removesuffix(".git").lower().replace(":", "/")
    repos = {"vllm-project/vllm", *(ch.upstream.repo.lower() for ch in st.changes.values() if ch.upstream)}
    return any(path.endswith("/" + repo) for repo in repos)


def require_vllm(
    co: Checkout, st: Stack, ref: str, head: str, up_ref: str | None, up: str | None, shared: bool = False
) -> None:
    """A checkout that is not vLLM's history is refused: no vllm/ package, or no history shared with upstream
    (`shared`: where the ref left upstream is known already)."""
    if not co.has_path(head, "vllm"):
        raise UsageError(
            f"{co.path} is not a vLLM checkout: {ref} ({head[:12]}) has no vllm/ package",
            hint=f"pass --fork a checkout of the fork of {_repo(st)} under test (and --ref its branch)",
        )
    if up is None or shared or co.merge_base(head, up) is not None:
        return
    if co.shallow:
        raise UsageError(
            f"{co.path} is a shallow clone: {ref} and {up_ref} share no commit in the history it holds",
            hint=f"fetch more history: {co.command('fetch', '--unshallow')}",
        )
    raise UsageError(
        f"{ref} and {up_ref} share no history in {co.path}: the fork is not built on it",
        hint="pass --upstream-ref the upstream branch the fork is based on",
    )


def missing_merge(
    st: Stack, co: Checkout, ref: str, tip_date: str, ch: Change, full: dict[str, str | None], state: ChangeState
) -> ChangeState:
    """A recorded merge commit the checkout lacks is not in HEAD's history (the change is judged by its patches).
    Where the upstream ref is as new as the merge, the ref is a release line, or the id is wrong: the fix says so."""
    up = ch.upstream
    if up is None or not up.merge_commit or full.get(up.merge_commit) is not None or state.fix:
        return state
    if up.merged_on and tip_date < up.merged_on.isoformat():
        return state  # upstream here predates the merge: nothing to fix
    src = where.change_source(st.root, ch.id)
    line = src.lines.get(("upstream", "merge_commit"))
    fetch = co.command("fetch", f"https://github.com/{up.repo}.git", "main")
    if co.shallow:
        fetch = co.command("fetch", "--unshallow")
    return replace(
        state,
        fix=f"{ref} ({tip_date}) is newer than the merge but does not hold {up.merge_commit}: if it "
        f"is upstream's main, fetch it ({fetch}); else check upstream.merge_commit in {src.path}:{line}",
    )
