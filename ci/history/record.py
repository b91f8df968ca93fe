"""What one build leaves in the history: the build (what was judged, where, when), each row's run (its status, the
image and fork commit it ran on, its metrics) and each criterion's verdict per change and target.

Plain, typed records: the report makes them (`ci.report.this_build`), the store writes and reads them, the rules read
them. A build is keyed: its Buildkite build id where it ran there, else a digest of its results, so that reporting the
same results again replaces the build rather than counting it twice."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

# A run's status as the store keeps it (its index); "not run" is no run and is not kept.
STATUSES = ("pass", "failure", "error", "conflict", "skipped", "incomplete")
FAILED = ("failure", "error", "conflict")  # a run that counts as a failure (a conflict: passed and failed in one build)


@dataclass(frozen=True, kw_only=True)
class Run:
    """One row's result in one build."""

    row: str
    change: str
    target: str
    status: str  # one of STATUSES
    image: str  # the image digest it ran in ("none": on a host's Python; "" where not recorded)
    commit: str  # the fork commit it ran ("vllm <build>" on a stock vLLM; "" where not recorded)
    metrics: tuple[tuple[str, float, str], ...] = ()  # (name, value, unit): each metric's value as the report shows it

    @property
    def ids(self) -> tuple[str, str]:
        """The build ids a run is the same build by: its image and its fork commit."""
        return self.image, self.commit


@dataclass(frozen=True, kw_only=True)
class Judged:
    """One criterion's verdict on one change, on one target ("" for a criterion judged on the change as a whole)."""

    change: str
    target: str
    criterion: str  # its stable id (report.json's: tied, cold_warm, no_jit, ...)
    status: str  # pass, fail, missing


@dataclass(frozen=True, kw_only=True)
class Build:
    """One report's build: what was judged and where, when, and every row's run."""

    key: str  # "buildkite:<build id>", else "results:<sha256 of the results>"
    at: datetime  # when its rows ran (the newest JUnit timestamp), else when it was reported; UTC
    branch: str  # $BUILDKITE_BRANCH, else the fork's ref the rows recorded, else ""
    commit: str  # the fork commit judged ("" where the rows ran a stock vLLM)
    stack: str  # the stack digest
    vllm: tuple[str, ...] = ()  # the vLLM builds the rows recorded
    images: tuple[tuple[str, str], ...] = ()  # (target, image digest) for every image a target's rows ran in
    number: int | None = None  # $BUILDKITE_BUILD_NUMBER
    url: str = ""  # $BUILDKITE_BUILD_URL
    runs: tuple[Run, ...] = ()
    verdicts: tuple[Judged, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Seen:
    """A row's run as the history holds it, with its build's place: what the rules read."""

    build: int  # the build's number in the store (1, 2, ...: the order builds were first written)
    number: int | None  # its Buildkite build number, where it had one
    at: datetime
    branch: str
    status: str
    image: str
    commit: str
    metrics: tuple[tuple[str, float], ...] = ()

    @property
    def failed(self) -> bool:
        return self.status in FAILED

    @property
    def counted(self) -> bool:
        """Whether it counts as a run: it passed or failed (a skipped or cut-short run says neither)."""
        return self.status == "pass" or self.failed

    @property
    def ids(self) -> tuple[str, str]:
        return self.image, self.commit

    @property
    def called(self) -> str:
        """The build as a reader names it: its Buildkite number, else its number in the history (0: this build, not
        yet written)."""
        if self.build == 0:
            return "this build"
        return f"build {self.number}" if self.number is not None else f"build #{self.build}"
