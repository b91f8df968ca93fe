"""Rows sharing one process (harness.shared), on this machine's CPU: the group runs in one child, each row keeps its
own result, log and JIT count, and a crash or hang fails that row alone while the rest run each in its own process.
The engines a shared process keeps (engine.in_process) and the cold figures its later rows report
(engine.row_record)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import ClassVar

import pytest
from junitparser import Error
from junitparser.xunit2 import JUnitXml
from support.paths import FAKES, REPO

SUITES = REPO / "suites"

SUITE = """\
import os, signal, subprocess, sys, time
import pytest

@pytest.mark.track("t")
def test_row(row, record_property):
    record_property("pid", str(os.getpid()))
    record_property("at", repr(time.time()))
    print("output of", row.id)
    if row.id == os.environ.get("CRASH_ROW"):
        os.kill(os.getpid(), signal.SIGKILL)
    if row.id == os.environ.get("HANG_ROW"):
        time.sleep(600)
    if row.id == os.environ.get("COMPILE_ROW"):
        subprocess.run([sys.executable, "-c", "import stackgate_jit_sentinel as s; s.record('kern')"], check=True)
"""


def _run(
    tmp_path: Path, rows: int, *, share: bool = True, timeout: float = 60, backends: str = "", **env: str
) -> dict[str, dict]:
    (tmp_path / "s").mkdir(exist_ok=True)
    (tmp_path / "s" / "test_it.py").write_text(SUITE)
    doc = {"schema": 1, "target": {"id": "cpu", "family": "cpu"}, "suite": "s", "git_revision": "abc",
           "image": {"ref": "img", "digest": "sha256:feed"}, "timeout_s": timeout,
           "rows": [{"id": f"r{n}", "change": "c", "track": "t", "suite": "s", "target": "cpu", "model_info": {},
                     "backend": backends[n] if backends else "b", "context": 1024 * (n + 1), "batch": 1}
                    for n in range(rows)]}  # fmt: skip
    (tmp_path / "rows.json").write_text(json.dumps(doc))
    run_env = dict(os.environ, STACKGATE_ROWS=str(tmp_path / "rows.json"), **env)
    run_env["PYTHONPATH"] = os.pathsep.join([str(FAKES), str(SUITES)])
    run_env["STACKGATE_JIT_LOG"] = str(tmp_path / "jit.jsonl")
    junit = tmp_path / "out" / "junit.xml"
    cmd = [sys.executable, "-m", "pytest", "s", "-p", "harness.plugin", "--stackgate-junit", str(junit),
           "--rootdir", str(tmp_path), "-p", "no:cacheprovider", *(["--stackgate-share"] if share else [])]  # fmt: skip
    subprocess.run(cmd, cwd=tmp_path, env=run_env, capture_output=True, check=False, timeout=300)
    cases = {}
    for case in next(iter(JUnitXml.fromfile(str(junit)))):
        props = {p.name: p.value for p in case.properties()}
        errors = [r.message for r in case.result if isinstance(r, Error)]
        cases[props["stackgate.row"]] = {"props": props, "error": errors[0] if errors else None, "out": case.system_out}
    return cases


def test_a_group_runs_in_one_process_and_a_crash_fails_that_row_alone(tmp_path: Path) -> None:
    cases = _run(tmp_path, 5, CRASH_ROW="r2")
    pids = {r: c["props"].get("pid") for r, c in cases.items()}
    assert pids["r0"] == pids["r1"] and pids["r0"] is not None  # one process for the rows before the crash
    assert cases["r2"]["error"].startswith("signal 9 (SIGKILL), in a shared process")
    assert cases["r0"]["error"] is None and cases["r1"]["error"] is None
    # the rows the crash left run each in its own process, and pass
    assert cases["r3"]["error"] is None and cases["r4"]["error"] is None
    assert len({pids["r0"], pids["r3"], pids["r4"]}) == 3
    logs = tmp_path / "out" / "logs"
    for r in ("r0", "r1", "r3"):  # each row's output in its own log, the one its testcase names
        (log,) = [p for p in logs.glob(f"*{r}*.log") if not p.name.startswith("shared-")]
        assert f"output of {r}" in log.read_text() and "output of r" + str(int(r[1]) + 1) not in log.read_text()


def test_a_shared_process_runs_the_rows_of_one_engine_configuration_one_after_another(tmp_path: Path) -> None:
    """Rows alternating between three backends (as the plan lists a group's rows) would build an engine for every row
    in a process that keeps two; grouped by what their engine is built from, each is built once."""
    cases = _run(tmp_path, 6, backends="ABCABC")
    order = sorted(cases, key=lambda r: float(cases[r]["props"]["at"]))
    assert order == ["r0", "r3", "r1", "r4", "r2", "r5"]
    assert len({c["props"]["pid"] for c in cases.values()}) == 1 and all(c["error"] is None for c in cases.values())


def test_a_hang_in_a_shared_process_times_out_that_row_alone(tmp_path: Path) -> None:
    cases = _run(tmp_path, 3, timeout=8, HANG_ROW="r1")
    assert cases["r1"]["error"].startswith("timeout after 8 s")
    assert cases["r0"]["error"] is None and cases["r2"]["error"] is None
    assert cases["r2"]["props"]["pid"] != cases["r0"]["props"]["pid"]


def test_each_row_of_a_shared_process_counts_its_own_compiles(tmp_path: Path) -> None:
    cases = _run(tmp_path, 3, COMPILE_ROW="r1")
    assert {r: c["props"].get("stackgate.jit.compiles") for r, c in cases.items()} == {"r0": "0", "r1": "1", "r2": "0"}
    assert len({c["props"]["pid"] for c in cases.values()}) == 1


def test_without_share_every_row_has_a_process_of_its_own(tmp_path: Path) -> None:
    cases = _run(tmp_path, 3, share=False)
    assert len({c["props"]["pid"] for c in cases.values()}) == 3


class FakeLLM:
    built: ClassVar[list[dict]] = []
    shut: ClassVar[list[FakeLLM]] = []

    def __init__(self, **kwargs: object) -> None:
        FakeLLM.built.append(kwargs)
        self.llm_engine = types.SimpleNamespace(
            engine_core=types.SimpleNamespace(shutdown=lambda: FakeLLM.shut.append(self))
        )


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    FakeLLM.built, FakeLLM.shut = [], []
    cleanups: list[int] = []
    vllm = types.ModuleType("vllm")
    vllm.LLM = FakeLLM  # type: ignore[attr-defined]
    state = types.ModuleType("vllm.distributed.parallel_state")
    state.cleanup_dist_env_and_memory = lambda: cleanups.append(1)  # type: ignore[attr-defined]
    for name, mod in (("vllm", vllm), ("vllm.distributed", types.ModuleType("vllm.distributed")),
                      ("vllm.distributed.parallel_state", state)):  # fmt: skip
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setenv("STACKGATE_SHARE_ENGINES", "1")
    return cleanups


def test_a_shared_process_keeps_two_engines_and_builds_each_once(engine_pkg, fake_vllm) -> None:
    from engine import in_process

    main, ref = {"model": "m", "spec": 3}, {"model": "m"}
    first = in_process.start(main, share=True)
    in_process.stop(first)  # a shared engine stays for the next row
    again = in_process.start(dict(reversed(list(main.items()))), share=True)
    assert again.llm is first.llm and again.reused and not first.reused and FakeLLM.shut == []
    reference = in_process.start(ref, share=True)
    assert in_process.start(ref, share=True).llm is reference.llm and len(FakeLLM.built) == 2
    kept = [first.llm, reference.llm]
    in_process.start({"model": "other"}, share=True)  # a third: every kept engine goes first, then one cleanup
    assert FakeLLM.shut == kept and fake_vllm == [1] and len(FakeLLM.built) == 3
    patched = in_process.start(main)  # not shared (built under a patch): nothing kept lives beside it
    assert len(FakeLLM.shut) == 3 and not patched.shared and fake_vllm == [1, 1]
    llm = patched.llm
    in_process.stop(patched)
    assert FakeLLM.shut[-1] is llm and fake_vllm == [1, 1, 1]


def test_without_a_shared_process_share_changes_nothing(engine_pkg, fake_vllm, monkeypatch) -> None:
    from engine import in_process

    monkeypatch.delenv("STACKGATE_SHARE_ENGINES")
    a = in_process.start({"model": "m"}, share=True)
    b = in_process.start({"model": "m"}, share=True)
    assert a.llm is not b.llm and not a.shared
    llm = a.llm
    in_process.stop(a)
    assert FakeLLM.shut == [llm]


def test_later_rows_of_a_shared_process_report_the_first_rows_cold_timings(engine_pkg, monkeypatch) -> None:
    from engine import row_record

    monkeypatch.setenv("STACKGATE_SHARE_ENGINES", "1")
    monkeypatch.setattr(row_record, "record_measurement", lambda node, m: node.user_properties.append(m) or m)

    def row_evidence(row_id: str) -> row_record.Evidence:
        request = types.SimpleNamespace(node=types.SimpleNamespace(user_properties=[]))
        return row_record.Evidence(request, types.SimpleNamespace(id=row_id))  # type: ignore[arg-type]

    first, later = row_evidence("a.cpu.m.1"), row_evidence("b.cpu.m.2")
    first.metric("engine_ready_s", 10.0, "s", "cold")
    first.metric("cold_first_request_ms", 900.0, "ms", "cold")
    later.metric("engine_ready_s", 0.0, "s", "cold")  # the engine it was handed was ready before the row began
    later.metric("cold_first_request_ms", 120.0, "ms", "cold")
    assert first.cold_from is None and later.cold_from == "a.cpu.m.1"
    later.metric("warm_request_ms", [100.0, 100.0, 300.0], "ms", "warm")
    later.metric("compiles_after_ready", 2, "count", "cold")  # counts stay the row's own
    later.metric("cold_warm_ratio", 1.2, "ratio")
    got = {m.name: m.samples for m in later.node.user_properties if hasattr(m, "samples")}
    assert got["engine_ready_s"] == (10.0,) and got["cold_first_request_ms"] == (900.0,)
    assert got["compiles_after_ready"] == (2.0,) and got["cold_warm_ratio"] == (9.0,)
    labels = [p[1] for p in later.node.user_properties if isinstance(p, tuple) and p[0] == "stackgate.cold_from"]
    assert labels and labels[0].startswith("a.cpu.m.1: this process's first row")


def test_the_schedulers_budget_for_a_shared_job_is_what_the_engines_hold(engine_pkg) -> None:
    from engine import config, in_process

    from ci.run.schedule import packing as schedule

    assert config.DUMMY_KV_CACHE_BYTES == schedule.DUMMY_KV_GIB * 2**30
    assert schedule.SHARED_JOB_GIB == schedule.DUMMY_ROW_GIB + (in_process.SHARED_ENGINES - 1) * schedule.DUMMY_KV_GIB


def test_a_batch_the_kv_cache_cannot_hold_at_once_fails_before_it_runs(engine_pkg) -> None:
    """A fixed KV budget too small for the row's batch would let its requests wait for each other: the row would
    time another workload than it names. The request fails first, naming what to raise."""
    from engine import config, in_process

    sent: list[int] = []
    cache = types.SimpleNamespace(num_gpu_blocks=16, block_size=16)  # 256 tokens
    llm = types.SimpleNamespace(
        llm_engine=types.SimpleNamespace(vllm_config=types.SimpleNamespace(cache_config=cache)),
        generate=lambda prompts, params, use_tqdm: sent.append(len(prompts)) or [],
    )
    engine = in_process.Engine(llm=llm, ready_s=0.0)
    params = types.SimpleNamespace(max_tokens=32)
    in_process.generate(engine, [{"prompt_token_ids": [1] * 96}] * 2, params)  # 2 x 8 blocks: fits exactly
    with pytest.raises(RuntimeError, match=r"holds 16 blocks of 16 tokens.*need 24 at once.*kv_cache_gib"):
        in_process.generate(engine, [{"prompt_token_ids": [1] * 96}] * 3, params)
    assert sent == [2]
    in_process.generate(types.SimpleNamespace(llm=types.SimpleNamespace(generate=llm.generate)), [{}] * 99, params)
    assert sent == [2, 99]  # no count of blocks to read (another vLLM): nothing is said
    row = types.SimpleNamespace(model_info={"kv_cache_gib": 2})
    assert config.kv_cache_bytes(row) == 2 << 30
    assert config.kv_cache_bytes(types.SimpleNamespace(model_info={})) == config.DUMMY_KV_CACHE_BYTES


def test_a_sigterm_in_a_shared_process_keeps_the_finished_rows_and_names_the_one_in_flight(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "test_it.py").write_text(SUITE)
    doc = {"schema": 1, "target": {"id": "cpu", "family": "cpu"}, "suite": "s", "git_revision": "abc",
           "image": {"ref": "img", "digest": "sha256:feed"}, "timeout_s": 120,
           "rows": [{"id": f"r{n}", "change": "c", "track": "t", "suite": "s", "target": "cpu", "model_info": {}}
                    for n in range(3)]}  # fmt: skip
    (tmp_path / "rows.json").write_text(json.dumps(doc))
    env = dict(os.environ, STACKGATE_ROWS=str(tmp_path / "rows.json"), HANG_ROW="r1")
    env["PYTHONPATH"] = os.pathsep.join([str(FAKES), str(SUITES)])
    env["STACKGATE_JIT_LOG"] = str(tmp_path / "jit.jsonl")
    junit = tmp_path / "out" / "junit.xml"
    cmd = [sys.executable, "-m", "pytest", "s", "-p", "harness.plugin", "--stackgate-junit", str(junit),
           "--rootdir", str(tmp_path), "-p", "no:cacheprovider", "--stackgate-share"]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (junit.exists() and "r0" in junit.read_text()):
        time.sleep(0.1)
    time.sleep(1.0)  # r1 is in flight, sleeping
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    cases = {}
    for case in next(iter(JUnitXml.fromfile(str(junit)))):
        props = {p.name: p.value for p in case.properties()}
        errors = [r.message for r in case.result if isinstance(r, Error)]
        cases[props["stackgate.row"]] = errors[0] if errors else None
    assert cases["r0"] is None, out
    assert cases["r1"].startswith("interrupted by SIGTERM")
    assert "r2" not in cases  # never started: a resume runs it
