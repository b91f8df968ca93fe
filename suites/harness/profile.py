"""What only the first request pays for: the cold request and a warm one of the same workload, each under
cProfile (where Python spends it: lazy imports, first calls, numba, allocator growth) and the torch
profiler (which ops and CUDA runtime calls), summarised side by side.

Off unless $STACKGATE_PROFILE_DIR is set: profiling slows every request, so a profiled run is a diagnosis
and its timings are not evidence (the row says `stackgate.profiled`). Each phase writes
`<dir>/<row>/<phase>.json`; once both `cold` and `warm` exist, `first-only.txt` lists what the cold
request spent beyond the warm one, largest first.
"""

from __future__ import annotations

import contextlib
import cProfile
import json
import os
import pstats
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

ENV_PROFILE = "STACKGATE_PROFILE_DIR"
TOP = 60
# frames torch.compile traced during this process's timed requests (every row, profiled or not): Dynamo
# traces once per process, no compile cache carries it, so a trace after ready is a compile after ready
_traced_in_requests: list[dict[str, Any]] = []
# once-per-process work that ran inside timed requests (engine.first_calls names the sites): (what, ms)
_first_calls: list[tuple[str, float]] = []


def enabled() -> bool:
    return bool(os.environ.get(ENV_PROFILE))


def folder() -> Path:
    row = os.environ.get("STACKGATE_ROW_ID") or "row"
    return Path(os.environ[ENV_PROFILE]) / row


def last_warm(i: int, repeats: int) -> str | None:
    """The phase name of warm sample `i` of `repeats`: the last one is profiled beside the cold request."""
    return "warm" if i == repeats - 1 else None


def traced_in_requests() -> list[dict[str, Any]]:
    """Frames torch.compile traced during the timed requests of this process so far (`request`)."""
    return list(_traced_in_requests)


def next_row() -> None:
    """A shared process's next row (harness.shared): what the rows before it traced and paid once is theirs."""
    _traced_in_requests.clear()
    _first_calls.clear()


def note_first_call(what: str, ms: float) -> None:
    _first_calls.append((what, ms))


def describe_first_calls() -> str:
    """`what (N ms)` per once-per-process site that ran in this process's timed requests, most time first."""
    by: dict[str, float] = {}
    for what, ms in _first_calls:
        by[what] = by.get(what, 0.0) + ms
    return "; ".join(f"{what} ({ms:.0f} ms)" for what, ms in sorted(by.items(), key=lambda kv: -kv[1]))


@contextlib.contextmanager
def request(name: str | None) -> Iterator[None]:
    """One timed request: the frames torch.compile traces during it are kept (`traced_in_requests`), and
    where profiling is on and `name` is given ("cold" or "warm"), it is profiled as that phase."""
    made: list[Any] = []
    try:
        with _traced(made), phase(name):
            yield
    finally:
        _traced_in_requests.extend(_frame(m) for m in made)


@contextlib.contextmanager
def phase(name: str | None) -> Iterator[None]:
    """Profile the block as `name` ("cold" or "warm") where profiling is on; otherwise do nothing."""
    if not name or not enabled():
        yield
        return
    torch_prof = _torch_profiler()
    traced: list[Any] = []
    py = cProfile.Profile()
    t0 = time.perf_counter()
    with _traced(traced), torch_prof if torch_prof is not None else contextlib.nullcontext():
        py.enable()
        try:
            yield
        finally:
            py.disable()
    wall_ms = (time.perf_counter() - t0) * 1000.0
    doc = {
        "phase": name,
        "wall_ms": wall_ms,
        "python": python_summary(py),
        "ops": ops_summary(torch_prof),
        "traced": [_frame(m) for m in traced],
    }
    out = folder()
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n")
    if (out / "cold.json").is_file() and (out / "warm.json").is_file():
        cold, warm = (json.loads((out / f"{p}.json").read_text()) for p in ("cold", "warm"))
        (out / "first-only.txt").write_text(first_only(cold, warm))


@contextlib.contextmanager
def _traced(made: list[Any]) -> Iterator[None]:
    """Append to `made`, on leaving the block, the records torch.compile made during it."""
    held = _dynamo_metrics()  # held, so that no id compared below is reused by a record made during the block
    before = {id(m) for m in held}
    try:
        yield
    finally:
        made.extend(m for m in _dynamo_metrics() if id(m) not in before)


def _dynamo_metrics() -> list[Any]:
    """torch.compile's record of every frame it traced in this process (empty without torch)."""
    try:
        from torch._dynamo.utils import get_compilation_metrics

        return list(get_compilation_metrics())
    except Exception:  # no torch, or an API that moved: the profile goes on without it
        return []


