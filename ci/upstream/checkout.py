"""A fork checkout, read through git (ci.git: no network, no hook, no attribute of its work tree): refs, ancestry,
patch-ids and the files commits touch. Every git process runs inside the checkout's git directory, where git has no
work tree: what it answers is the history's, whatever the user's work tree holds.

Each question over many commits is one git process (or one `git log -p | git patch-id` pair) over the whole
range or list, never one process per commit, so a long history costs a few streams.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ci import git
from ci.errors import StackgateError, UsageError
from ci.escape import command
from ci.upstream.git_streams import PATCH, REC, Touch, failure, file_ids_of, last, touches


def git_lines(out: str) -> list[str]:
    """git's answer, line by line: split at newlines alone. `str.splitlines` also splits at U+0085, U+2028 and
    others, which a path or a commit subject may hold: the error would name a path that does not exist."""
    return out.split("\n")[:-1] if out.endswith("\n") else out.split("\n") if out else []


def _one(out: str) -> str:
    """git's one-line answer (a path): its last newline alone taken off, as a path may hold others."""
    return out[:-1] if out.endswith("\n") else out


@dataclass(frozen=True)
class Checkout:
    path: Path  # as the user named it: what messages and fix lines say
    head: str  # the commit HEAD names; "" where it names none (a bare clone whose HEAD branch was never fetched)
    shallow: bool
    git_dir: Path  # where every git process runs (a bare clone's folder, a work tree's .git, a worktree's own)

    @classmethod
    def open(cls, path: Path) -> Checkout:
        """The checkout at `path` itself (not a folder inside another repository); a bare clone reads the same."""
        fix = "pass --fork the path of a git checkout of the fork (git clone URL DIR)"
        if not path.is_dir():
            raise UsageError(f"{path}: no such directory", hint=fix)
        # --show-toplevel fails in a bare repository: ask whether it is one, and where its git dir is, first
        probe = git.run(path, "rev-parse", "--absolute-git-dir")
        if probe.returncode != 0:
            why = "" if "not a git repository" in probe.stderr else f" ({last(probe.stderr)})"
            raise UsageError(f"{path} is not a git repository{why}", hint=fix)
        git_dir = Path(_one(probe.stdout))
        bare = git.run(path, "rev-parse", "--is-bare-repository").stdout.strip() == "true"
        top = str(git_dir) if bare else _one(git.run(path, "rev-parse", "--show-toplevel").stdout)
        if top and Path(top).resolve() != path.resolve():
            raise UsageError(
                f"{path} is not a git repository: it is a folder inside the repository {top}",
                hint=f"pass --fork {command([top])}, or the path of the fork's own checkout",
            )
        found = cls(path, "", False, git_dir)
        head = found.git("rev-parse", "--verify", "--quiet", "HEAD^{commit}", ok=(0, 1)).strip()
        shallow = found.git("rev-parse", "--is-shallow-repository").strip() == "true"
        return cls(path, head, shallow, git_dir)

    def command(self, *args: str) -> str:
        """`git -C CHECKOUT ARGS` as a line to print (a fix line), every value quoted (`ci.escape.command`)."""
        return command(["git", "-C", str(self.path), *args])

    def git(self, *args: str, stdin: str | None = None, ok: Sequence[int] = (0,)) -> str:
        return self.run(*args, stdin=stdin, ok=ok).stdout

    def run(
        self,
        *args: str,
        stdin: str | None = None,
        ok: Sequence[int] = (0,),
        extra: Mapping[str, str] | None = None,
        network: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        """git ARGS in the checkout's git directory (ci.git); an exit status outside `ok` is a UsageError naming the
        checkout. `extra`: environment of stackgate's own (a scratch index or object directory, an author);
        `network`: a fetch the user asked for."""
        done = git.run(self.git_dir, *args, stdin=stdin, extra=extra, network=network)
        if done.returncode not in ok:
            raise self.failed(f"git {' '.join(args[:3])}", done.stderr)
        return done

    def failed(self, what: str, stderr: str, hint: str = "") -> StackgateError:
        """A git process that failed, in words (ci.upstream.git_streams.failure); `hint` where nothing better is
        known (default: look at the checkout)."""
        return failure(what, self.path, stderr, hint or f"check the checkout: {self.command('status')}")

    def raw(self, *args: str, stdin: bytes | None = None) -> bytes:
        """git ARGS's output as bytes (blobs as git stores them)."""
        done = git.run(self.git_dir, *args, stdin=stdin, text=False)
        if done.returncode != 0:
            raise UsageError(
                f"git {args[0]} failed in {self.path}: {last(done.stderr.decode(errors='replace'))}",
                hint=f"check the checkout: {self.command('fsck')}",
            )
        return done.stdout

    def with_index(self, index: Path, *args: str, stdin: str | None = None, ok: Sequence[int] = (0,)):
        """A git command on a scratch index file (plumbing that builds a tree without touching any work tree,
        so bare repositories and checkouts with files missing on disk work alike)."""
        return self.run(*args, stdin=stdin, ok=ok, extra={"GIT_INDEX_FILE": str(index)})

    def commit_tree(self, tree: str, parent: str, message: str, ident: dict[str, str]) -> str:
        """A new commit object (no ref moved); `ident` fixes author and committer, so the id is reproducible."""
        return self.run("commit-tree", tree, "-p", parent, stdin=message, extra=ident).stdout.strip()

    def commit(self, ref: str) -> str | None:
        """The commit a ref names, or None where it names none."""
        if ref.startswith("-"):
            return None
        out = self.git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", ok=(0, 1))
        return out.strip() or None

    def remotes(self) -> dict[str, str]:
        """Each remote's name -> its fetch URL (a name may hold a space: each entry is read whole)."""
        out = self.git("config", "--null", "--get-regexp", r"^remote\..*\.url$", ok=(0, 1))
        found = {}
        for entry in out.split("\0"):
            key, _, url = entry.partition("\n")
            if key:
                found[key.removeprefix("remote.").removesuffix(".url")] = url
        return found

    def has_path(self, commit: str, path: str) -> bool:
        """Whether `path` (a file or folder) is in the tree of `commit`."""
        return bool(self.git("ls-tree", "--name-only", commit, "--", path, ok=(0, 128)).strip())

    def date(self, commit: str) -> str:
        """The committer date of `commit`, YYYY-MM-DD in UTC."""
        return self.git("log", "-1", "--date=format-local:%Y-%m-%d", "--format=%cd", commit, "--").strip()

    def file_ids(self, commits: Iterable[str]) -> dict[str, dict[str, str]]:
        """commit -> {path: file patch-id}, for each file its patch changes; one process. A file patch-id is the
        sha1 of the file's path and its added and removed lines with all whitespace taken out (hunk positions and
        context left out, as git patch-id does for a whole patch): equal for the same edit of the same file after
        a rebase, different once a line of the edit differs."""
        wanted = sorted(set(commits))
        if not wanted:
            return {}
        out = self.git("log", *PATCH, "--no-walk=unsorted", *wanted, "--")
        return file_ids_of(out)

    def refs(self) -> list[str]:
        """Branches and remote-tracking branches, for a hint."""
        out = self.git("for-each-ref", "--format=%(refname:short)", "refs/remotes", "refs/heads")
        return [r for r in out.split() if not r.endswith("/HEAD")]

    def resolve(self, ids: Iterable[str]) -> dict[str, str | None]:
        """Each (abbreviated) commit id -> the full id, or None where the object database lacks it; one process.
        An abbreviation that names several objects is an error: it must be given longer."""
        wanted = sorted(set(ids))
        if not wanted:
            return {}
        out = self.git(
            "cat-file", "--batch-check=%(objectname) %(objecttype)", stdin="".join(f"{i}^{{commit}}\n" for i in wanted)
        )
        found: dict[str, str | None] = {}
        for want, line in zip(wanted, git_lines(out), strict=True):
            name, _, kind = line.rpartition(" ")
            if kind == "ambiguous":
                raise UsageError(
                    f"commit id {want} is ambiguous in {self.path}", hint="give more of its digits in the change file"
                )
            found[want] = name if kind == "commit" else None
        return found

    def is_ancestor(self, commit: str, of: str) -> bool:
        return self.run("merge-base", "--is-ancestor", commit, of, ok=(0, 1)).returncode == 0

    def merge_base(self, a: str, b: str) -> str | None:
        return self.git("merge-base", a, b, ok=(0, 1)).strip() or None

    def patch_ids(self, *revs: str, walk: bool = True, reverse: bool = False) -> dict[str, str]:
        """commit -> `git patch-id --stable` of its patch (`reverse`: of its patch reversed, as its revert's is), for
        every non-merge commit of the range `revs` (or of exactly the commits `revs`, walk=False): one `git log -p`
        streamed into one `git patch-id`. Merges and empty commits have no patch and no entry."""
        if not revs:
            return {}
        # reversed, its prefixes as its revert's are (-R swaps them, and the patch-id reads the file names)
        back = ["-R", "--src-prefix=b/", "--dst-prefix=a/"] if reverse else []
        how = [*(["--no-merges"] if walk else ["--no-walk=unsorted"]), *back]
        args = ["log", *PATCH, *how, *revs, "--"]
        with tempfile.TemporaryFile() as errors:
            log = git.start(self.git_dir, *args, stderr=errors)
            assert log.stdout is not None
            ids = git.run(self.git_dir, "patch-id", "--stable", pipe=log.stdout)
            log.stdout.close()
            if log.wait() != 0 or ids.returncode != 0:
                errors.seek(0)
                raise UsageError(
                    f"git log -p failed in {self.path}: {last(errors.read().decode() + ids.stderr)}",
                    hint=f"check the checkout: {self.command('fsck')}",
                )
        out: dict[str, str] = {}
        for line in git_lines(ids.stdout):
            patch_id, _, commit = line.partition(" ")
            out[commit] = patch_id
        return out

    def files(self, commits: Iterable[str]) -> dict[str, tuple[str, ...]]:
        """commit -> the paths its patch changes; one process."""
        wanted = sorted(set(commits))
        if not wanted:
            return {}
        out = self.git(
            "log", "--no-walk=unsorted", "--no-renames", f"--format={REC}%H", "--name-only", "-z", *wanted, "--"
        )
        return {t.commit: t.files for t in touches(out)}

    def touching(self, revs: Sequence[str], paths: Iterable[str]) -> list[Touch]:
        """The non-merge commits of the range `revs` (`base..tip`, or a tip and `^excluded` commits) that change any
        of `paths`, newest first; one process."""
        wanted = sorted(set(paths))
        if not wanted:
            return []
        out = self.git(
            "log",
            "--no-merges",
            "--full-history",
            "--no-renames",
            f"--format={REC}%H%x02%s",
            "--name-only",
            "-z",
            *revs,
            "--",
            *(f":(literal){p}" for p in wanted),
        )
        return touches(out)

    def adding(self, revs: Sequence[str], paths: Iterable[str]) -> dict[str, str]:
        """path -> the newest commit of the range `revs` that added it, for each of `paths` some commit added; one
        process."""
        wanted = sorted(set(paths))
        if not wanted:
            return {}
        out = self.git(
            "log",
            "--diff-filter=A",
            "--no-renames",
            f"--format={REC}%H",
            "--name-only",
            "-z",
            *revs,
            "--",
            *(f":(literal){p}" for p in wanted),
        )
        found: dict[str, str] = {}
        for t in touches(out):
            for path in t.files:
                found.setdefault(path, t.commit)
        return found

    def titles(self, *revs: str, walk: bool = True) -> dict[str, str]:
        """commit -> subject, for the non-merge commits of the range `revs` (or exactly the commits, walk=False)."""
        if not revs:
            return {}
        how = ["--no-merges"] if walk else ["--no-walk=unsorted"]
        out = self.git("log", *how, f"--format=%H{REC}%s", *revs, "--")
        return dict(line.split(REC, 1) for line in git_lines(out) if REC in line)

    def subjects(self, tip: str, patterns: Sequence[str]) -> list[tuple[str, str]]:
        """(commit, subject) of the commits reachable from `tip` whose message matches any of the fixed strings
        `patterns`; one process."""
        if not patterns:
            return []
        greps = [f"--grep={p}" for p in patterns]
        out = self.git("log", "--fixed-strings", f"--format=%H{REC}%s", *greps, tip, "--")
        return [(c, s) for c, _, s in (line.partition(REC) for line in git_lines(out))]
