"""JIT refused, not only counted: with $STACKGATE_REFUSE_JIT=1 (the images set it) a row that compiles
anything errors and names the kernel; a test that compiles on purpose says so with a marker."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from junitparser.xunit2 import JUnitXml
from support.paths import REPO

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


def test_traces_after_ready(monkeypatch):
    import sys
    import types

    from harness import profile

    metrics = []  # torch.compile's record of traced frames (a stand-in for torch here)
    fake = types.ModuleType("torch._dynamo.utils")
    fake.get_compilation_metrics = lambda: list(metrics)
    monkeypatch.setitem(sys.modules, "torch._dynamo.utils", fake)
    with profile.request("cold"):  # a timed request during which a torch.compile'd helper is first traced
        metrics.append(types.SimpleNamespace(co_filename="/s/vllm/v1/spec_decode/utils.py", co_firstlineno=565,
                                             co_name="update_num_computed_tokens_for_batch_change",
                                             entire_frame_compile_time_s=0.33))
"""


def _run(tmp_path: Path, refuse: bool, name: str = "", out: str = "out") -> dict[str, tuple[str, str]]:
    pytest.importorskip("triton")
    name = name or f"unbaked_{uuid.uuid4().hex[:8]}"
    (tmp_path / "suites" / "jit").mkdir(parents=True, exist_ok=True)
    (tmp_path / "suites" / "jit" / "test_jit.py").write_text(BODY.replace("NAME", name))
    env = {**os.environ, "STACKGATE_REFUSE_JIT": "1" if refuse else "0",
           "STACKGATE_RUNTIME_CACHES": str(tmp_path / "rt")}  # fmt: skip
    argv = [sys.executable, "-m", "ci", "run", "cpu", "jit", "--host", "--suites-dir", str(tmp_path / "suites"),
            "--out", str(tmp_path / out)]  # fmt: skip
    subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    cases = {}
    for suite in JUnitXml.fromfile(str(tmp_path / out / "junit-cpu-jit-0.xml")):
        for case in suite:
            cases[case.name] = (case.result[0]._tag, case.result[0].message or "") if case.result else ("pass", "")
    return cases


def test_a_row_that_compiles_errors_naming_the_kernel(tmp_path: Path) -> None:
    cases = _run(tmp_path, refuse=True)
    status, message = cases["test_compiles"]
    assert status == "error" and "JIT refused ($STACKGATE_REFUSE_JIT=1): 1 Triton compile(s) into" in message
    assert "unbaked_" in message and message.endswith("_a")
    assert cases["test_compiles_on_purpose"] == ("pass", "") and cases["test_compiles_nothing"] == ("pass", "")
    status, message = cases["test_traces_after_ready"]  # Dynamo's trace: no Triton compile, no new cache file
    assert status == "error" and "torch.compile traced after ready (Dynamo, once per process" in message
    assert message.endswith("vllm/v1/spec_decode/utils.py:565:update_num_computed_tokens_for_batch_change (0.33 s)")


def test_without_refusal_the_compile_is_counted_not_refused(tmp_path: Path) -> None:
    assert _run(tmp_path, refuse=False)["test_compiles"] == ("pass", "")


def test_a_kernel_the_bake_made_under_another_key_is_named_with_the_part_that_differs(tmp_path: Path) -> None:
    """The artefact did not serve a kernel its bake compiled: the refusal says which part of the key moved."""
    name = f"unbaked_{uuid.uuid4().hex[:8]}"
    _run(tmp_path, refuse=False, name=name, out="first")
    events = [json.loads(line) for line in (tmp_path / "first" / "jit-events.jsonl").read_text().splitlines()]
    baked = next(e for e in events if e["kernel"].endswith("_a"))
    baked["hash"] = "0" * 64  # the bake's compile of the same specialisation, on a host whose option differed
    baked["key_parts"]["options"]["debug"] = not baked["key_parts"]["options"]["debug"]
    (tmp_path / "rt" / "cpu" / "warm-bake-jit.jsonl").write_text(json.dumps(baked) + "\n")
    shutil.rmtree(tmp_path / "rt" / "cpu" / "triton", ignore_errors=True)
    status, message = _run(tmp_path, refuse=True, name=name, out="second")["test_compiles"]
    assert status == "error" and "the bake compiled 1 of their specialisations too" in message
    flipped = baked["key_parts"]["options"]["debug"]
    assert "baked under key 0000000000, compiled here under" in message
    assert f"option debug {flipped!r} in the bake, {not flipped!r} here" in message


def test_the_key_diff_names_each_moved_part_and_skips_what_the_bake_never_reached() -> None:
    sys.path.insert(0, str(REPO / "suites"))
    from harness import missed

    spec = {"function": "m:k", "signature": [["x", "*i32"]], "constants": {}, "divisible_by_16": ["x"],
            "num_warps": 4, "num_stages": 3, "target": "cuda:90"}  # fmt: skip
    parts = {"triton": "t1", "backend": "12.8-90", "fn": "f1", "src": "s1", "options": {"debug": False}}
    bake = [{**spec, "kernel": "k", "hash": "a" * 64, "key_parts": parts}]
    moved = {**parts, "backend": "12.9-90", "options": {"debug": False, "TRITON_X": "1"}}
    here = [{**spec, "kernel": "k", "hash": "b" * 64, "key_parts": moved},
            {**spec, "kernel": "other", "num_warps": 8, "hash": "c" * 64, "key_parts": parts}]  # fmt: skip
    (line,) = missed.explain(here, bake)
    assert line.startswith("k: baked under key aaaaaaaaaa, compiled here under bbbbbbbbbb: ")
    assert "backend '12.8-90' in the bake, '12.9-90' here" in line
    assert "option TRITON_X None in the bake, '1' here" in line
    assert missed.explain(here[:1], [{**bake[0], "hash": "b" * 64}]) == [
        "k: the bake made key bbbbbbbbbb too, yet it was not in the cache here"
    ]


def test_a_graph_vllm_compiled_again_names_the_factor_of_its_cache_key_that_moved(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO / "suites"))
    from harness import missed

    top = tmp_path / "vllm" / "torch_compile_cache"
    env = {"VLLM_USE_AOT_COMPILE": False, "VLLM_X": 1}
    for name, cfg, env_x in (("aaaa", "c1", 1), ("bbbb", "c2", 1), ("new1", "c2", 2)):
        d = top / name / "rank_0_0" / "backbone"
        d.mkdir(parents=True)
        factors = {"config_hash": cfg, "compiler_hash": "k", "code_hash": "code", "env": {**env, "VLLM_X": env_x}}
        (d / missed.FACTORS).write_text(json.dumps(factors))
    made = str(top / "new1" / "rank_0_0" / "backbone" / missed.FACTORS)
    (line,) = missed.explain_compile_cache([made, str(top / "new1" / "rank_0_0" / "backbone" / "artifact")])
    assert (
        line
        == "vLLM compile cache new1/backbone: nearest baked bbbb/backbone differs in env VLLM_X 1 in the bake, 2 here"
    )
    assert missed.explain_compile_cache([str(top / "aaaa" / "x.py")]) == []
