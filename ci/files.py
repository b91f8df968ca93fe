"""Reading an input file the way untrusted input must be read: a regular file, and no larger than its kind can be.

A FIFO would block the reader until someone writes to it, and a device (a symlink to /dev/zero) would never end:
both are refused before a byte is read, and a file is read only up to its limit.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

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
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens at once, without waiting for a writer
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = _KINDS.get(stat.S_IFMT(mode), "no regular file")
            raise OSError(errno.EINVAL, f"{kind}, not a regular file", str(path))
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"over the {limit:,}-byte limit for this input", str(path))
    return data