def _frame(m: Any) -> dict[str, Any]:
    path = Path(str(getattr(m, "co_filename", "") or "?"))
    line_name = f"{getattr(m, 'co_firstlineno', '?')}:{getattr(m, 'co_name', '?')}"
    site = "/".join(p for p in path.parts[-4:] if p != "/")  # enough of the path to find the file in a checkout
    return {
        "frame": f"{path.name}:{line_name}",
        "s": getattr(m, "entire_frame_compile_time_s", None),
        "site": f"{site}:{line_name}",
    }


def describe_traced(frames: list[dict[str, Any]]) -> str:
    """`file:line:function (seconds) xN` per traced frame, most time first: what a JIT refusal names."""
    by: dict[str, list[float]] = {}
    for f in frames:
        by.setdefault(f["site"], []).append(float(f["s"] or 0.0))
    ranked = sorted(by.items(), key=lambda kv: -sum(kv[1]))
    return "; ".join(f"{name} ({sum(ts):.2f} s{f' x{len(ts)}' if len(ts) > 1 else ''})" for name, ts in ranked)


def _torch_profiler() -> Any:
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile
    except ImportError:
        return None
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    return profile(activities=activities, record_shapes=False, with_stack=False)


def python_summary(prof: cProfile.Profile) -> list[dict[str, Any]]:
    """Functions by own time and by cumulative time (the union of both tops), milliseconds."""
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    rows = [
        {"fn": f"{Path(file).name}:{line}:{func}", "calls": nc, "own_ms": tt * 1e3, "cum_ms": ct * 1e3}
        for (file, line, func), (_cc, nc, tt, ct, _callers) in stats.items()
    ]
    keep = {r["fn"] for r in sorted(rows, key=lambda r: -r["own_ms"])[:TOP]}
    keep |= {r["fn"] for r in sorted(rows, key=lambda r: -r["cum_ms"])[:TOP]}
    return sorted((r for r in rows if r["fn"] in keep), key=lambda r: -r["cum_ms"])


def ops_summary(prof: Any) -> list[dict[str, Any]]:
    """torch ops and CUDA runtime calls by self CPU time, with their device time, milliseconds."""
    if prof is None:
        return []
    rows = []
    for e in prof.key_averages():
        device_us = getattr(e, "self_device_time_total", None)
        if device_us is None:
            device_us = getattr(e, "self_cuda_time_total", 0.0)
        cpu_ms = e.self_cpu_time_total / 1e3
        rows.append({"op": e.key, "calls": e.count, "cpu_ms": cpu_ms, "device_ms": device_us / 1e3})
    keep = {r["op"] for r in sorted(rows, key=lambda r: -r["cpu_ms"])[:TOP]}
    keep |= {r["op"] for r in sorted(rows, key=lambda r: -r["device_ms"])[:TOP]}
    return sorted((r for r in rows if r["op"] in keep), key=lambda r: -r["cpu_ms"])


def _excess(cold: list[Mapping[str, Any]], warm: list[Mapping[str, Any]], key: str, value: str) -> list[tuple]:
    seen = {r[key]: r for r in warm}
    out = []
    for r in cold:
        w = seen.get(r[key])
        extra = r[value] - (w[value] if w else 0.0)
        if extra > 0:
            out.append((extra, r[key], r["calls"], w["calls"] if w else 0))
    return sorted(out, reverse=True)


def first_only(cold: Mapping[str, Any], warm: Mapping[str, Any], *, limit: int = 25) -> str:
    """A plain-text account of where the cold request's extra time went, largest first."""
    lines = [f"cold {cold['wall_ms']:.1f} ms, warm {warm['wall_ms']:.1f} ms (both under the profilers)", ""]
    lines.append("frames torch.compile traced during the request (cold / warm):")
    for phase, doc in (("cold", cold), ("warm", warm)):
        for f in doc.get("traced", []):
            lines.append(f"  {phase}: {f['frame']} ({f['s']} s)")
    sections = (
        ("Python, cumulative ms beyond the warm request (calls cold / warm):", "python", "fn", "cum_ms"),
        ("Python, own ms beyond the warm request:", "python", "fn", "own_ms"),
        ("torch ops and CUDA runtime calls, self CPU ms beyond the warm request:", "ops", "op", "cpu_ms"),
        ("device ms beyond the warm request:", "ops", "op", "device_ms"),
    )
    for heading, table, key, value in sections:
        lines.append(heading)
        for extra, name, nc, nw in _excess(cold[table], warm[table], key, value)[:limit]:
            lines.append(f"  {extra:10.1f}  {name}  ({nc} / {nw})")
    return "\n".join(lines) + "\n"
