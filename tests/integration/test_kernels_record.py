"""`ci kernels record`: the sentinel's compile events become a kernel list whose bake reproduces the very
same cache keys; the same events always give the same bytes; what cannot be re-made is listed, not lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import paths
from support.paths import REPO

from ci.images import kernels

DATA = paths.DATA / "kernels"
TARGETS = "cuda:90,hip:gfx1151"


def _compile(kernel_list: Path, cache: Path, log: Path) -> list[dict]:
    """Compile a kernel list in a fresh process with the sentinel installed; its events."""
    pytest.importorskip("triton")
    code = ("import sys, harness.jit_sentinel as s; s.install(); from harness import aot; "
            "aot.compile_list(aot.load_list(sys.argv[1]), sys.argv[2].split(','))")  # fmt: skip
    env = {**os.environ, "TRITON_CACHE_DIR": str(cache), "STACKGATE_JIT_LOG": str(log),
           "PYTHONPATH": str(REPO / "suites")}  # fmt: skip
    subprocess.run([sys.executable, "-c", code, str(kernel_list), TARGETS], env=env, check=True,
                   capture_output=True, timeout=600)  # fmt: skip
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_a_recorded_list_bakes_the_same_cache_keys(tmp_path: Path) -> None:
    seen = _compile(REPO / "containers" / "kernels" / "selftest.yaml", tmp_path / "c1", tmp_path / "run.jsonl")
    recorded = tmp_path / "recorded.yaml"
    recorded.write_text(kernels.record(seen))
    baked = _compile(recorded, tmp_path / "c2", tmp_path / "bake.jsonl")
    keys = {(e["kernel"], e["target"], e["hash"]) for e in seen}
    assert len(keys) == 10 and {(e["kernel"], e["target"], e["hash"]) for e in baked} == keys


def test_the_same_events_give_the_same_bytes() -> None:
    events = kernels.events([DATA / "jit-events.jsonl"])
    assert kernels.record(events) == (DATA / "recorded.yaml").read_text()
    assert kernels.record(list(reversed(events))) == (DATA / "recorded.yaml").read_text()  # order-free


def test_what_cannot_be_remade_is_listed_with_the_reason() -> None:
    [good, *_] = kernels.events([DATA / "jit-events.jsonl"])
    inductor = {**good, "kernel": "triton_poi_fused_add_0", "function": "torchinductor_root.ab:triton_poi_fused_add_0"}
    unaligned = {**good, "divisible_by_16": [n for n in good["divisible_by_16"] if n != "x_ptr"]}
    old = {k: v for k, v in good.items() if k not in ("function", "signature")}
    text = kernels.record([inductor, unaligned, old])
    assert "generated at run time, not importable; the warm-run bake covers it" in text
    assert "pointer(s) x_ptr not 16-byte aligned" in text
    assert "no @triton.jit function recorded" in text
    assert "kernels:\nnot_baked:" in text  # nothing bakeable among them


def test_the_h200_list_is_what_its_run_recorded() -> None:
    """containers/kernels/vllm-0.26.0-h200.yaml comes, byte for byte, from the events under evidence/."""
    listed = REPO / "containers" / "kernels" / "vllm-0.26.0-h200.yaml"
    head = listed.read_text().split("\nkernels:", 1)[0].splitlines()[1:]
    note = "\n".join(line.removeprefix("# ") for line in head)
    run = REPO / "evidence" / "h200-record"
    assert kernels.record(kernels.events([run / "spec", run / "sparse"]), note) == listed.read_text()


def test_each_compile_names_the_parts_of_its_cache_key(tmp_path: Path) -> None:
    """Two compiles of one specialisation under different keys must be told apart by the event alone."""
    seen = _compile(REPO / "containers" / "kernels" / "selftest.yaml", tmp_path / "c", tmp_path / "run.jsonl")
    for e in seen:
        parts = e["key_parts"]
        assert len(parts["fn"]) == 16 and len(parts["src"]) == 16
        assert parts["options"]["num_warps"] == e["num_warps"] and "debug" in parts["options"]
        assert "hash" not in parts["options"] and "shared" not in parts["options"]
        assert len(parts["triton"]) == 16 and e["target"].split(":")[1] in parts["backend"]
    by_kernel = {}
    for e in seen:
        by_kernel.setdefault(e["kernel"], set()).add(e["key_parts"]["fn"])
    assert all(len(fns) == 1 for fns in by_kernel.values())  # one function, one function key, on any target
    archs = {e["target"]: e["key_parts"]["options"].get("arch") for e in seen}
    assert len(set(archs.values())) == 2, archs  # the two targets' keys differ through the options
