"""The pipeline's parts: what `python -m ci pipeline` was asked for (Options), one command step (Step), a wait, and
the few spellings every step shares (its key, a nox call, a `python -m ci` call from nox's venv)."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ci.common.escape import command

TOOLS = "source .buildkite/tools.sh"  # the pinned nox and uv on PATH (.buildkite/tools.txt, hashed)
BUILD_MIN, REPORT_MIN, GATE_MIN = 180, 20, 10  # minutes: an image of 8+ GB built, verified and baked; the report
RUN_SETUP_MIN = 30  # a run step's own work beside its rows: the image (a no-op where current) and nox's venv
RESULTS, REPORT = "results", "report"
HISTORY = "history/history.sqlite"  # the report step's history: pulled from the last builds, added to, uploaded
# Buildkite Test Engine's collector: uploads a step's JUnit (each testcase's classname and name; a row's testcases
# carry its row id and change as properties). Its token is the org's, in $BUILDKITE_ANALYTICS_TOKEN.
TEST_COLLECTOR = "test-collector#v1.7.0"
VENV_PYTHON = ".nox/run/bin/python"  # nox's venv of the `run` session: nox itself reports every failure as 1
AGENT_LOST = {"automatic": [{"exit_status": -1, "limit": 2}]}  # the agent vanished mid-job: never a test's exit
_KEY = re.compile(r"[^A-Za-z0-9_\-:]")
ABSENT = (
    "fork-absent"  # ci.fork.fork_plan.ABSENT: the results folder of the rows a fork lacks (a test holds them equal)
)


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """A change the fork lacks, as `--try-ports` found it where the pipeline was made: its port's pinned tip where it
    ports cleanly (each agent that makes it again must end there), else "" and its readiness in words."""

    change: str
    tip: str  # the port's last commit, pinned (ci.fork.port_trial); "" where it does not port cleanly
    said: str  # "clean, 1 prerequisite"; or "conflicts: own.py (1 hunk); #61002 itself: conflicts in vllm/own.py"
    rows: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (target, its row ids), each target holding its rows


@dataclass(frozen=True, kw_only=True)
class Options:
    """What `python -m ci pipeline` was asked for; the later uploads repeat it."""

    targets: tuple[str, ...] = ()
    suites: tuple[str, ...] = ()
    changes: tuple[str, ...] = ()
    shard_size: int = 16  # rows per run step
    baseline: str | None = None  # a report.json on the report's agent to judge regressions against
    stack: Path | None = None  # another stack directory (relative to the checkout)
    registry: str | None = None  # where the build steps push each image and the run steps pull it by digest
    # `--fork PATH --ref COMMIT [...]`, the ref resolved when the pipeline was made: every build step builds this
    # fork's image, every agent judging the same commit
    fork: tuple[str, ...] = ()
    stock: frozenset[str] = frozenset()  # targets that build the locked release (no imported change's rows there)
    without: tuple[str, ...] = ()  # each of these changes' rows also run on the fork without it, and are compared
    compare_without: tuple[str, ...] = ()  # each judged as ported by the timing protocol, on one agent (.timing)
    runs: int = 5  # runs of each arm of that protocol
    test_engine: bool = False  # each run step sends its JUnit to Buildkite Test Engine (the test-collector plugin)
    try_ports: bool = False  # every change the fork lacks tried as a port (.try_ports), as `candidates` says
    candidates: tuple[Candidate, ...] = ()

    def filters(self) -> list[str]:
        out: list[str] = []
        for flag, values in (("--target", self.targets), ("--suite", self.suites), ("--change", self.changes)):
            out += [flag, ",".join(values)] if values else []
        return out

    def fork_for(self, target: str) -> tuple[str, ...]:
        """The fork options a target's build takes: none where it builds the locked release."""
        return () if target in self.stock else self.fork

    def stack_args(self) -> list[str]:
        return ["--stack", str(self.stack)] if self.stack else []

    def argv(self) -> list[str]:
        """These options as `python -m ci pipeline` arguments."""
        out = [*self.stack_args(), *self.filters(), "--shard-size", str(self.shard_size)]
        out += ["--registry", self.registry] if self.registry else ["--one-agent"]
        out += [*self.fork, *(a for c in self.without for a in ("--without", c))]
        out += [a for c in self.compare_without for a in ("--compare-without", c)]
        out += ["--try-ports"] if self.try_ports else []
        out += ["--runs", str(self.runs)] if self.compare_without or self.try_ports else []
        out += ["--test-engine"] if self.test_engine else []
        return out + (["--baseline", self.baseline] if self.baseline else [])


@dataclass(frozen=True, kw_only=True)
class Step:
    """One command step, one job."""

    key: str
    label: str
    queue: str
    commands: tuple[str, ...]
    depends_on: tuple[str, ...] = ()
    artifact_paths: tuple[str, ...] = ()
    soft_fail: str = ""  # why this step's test failures (exit 1) do not fail the build; "" where they do
    soft_status: int = 1  # the exit status that soft-fails (2: a port candidate that does not port, said as such)
    timeout_min: int = 30  # a hung job holds an agent until Buildkite stops it
    tags: tuple[tuple[str, str], ...] = ()  # agent tags beyond the queue: the GPUs the job's rows need
    plugins: tuple[tuple[str, dict[str, Any]], ...] = ()  # (plugin@version, its settings)

    def to_yaml(self) -> dict[str, Any]:
        agents = {"queue": self.queue, **dict(self.tags)}
        out: dict[str, Any] = {"key": self.key, "label": self.label, "agents": agents}
        if self.depends_on:
            out["depends_on"] = list(self.depends_on)
        out["commands"] = [TOOLS, *self.commands]
        if self.plugins:
            out["plugins"] = [{name: dict(settings)} for name, settings in self.plugins]
        if self.artifact_paths:
            out["artifact_paths"] = list(self.artifact_paths)
        if self.soft_fail:
            out["soft_fail"] = [{"exit_status": self.soft_status}]
        out["timeout_in_minutes"] = self.timeout_min
        out["retry"] = copy.deepcopy(AGENT_LOST)
        return out


@dataclass(frozen=True, kw_only=True)
class Group:
    """A group of command steps, shown as one in Buildkite's UI (one change tried as a port on each target)."""

    key: str
    label: str
    steps: tuple[Step, ...]

    def to_yaml(self) -> dict[str, Any]:
        return {"group": self.label, "key": self.key, "steps": [s.to_yaml() for s in self.steps]}


@dataclass(frozen=True)
class Wait:
    """Waits for every step above it; with continue_on_failure, runs what follows even when they failed."""

    continue_on_failure: bool = True

    def to_yaml(self) -> dict[str, Any]:
        return {"wait": None, "continue_on_failure": self.continue_on_failure}


def key(*parts: object) -> str:
    return _KEY.sub("-", "-".join(str(p) for p in parts))[:100]


def nox(session: str, *args: str) -> str:
    return command(["nox", "-s", session, *(["--", *args] if args else [])])


def ci(*args: str) -> str:
    """`python -m ci ...` from nox's venv: nox turns every failure into 1, and the agent must see 5, 7 and 8."""
    return command([VENV_PYTHON, "-m", "ci", *args])


def results_root(without: str = "") -> str:
    return RESULTS + (f"-without-{without}" if without else "")  # an ablation's run steps upload apart


def collector(files: str) -> tuple[tuple[str, dict[str, Any]], ...]:
    """The test-collector plugin, sending the JUnit files `files` names to Buildkite Test Engine."""
    return ((TEST_COLLECTOR, {"files": files, "format": "junit"}),)
