"""A fork checkout, read through git (subprocess, no network): refs, ancestry, patch-ids and the files commits touch.

Each question over many commits is one git process (or one `git log -p | git patch-id` pair) over the whole
range or list, never one process per commit, so a long history costs a few streams.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ci.errors import UsageError
from ci.upstream.git_streams import GIT, PATCH, REC, Touch, file_ids_of, last, touches
from ci.upstream.git_streams import env as git_env


def git_lines(out: str) -> list[str]:
    """git's answer, line by line: split at newlines alone. `str.splitlines` also splits at U+0085, U+2028 and
    others, which a path or a commit subject may hold: the error would name a path that does not exist."""
    return out.split("\n")[:-1] if out.endswith("\n") else out.split("\n") if out else []


@dataclass(frozen=True)
class Checkout:
    path: Path
    head: str  # the commit HEAD names; "" where it names none (a bare clone whose HEAD branch was never fetched)
    shallow: bool

    @classmethod
    def open(cls, path: Path) -> Checkout:
        """The checkout at `path` itself (not a folder inside another repository); a bare clone reads the same."""
        fix = "pass --fork the path of a git checkout of the fork (git clone URL DIR)"
        if not path.is_dir():
            raise UsageError(f"{path}: no such directory", hint=fix)
        # --show-toplevel fails in a bare repository: ask whether it is one, and where its git dir is, first
        probe = subprocess.run(
            [*GIT, "-C", str(path), "rev-parse", "--is-bare-repository", "--absolute-git-dir"],
            capture_output=True,
            text=True,
            env=git_env(),
        )
        if probe.returncode != 0:
            why = "" if "not a git repository" in probe.stderr else f" ({last(probe.stderr)})"
            raise UsageError(f"{path} is not a git repository{why}", hint=fix)
        bare, git_dir = git_lines(probe.stdout)[:2]
        if bare == "true":
            top = [git_dir]
        else:
            top = git_lines(
                subprocess.run(
                    [*GIT, "-C", str(path), "rev-parse", "--show-toplevel"],
                    capture_output=True,
                    text=True,
                    env=git_env(),
                ).stdout
            )
        if top and Path(top[0]).resolve() != path.resolve():
            raise UsageError(
                f"{path} is not a git repository: it is a folder inside the repository {top[0]}",
                hint=f"pass --fork {top[0]}, or the path of the fork's own checkout",
            )
        head = subprocess.run(
            [*GIT, "-C", str(path), "rev-parse", "--verify", "--quiet", "HEAD^{commit}"],
            capture_output=True,
            text=True,
            env=git_env(),
        )
        shallow = cls(path, "", False).git("rev-parse", "--is-shallow-repository").strip() == "true"
        return cls(path, head.stdout.strip() if head.returncode == 0 else "", shallow)

    def git(self, *args: str, stdin: str | None = None, ok: Sequence[int] = (0,)) -> str:
        return self._run(*args, stdin=stdin, ok=ok).stdout

    def _run(
        self, *args: str, stdin: str | None = None, ok: Sequence[int] = (0,), index: Path | None = None
    ) -> subprocess.CompletedProcess:
        env = {**git_env(), "GIT_INDEX_FILE": str(index)} if index else git_env()
        done = subprocess.run(
            [*GIT, "-C", str(self.path), *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            errors="surrogateescape",
        )
        if done.returncode not in ok:
            raise UsageError(
                f"git {' '.join(args[:3])} failed in {self.path}: {last(done.stderr)}",
                hint=f"check the checkout: git -C {self.path} status",
            )
        return done

    def with_index(self, index: Path, *args: str, stdin: str | None = None, ok: Sequence[int] = (0,)):
        """A git command on a scratch index file (plumbing that builds a tree without touching any work tree,
        so bare repositories and checkouts with files missing on disk work alike)."""
        return self._run(*args, stdin=stdin, ok=ok, index=index)

    def commit_tree(self, tree: str, parent: str, message: str, ident: dict[str, str]) -> str:
        """A new commit object (no ref moved); `ident` fixes author and committer, so the id is reproducible."""
        done = subprocess.run(
            [*GIT, "-C", str(self.path), "commit-tree", tree, "-p", parent],
            input=message,
            capture_output=True,
            text=True,
            env={**git_env(), **ident},
        )
        if done.returncode != 0:
            raise UsageError(
                f"git commit-tree failed in {self.path}: {last(done.stderr)}",
                hint=f"check the checkout: git -C {self.path} status",
            )
        return done.stdout.strip()

    def archive(self, commit: str, paths: Sequence[str]) -> bytes:
        """A tar of `paths` as they are at `commit`, in one process."""
        done = subprocess.run(
            [*GIT, "-C", str(self.path), "archive", "--format=tar", commit, "--", *(f":(literal){p}" for p in paths)],
            capture_output=True,
            env=git_env(),
        )
        if done.returncode != 0:
            raise UsageError(
                f"git archive failed in {self.path}: {last(done.stderr.decode(errors='replace'))}",
                hint=f"check the checkout: git -C {self.path} fsck",
            )
        return done.stdout

    def commit(self, ref: str) -> str | None:
        """The commit a ref names, or None where it names none."""
        if ref.startswith("-"):
            return None
        out = self.git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", ok=(0, 1))
        return out.strip() or None

    def remotes(self) -> dict[str, str]:
        """Each remote's name -> its fetch URL."""
        out = self.git("config", "--get-regexp", r"^remote\..*\.url$", ok=(0, 1))
        found = {}
        for line in git_lines(out):
            key, _, url = line.partition(" ")
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
        return self._run("merge-base", "--is-ancestor", commit, of, ok=(0, 1)).returncode == 0

    def merge_base(self, a: str, b: str) -> str | None:
        return self.git("merge-base", a, b, ok=(0, 1)).strip() or None

    def patch_ids(self, *revs: str, walk: bool = True) -> dict[str, str]:
        """commit -> `git patch-id --stable` of its patch, for every non-merge commit of the range `revs` (or of
        exactly the commits `revs`, walk=False): one `git log -p` streamed into one `git patch-id`. Merges and
        empty commits have no patch and no entry."""
        if not revs:
            return {}
        args = ["log", *PATCH, *(["--no-merges"] if walk else ["--no-walk=unsorted"]), *revs, "--"]
        with tempfile.TemporaryFile() as errors:
            log = subprocess.Popen(
                [*GIT, "-C", str(self.path), *args], stdout=subprocess.PIPE, stderr=errors, env=git_env()
            )
            assert log.stdout is not None
            ids = subprocess.run(
                [*GIT, "-C", str(self.path), "patch-id", "--stable"],
                stdin=log.stdout,
                capture_output=True,
                text=True,
                env=git_env(),
            )
            log.stdout.close()
            if log.wait() != 0 or ids.returncode != 0:
                errors.seek(0)
                raise UsageError(
                    f"git log -p failed in {self.path}: {last(errors.read().decode() + ids.stderr)}",
                    hint=f"check the checkout: git -C {self.path} fsck",
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
