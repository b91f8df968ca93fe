"""What `ci upstream` reads from git: how a patch is diffed (the same everywhere: patch-ids are recorded in the stack
and compared with ones computed on another machine), and the parsers of its output streams (commits with the files
they touch, file patch-ids, the last line of an error). Every git process runs through `ci.git`."""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ci.errors import BuildError, StackgateError, UsageError
from ci.escape import command

PATCH = (
    "-p",
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--no-renames",
    "--diff-algorithm=myers",
    "--indent-heuristic",
    "-U3",
    "--inter-hunk-context=0",
    "--format=commit %H",
)
REC = "\x01"  # starts each commit in the streams parsed here


@dataclass(frozen=True, kw_only=True)
class Touch:
    """An upstream commit and the files it changed (those asked about)."""

    commit: str
    subject: str
    files: tuple[str, ...]


def file_ids_of(log_p: str) -> dict[str, dict[str, str]]:
    """`git log -p --format='commit %H'` output -> commit -> {path: file patch-id} (see Checkout.file_ids)."""
    out: dict[str, dict[str, str]] = {}
    commit, path, digest, hunks = "", "", None, False

    def close() -> None:
        if commit and path and digest is not None:
            out.setdefault(commit, {})[path] = digest.hexdigest()

    for line in log_p.split("\n"):
        if line.startswith("commit ") and len(line) == 47:
            close()
            commit, path, digest, hunks = line[7:], "", None, False
            out.setdefault(commit, {})
        elif line.startswith("diff --git "):
            close()
            path, hunks = line.rsplit(" b/", 1)[-1], False
            digest = hashlib.sha1(path.encode(errors="surrogateescape"))
        elif line.startswith("@@"):
            hunks = True  # past the file's header (its ---/+++ lines)
        elif hunks and digest is not None and line[:1] in ("+", "-"):
            digest.update(line[0].encode() + "".join(line[1:].split()).encode(errors="surrogateescape") + b"\n")
    close()
    return out


def touches(out: str) -> list[Touch]:
    found = []
    for chunk in out.split(REC)[1:]:
        head, _, names = chunk.partition("\0")
        commit, _, subject = head.partition("\x02")
        found.append(
            Touch(
                commit=commit, subject=subject, files=tuple(n.strip("\n") for n in names.split("\0") if n.strip("\n"))
            )
        )
    return found


def last(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return lines[-1].removeprefix("fatal: ").removeprefix("error: ") if lines else "no message"


_LOCKED = re.compile(r"Unable to create '([^'\n]+\.lock)': File exists")
_UNWRITABLE = ("Read-only file system", "Permission denied", "Operation not permitted", "insufficient permission")


def failure(what: str, where: Path, stderr: str, hint: str) -> StackgateError:
    """A git process that failed in the checkout `where`, in words: a lock another git holds (named, where git's last
    line says only "remove the file manually"), a full disk (exit 3), a checkout that cannot be written; else git's
    last word and `hint`."""
    said = last(stderr)
    if lock := _LOCKED.search(stderr):
        held = os.path.normpath(lock.group(1))
        return UsageError(
            f"{what} failed in {where}: {held} exists: another git may be running in this repository (or one that "
            "crashed left it behind)",
            hint=f"let the other git finish, then run it again; if none is running, remove the lock: "
            f"{command(['rm', '--', held])}",
        )
    if "No space left on device" in stderr:
        return BuildError(
            f"{what} failed in {where}: no space left on device ({said})",
            hint="free space where the checkout (and $TMPDIR) is, then run it again",
        )
    if any(s in stderr for s in _UNWRITABLE):
        return UsageError(
            f"{what} failed: {where} cannot be written ({said})",
            hint="run it in a checkout you can write (a clone of this one), or make this one writable",
        )
    return UsageError(f"{what} failed in {where}: {said}", hint=hint)
