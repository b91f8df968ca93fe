"""The line that says why a row crashed: an illegal memory access, a failed assertion, a CUDA or NCCL error,
a fatal signal. Read from a row's log (every process of the row writes there), first match by kind. For a row
that hung: where each of its processes was, from the stacks they dumped to the log when its time ran out, or,
where none did, the last thing it printed."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

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
_COLLECTING = re.compile(r"^\s+Garbage-collecting$")  # written above the frames of a thread stopped in the GC
_STDLIB = re.compile(r"/lib/python3\.\d+/(?!site-packages|dist-packages)")
_SUITES = "/suites/"


@dataclass
class _Dump:
    """One process's main thread, as faulthandler wrote it: frames innermost first."""

    frames: list[re.Match[str]] = field(default_factory=list)
    collecting: bool = False


def hang_sites(text: str, limit: int = 4) -> list[str]:
    """Where each dumped main thread ("Current thread") was, as `path:line func` with the path from its package
    on: its innermost frame outside the standard library (waits in threading or selectors say little), marked
    where the thread was collecting garbage, then `<-` the innermost frame of the suites' own code under it, which
    says what the test was doing there. A process with no frame of its own (an idle helper: multiprocessing's
    resource tracker) is left out where another process says more; code without a file (`<string>`, `<frozen
    runpy>`) is never a site."""
    dumps = _main_threads(text)
    sites = [site for dump in dumps if (site := _site(dump, own_code_only=True))]
    if not sites:
        sites = [site for dump in dumps if (site := _site(dump, own_code_only=False))]
    return list(dict.fromkeys(sites))[:limit]


def _main_threads(text: str) -> list[_Dump]:
    """Every "Current thread" block of the dumps in `text`; any other line ends a block."""
    dumps: list[_Dump] = []
    inside = False
    for line in text.splitlines():
        if head := _THREAD.search(line):
            inside = head.group(1) == "Current thread"
            if inside:
                dumps.append(_Dump())
        elif inside and (frame := _FRAME.match(line)):
            dumps[-1].frames.append(frame)
        elif inside and _COLLECTING.match(line):
            dumps[-1].collecting = True
        else:
            inside = False
    return [dump for dump in dumps if dump.frames]


def _site(dump: _Dump, *, own_code_only: bool) -> str:
    """The site of one dump, or "" where it has none: with `own_code_only`, none in the standard library either."""
    frames = [f for f in dump.frames if not f["path"].startswith("<")]
    own = [f for f in frames if not _STDLIB.search(f["path"])]
    candidates = own if own_code_only else own or frames
    if not candidates:
        return ""
    pick = candidates[0]
    site = _frame(pick) + (" (garbage-collecting)" if dump.collecting else "")
    test = next((f for f in frames if _SUITES in f["path"]), None)
    if test is not None and test is not pick:
        site += f" <- {_frame(test)}"
    return site


def last_output(text: str, width: int = 160) -> str:
    """The last thing a row printed, to say how far a hung row got where no stack says where it stopped: its last
    non-empty line, of a progress bar redrawn in place with carriage returns (tqdm) only the last drawing, stripped
    and cut to `width` characters."""
    for line in reversed(text.split("\n")):
        for segment in reversed(line.split("\r")):
            if segment.strip():
                return segment.strip()[:width]
    return ""


def _frame(frame: re.Match[str]) -> str:
    return f"{short_path(frame['path'])}:{frame['line']} {frame['func']}"


def short_path(path: str) -> str:
    """A source path from its package on (after site-packages, dist-packages or the suites' folder), else its
    last four parts: what a message needs to find the file in a checkout."""
    for mark in ("/site-packages/", "/dist-packages/", _SUITES):
        if mark in path:
            return path.split(mark, 1)[1]
    return "/".join(path.split("/")[-4:])
