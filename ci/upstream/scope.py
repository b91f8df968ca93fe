"""Which fork, at which ref, against which history: what every verb judges (`ci upstream`, `ci fork`, the plan, the
build, the pipeline), resolved once and the same way everywhere.

The checkout is `--fork`, else $STACKGATE_FORK, else stack/fork.yaml's. Where it is fork.yaml's checkout, that file's
facts apply (its ref, base, upstream ref and `carries` records); any other checkout is another fork, judged from its
history alone. The ref is `--ref`, else $STACKGATE_FORK_REF, else fork.yaml's (for its own checkout), else HEAD.

The fork's own commits are those of the ref that neither upstream's main (`--upstream-ref`, fork.yaml's, or the main
branch of the remote whose URL is upstream's repository) nor the base release's tree reach. The base is `--base-ref`
(with `--base-version` where its name is not vX.Y.Z), else fork.yaml's, else the newest release tag in the ref's
history; a change that base release holds is converged through the base.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ci.errors import UsageError
from ci.stack import yaml_lines
from ci.stack.model import Carried, Stack
from ci.upstream import history
from ci.upstream.checkout import Checkout

ENV_FORK = "STACKGATE_FORK"
ENV_REF = "STACKGATE_FORK_REF"
_TAG = re.compile(r"^v(\d+\.\d+\.\d+(?:\.post\d+)?)$")


@dataclass(frozen=True, kw_only=True)
class Base:
    """The upstream release the fork is built on: its wheel gives the compiled parts."""

    version: str
    ref: str
    commit: str  # the full id `ref` names in the checkout
    release_commit: str | None = None  # upstream's release commit, as the wheel's vllm/_version.py names it
    how: str  # where it was found: "stack/fork.yaml", "--base-ref", "the newest release tag in main's history"


@dataclass(frozen=True, kw_only=True)
class Scope:
    name: str
    co: Checkout
    ref: str  # as named
    head: str  # the commit it names
    upstream_ref: str | None = None
    upstream: str | None = None  # the commit upstream_ref names
    base: Base | None = None
    base_problem: str = ""  # why no base was found, with what makes one known
    records: Mapping[str, Carried] = field(default_factory=dict)
    recorded: bool = False  # stack/fork.yaml describes this checkout: its facts apply, and --record writes there

    @property
    def own(self) -> tuple[str, ...]:
        """The fork's own commits, as `git log` arguments: the ref, less what upstream and the base reach."""
        return (self.head, *(f"^{c}" for c in (self.upstream, self.base.commit if self.base else None) if c))

    @property
    def own_label(self) -> str:
        """The same range as a reader would type it: "upstream/main..main", "v0.26.0..main", or with both
        "main ^upstream/main ^v0.26.0"."""
        left = [r for r in (self.upstream_ref, self.base.ref if self.base else None) if r]
        if len(left) == 1:
            return f"{left[0]}..{self.ref}"
        return " ".join([self.ref, *(f"^{r}" for r in left)])

    def require_base(self) -> Base:
        if self.base is None:
            raise UsageError(
                f"{self.co.path}: the base release of {self.ref} is not known: {self.base_problem}",
                hint="pass --base-ref REF --base-version X.Y.Z (the release tree the fork is built on), "
                "or fetch upstream's release tags (git fetch upstream --tags)",
            )
        return self.base


def checkout_path(st: Stack, override: Path | None = None) -> Path:
    """--fork, else $STACKGATE_FORK, else fork.yaml's checkout (relative to the stack folder)."""
    chosen = override or os.environ.get(ENV_FORK) or (st.fork.checkout if st.fork else None)
    if chosen is None:
        raise UsageError(
            "no fork checkout: pass --fork PATH (or set $STACKGATE_FORK)",
            hint="a local clone of the fork: git clone URL DIR, then --fork DIR",
        )
    if "://" in str(chosen) or str(chosen).startswith("git@"):
        raise UsageError(
            f"fork checkout {chosen} is a URL: stackgate reads a local clone, offline",
            hint=f"git clone {chosen} DIR && export {ENV_FORK}=DIR",
        )
    path = Path(chosen).expanduser()
    return path if path.is_absolute() else (st.root / path).resolve()


