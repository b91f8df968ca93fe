"""What vLLM wrote while an engine started, read back for one thing: a warm-up that failed and was skipped.

vLLM's warm-ups run inside `except Exception` and log "Skipping … warmup" when they raise (vLLM 0.26.0's sparse MLA
Triton warm-up: a warning with the traceback). A warm-up calling a function it never imported is such a NameError,
swallowed: the engine starts, and what it should have compiled compiles on the first request instead. A skip said
at INFO without a traceback is a warm-up that does not apply ("no Qwen GDN layer found") and is not a failure.

The harness sends a row's output, its engine's worker processes included, to the row's log file (harness.child);
`mark` notes where that file ends, `since` reads what was written after it. Where the output is not a file (a plain
`pytest` in a terminal) nothing can be read back, and `since` says so with None.
"""

from __future__ import annotations

import os
import re
import stat
import sys

_SKIP = re.compile(r"\bSkipping\b(?P<what>.*?\bwarm-?up\b)", re.IGNORECASE)
_LEVEL = re.compile(r"\b(?:WARNING|ERROR|CRITICAL)\b")
_PREFIX = re.compile(r"^\([^)]*\)\s*")  # "(EngineCore_DP0 pid=123) ": a worker process's line
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b(?::.*)?)$")
_READ_MAX = 32 << 20  # bytes of an engine start read back


def mark() -> tuple[int, int] | None:
    """Where the process's output file ends now, as (inode, size); None where its output is not a regular file."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        st = os.fstat(1)
    except OSError:
        return None
    return (st.st_ino, st.st_size) if stat.S_ISREG(st.st_mode) else None


def since(at: tuple[int, int] | None) -> str | None:
    """The output written to the same file after `mark()` returned `at`; None where it cannot be read back."""
    if at is None:
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        with open("/proc/self/fd/1", "rb") as fh:
            if os.fstat(fh.fileno()).st_ino != at[0]:
                return None
            fh.seek(at[1])
            return fh.read(_READ_MAX).decode("utf-8", "replace")
    except OSError:
        return None


def failed_warmups(text: str) -> list[str]:
    """Each warm-up the text says was skipped because it failed: a "Skipping … warmup" line at WARNING or above, or
    followed by a traceback, with the exception the traceback ends in: "Skipping spec decode warmup (NameError: name
    'x' is not defined)"."""
    lines = [_PREFIX.sub("", line.rstrip()) for line in text.splitlines()]
    out: list[str] = []
    for i, line in enumerate(lines):
        found = _SKIP.search(line)
        if not found:
            continue
        after = lines[i + 1 : i + 200]
        traced = any(line.startswith("Traceback (most recent call last)") for line in after[:3])
        if not traced and not _LEVEL.search(line[: found.start()]):
            continue  # said at INFO, nothing raised: the warm-up does not apply here
        raised = next((m.group(1) for x in after if (m := _EXCEPTION.match(x.strip()))), None) if traced else None
        said = ("Skipping" + found.group("what")).strip()
        out.append(said + (f" ({raised})" if raised else ""))
    return list(dict.fromkeys(out))
