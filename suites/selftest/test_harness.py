"""The harness self-test on the cpu image: baked kernels load without compiling, the JIT sentinel sees
an unbaked kernel, and a real CPU workload is timed cold and warm with a float64 reference."""

from __future__ import annotations

import importlib
import os
import uuid

import pytest
from harness import jit
from harness.measure import Measurement, cold_warm, of_samples

from selftest import workload

ENV_KERNEL_LIST = "STACKGATE_KERNEL_LIST"


@pytest.mark.track("harness-selftest")
def test_selftest_row(row, jit_window, record_measurement):
    xs = workload.inputs(int(row["context"]), int(row["batch"]))
    timing = cold_warm("workload", lambda: workload.run(xs), repeats=5)
    record_measurement(timing.cold)
    record_measurement(timing.warm)

    tol = row.acceptance["tolerance"]
    err = workload.max_abs_err(xs, workload.run(xs))
    record_measurement(of_samples(tol["metric"], [err], tol["unit"]))
    assert err <= tol["max"], f"{tol['metric']} {err:.3g} exceeds {tol['max']:g} {tol['unit']}"

    loaded, why_not = _load_baked()
    if loaded is None:
        pytest.skip(f"workload measured; baked-kernel check not run: {why_not}")
    misses = [f"{kernel}@{target}" for kernel, target, hit in loaded if not hit]
    record_measurement(
        Measurement(
            name="baked_kernel_compiles",
            value=float(len(misses)),
            unit="compiles",
            phase="none",
            samples=(float(len(misses)),),
        )
    )
    assert loaded, "the kernel list names no baked kernels"
    assert not misses, f"baked kernels that were not cache hits: {', '.join(misses)}"
    jit.expect_aot(jit_window.seen(), "loading the baked kernels")


def _load_baked() -> tuple[list | None, str]:
    try:
        aot = importlib.import_module("harness.aot")
    except ImportError as exc:
        return None, f"harness.aot is not available ({exc})"
    if not hasattr(aot, "load_baked"):
        return None, "harness.aot has no load_baked()"
    path = os.environ.get(ENV_KERNEL_LIST) or getattr(aot, "DEFAULT_KERNEL_LIST", None)
    if not path:
        return None, f"no kernel list: set ${ENV_KERNEL_LIST}"
    if not os.path.isfile(path):
        return None, f"nothing was baked ({path} does not exist; ci run --host --unbaked runs so)"
    return list(aot.load_baked(path)), ""


@pytest.mark.jit_expected
def test_sentinel_catches_unbaked_kernel(tmp_path, monkeypatch):
    """A kernel nobody baked, compiled for a GPU target, must show up as one compile naming it."""
    if jit.sentinel() is None:
        pytest.skip("the JIT sentinel is not installed here")
    triton = pytest.importorskip("triton", reason="triton is not installed here")
    from triton.backends.compiler import GPUTarget

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))  # empty cache: a real compile
    name = f"stackgate_unbaked_{uuid.uuid4().hex[:8]}"
    # a fresh source file (Triton reads the source of @jit functions): no cache anywhere can hold it
    module = tmp_path / f"{name}.py"
    module.write_text(
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        f"def {name}(x_ptr, n):\n    offs = tl.arange(0, 64)\n    tl.store(x_ptr + offs, offs, mask=offs < n)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    kernel = getattr(importlib.import_module(name), name)
    window = jit.Window()
    triton.compile(triton.compiler.ASTSource(kernel, {"x_ptr": "*i32", "n": "i32"}), target=GPUTarget("cuda", 90, 32))
    seen = window.seen()
    assert seen.compiles and name in seen.kernels, f"the sentinel missed the compile of {name}: saw {seen}"
    with pytest.raises(pytest.fail.Exception, match=name):
        jit.expect_aot(seen, "an unbaked kernel")
