"""What a row test records and how it fails: every measurement with its unit and phase, named
properties, and one failure message that lists every criterion the row missed (absence first)."""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Sequence
from typing import Any

import pytest
from harness import profile as profiling
from harness.items import ENV_SHARE
from harness.measure import COLD_FROM, Measurement, cold_from, first_cold, of_samples
from harness.measure import record as record_measurement


class Evidence:
    def __init__(self, request: pytest.FixtureRequest, row: Any) -> None:
        self.node = request.node
        self.row = row
        self.failures: list[str] = []
        self.absent: str | None = None
        self.cold_from: str | None = None  # the row whose cold timings this one reports (shared child)
        self.recorded: dict[str, list[float]] = {}

    @classmethod
    def start(cls, request: pytest.FixtureRequest, row: Any, *, every_worker: bool = False) -> Evidence:
        """A row test's first steps: the engine env for the row's track (before vllm is imported), the vLLM
        version, and whether the change is present (by the probe its change file names, engine.presence.of: it may
        import vllm, so it runs after the env).
        `every_worker`: the test's probes see every worker process (engine.workers), so TP/DP rows may run."""
        from engine import config, presence

        ev = cls(request, row)
        if int(row["tp"]) * int(row["dp"]) > 1 and not every_worker:
            # vLLM runs TP/DP workers in other processes; the probes (graph replays, layer-0 outputs,
            # indexer calls) watch this one. A row they cannot watch fails saying so, never "0 seen".
            pytest.fail(
                f"tp={row['tp']} dp={row['dp']}: the in-process probes cannot watch worker processes; "
                "this row needs the multi-GPU probes",
                pytrace=False,
            )
        ev.prop("engine_env", config.set_engine_env(runner=config.runner_for(row)))
        ev.prop("vllm_version", presence.vllm_version())
        if row.model_info.get("shrunk_of"):  # the real model's architecture, shrunk, with random weights
            ev.prop("shrunk_of", row.model_info["shrunk_of"])
        if os.environ.get(config.ENV_MODEL_CLASSES):  # another of vLLM's implementations of the model, asked for
            ev.prop("model_class_overrides", os.environ[config.ENV_MODEL_CLASSES])
        commit = presence.vllm_commit()
        if commit:  # the build, not only the release: a fork's wheel and upstream's differ here
            ev.prop("vllm_commit", commit)
        ev.build(presence.vllm_root())
        if profiling.enabled():  # a diagnosis: the profilers slow the timed requests
            ev.prop("profiled", profiling.folder().as_posix())
        ev.presence(presence.of(row))
        return ev

    def build(self, root: Any) -> None:
        """The tree under test by content (`vllm_build`), and for a fork build the imported changes it holds; a tree
        that is not the build its manifest names fails the row (it would be judged as a build it is not)."""
        if root is None:
            return
        from harness import vllm_build

        built = vllm_build.describe(root)
        for name, value in vllm_build.properties(built):
            self.prop(name, value)
        if "mismatch" in built:
            self.failures.append(built["mismatch"])

    def metric(self, name: str, samples: float | Sequence[float], unit: str, phase: str = "none") -> Measurement:
        values = [float(samples)] if isinstance(samples, (int, float)) else [float(s) for s in samples]
        if phase == "cold" and unit in ("s", "ms") and os.environ.get(ENV_SHARE) == "1":  # timings only: counts
            taken, taken_on = first_cold(name, values, self.row.id)  # stay the row's own
            if taken_on:
                values = list(taken)
                if self.cold_from is None:
                    self.cold_from = taken_on
                    self.node.user_properties.append((COLD_FROM, cold_from(taken_on)))
        elif name == "cold_warm_ratio" and self.cold_from and self.recorded.get("warm_request_ms"):
            cold = self.recorded.get("cold_first_request_ms", values)
            values = [cold[0] / statistics.median(self.recorded["warm_request_ms"])]
        self.recorded[name] = values
        return record_measurement(self.node, of_samples(name, values, unit, phase))  # type: ignore[arg-type]

    def prop(self, name: str, value: Any) -> None:
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        self.node.user_properties.append((f"stackgate.{name}", text))

    def presence(self, found: Any) -> None:
        self.prop("change_present", bool(found.present))
        self.prop("change_evidence", found.evidence)
        if not found.present:
            self.absent = found.message()
            from engine import config

            config.change_absent = self.absent

    def expect(self, ok: bool, message: str) -> None:
        if not ok:
            self.failures.append(message)

    def tolerance(self, value: float | None, what: str) -> None:
        """The change's numerical tolerance against its named reference, from the row's acceptance."""
        tol = self.row.acceptance.get("tolerance", {})
        limit = float(tol.get("max", 0))
        ref = tol.get("reference", {})
        against = f"{ref.get('backend', '?')} {ref.get('variant', '')}".strip()
        if value is None or value != value:  # None or NaN: never a pass
            self.failures.append(f"{tol.get('metric', what)} not measured against {against}")
        elif value > limit:
            self.failures.append(
                f"{tol.get('metric', what)} {value:.4g} {tol.get('unit', '')} > {limit:g} vs {against}"
            )

    def graph_replay(self, value: float | None, *, ran_mode: str | None = None) -> None:
        """`ran_mode`: the CUDA graph mode vLLM ran the row in; a failure names it where vLLM changed the row's
        (it drops full graphs for spec decode on a backend that cannot replay them, and logs why)."""
        gr = self.row.acceptance.get("graph_replay", {})
        lo, hi = gr.get("min"), gr.get("max")  # an absent bound is open
        if value is None:
            self.failures.append(f"graph-replay assertion not measured: {gr.get('metric')}")
        elif (lo is not None and value < lo) or (hi is not None and value > hi):
            want = (
                f"== {lo:g}"
                if lo == hi
                else " and ".join(
                    w for w in (f">= {lo:g}" if lo is not None else "", f"<= {hi:g}" if hi is not None else "") if w
                )
            )
            asked = str(self.row["cudagraph_mode"])
            why = ""
            if ran_mode is not None and ran_mode != asked:
                why = f" (vLLM ran cudagraph_mode {ran_mode}, not the row's {asked})"
            self.failures.append(f"graph-replay assertion failed: {gr.get('metric')} = {value:g}, expected {want}{why}")

    def finish(self) -> None:
        from engine import steady

        if steady.pinned():  # the conditions its timings ran under (engine.steady)
            self.prop("timing_cpus", steady.pinned())
        problems = ([self.absent] if self.absent else []) + self.failures
        if problems:
            pytest.fail("; ".join(problems), pytrace=False)
