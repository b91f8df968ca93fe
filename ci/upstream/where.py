"""Where a change's fields are written: its file's parsed YAML with line marks, for errors that name the line."""

from __future__ import annotations

from pathlib import Path

from ci.stack import yaml_lines
from ci.stack.yaml_lines import Source


def change_source(stack_root: Path, change_id: str) -> Source:
    """The change file whose `id` is `change_id` (a file's name need not be its id)."""
    for path in sorted((stack_root / "changes").glob("*.yaml")):
        src = yaml_lines.load(path)
        if isinstance(src.data, dict) and str(src.data.get("id")) == change_id:
            return src
    raise LookupError(f"no change file of {stack_root / 'changes'} has id {change_id!r}")
