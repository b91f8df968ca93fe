"""The line that says why a row crashed: an illegal memory access, a failed assertion, a CUDA or NCCL error,
a fatal signal. Read from a row's log (every process of the row writes there), first match by kind. For a row
that hung: where each of its processes was, from the stacks they dumped to the log when its time ran out."""

from __future__ import annotations

import re

# Most telling first: an IMA is the cause even where an assertion or a dead engine follows it.
KINDS = (
    ("illegal memory access", re.compile(r"illegal memory access", re.I)),
    ("assertion", re.compile(r"\bAssertionError\b.*|^\s*assert .+", re.M)),
    ("CUDA error", re.compile(r"CUDA error:.*|cudaError\w*.*|CUBLAS_STATUS_\w+.*", re.I)),
    ("NCCL error", re.compile(r"NCCL error.*|ncclSystemError.*|ncclInternalError.*|ncclUnhandledCudaError.*")),
    ("out of memory", re.compile(r"CUDA out of memory.*|OutOfMemoryError.*")),
    ("fatal signal", re.compile(r"Fatal Python error:.*|Segmentation fault.*|SIGSEGV.*|SIGABRT.*|core dumped")),
)
_MAX = 300


def cause(text: str) -> str:
    """'kind: the line' for the most telling match in `text`, or "" where none is found."""
    for kind, pattern in KINDS:
        for line in text.splitlines():
            if pattern.search(line):
                return f"{kind}: {' '.join(line.split())[:_MAX]}"
    return ""


# faulthandler's dump (harness.jit_sentinel.install registers it on STACK_DUMP_SIGNAL in every process of a row)
_THREAD = re.compile(r"(Current thread|Thread) 0x[0-9a-f]+ .*\(most recent call first\):$")
_FRAME = re.compile(r'^\s+File "(?P<path>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')
_STDLIB = re.compile(r"/lib/python3\.\d+/(?!site-packages|dist-packages)")


def hang_sites(text: str, limit: int = 4) -> list[str]:
    """Where each dumped main thread ("Current thread") was: its innermost frame outside the standard library
    (waits in threading or selectors say little), as `path:line func` with the path from its package on."""
    blocks: list[list[re.Match[str]]] = []
    inside = False
    for line in text.splitlines():
        if head := _THREAD.search(line):
            inside = head.group(1) == "Current thread"
            if inside:
                blocks.append([])
        elif inside and (frame := _FRAME.match(line)):
            blocks[-1].append(frame)
        else:
            inside = False
    sites: list[str] = []
    for frames in filter(None, blocks):
        pick = next((f for f in frames if not _STDLIB.search(f["path"])), frames[0])
        site = f"{_short(pick['path'])}:{pick['line']} {pick['func']}"
        if site not in sites:
            sites.append(site)
    return sites[:limit]


def _short(path: str) -> str:
    for mark in ("/site-packages/", "/dist-packages/", "/suites/"):
        if mark in path:
            return path.split(mark, 1)[1]
    return "/".join(path.split("/")[-4:])
