"""Whether a folder holds only what this user (or root) wrote: the test before reading back anything that runs.

A cache that keeps executable formats (pickles, Jinja's compiled templates) runs whatever it holds with the rights
of whoever reads it. `$STACKGATE_CACHE`, `$XDG_CACHE_HOME` and `~` are set by others too (a CI agent's environment,
a shared home, a folder made with mode 0777 for another job), so the folder is trusted only where nobody else could
have put a file in it: every folder on the way is owned by this user or root and writable by nobody else (a sticky
folder such as /tmp excepted on the way, never as the folder itself), and every symlink on the way is this user's or
root's. Where that does not hold the folder is not used, and the reason is said once a process.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

_MAX_LINKS = 40  # as the kernel's own limit on symlinks followed in one path (ELOOP)


def untrusted(folder: Path) -> str | None:
    """Why `folder` may hold files another user wrote, or None where only this user and root can have written there.
    A folder that does not exist yet is judged by the part of the path that does (it is made there, mode 0700)."""
    me = os.geteuid()
    pending = list(Path(os.path.abspath(folder)).parts[1:])
    at, followed = "/", 0
    while pending:
        name = pending.pop(0)
        if name in (".", ".."):  # as a symlink's target may spell its way
            at = at if name == "." else os.path.dirname(at)
            continue
        here = os.path.join(at, name)
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            return None  # made later, by this process, under the last folder checked
        except OSError as exc:
            return f"{here} cannot be examined ({exc.strerror or exc})"
        if stat.S_ISLNK(st.st_mode):
            if st.st_uid not in (me, 0):
                return f"{here} is a symlink owned by uid {st.st_uid}, not by you (uid {me}) or root"
            followed += 1
            if followed > _MAX_LINKS:
                return f"{here}: too many symlinks on the way"
            target = os.readlink(here)
            pending[:0] = Path(target).parts[1:] if os.path.isabs(target) else Path(target).parts
            at = "/" if os.path.isabs(target) else at
            continue
        if not stat.S_ISDIR(st.st_mode):
            return f"{here} is not a folder"
        why = _others_may_write(here, st, me, sticky_ok=bool(pending))
        if why:
            return why
        at = here
    return None


def _others_may_write(path: str, st: os.stat_result, me: int, *, sticky_ok: bool) -> str | None:
    """Why others could put a file in the folder `path` (`st`); a sticky folder on the way lets them make only
    names of their own, not replace this user's."""
    if st.st_uid not in (me, 0):
        return f"{path} is owned by uid {st.st_uid}, not by you (uid {me}) or root"
    writable = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if writable and not (sticky_ok and st.st_mode & stat.S_ISVTX):
        who = "others" if st.st_mode & stat.S_IWOTH else "its group"
        return f"{path} is writable by {who} (mode {st.st_mode & 0o7777:04o})"
    return None


def usable(folder: Path, what: str) -> bool:
    """Whether `what` in `folder` may be read back (see `untrusted`); where not, a warning, once a process for each
    reason: the stack's and the template's caches share a parent, and one folder of another user's is one warning."""
    why = untrusted(folder)
    if why is not None and why not in _SAID:
        _SAID.add(why)
        print(
            f"warning: {what} not used: {why}, and another user could have put code there that would run as you"
            "\n  fix: point $STACKGATE_CACHE at a folder of your own (mode 0700), or chmod go-w the folder named",
            file=sys.stderr,
            flush=True,
        )
    return why is None


_SAID: set[str] = set()


def make(folder: Path) -> None:
    """`folder` and the folders above it that are missing, each readable and writable by this user alone (whatever
    the umask: a group-writable folder would not be trusted afterwards)."""
    if folder.is_dir():
        return
    make(folder.parent)
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        return  # made meanwhile by another process: judged as it is by `usable`


def own_file(fd: int) -> bool:
    """Whether the open file `fd` is this user's (or root's) and writable by nobody else."""
    st = os.fstat(fd)
    return stat.S_ISREG(st.st_mode) and st.st_uid in (os.geteuid(), 0) and not st.st_mode & 0o022


def read_kept(path: Path, what: str) -> bytes | None:
    """The bytes of a file stackgate kept at `path`, where its folder is usable and the file is this user's own and no
    link; None where it is absent, or where anything of that does not hold (a miss: the caller makes it anew)."""
    if not path.parent.is_dir() or not usable(path.parent, what):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        return fh.read() if own_file(fh.fileno()) else None
