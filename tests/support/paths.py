"""The folders tests read, found from this file: the checkout's root, its suites/, and the tests' own data and fakes."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
REPO = TESTS.parent
SUITES = REPO / "suites"
DATA = TESTS / "data"  # a CUDA extension to build, recorded kernels
FAKES = TESTS / "fakes"  # stand-ins put first on a child's PYTHONPATH
