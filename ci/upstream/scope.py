"""Which fork, at which ref, against which history: what every verb judges (`ci upstream`, `ci fork`, the plan, the
build, the pipeline), resolved once and the same way everywhere.

The checkout is `--fork` (relative to where the user stands), else $STACKGATE_FORK, else stack/fork.yaml's (relative
to the stack folder). Where it is fork.yaml's checkout, that file's facts apply (its ref, base, upstream and `carries`
records); any other checkout is another fork, judged from its history alone. The ref is `--ref`, else
$STACKGATE_FORK_REF, else fork.yaml's (for its own checkout), else HEAD.

The fork's own commits are those of the ref that neither upstream's main (ci.upstream.history) nor the base release's
tree reach. The base is `--base-ref` (with `--base-version` where its name is not vX.Y.Z; `--base-version` alone: the
release over where the ref left upstream's main), else fork.yaml's, else found from history (ci.upstream.release);
a change that base release holds is converged through the base.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ci.errors import UsageError
from ci.escape import command
from ci.stack.model import Carried, Stack
from ci.upstream import carries_check, history, partial, refs, release
from ci.upstream.checkout import Checkout
from ci.upstream.release import Base, Left

ENV_FORK = "STACKGATE_FORK"
ENV_REF = "STACKGATE_FORK_REF"


@dataclass(frozen=True, kw_only=True)
class Scope:
    name: str
    co: Checkout
    ref: str  # as named
    head: str  # the commit it names
    upstream_ref: str | None = None
    upstream: str | None = None  # the commit upstream_ref names
    upstream_how: str = ""  # how upstream was found: "--upstream-ref", "remote upstream (its URL is …)", …
    left: Left | None = None  # where the ref left upstream's main
    base: Base | None = None
    base_problem: str = ""  # why no base was found
    base_fix: str = ""  # what makes it known
    records: Mapping[str, Carried] = field(default_factory=dict)
    recorded: bool = False  # stack/fork.yaml describes this checkout: its facts apply, and --record writes there
    given: tuple[str, ...] = ()  # the --upstream-ref/--base-ref/--base-version options the user gave, to repeat

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

    @property
    def options(self) -> tuple[str, ...]:
        """The options that name this fork at this ref again, as the user gave them: what a fix line repeats."""
        return ("--fork", str(self.co.path), "--ref", self.ref, *self.given)

    def command(self, verb: str, *more: str) -> str:
        """`python -m ci VERB` on this fork, every option the user gave repeated."""
        return command(["python", "-m", "ci", *verb.split(), *self.options, *more])

    def require_base(self) -> Base:
        if self.base is None:
            raise UsageError(
                f"{self.co.path}: the base release of {self.ref} is not known: {self.base_problem}",
                hint=self.base_fix,
            )
        return self.base


def configured(st: Stack) -> bool:
    """Whether a fork is configured: $STACKGATE_FORK, or stack/fork.yaml whose checkout exists. Every entry point
    then judges it, unless told --stock."""
    if os.environ.get(ENV_FORK):
        return True
    return st.fork is not None and checkout_path(st).exists()


def wanted(st: Stack, args: object) -> bool:
    """Whether a command judges the fork: one named (--fork, --without) or configured, unless --stock."""
    named = bool(getattr(args, "fork", None) or getattr(args, "without", None))
    if getattr(args, "stock", False):
        if named:
            raise UsageError(
                "--stock judges the locked release, --fork and --without the fork", hint="give one of them"
            )
        return False
    return named or configured(st)


def checkout_path(st: Stack, override: Path | None = None) -> Path:
    """--fork (relative to the folder the user stands in), else $STACKGATE_FORK (so too), else fork.yaml's checkout
    (relative to the stack folder)."""
    given = override or os.environ.get(ENV_FORK)
    chosen = given or (st.fork.checkout if st.fork else None)
    if chosen is None:
        raise UsageError(
            "no fork checkout: pass --fork PATH (or set $STACKGATE_FORK)",
            hint="a local clone of the fork: git clone URL DIR, then --fork DIR",
        )
    if "://" in str(chosen) or str(chosen).startswith("git@"):
        raise UsageError(
            f"fork checkout {chosen} is a URL: stackgate reads a local clone, offline",
            hint=f"{command(['git', 'clone', chosen, 'DIR'])} && export {ENV_FORK}=DIR",
        )
    path = Path(chosen).expanduser()
    return path if path.is_absolute() else ((Path.cwd() if given else st.root) / path).resolve()


def open_scope(
    st: Stack,
    *,
    fork: Path | None = None,
    ref: str | None = None,
    upstream_ref: str | None = None,
    base_ref: str | None = None,
    base_version: str | None = None,
    fetch_missing: bool = False,
) -> Scope:
    path = checkout_path(st, fork)
    if not path.exists():
        raise UsageError(
            f"fork checkout {path} does not exist (--fork, ${ENV_FORK} or stack/fork.yaml's checkout)",
            hint=f"clone the fork there, or pass --fork PATH_OF_YOUR_CLONE (or export {ENV_FORK}=PATH)",
        )
    co = Checkout.open(path)
    partial.require(co, fetch_missing)  # before anything reads the history a partial clone lacks
    src = st.fork
    recorded = src is not None and _same_fork(st, co, path)
    named = ref or os.environ.get(ENV_REF) or (src.ref if recorded and src else None) or "HEAD"
    named = refs.as_typed(co, named, "--ref" if ref or not os.environ.get(ENV_REF) else f"${ENV_REF}")
    head = refs.commit(co, named, "--ref")
    up = history.upstream_tip(co, st, upstream_ref, src.upstream if recorded and src else None)
    where = release.left(co, head, up.ref, up.commit)
    base, unknown = _base(co, st, named, head, where, base_ref, base_version, recorded)
    if up.commit is None and base is None:
        raise UsageError(
            f"{path}: nothing says which commits of {named} are the fork's own: {history.no_remote(co, st)}, "
            f"and {unknown.problem}",
            hint=f"{history.add_remote(co, st)}; or set upstream once (${history.ENV_UPSTREAM}=REF, or stack/fork.yaml "
            "upstream: REMOTE); or pass --base-ref REF --base-version X.Y.Z (the release the fork is built on)",
        )
    history.require_vllm(co, st, named, head, up.ref, up.commit, shared=where is not None)
    if recorded and src is not None:
        carries_check.own_commits(st, co, src.carries, base, up.commit)
    # what names it again in a fresh shell: the options given, and an upstream given only by the environment
    env_up = os.environ.get(history.ENV_UPSTREAM) if up.how.startswith(f"${history.ENV_UPSTREAM}") else None
    given = [("--upstream-ref", upstream_ref or env_up), ("--base-ref", base_ref), ("--base-version", base_version)]
    return Scope(
        name=(src.name if recorded and src else _name(path)),
        co=co,
        ref=named,
        head=head,
        upstream_ref=up.ref,
        upstream=up.commit,
        upstream_how=up.how,
        left=where,
        base=base,
        base_problem=unknown.problem,
        base_fix=unknown.fix,
        records=(src.carries if recorded and src else {}),
        recorded=recorded,
        given=tuple(x for flag, value in given if value for x in (flag, value)),
    )


def _same_fork(st: Stack, co: Checkout, path: Path) -> bool:
    """Whether the checkout is the fork stack/fork.yaml records: its checkout, or a clone of it or of its `url`."""
    src = st.fork
    assert src is not None
    home = (st.root / Path(src.checkout).expanduser()).resolve()
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


_KNOWN = release.Unknown(problem="", fix="")


def _base(
    co: Checkout,
    st: Stack,
    ref: str,
    head: str,
    where: Left | None,
    base_ref: str | None,
    version: str | None,
    recorded: bool,
) -> tuple[Base | None, release.Unknown]:
    src = st.fork
    if base_ref is None and version is not None:
        if where is None:
            raise UsageError(
                f"--base-version {version} alone names the release over where {ref} left upstream's main, and "
                "upstream's main is not known here",
                hint="give --base-ref REF (the release tree the fork is built on) with it, or set upstream once",
            )
        on = release.line(co, head, where)
        if on is not None:  # a release line's tree is its last commit: its cherry-picks are the release's
            how = (
                f"--base-version, over the release line's last commit {on.said()}, which {ref} took from "
                f"{where.said()} ({on.picked} of its commits cherry-picked from upstream's main)"
            )
            base = Base(version=version, ref=on.end[:12], commit=on.end, how=how)
        else:
            how = f"--base-version, over where {ref} left {where.said()}"
            base = Base(version=version, ref=where.commit[:12], commit=where.commit, how=how)
    elif base_ref is not None:
        base_ref = refs.as_typed(co, base_ref, "--base-ref")
        version = version or release.version_of(base_ref)
        if version is None:
            raise UsageError(
                f"--base-ref {base_ref!r} is not named like a release (vX.Y.Z)",
                hint="give the vLLM release its tree is with --base-version, e.g. --base-version 0.27.1",
            )
        base = Base(version=version, ref=base_ref, commit=refs.commit(co, base_ref, "--base-ref"), how="--base-ref")
    elif recorded and src is not None and src.base is not None:
        commit = refs.commit(co, src.base.ref, "stack/fork.yaml base.ref")
        base = Base(
            version=src.base.version,
            ref=src.base.ref,
            commit=commit,
            release_commit=src.base.commit,
            how="stack/fork.yaml",
        )
    else:
        found = release.find(co, ref, head, where, release.line(co, head, where))
        if isinstance(found, release.Unknown):
            return None, found
        base = found
    if not co.is_ancestor(base.commit, head):
        raise UsageError(
            f"the base {base.ref} ({base.how}) is not in the history of {ref} ({co.path})",
            hint="the base names the release tree the fork's ref was built on: pass --base-ref REF",
        )
    return base, _KNOWN


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
        fetch_missing=bool(getattr(args, "fetch_missing", False)),
    )
