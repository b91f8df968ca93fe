"""Warm one GPU row: its own test, run once off the record (harness.warmup.run_row_test), so the caches hold
every engine configuration and shape the test reaches, a reference engine's and a mixed batch's included."""

from __future__ import annotations

from typing import Any

from harness.warmup import run_row_test


def warm(row: Any) -> int:
    return run_row_test(row)
