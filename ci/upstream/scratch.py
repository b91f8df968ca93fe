"""A place of our own to try a patch in a fork's checkout without touching it: a temporary index (read from a
commit's tree) and a temporary object directory that reads the checkout's objects as an alternate. Whatever git
writes while trying (merged blobs, trees, commits) lands in the temporary directory and goes with it; `keep` adds it
to the checkout's object store through git, for a port that is made (no ref moves until the caller moves one).

The user's work tree, index, refs and object store stay as they were; bare clones and clones lacking blobs
outside vllm/ work alike (no checkout of files: plumbing on the index)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ci import git, signals
from ci.upstream.checkout import Checkout


class Scratch:
    def __init__(self, co: Checkout) -> None:
        self.co = co
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._home = Path()
        self._store = Path()
        self._trees: dict[str, Path] = {}  # commit -> an index file read from its tree, copied for each attempt

    def __enter__(self) -> Scratch:
        self._store = store(self.co)  # first: a stop while git answers leaves no folder made (__exit__ would not run)
        self._tmp = tempfile.TemporaryDirectory(prefix="stackgate-port-")
        self._home = Path(self._tmp.name)
        (self._home / "objects").mkdir()
        return self

    def __exit__(self, *_: object) -> None:
        if self._tmp is not None:
            with signals.held():  # a stop arriving now waits until the folder is gone, not half of it
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
            raise self.co.failed(
                f"git {' '.join(args[:2])}", done.stderr, hint=f"check the checkout: {self.co.command('fsck')}"
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

    def save(self, name: str) -> str:
        """The scratch index as it is now, copied aside under `name` (to `restore` later); its path."""
        saved = self._home / f"{name}.index"
        shutil.copyfile(self._home / "index", saved)
        return str(saved)

    def restore(self, saved: str) -> None:
        """The scratch index as `save` copied it."""
        shutil.copyfile(saved, self._home / "index")

    def keep(self) -> None:
        """The objects written here, added to the checkout's store by git itself (`pack-objects | unpack-objects`):
        the store's permissions (core.sharedRepository), its temporary files and their removal where it fails are
        git's own; an object already there is left alone."""
        names = sorted(p.parent.name + p.name for p in self.objects.glob("[0-9a-f][0-9a-f]/*") if len(p.name) == 38)
        if not names:
            return
        scratch = {
            "GIT_OBJECT_DIRECTORY": str(self.objects),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": _alternate(self._store),
        }
        listed = "".join(f"{n}\n" for n in names).encode()
        pack = git.run(self.co.git_dir, "pack-objects", "--stdout", "-q", stdin=listed, text=False, extra=scratch)
        folders = [self._store / n[:2] for n in dict.fromkeys(names)]
        there = {p for f in folders if f.is_dir() for p in f.iterdir()}
        done = (
            pack if pack.returncode else git.run(self.co.git_dir, "unpack-objects", "-q", stdin=pack.stdout, text=False)
        )
        if done.returncode:
            for f in folders:  # git leaves its temporary file where a write failed (a full disk): ours to remove
                for p in set(f.iterdir() if f.is_dir() else ()) - there:
                    if p.name.startswith("tmp_obj_"):
                        p.unlink(missing_ok=True)
            raise self.co.failed(
                "git unpack-objects (the port's objects into the checkout)", done.stderr.decode(errors="replace")
            )


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
