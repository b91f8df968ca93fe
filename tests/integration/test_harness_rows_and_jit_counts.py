"""The suites' harness from outside: rows as parameters, JIT properties through the sentinel, helpers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from junitparser import Failure
from junitparser.xunit2 import JUnitXml
from support.paths import FAKES, SUITES

sys.path.insert(0, str(SUITES))  # the harness is importable without ci/, as in the images

from harness import graphs, hardware, measure
from harness.causes import hang_sites


def _rows(path: Path, rows: list[tuple[str, str]], model_info: dict[str, dict] | None = None) -> Path:
    doc = {"schema": 1, "target": {"id": "cpu", "family": "cpu"}, "suite": "s", "git_revision": "abc",
           "image": {"ref": "img", "digest": "sha256:feed"}, "timeout_s": 30,
           "rows": [{"id": i, "change": "c", "track": t, "suite": "s", "target": "cpu",
                     "model_info": (model_info or {}).get(i, {})} for i, t in rows]}  # fmt: skip
    path.write_text(json.dumps(doc))
    return path


def _run(
    tmp_path: Path,
    test_source: str,
    rows: list[tuple[str, str]],
    sentinel: bool = True,
    model_info: dict[str, dict] | None = None,
) -> dict[str, dict]:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "test_it.py").write_text(test_source)
    env = dict(os.environ, STACKGATE_ROWS=str(_rows(tmp_path / "rows.json", rows, model_info)))
    env["PYTHONPATH"] = os.pathsep.join([str(FAKES)] * sentinel + [str(SUITES)])
    env.pop("STACKGATE_JIT_LOG", None)
    junit = tmp_path / "junit.xml"
    cmd = [sys.executable, "-m", "pytest", "s", "-p", "harness.plugin", "--stackgate-junit", str(junit), "--rootdir",
           str(tmp_path), "-p", "no:cacheprovider"]  # fmt: skip
    subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, check=False)
    cases = {}
    for case in next(iter(JUnitXml.fromfile(str(junit)))):
        fail = [r.message for r in case.result if isinstance(r, Failure)]
        cases[case.name] = {"props": {p.name: p.value for p in case.properties()}, "failure": fail[0] if fail else None}
    return cases


JIT_SUITE = """\
import subprocess, sys
import pytest
from harness import jit_seen

def _compile_elsewhere(name):
    # a compile in another process, as in vLLM's EngineCore: the window must still see it
    subprocess.run([sys.executable, "-c", f"import stackgate_jit_sentinel as s; s.record({name!r})"], check=True)

@pytest.mark.track("t1")
def test_compiles(row):
    _compile_elsewhere("kern_" + row.id)

@pytest.mark.track("t1")
def test_expects_aot(row, jit_window):
    _compile_elsewhere("late_kernel")
    jit_seen.expect_aot(jit_window.seen(), row.id)

def test_plain():
    pass
"""


def test_rows_become_items_and_jit_compiles_are_counted_across_processes(tmp_path: Path) -> None:
    cases = _run(tmp_path, JIT_SUITE, [("r1", "t1"), ("r2", "t1"), ("r3", "t2")])
    assert set(cases) == {"test_compiles[r1]", "test_compiles[r2]", "test_expects_aot[r1]", "test_expects_aot[r2]",
                          "test_plain", "r3"}  # fmt: skip
    one = cases["test_compiles[r1]"]["props"]
    assert one["stackgate.row"] == "r1" and one["stackgate.track"] == "t1"
    assert one["stackgate.image_digest"] == "sha256:feed" and one["stackgate.git_revision"] == "abc"
    assert (one["stackgate.jit.compiles"], one["stackgate.jit.kernels"]) == ("1", "kern_r1")
    assert (
        cases["test_expects_aot[r2]"]["failure"]
        == "Failed: r2 expected AOT kernels but saw 1 JIT compile(s): late_kernel"
    )
    assert cases["test_plain"]["props"]["stackgate.jit.compiles"] == "0"
    assert "stackgate.row" not in cases["test_plain"]["props"]


def test_each_rows_process_gets_its_models_env_and_only_its_own(tmp_path: Path) -> None:
    """A model's runtime switches (models.yaml `env`) reach its rows' processes, over the target's env, and no
    other row's: the row without them sees the switch unset, the one with them sees the model's value."""
    source = """\
import os
import pytest

@pytest.mark.track("t1")
def test_env(row):
    want = {"r1": "1", "r2": None}[row.id]
    assert os.environ.get("STACKGATE_TEST_SWITCH") == want, os.environ.get("STACKGATE_TEST_SWITCH")
