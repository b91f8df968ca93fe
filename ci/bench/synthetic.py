"""Synthetic JUnit that follows docs/boundary.md, written with junitparser: for the report's
benchmark and tests, so both read the same shape the container-side harness writes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from junitparser import Error, Failure, Skipped, xunit2

from ci.results.metrics import Metric, Phase
from ci.results.node_ids import test_module
from ci.stack.change import Change
from ci.stack.plan import Row


@dataclass(frozen=True, kw_only=True)
class FakeCase:
    row: str  # row id ("" for a case outside the row matrix)
    change: str
    target: str
    suite: str
    classname: str
    test: str = "test_row"
    status: str = "pass"  # pass | failure | error | skipped
    message: str = ""
    jit_compiles: int = 0
    jit_kernels: tuple[str, ...] = ()
    aot: str = "image"  # the ahead-of-time cache the row ran with, as the harness says it
    vllm_version: str = ""  # stackgate.vllm_version, where given
    metrics: tuple[Metric, ...] = ()
    jit_traced: str = ""  # stackgate.jit.traced_after_ready, where given
    first_request_only: str = ""  # stackgate.first_request_only, where given
    props: tuple[tuple[str, str], ...] = ()  # further stackgate.<name> properties (a fork build's, the probe's)


def metric(name: str, value: float, unit: str, phase: Phase, samples: Sequence[float] = ()) -> Metric:
    samples = tuple(samples) or (value,)
    return Metric(
        name=name,
        value=value,
        unit=unit,
        phase=phase,
        repeats=len(samples),
        spread=max(samples) - min(samples),
        samples=samples,
    )


def passing_metrics(change: Change) -> tuple[Metric, ...]:
    """Metrics meeting every criterion of `change`, measured cold and warm, five repeats each."""
    acc = change.acceptance
    out: dict[str, Metric] = {}
    for phase, names in (("cold", acc.measurements.cold), ("warm", acc.measurements.warm)):
        for name in names:
            value = 0.0 if "compiles" in name else (900.0 if phase == "cold" else 50.0)
            out[name] = metric(name, value, _unit(name), phase, [value * f for f in (0.99, 1.0, 1.0, 1.0, 1.01)])  # type: ignore[arg-type]
    if acc.measurements.max_cold_warm_ratio is not None:
        out["cold_warm_ratio"] = metric("cold_warm_ratio", 1.0, "ratio", "none")
    tol = acc.tolerance
    out[tol.metric] = metric(tol.metric, 0.0, tol.unit, "warm")
    g = acc.graph_replay
    value = g.min if g.min is not None else (g.max if g.max is not None else 0.0)
    out[g.metric] = metric(g.metric, value, "", "warm")
    reg = acc.allowed_regression
    if reg.metric not in out:
        out[reg.metric] = metric(reg.metric, 100.0, _unit(reg.metric), "warm", [99.0, 100.0, 100.0, 101.0])
    return tuple(out.values())


def _unit(name: str) -> str:
    for suffix, unit in (("_tok_s", "tok/s"), ("_ms", "ms"), ("_s", "s")):
        if name.endswith(suffix):
            return unit
    return ""


def for_row(row: Row, change: Change, **kw: object) -> FakeCase:
    module = test_module(change.acceptance.regression.tests[0])
    base = FakeCase(
        row=row.id,
        change=row.change,
        target=row.target,
        suite=row.suite,
        classname=module,
        metrics=passing_metrics(change),
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def with_metric(case: FakeCase, m: Metric) -> FakeCase:
    return replace(case, metrics=(*(x for x in case.metrics if x.name != m.name), m))


def without_metric(case: FakeCase, name: str) -> FakeCase:
    return replace(case, metrics=tuple(x for x in case.metrics if x.name != name))


def write(path: Path, target: str, suite: str, cases: Sequence[FakeCase], shard: int = 0, caches: str = "") -> Path:
    ts = xunit2.TestSuite(f"stackgate.{target}.{suite}.{shard}")
    for key, value in (
        ("target", target),
        ("suite", suite),
        ("image_digest", "sha256:" + "0" * 64),
        ("git_revision", "0" * 40),
        ("host", "synthetic"),
    ):
        ts.add_property(f"stackgate.{key}", value)
    if caches:
        ts.add_property("stackgate.caches", caches)
    for c in cases:
        tc = xunit2.TestCase(name=f"{c.test}[{c.row}]" if c.row else c.test, classname=c.classname, time=1.0)
        if c.row:
            for key, value in (
                ("row", c.row),
                ("change", c.change),
                ("target", c.target),
                ("suite", c.suite),
                ("image_digest", "sha256:" + "0" * 64),
                ("git_revision", "0" * 40),
                ("jit.compiles", str(c.jit_compiles)),
                ("jit.kernels", ",".join(c.jit_kernels)),
                ("jit.cache_new_files", "0"),
                ("aot", c.aot),
            ):
                tc.add_property(f"stackgate.{key}", value)
            if c.vllm_version:
                tc.add_property("stackgate.vllm_version", c.vllm_version)
            if c.jit_traced:
                tc.add_property("stackgate.jit.traced_after_ready", c.jit_traced)
            if c.first_request_only:
                tc.add_property("stackgate.first_request_only", c.first_request_only)
            for key, value in c.props:
                tc.add_property(f"stackgate.{key}", value)
            for m in c.metrics:
                tc.add_property(f"stackgate.metric.{m.name}", json.dumps(m.to_json()))
        result = {"failure": Failure, "error": Error, "skipped": Skipped}.get(c.status)
        if result is not None:
            tc.result = [result(c.message)]
        ts.add_testcase(tc)
    doc = xunit2.JUnitXml()
    doc.add_testsuite(ts)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc.write(str(path))
    return path