def open_scope(
    st: Stack,
    *,
    fork: Path | None = None,
    ref: str | None = None,
    upstream_ref: str | None = None,
    base_ref: str | None = None,
    base_version: str | None = None,
) -> Scope:
    path = checkout_path(st, fork)
    if not path.exists():
        raise UsageError(
            f"fork checkout {path} does not exist (--fork, ${ENV_FORK} or stack/fork.yaml's checkout)",
            hint=f"clone the fork there, or pass --fork PATH_OF_YOUR_CLONE (or export {ENV_FORK}=PATH)",
        )
    co = Checkout.open(path)
    src = st.fork
    recorded = src is not None and _same_fork(st, co, path)
    named = ref or os.environ.get(ENV_REF) or (src.ref if recorded and src else None) or "HEAD"
    head = _commit(co, named, "--ref")
    up_ref, up = history.upstream_tip(co, st, upstream_ref or (src.upstream_ref if recorded and src else None))
    base, problem = _base(co, st, named, head, base_ref, base_version, recorded)
    if up is None and base is None:
        raise UsageError(
            f"{path}: nothing says which commits of {named} are the fork's own: {history.no_remote(co, st)}, "
            f"and {problem}",
            hint=f"{history.add_remote(co, st)}; or pass --base-ref REF --base-version X.Y.Z (the release the fork "
            "is built on), or --upstream-ref REF naming upstream's main",
        )
    history.require_vllm(co, st, named, head, up_ref, up)
    if recorded and src is not None:
        _records_are_own(st, co, src.carries, base, up)
    return Scope(
        name=(src.name if recorded and src else _name(path)),
        co=co,
        ref=named,
        head=head,
        upstream_ref=up_ref,
        upstream=up,
        base=base,
        base_problem=problem,
        records=(src.carries if recorded and src else {}),
        recorded=recorded,
    )


def _records_are_own(
    st: Stack, co: Checkout, records: Mapping[str, Carried], base: Base | None, upstream: str | None
) -> None:
    """Every commit fork.yaml records carrying a change is one of the fork's own, where the checkout holds it: one
    the base release or upstream's main reaches is not the fork's work (it would make the change "ported", schedule
    its rows, and have --without revert a file of the base release). A record the checkout lacks stands: a rebase
    may have dropped it, and its patch-id is compared instead."""
    full = co.resolve(c for rec in records.values() for c in rec.commits)
    bounds = [(f"its base {base.ref}", base.commit)] if base else []
    bounds += [("upstream's main", upstream)] if upstream else []
    for change, rec in records.items():
        for i, commit in enumerate(rec.commits):
            found = full.get(commit)
            where = next((name for name, tip in bounds if found and co.is_ancestor(found, tip)), None)
            if where is not None:
                src = yaml_lines.load(st.root / "fork.yaml")
                raise src.error(
                    ("fork", "carries", change, "commits", i),
                    f"commit {commit} is in the history of {where}, not one of the fork's own commits: no record of "
                    f"the fork carrying #{change} can name it",
                    hint="record the fork's commits that carry the change (python -m ci fork --record finds them), "
                    "or drop the record where the base release holds the change",
                )


def _same_fork(st: Stack, co: Checkout, path: Path) -> bool:
    """Whether the checkout is the fork stack/fork.yaml records: its checkout, or a clone of it or of its `url`."""
    src = st.fork
    assert src is not None
    home = checkout_path(st, Path(src.checkout)).resolve()
    if path.resolve() == home:
        return True
    wanted = {_where(str(home))} | ({_where(src.url)} if src.url else set())
    return any(_where(url) in wanted for url in co.remotes().values())


