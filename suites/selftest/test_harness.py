"""The harness self-test on the cpu image: baked kernels load without compiling, the JIT sentinel sees
an unbaked kernel, and a real CPU workload is timed cold and warm with a float64 reference. A row of an imported change
run here (a test stack's, on a fork build laid on the path) records that build as the GPU suites' rows do."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import time
import uuid

import pytest
from harness import jit_seen, vllm_build
from harness.measure import Measurement, cold_warm, of_samples

from selftest import exp_mean

ENV_KERNEL_LIST = "STACKGATE_KERNEL_LIST"


@pytest.mark.track("harness-selftest")
def test_selftest_row(row, jit_window, record_measurement, record_property):
    absent = _fork_build(row, record_measurement, record_property)
    xs = exp_mean.inputs(int(row["context"]), int(row["batch"]))
    timing = cold_warm("workload", lambda: exp_mean.run(xs), repeats=5)
    record_measurement(timing.cold)
    record_measurement(timing.warm)

    tol = row.acceptance["tolerance"]
    err = exp_mean.max_abs_err(xs, exp_mean.run(xs))
    record_measurement(of_samples(tol["metric"], [err], tol["unit"]))
    assert err <= tol["max"], f"{tol['metric']} {err:.3g} exceeds {tol['max']:g} {tol['unit']}"

    loaded, why_not = _load_baked()
    if loaded is None:
        if absent:  # the change's absence is the finding, never a skip
            pytest.fail(absent, pytrace=False)
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
    jit_seen.expect_aot(jit_window.seen(), "loading the baked kernels")
    if absent:  # its measurements are recorded (the side without the change is what a port is judged against)
        pytest.fail(absent, pytrace=False)


IMPORTS = 3  # cold imports of the fork build's vLLM, each in a fresh interpreter


def _fork_build(row, record_measurement, record_property) -> str:
    """A row of an imported change on the cpu self-test (a test stack's change, its rows run on a fork build laid on
    this host's path: ci main --host --try-port or --compare-without) records the build it ran on as a GPU suite's
    row does, whether the build holds the change (by the build's manifest: ci fork's reading of its history at the
    commit built; the self-test probes no vLLM code), and how long the build's vLLM takes to import cold, in a fresh
    interpreter each time. Returns why the change is absent ("" where it is present, or where the row is none of an
    imported change on a fork build: the self-test's own rows, a stock vLLM, no vLLM at all)."""
    root = vllm_build.under_test()
    built = vllm_build.describe(root) if root is not None else {}
    held = built.get("fork_held") or {}
    if row.change not in held:
        return ""
    for name, value in vllm_build.properties(built):
        record_property(f"stackgate.{name}", value)
    present = row.change in built["fork_changes"]
    record_property("stackgate.change_present", "true" if present else "false")
    record_property(
        "stackgate.change_evidence",
        f"#{row.change} {held[row.change]} in the build's manifest (ci fork read at the commit built)",
    )
    if "mismatch" in built:
        pytest.fail(built["mismatch"], pytrace=False)
    times = []
    for _ in range(IMPORTS):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import vllm"], check=True, env=os.environ.copy())
        times.append((time.perf_counter() - started) * 1000.0)
    record_measurement(of_samples("vllm_import_ms", times, "ms", phase="cold"))
    fork = built.get("fork", {})
    return (
        ""
        if present
        else f"change #{row.change} absent in fork {fork.get('name')} {fork.get('ref')} ({held[row.change]})"
    )


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
    if jit_seen.sentinel() is None:
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
    window = jit_seen.Window()
    triton.compile(triton.compiler.ASTSource(kernel, {"x_ptr": "*i32", "n": "i32"}), target=GPUTarget("cuda", 90, 32))
    seen = window.seen()
    assert seen.compiles and name in seen.kernels, f"the sentinel missed the compile of {name}: saw {seen}"
    with pytest.raises(pytest.fail.Exception, match=name):
        jit_seen.expect_aot(seen, "an unbaked kernel")
