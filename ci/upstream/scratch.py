"""A place of our own to try a patch in a fork's checkout without touching it: a temporary index (read from a
commit's tree) and a temporary object directory that reads the checkout's objects as an alternate. Whatever git
writes while trying (merged blobs, trees, commits) lands in the temporary directory and goes with it; `keep` copies
it into the checkout's object store, for a port that is made (no ref moves until the caller moves one).

The user's work tree, index, refs and object store stay as they were; bare clones and clones lacking blobs
outside vllm/ work alike (no checkout of files: plumbing on the index)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ci import git
from ci.errors import UsageError
from ci.upstream.checkout import Checkout
from ci.upstream.git_streams import last


class Scratch:
    def __init__(self, co: Checkout) -> None:
        self.co = co
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._home = Path()
        self._store = Path()
        self._trees: dict[str, Path] = {}  # commit -> an index file read from its tree, copied for each attempt

    def __enter__(self) -> Scratch:
        self._tmp = tempfile.TemporaryDirectory(prefix="stackgate-port-")
        self._home = Path(self._tmp.name)
        (self._home / "objects").mkdir()
        self._store = store(self.co)
        return self

    def __exit__(self, *_: object) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    @property
    def objects(self) -> Path:
        return self._home / "objects"

    def _env(self) -> dict[str, str]:
        return {
            "GIT_INDEX_FILE": str(self._home / "index"),
            "GIT_OBJECT_DIRECTORY": str(self.objects),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": _alternate(self._store),
        }

    def run(
        self, *args: str, stdin: str | None = None, ok: Sequence[int] = (0,), ident: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        done = git.run(self.co.git_dir, *args, stdin=stdin, extra={**self._env(), **(ident or {})})
        if done.returncode not in ok:
            raise UsageError(
                f"git {' '.join(args[:2])} failed in {self.co.path}: {last(done.stderr)}",
                hint=f"check the checkout: {self.co.command('fsck')}",
            )
        return done

    def git(
        self, *args: str, stdin: str | None = None, ok: Sequence[int] = (0,), ident: dict[str, str] | None = None
    ) -> str:
        return self.run(*args, stdin=stdin, ok=ok, ident=ident).stdout

    def read_tree(self, commit: str) -> None:
        """The scratch index set to `commit`'s tree (read once, then copied: an index is read faster than a tree)."""
        index = self._home / "index"
        saved = self._trees.get(commit)
        if saved is None:
            self.git("read-tree", commit)
            saved = self._trees[commit] = self._home / f"tree-{len(self._trees)}.index"
            shutil.copyfile(index, saved)
        else:
            shutil.copyfile(saved, index)

    def keep(self) -> None:
        """Copy the objects written here into the checkout's store (each file by its name, as git writes them:
        an object already there is left alone)."""
        dest = self._store
        for src in sorted(p for p in self.objects.rglob("*") if p.is_file()):
            target = dest / src.relative_to(self.objects)
            if target.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".stackgate-")
            os.close(fd)
            shutil.copyfile(src, tmp)
            os.chmod(tmp, 0o444)
            os.replace(tmp, target)


def store(co: Checkout) -> Path:
    """The checkout's object directory (a bare clone's `objects`, a work tree's `.git/objects`)."""
    out = co.git("rev-parse", "--git-path", "objects").strip()
    path = Path(out)
    return path if path.is_absolute() else (co.git_dir / path).resolve()


def _alternate(path: Path) -> str:
    """One entry of GIT_ALTERNATE_OBJECT_DIRECTORIES: a path holding the list separator or a quote is quoted, as
    git reads it (C-style, in double quotes)."""
    text = str(path)
    if ":" not in text and '"' not in text and not text.startswith('"'):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
