"""harness.profile: what only the first request pays for, named from the cold and warm profiles."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from support.paths import SUITES

sys.path.insert(0, str(SUITES))

from harness import profile

_done: set[str] = set()


def _first_use_only() -> None:
    if "x" not in _done:  # the cold request's one-time cost: a lazy set-up
        time.sleep(0.2)
        _done.add("x")


def _request() -> None:
    _first_use_only()
    sum(range(10_000))


def test_off_unless_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(profile.ENV_PROFILE, raising=False)
    with profile.phase("cold"):
        _request()
    assert not list(tmp_path.iterdir())


def test_the_cold_requests_extra_time_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(profile.ENV_PROFILE, str(tmp_path))
    monkeypatch.setenv("STACKGATE_ROW_ID", "48804.cpu.r1")
    _done.clear()
    for phase in ("cold", "warm"):
        with profile.phase(phase):
            _request()
    out = tmp_path / "48804.cpu.r1"
    cold = json.loads((out / "cold.json").read_text())
    warm = json.loads((out / "warm.json").read_text())
    assert cold["wall_ms"] >= 200 > warm["wall_ms"]
    report = (out / "first-only.txt").read_text()
    cumulative = report.split("Python, cumulative ms")[1].split("Python, own ms")[0]
    top = cumulative.splitlines()[1]  # the largest excess of cumulative time
    assert "_request" in top or "_first_use_only" in top, report
    assert "_first_use_only" in cumulative and float(top.split()[0]) >= 190


def test_frames_torch_compile_traced_during_the_request_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch.compile's metrics say which function was traced on first use (a stand-in for torch here)."""
    import types

    metrics: list[object] = [types.SimpleNamespace(co_filename="/x/startup.py", co_firstlineno=1, co_name="warm")]
    fake = types.ModuleType("torch._dynamo.utils")
    fake.get_compilation_metrics = lambda: list(metrics)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch._dynamo.utils", fake)
    monkeypatch.setenv(profile.ENV_PROFILE, str(tmp_path))
    monkeypatch.setenv("STACKGATE_ROW_ID", "r")
    with profile.phase("cold"):
        metrics.append(
            types.SimpleNamespace(
                co_filename="/v/spec_decode/utils.py",
                co_firstlineno=565,
                co_name="update_num_computed_tokens",
                entire_frame_compile_time_s=0.4,
            )
        )
    with profile.phase("warm"):
        pass
    report = (tmp_path / "r" / "first-only.txt").read_text()
    assert "cold: utils.py:565:update_num_computed_tokens (0.4 s)" in report
    assert "startup.py" not in report and "warm:" not in report


def test_frames_traced_during_any_timed_request_are_kept_profiled_or_not(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every timed request keeps what torch.compile traced during it (the row's JIT record): Dynamo traces once
    per process, so a trace after ready is a compile after ready even when inductor's cache served its graph."""
    import types

    metrics: list[object] = [types.SimpleNamespace(co_filename="/x/model.py", co_firstlineno=1, co_name="forward")]
    fake = types.ModuleType("torch._dynamo.utils")
    fake.get_compilation_metrics = lambda: list(metrics)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch._dynamo.utils", fake)
    monkeypatch.delenv(profile.ENV_PROFILE, raising=False)
    monkeypatch.setattr(profile, "_traced_in_requests", [])
    helper = "/site/vllm/v1/spec_decode/utils.py"
    with profile.request("cold"):  # traced twice (a recompile on a guard) and once elsewhere
        for s in (0.3, 0.2):
            metrics.append(types.SimpleNamespace(co_filename=helper, co_firstlineno=565, co_name="update",
                                                 entire_frame_compile_time_s=s))  # fmt: skip
        metrics.append(types.SimpleNamespace(co_filename="/site/vllm/sampler.py", co_firstlineno=9, co_name="top_k",
                                             entire_frame_compile_time_s=0.1))  # fmt: skip
    with profile.request(None):
        pass
    traced = profile.traced_in_requests()
    assert [f["frame"] for f in traced] == ["utils.py:565:update", "utils.py:565:update", "sampler.py:9:top_k"]
    assert profile.describe_traced(traced) == (
        "vllm/v1/spec_decode/utils.py:565:update (0.50 s x2); site/vllm/sampler.py:9:top_k (0.10 s)"
    )


def test_what_the_cold_request_compiled_and_traced_is_named_with_its_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The row counted 7 compiles and a trace after ready: the first request's excess over warm names them, each with
    its own seconds, so the cold/warm criterion no longer leaves them "not named"."""
    from engine import in_process
    from harness import jit_seen

    events = tuple({"kernel": k, "time_s": s} for k, s in (("eagle_step", 0.25), ("rejection", 0.125)))
    seen = jit_seen.Seen(compiles=2, kernels=("eagle_step", "rejection"), cache_new_files=(), events=events)
    frame = {"site": "vllm/v1/spec_decode/utils.py:565:update", "s": 0.36}

    class Window:
        def seen(self) -> jit_seen.Seen:
            return seen

    def generate(*_: object) -> list[str]:
        profile._traced_in_requests.append(frame)  # as profile.request keeps a frame Dynamo traced in the request
        return ["out"]

    monkeypatch.setattr(jit_seen, "Window", Window)
    monkeypatch.setattr(in_process, "generate", generate)
    monkeypatch.setattr(in_process, "cuda_sync", lambda: None)
    profile.next_row()
    in_process.timed_ms(object(), [], None, profile="warm")  # a warm request's compiles are not the first request's
    assert profile.describe_first_calls() == ""
    in_process.timed_ms(object(), [], None, profile="cold")
    named = profile.describe_first_calls().split("; ")
    assert named == [
        "torch.compile trace of vllm/v1/spec_decode/utils.py:565:update (360 ms)",
        "Triton compile of eagle_step (250 ms)",
        "Triton compile of rejection (125 ms)",
    ]