"""
    cases = _run(tmp_path, source, [("r1", "t1"), ("r2", "t1")],
                 model_info={"r1": {"env": {"STACKGATE_TEST_SWITCH": "1"}}})  # fmt: skip
    assert {name: case["failure"] for name, case in cases.items()} == {"test_env[r1]": None, "test_env[r2]": None}


def test_a_row_no_test_serves_is_an_error_not_a_silence(tmp_path: Path) -> None:
    junit_cases = _run(tmp_path, JIT_SUITE, [("r1", "t1"), ("r3", "t2")])
    assert junit_cases["r3"]["props"]["stackgate.row"] == "r3"
    xml = next(iter(JUnitXml.fromfile(str(tmp_path / "junit.xml"))))
    r3 = next(c for c in xml if c.name == "r3")
    assert r3.result[0].message == "no test serves track t2 in this suite"


def test_without_the_sentinel_the_compile_count_is_absent_not_zero(tmp_path: Path) -> None:
    cases = _run(tmp_path, "def test_plain():\n    pass\n", [], sentinel=False)
    assert "stackgate.jit.compiles" not in cases["test_plain"]["props"]
    assert cases["test_plain"]["props"]["stackgate.jit.cache_new_files"] == "0"


def test_a_bare_assert_in_library_code_names_its_site_and_check(tmp_path: Path) -> None:
    """vLLM's DeepSeek-V4 layer fails a bare `assert` on dummy weights: "AssertionError" alone named nothing."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "model.py").write_text("def forward(w):\n    assert w is not None\n")
    source = "import sys\nsys.path.insert(0, %r)\nfrom model import forward\n\ndef test_it():\n    forward(None)\n"
    cases = _run(tmp_path, source % str(tmp_path / "lib"), [])
    failure = cases["test_it"]["failure"]
    assert failure.startswith("AssertionError at ") and failure.endswith("model.py:2: assert w is not None"), failure


def test_measurements_carry_unit_phase_repeats_spread_and_samples(tmp_path: Path) -> None:
    src = """\
from harness.measure import cold_warm

def test_timed(record_measurement):
    t = cold_warm("step", lambda: sum(range(1000)), repeats=4)
    record_measurement(t.cold)
    record_measurement(t.warm)
"""
    props = _run(tmp_path, src, [])["test_timed"]["props"]
    cold, warm = json.loads(props["stackgate.metric.cold_step_ms"]), json.loads(props["stackgate.metric.warm_step_ms"])
    assert (cold["phase"], cold["repeats"], cold["unit"]) == ("cold", 1, "ms")
    assert (warm["phase"], warm["repeats"], len(warm["samples"])) == ("warm", 4, 4)
    assert warm["spread"] == pytest.approx(max(warm["samples"]) - min(warm["samples"]))


def test_a_second_cold_timing_in_one_process_is_refused() -> None:
    measure.cold_warm("refused-twice", lambda: None, repeats=1)
    with pytest.raises(RuntimeError, match="not cold"):
        measure.cold_warm("refused-twice", lambda: None, repeats=1)


def test_graph_counter_counts_replays_and_captures_then_restores(monkeypatch: pytest.MonkeyPatch) -> None:
    class CUDAGraph:
        def replay(self) -> str:
            return "replayed"

        def capture_begin(self) -> None:
            pass

    fake = types.ModuleType("torch")
    fake.cuda = types.SimpleNamespace(CUDAGraph=CUDAGraph)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", fake)
    g = CUDAGraph()
    with graphs.GraphCounter() as counter:
        g.capture_begin()
        assert g.replay() == "replayed"
        g.replay()
    g.replay()  # after exit: not counted
    assert (counter.available, counter.replays, counter.captures) == (True, 2, 1)


def test_graph_counter_without_torch_is_unavailable_not_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(graphs.importlib.util, "find_spec", lambda name: None)
    with graphs.GraphCounter() as counter:
        pass
    assert counter.available is False


def test_hardware_absent_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hardware, "nvidia_capabilities", lambda: ("9.0",))
    monkeypatch.setattr(hardware, "amdgpu_gfx", lambda: ())
    sm90 = {"id": "cuda-sm90", "family": "cuda", "nvidia_compute_capability": "9.0"}
    gb10 = {"id": "cuda-sm121a", "family": "cuda", "nvidia_compute_capability": "12.1"}
    gfx = {"id": "rocm-gfx1151", "family": "rocm", "amdgpu_gfx": "gfx1151"}
    assert hardware.absent_reason(sm90, 1) is None
    assert (
        hardware.absent_reason(sm90, 2)
        == "hardware absent: row needs 2 GPUs (NVIDIA GPU with compute capability 9.0); 1 present"
    )
    assert "found 9.0" in (hardware.absent_reason(gb10, 1) or "")
    assert "needs an AMD GPU gfx1151; found none" in (hardware.absent_reason(gfx, 1) or "")
    assert hardware.absent_reason({"id": "cpu", "family": "cpu"}, 1) is None


def test_selftest_error_metric_is_real() -> None:
    """The selftest's tolerance can fail: its float32 path differs measurably from the float64 reference."""
    from selftest import exp_mean

    xs = exp_mean.inputs(4096, 2)
    err = exp_mean.max_abs_err(xs, exp_mean.run(xs))
    assert 0 < err < 1e-6


