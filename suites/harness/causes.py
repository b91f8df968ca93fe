"""The line that says why a row crashed: an illegal memory access, a failed assertion, a CUDA or NCCL error,
a fatal signal. Read from a row's log (every process of the row writes there), first match by kind."""

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
