"""A matrix's include entries: checked against the change they belong to, naming the line.

A matrix without `context` and `batch` axes is made of its include entries alone, so each must name both.
An entry's pins (`models`, `backend`) must name a model the change lists and a backend the stack knows;
exclude entries take no pins (an exclusion by model or backend is a shorter include list).
"""

from __future__ import annotations

from collections.abc import Container
from typing import TYPE_CHECKING

from ci.stack.change import Change

if TYPE_CHECKING:  # YAML is parsed only where a stack is loaded, not read back from the cache
    from ci.stack.yaml_lines import Source


def check(change: Change, src: Source, backends: Container[str]) -> None:
    m = change.matrix
    if (m.context is None) != (m.batch is None):
        raise src.error(
            ("matrix",),
            "the matrix names one of context and batch without the other",
            hint="give both axes, or neither (then each include entry names its own)",
        )
    product = m.context is not None
    if not product and not m.include:
        raise src.error(
            ("matrix",),
            "the matrix has no context and batch axes and no include entries: no rows",
            hint="add context and batch axes, or include entries naming them",
        )
    for i, inc in enumerate(m.include):
        if not product and (inc.context is None or inc.batch is None):
            raise src.error(
                ("matrix", "include", i),
                "this include entry names no context or batch, and the matrix has no such axes to take them from",
                hint="give the entry context: and batch:",
            )
        for j, model in enumerate(inc.models or ()):
            if model not in change.models:
                raise src.error(
                    ("matrix", "include", i, "models", j),
                    f"model {model!r} is not one the change lists",
                    hint=f"list it under models:, or pin one of {', '.join(change.models)}",
                )
        if inc.backend is not None and inc.backend not in backends:
            raise src.error(
                ("matrix", "include", i, "backend"),
                f"unknown backend {inc.backend!r}",
                hint="backends.yaml lists the known ones",
            )
    for i, ex in enumerate(m.exclude):
        if ex.models is not None or ex.backend is not None:
            raise src.error(
                ("matrix", "exclude", i),
                "an exclude entry cannot pin models or a backend",
                hint="pin them on include entries instead",
            )
