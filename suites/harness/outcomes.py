"""What a finished item's outcome becomes once the controller has looked around it: an error where it compiled with
JIT refused, where its JIT log cannot all be read, or where its processes outlived it."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from harness import jit_seen, missed
from harness.isolate import Outcome
from harness.items import ENV_REFUSE_JIT, TRACED_AFTER_READY
from harness.jit_log import UNREADABLE as UNREADABLE_LINE


def refuse_jit(outcome: Outcome, seen: jit_seen.Seen) -> Outcome:
    """With JIT refused, a row that compiled anything (a Triton kernel, files new in a JIT cache: inductor,
    vLLM's compile cache, DeepGEMM, FlashInfer, CUDA's; or a frame torch.compile traced during a request)
    errors, naming what compiled where."""
    found = []
    traced = dict(outcome.properties).get(TRACED_AFTER_READY)
    if traced:  # Dynamo traces in each process: with its graph in inductor's cache nothing new is written
        found.append(
            f"torch.compile traced after ready (Dynamo, once per process: no cache carries it, only a "
            f"warm-up at engine start does): {traced}"
        )
    if seen.compiles:
        cache = os.environ.get("TRITON_CACHE_DIR", "~/.triton/cache")
        found.append(f"{seen.compiles} Triton compile(s) into {cache}: {', '.join(seen.named()[:8])}")
        why = missed.explain(seen.events, missed.baked())
        if why:
            found.append(f"the bake compiled {len(why)} of their specialisations too: {' | '.join(why[:3])}")
    if seen.cache_new_files:
        dirs = sorted({str(Path(f).parent) for f in seen.cache_new_files})
        found.append(f"{len(seen.cache_new_files)} new JIT cache file(s) under {', '.join(dirs[:3])}")
        found += missed.explain_compile_cache(seen.cache_new_files)[:3]
    if not found:
        return outcome
    what = f"JIT refused (${ENV_REFUSE_JIT}=1): " + "; ".join(found)
    if outcome.status in ("passed", "skipped"):
        return replace(outcome, status="error", message=what)
    return replace(outcome, message=f"{outcome.message}; {what}")


def torn_log(outcome: Outcome, seen: jit_seen.Seen) -> Outcome:
    """A row whose JIT-log lines cannot all be read does not pass: what it compiled is not known."""
    torn = [e.get("torn", "") for e in seen.events if e.get("kernel") == UNREADABLE_LINE]
    if not torn:
        return outcome
    what = (
        f"{len(torn)} unreadable JIT-log line(s) (a process killed mid-write, or a short write on a full disk), "
        f"so its compiles cannot be counted: {torn[0][:80]!r}"
    )
    if outcome.status in ("passed", "skipped"):
        return replace(outcome, status="error", message=what)
    return replace(outcome, message=f"{outcome.message}; {what}")


def left_behind(outcome: Outcome, left: list[str]) -> Outcome:
    """A row whose processes outlive it does not pass: they would hold the GPU and skew the next row."""
    what = f"left {len(left)} process(es) running after the test, killed: {', '.join(left[:5])}"
    if outcome.status in ("passed", "skipped"):
        return replace(outcome, status="error", message=what)
    return replace(outcome, message=f"{outcome.message}; {what}")


def tell_pytest(item: pytest.Item, o: Outcome) -> None:
    """Tell pytest what happened, so its summary and exit status agree with the JUnit file."""
    if o.status == "skipped":
        rep = pytest.TestReport(
            item.nodeid,
            item.location,
            {},
            "skipped",
            (str(item.path), (item.location[1] or 0) + 1, f"Skipped: {o.message}"),
            "setup",
        )
    else:
        outcome = "passed" if o.status == "passed" else "failed"
        when = "setup" if o.status == "error" else "call"
        text = f"{o.message}\n{o.details}".strip() + (f"\n(full log: {o.log})" if o.log else "")
        rep = pytest.TestReport(
            item.nodeid,
            item.location,
            {},
            outcome,
            text if outcome == "failed" else None,
            when,
            duration=o.duration_s,
            user_properties=list(o.properties),
        )
    item.ihook.pytest_runtest_logreport(report=rep)
