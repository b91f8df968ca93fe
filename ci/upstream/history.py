"""Which history is upstream, and what a checkout must be to be judged: the remote whose URL is the change files'
upstream repository (or --upstream-ref), a vLLM tree, a history shared with upstream; and the fix line for a recorded
merge commit the checkout lacks."""

from __future__ import annotations

from dataclasses import replace

from ci.errors import UsageError
from ci.stack.change import Change
from ci.stack.model import Stack
from ci.upstream import where
from ci.upstream.checkout import Checkout
from ci.upstream.state import ChangeState


def upstream_tip(co: Checkout, st: Stack, ref: str | None) -> tuple[str | None, str | None]:
    """The upstream ref and its commit: the one asked for, else the main branch of the remote whose URL is the
    upstream repository the change files name (vllm-project/vllm); (None, None) where the checkout has no such
    remote (the fork's base release then bounds its own commits). Never a guess: a fork's own origin/main would
    make its own history "upstream" and every count wrong."""
    if ref:
        if tip := co.commit(ref):
            return ref, tip
        known = co.refs()
        shown = ", ".join(known[:12]) + (", …" if len(known) > 12 else "") if known else "none"
        raise UsageError(
            f"--upstream-ref {ref!r} names no commit in {co.path}",
            hint=f"fetch it ({add_remote(co, st)}), or pass a ref it has (branches here: {shown})",
        )
    ours = [name for name, url in co.remotes().items() if _is_upstream(url, st)]
    for name in ours:
        for branch in (f"{name}/main", f"{name}/HEAD"):
            if tip := co.commit(branch):
                return branch, tip
    if ours:
        raise UsageError(
            f"remote {ours[0]!r} is {_repo(st)}, but none of its branches is fetched in {co.path}",
            hint=f"git -C {co.path} fetch {ours[0]}",
        )
    return None, None


def add_remote(co: Checkout, st: Stack) -> str:
    return f"git -C {co.path} remote add upstream https://github.com/{_repo(st)}.git && git -C {co.path} fetch upstream"


def no_remote(co: Checkout, st: Stack) -> str:
    seen = ", ".join(f"{n} ({u})" for n, u in co.remotes().items()) or "none"
    return f"no remote is {_repo(st)} (remotes: {seen})"


def _repo(st: Stack) -> str:
    repos = sorted({ch.upstream.repo for ch in st.changes.values() if ch.upstream})
    return repos[0] if repos else "vllm-project/vllm"


def _is_upstream(url: str, st: Stack) -> bool:
    """Whether a remote URL (https, ssh or scp-like) is a repository the change files name as upstream."""
    path = url.strip().rstrip("/").removesuffix(".git").lower().replace(":", "/")
    return any(path.endswith("/" + ch.upstream.repo.lower()) for ch in st.changes.values() if ch.upstream)


def require_vllm(co: Checkout, st: Stack, ref: str, head: str, up_ref: str | None, up: str | None) -> None:
    """A checkout that is not vLLM's history is refused: no vllm/ package, or no history shared with upstream."""
    if not co.has_path(head, "vllm"):
        raise UsageError(
            f"{co.path} is not a vLLM checkout: {ref} ({head[:12]}) has no vllm/ package",
            hint=f"pass --fork a checkout of the fork of {_repo(st)} under test (and --ref its branch)",
        )
    if up is None or co.merge_base(head, up) is not None:
        return
    if co.shallow:
        raise UsageError(
            f"{co.path} is a shallow clone: {ref} and {up_ref} share no commit in the history it holds",
            hint=f"fetch more history: git -C {co.path} fetch --unshallow",
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
    fetch = f"git -C {co.path} fetch https://github.com/{up.repo}.git main"
    if co.shallow:
        fetch = f"git -C {co.path} fetch --unshallow"
    return replace(
        state,
        fix=f"{ref} ({tip_date}) is newer than the merge but does not hold {up.merge_commit}: if it "
        f"is upstream's main, fetch it ({fetch}); else check upstream.merge_commit in {src.path}:{line}",
    )
