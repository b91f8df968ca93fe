"""Files read as untrusted input must be read, and written as a shared folder demands.

Reading: a regular file, and no larger than its kind can be. A FIFO would block the reader until someone writes to
it, and a device (a symlink to /dev/zero) would never end: both are refused before a byte is read, and a file is read
only up to its limit. Writing: a new file beside the target, renamed over it (`staged`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import BinaryIO

REPORT_JSON_MAX = 1 << 30  # a report.json: 10,000 rows make 15 MB (the baseline, the gate's input)

_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


def read_regular(path: Path, limit: int) -> bytes:
    """The bytes of `path`; an OSError whose strerror says why not where it is no regular file or over `limit`."""
    blocks, size = [], 0
    with open_regular(path, limit) as fh:  # a block at a time: read(limit) would set the whole limit aside
        for block in iter(lambda: fh.read(1 << 20), b""):
            size += len(block)
            if size > limit:
                raise OSError(errno.EFBIG, f"over the {limit:,}-byte limit for this input", str(path))
            blocks.append(block)
    return b"".join(blocks)


def open_regular(path: Path, limit: int | None = None) -> BinaryIO:
    """`path` opened to read, where it is a regular file (of at most `limit` bytes); an OSError whose strerror says
    why not otherwise. A FIFO is opened without waiting for a writer, and refused: a reader (tarfile among them)
    would block on it forever."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = _KINDS.get(stat.S_IFMT(info.st_mode), "no regular file")
            raise OSError(errno.EINVAL, f"{kind}, not a regular file", str(path))
        if limit is not None and info.st_size > limit:
            raise OSError(errno.EFBIG, f"over the {limit:,}-byte limit for this input", str(path))
        return os.fdopen(os.dup(fd), "rb")
    finally:
        os.close(fd)


@contextlib.contextmanager
def staged(path: Path, mode: int = 0o644) -> Iterator[BinaryIO]:
    """A file to write `path` through: made new and exclusively beside it (a random name, O_EXCL), then renamed over
    it whole. Nothing is ever written through what `path`, or a fixed temporary name beside it, already is (a
    symlink another user planted there points the write at their choice of file), and no reader sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def replace(path: Path, data: bytes | str, mode: int = 0o644) -> Path:
    """`path` holding `data` (text as UTF-8), written as `staged` writes it."""
    with staged(path, mode) as fh:
        fh.write(data.encode() if isinstance(data, str) else data)
    return path


def replace_together(written: Mapping[Path, str]) -> None:
    """Each path holding its text (UTF-8), all replaced or none: every file is written beside its path first, then
    each renamed over it; where a rename fails, those already renamed get their previous content back."""
    temps: dict[Path, str] = {}
    before: dict[Path, bytes | None] = {}
    try:
        for path, text in written.items():
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            temps[path] = tmp
            with os.fdopen(fd, "wb") as fh:
                fh.write(text.encode())
            os.chmod(tmp, 0o644)
        for path, tmp in temps.items():
            before[path] = path.read_bytes() if path.exists() else None
            os.replace(tmp, path)
    except BaseException:
        for path, old in before.items():
            if old is None:
                path.unlink(missing_ok=True)
            elif path.exists() and path.read_bytes() != old:
                replace(path, old)
        raise
    finally:
        for tmp in temps.values():
            if os.path.lexists(tmp):
                os.unlink(tmp)


def fresh(path: Path) -> BinaryIO:
    """A new file at `path` to write (an earlier run's file there removed first), opened O_EXCL | O_NOFOLLOW: a log's
    name is known in advance, and a symlink planted under it is never written or truncated through."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644), "wb")