def _ready(log: Path, deadline_s: float = 10.0) -> str:
    """The line a fake item prints once it is set up (its handlers registered, its children started)."""
    import time

    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("ready"):
                return line
        time.sleep(0.05)
    raise AssertionError(f"the fake item never got ready: {log.read_text(errors='replace')!r}")


STACK_DUMPING_ITEM = """\
import faulthandler, signal, subprocess, sys, time
faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
compiler = subprocess.Popen(["sleep", "60"])  # nvcc or ptxas: no handler for SIGUSR1
print("ready", compiler.pid, flush=True)

def waiting_for_the_compiler():
    time.sleep(60)

waiting_for_the_compiler()
"""


def test_a_hung_items_stacks_are_asked_only_of_processes_that_handle_the_signal(tmp_path: Path) -> None:
    import signal

    from harness import isolate, reaper

    log = tmp_path / "item.log"
    with log.open("wb") as out:
        item = subprocess.Popen([sys.executable, "-c", STACK_DUMPING_ITEM], stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
    try:
        compiler = int(_ready(log).split()[1])
        isolate.dump_stacks(item.pid)
        assert compiler in [pid for pid, _ in reaper.descendants(item.pid)], "the signal killed the compiler"
        dump = log.read_text(errors="replace")
        assert "(most recent call first)" in dump and "waiting_for_the_compiler" in dump, dump
    finally:
        os.killpg(item.pid, signal.SIGKILL)
        item.wait()
    assert not isolate.catches(item.pid, signal.SIGUSR1)  # a process that is gone is not signalled


# A row of the H200 run: pytest's process stopped in the garbage collector (a zmq context's __del__), then
# multiprocessing's resource tracker, idle as it always is.
GC_HANG = """\
Current thread 0x00007f51f208a140 (most recent call first):
  Garbage-collecting
  File "/root/stage/site/zmq/sugar/context.py", line 264 in term
  File "/root/stage/site/zmq/sugar/context.py", line 322 in destroy
  File "/root/stage/site/zmq/sugar/context.py", line 140 in __del__
  File "/work/main/suites/engine/engines.py", line 39 in stop
  File "/work/main/suites/composition/test_composition.py", line 32 in _one_engine
  File "/work/main/suites/composition/test_composition.py", line 59 in test_composition
  File "/opt/torch/.venv/lib/python3.12/site-packages/_pytest/python.py", line 167 in pytest_pyfunc_call
  File "<frozen runpy>", line 198 in _run_module_as_main
Current thread 0x00007f1b790ce300 (most recent call first):
  File "/usr/lib/python3.12/multiprocessing/resource_tracker.py", line 227 in main
  File "<string>", line 1 in <module>
"""


def test_a_row_hung_in_the_garbage_collector_names_the_site_and_the_suites_call_under_it() -> None:
    assert hang_sites(GC_HANG) == [
        "site/zmq/sugar/context.py:264 term (garbage-collecting) <- engine/engines.py:39 stop"
    ]


def test_an_idle_helper_is_a_site_only_where_no_process_says_more() -> None:
    helper = GC_HANG[GC_HANG.index("Current thread 0x00007f1b") :]
    assert hang_sites(helper) == ["lib/python3.12/multiprocessing/resource_tracker.py:227 main"]  # never <string>
    only_code_without_a_file = (
        'Current thread 0x00007f02 (most recent call first):\n  File "<string>", line 1 in <module>\n'
    )
    assert hang_sites(only_code_without_a_file) == []


WARMING_UP_ITEM = """\
import sys, time
print("Loading weights took 3.1 s", flush=True)
for done in ("  0%|          | 0/2441 [00:00<?, ?it/s]", " 40%|███▉      | 965/2441 [02:01<03:06,  7.92it/s]"):
    sys.stderr.write("\\rDeepGEMM warmup: " + done)  # tqdm redraws its bar in place, with no newline
    sys.stderr.flush()
time.sleep(60)
"""


def test_a_hung_item_that_dumped_no_stack_says_how_far_its_log_got(tmp_path: Path) -> None:
    from harness import isolate

    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    outcome = isolate.run_child(["-c", WARMING_UP_ITEM], cwd=tmp_path, result=tmp_path / "result.json",
                                log=tmp_path / "item.log", timeout_s=2, env=env)  # fmt: skip
    assert outcome.status == "error"
    assert outcome.message == (
        "timeout after 2 s (no process dumped its stack); "
        "last output: DeepGEMM warmup:  40%|███▉      | 965/2441 [02:01<03:06,  7.92it/s]"
    )


def test_the_last_output_is_the_last_drawing_of_the_last_line_cut_short() -> None:
    from harness.causes import last_output

    assert last_output("step 1\nstep 2\r\n\n  \r \n") == "step 2"
    assert last_output("a\rbar 10%\rbar 20%\r  \n") == "bar 20%"
    assert last_output("x" * 500) == "x" * 160
    assert last_output("\n\n") == ""
