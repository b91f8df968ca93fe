"""Warm GPU rows: their own tests, run once off the record (harness.warm_run.run_rows_test), the rows of a group in
one process, so the caches hold every engine configuration and shape the tests reach, a reference engine's and a
mixed batch's included."""

from __future__ import annotations

from typing import Any

from harness.warm_run import run_row_test, run_rows_test


def warm(row: Any) -> int:
    return run_row_test(row)


def warm_group(rows: list[Any]) -> int:
    """The rows of one model, change and suite in one process, each engine configuration built once."""
    return run_rows_test(rows)
