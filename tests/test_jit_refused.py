"""JIT refused, not only counted: with $STACKGATE_REFUSE_JIT=1 (the images set it) a row that compiles
anything errors and names the kernel; a test that compiles on purpose says so with a marker."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from junitparser.xunit2 import JUnitXml

REPO = Path(__file__).resolve().parent.parent

BODY = """\
import importlib
import pytest


def _compile_unbaked(tmp_path, monkeypatch, name):
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / f"{name}.py").write_text(
        "import triton\\nimport triton.language as tl\\n\\n\\n@triton.jit\\n"
        f"def {name}(x_ptr, n):\\n    offs = tl.arange(0, 64)\\n    tl.store(x_ptr + offs, offs, mask=offs < n)\\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    kernel = getattr(importlib.import_module(name), name)
    triton.compile(triton.compiler.ASTSource(kernel, {"x_ptr": "*i32", "n": "i32"}), target=GPUTarget("cuda", 90, 32))


def test_compiles(tmp_path, monkeypatch):
    _compile_unbaked(tmp_path, monkeypatch, "NAME_a")


@pytest.mark.jit_expected
def test_compiles_on_purpose(tmp_path, monkeypatch):
    _compile_unbaked(tmp_path, monkeypatch, "NAME_b")


def test_compiles_nothing():
    pass
"""


def _run(tmp_path: Path, refuse: bool) -> dict[str, tuple[str, str]]:
    pytest.importorskip("triton")
    name = f"unbaked_{uuid.uuid4().hex[:8]}"
    (tmp_path / "suites" / "jit").mkdir(parents=True)
    (tmp_path / "suites" / "jit" / "test_jit.py").write_text(BODY.replace("NAME", name))
    env = {**os.environ, "STACKGATE_REFUSE_JIT": "1" if refuse else "0"}
    argv = [sys.executable, "-m", "ci", "run", "cpu", "jit", "--host", "--suites-dir", str(tmp_path / "suites"),
            "--out", str(tmp_path / "out")]  # fmt: skip
    subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    cases = {}
    for suite in JUnitXml.fromfile(str(tmp_path / "out" / "junit-cpu-jit-0.xml")):
        for case in suite:
            cases[case.name] = (case.result[0]._tag, case.result[0].message or "") if case.result else ("pass", "")
    return cases


def test_a_row_that_compiles_errors_naming_the_kernel(tmp_path: Path) -> None:
    cases = _run(tmp_path, refuse=True)
    status, message = cases["test_compiles"]
    assert status == "error" and "JIT refused ($STACKGATE_REFUSE_JIT=1): 1 Triton compile(s) into" in message
    assert "unbaked_" in message and message.endswith("_a")
    assert cases["test_compiles_on_purpose"] == ("pass", "") and cases["test_compiles_nothing"] == ("pass", "")


def test_without_refusal_the_compile_is_counted_not_refused(tmp_path: Path) -> None:
    assert _run(tmp_path, refuse=False)["test_compiles"] == ("pass", "")