def _where(url: str) -> str:
    """A repository's location, spelled one way: file:///a/b.git, /a/b and /a/b/ alike; https://github.com/O/R,
    git@github.com:O/R.git and ssh://git@github.com/O/R alike."""
    text = url.strip().removeprefix("file://").rstrip("/").removesuffix(".git")
    if text.startswith("/"):
        return str(Path(text).resolve()).removesuffix(".git")
    text = re.sub(r"^[a-z+]+://", "", text)
    text = re.sub(r"^[^@/]+@", "", text)
    return text.replace(":", "/", 1).lower()


def _commit(co: Checkout, ref: str, flag: str) -> str:
    found = co.commit(ref)
    if found is None:
        known = co.refs()
        shown = ", ".join(known[:10]) + (", …" if len(known) > 10 else "") if known else "none"
        raise UsageError(
            f"{flag} {ref!r} names no commit in {co.path}",
            hint=f"pass {flag} a branch, tag or commit it holds (branches here: {shown}), or fetch it",
        )
    return found


def _base(
    co: Checkout, st: Stack, ref: str, head: str, base_ref: str | None, version: str | None, recorded: bool
) -> tuple[Base | None, str]:
    src = st.fork
    if base_ref is None and version is not None:
        raise UsageError("--base-version names the release of --base-ref", hint="give --base-ref REF with it")
    if base_ref is not None:
        version = version or _version(base_ref)
        if version is None:
            raise UsageError(
                f"--base-ref {base_ref!r} is not named like a release (vX.Y.Z)",
                hint="give the vLLM release its tree is with --base-version, e.g. --base-version 0.27.1",
            )
        base = Base(version=version, ref=base_ref, commit=_commit(co, base_ref, "--base-ref"), how="--base-ref")
    elif recorded and src is not None and src.base is not None:
        commit = _commit(co, src.base.ref, "stack/fork.yaml base.ref")
        base = Base(
            version=src.base.version,
            ref=src.base.ref,
            commit=commit,
            release_commit=src.base.commit,
            how="stack/fork.yaml",
        )
    else:
        tag = _release_tag(co, head)
        version = _version(tag) if tag else None
        if tag is None or version is None:
            return None, f"no release tag (vX.Y.Z) in the history of {ref}"
        base = Base(
            version=version, ref=tag, commit=_commit(co, tag, "tag"), how=f"the newest release tag in {ref}'s history"
        )
    if not co.is_ancestor(base.commit, head):
        raise UsageError(
            f"the base {base.ref} ({base.how}) is not in the history of {ref} ({co.path})",
            hint="the base names the release tree the fork's ref was built on: pass --base-ref REF",
        )
    return base, ""


def _release_tag(co: Checkout, commit: str) -> str | None:
    """The newest release tag (vX.Y.Z, no rc or dev tag) in the history of `commit`, or None."""
    out = co.git(
        "describe", "--tags", "--abbrev=0", "--match", "v[0-9]*.[0-9]*.[0-9]*", "--exclude", "*rc*", "--exclude",
        "*dev*", commit, ok=(0, 128),
    )  # fmt: skip
    return out.strip() or None


def _version(ref: str) -> str | None:
    m = _TAG.match(ref.rsplit("/", 1)[-1])
    return m.group(1) if m else None


def _name(path: Path) -> str:
    return path.name.removesuffix(".git") or "fork"


def from_args(st: Stack, args: object) -> Scope:
    """The scope the fork options of a command line name (ci.options.add_fork)."""
    given = getattr(args, "fork", None)
    return open_scope(
        st,
        fork=given if isinstance(given, Path) else None,  # a bare --fork (options.THE_FORK): the default checkout
        ref=getattr(args, "ref", None),
        upstream_ref=getattr(args, "upstream_ref", None),
        base_ref=getattr(args, "base_ref", None),
        base_version=getattr(args, "base_version", None),
    )
