"""The typed model of one imported change: what it is upstream, the matrix it is proven on and the acceptance
criteria it is judged by (stack/changes/<id>.yaml). Nothing here is a fact of one fork: which commits of a fork
carry a change is found in that fork's history (ci.upstream) or recorded with the fork (stack/fork.yaml)."""

from __future__ import annotations

import datetime as dt
from dataclasses import field
from typing import Annotated, Literal, TypeVar

from ci.stack.schema import (
    CommitId,
    Count,
    Finite,
    GraphMode,
    NonNegative,
    PatchId,
    Positive,
    StrictBool,
    frozen,
    rule,
)

T = TypeVar("T")


@frozen
class Proven:
    """The builds a regression test was run on: it must fail where the bug is and pass where the fix is."""

    fails_on: str  # the vLLM build with the bug, as the report names builds ("0.28.0 (g2cf0a6915) build 5575…")
    passes_on: str  # the same build with the fix
    evidence: str  # the campaign that shows both, a path in the repository


@frozen
class FollowUp:
    ref: str  # "vllm-project/vllm#52512"
    what: str
    regression_test: bool = False
    proven: Proven | None = None  # a regression test shown to fail on the bug and pass on the fix
    merge_commit: CommitId | None = None  # the commit that merged it upstream, where it is merged
    merged_on: dt.date | None = None


@frozen
class Upstream:
    repo: str
    pr: int
    title: str
    state: Literal["open", "merged", "closed"]  # closed: closed without merging
    as_of: dt.date
    merged_on: dt.date | None = None
    # The commit that merged the PR into upstream's main (a merged PR only); absent where it is not known,
    # and `ci upstream` then says "merge commit not recorded" rather than guess.
    merge_commit: CommitId | None = None
    commits: tuple[CommitId, ...] = ()  # the PR's own commits (pull/<pr>/head), where a port cherry-picks them
    # `git patch-id --stable` of the merge commit's patch (a squash merge: the whole change), so that a fork carrying
    # upstream's patch itself (a cherry-pick of the merge) is found on a checkout without the merge commit
    patch_id: PatchId | None = None
    # each file the merge commit changes -> its file patch-id (ci.upstream.checkout.file_ids): a port whose patch
    # was edited (a conflict resolved) is still found, as "ported, edited", naming the files that differ
    file_ids: dict[str, PatchId] = field(default_factory=dict)
    stacked_on: tuple[int, ...] = ()  # upstream PRs this one is stacked on
    related: tuple[int, ...] = ()
    # the oldest vLLM release that contains it (its presence probe, suites/engine/tracked.py, finds it there):
    # the release a positive control runs the change's rows on, and a fork based on it or later holds it
    first_release: str | None = None
    # files the PR creates: where no commit of it can be compared (a PR closed unmerged, its commits nowhere to
    # fetch), a fork tree without any of them does not carry it, and the commits that added them do
    adds: tuple[str, ...] = ()
    follow_ups: tuple[FollowUp, ...] = ()  # later upstream PRs on the same code (a fix, a regression test's bug)
    # a PR closed unmerged: the upstream PRs that took another road to its goal, and that road in a few words (the
    # report says it beside the change's "absent", so a reader knows why no release will ever hold it)
    superseded_by: tuple[int, ...] = ()
    superseded_how: str | None = None
    # the Triton kernels its warm-up launches at engine start, as the PR names them: a kernel still compiled after
    # ready is reported with the change that would warm it (a kernel-warmup track's next port)
    warms: tuple[str, ...] = ()


@frozen
class Combo:
    """One partial assignment of axis values (matrix include/exclude entries).

    `models` and `backend` pin an include entry: it applies to those models only (a real model's pin covers its
    shrunk twin) and to that one of their backends only (a model or target without it gets no row from it).
    """

    models: tuple[str, ...] | None = None
    backend: str | None = None
    context: Positive | None = None
    batch: Positive | None = None
    speculative: bool | None = None
    num_speculative_tokens: Count | None = None
    tp: Positive | None = None
    dp: Positive | None = None
    ep: bool | None = None
    cudagraph_mode: GraphMode | None = None
    dcp: Positive | None = None
    dbo: bool | None = None
    kv_cache_dtype: str | None = None


# An axis lists at least one value; duplicates are refused by the loader, naming the line.
Axis = Annotated[tuple[T, ...], rule(min_length=1)]


@frozen
class Matrix:
    """Axes are expanded as a cartesian product; `include` adds combos, `exclude` drops matches.

    An omitted `tp` takes each model's own; every other omitted axis takes its first default. A matrix without
    `context` and `batch` has no product (as a GitHub matrix with `include` alone): its rows are its include
    entries, each naming its own context and batch.
    """

    context: Axis[Positive] | None = None
    batch: Axis[Positive] | None = None
    speculative: Axis[bool] = (True,)
    num_speculative_tokens: Axis[Count] = (1,)
    tp: Axis[Positive] | None = None
    dp: Axis[Positive] = (1,)
    ep: Axis[bool] = (False,)
    cudagraph_mode: Axis[GraphMode] = ("FULL_AND_PIECEWISE",)
    dcp: Axis[Positive] = (1,)
    dbo: Axis[bool] = (False,)
    kv_cache_dtype: Axis[str] = ("auto",)
    include: tuple[Combo, ...] = ()
    exclude: tuple[Combo, ...] = ()


@frozen
class Regression:
    tests: tuple[str, ...]  # pytest node ids or files that tie the change
    benchmark: str  # what is measured, in words a reviewer can check


@frozen
class Reference:
    backend: str  # a backend id, or "row": the row's own backend in another configuration
    kv_cache_dtype: str | None = None
    variant: str = ""  # what differs from the row ("warm-up disabled", "non-speculative")


@frozen
class Tolerance:
    metric: str
    max: NonNegative
    unit: str
    reference: Reference


@frozen
class GraphReplay:
    """The graph-replay assertion: the metric must lie within [min, max] (a bound left out is open)."""

    metric: str
    min: Finite | None = None
    max: Finite | None = None
    description: str

    def holds(self, value: float) -> bool:
        return (self.min is None or value >= self.min) and (self.max is None or value <= self.max)

    @property
    def rule(self) -> str:
        if self.min is not None and self.min == self.max:
            return f"{self.metric} == {self.min:g}"
        bounds = [
            f"{self.min:g} <=" if self.min is not None else "",
            self.metric,
            f"<= {self.max:g}" if self.max is not None else "",
        ]
        return " ".join(b for b in bounds if b)


@frozen
class AllowedRegression:
    metric: str
    better: Literal["higher", "lower"]
    max_pct: NonNegative
    description: str = ""


@frozen
class Effect:
    """What the change acts on, and by how much it must move it: `metric` on the fork's build against the same fork
    without the change (`ci main --compare-without`), at least `min_gain_pct` better, on the rows `only` selects (every
    row where empty: `{context: [512], model: [...]}` keeps the rows whose axis values are listed). Judged only where
    the A/A floor measured for the row is narrower than the bound (ci.results.criteria.effect)."""

    metric: str
    better: Literal["higher", "lower"]
    min_gain_pct: Annotated[float, rule(gt=0, allow_inf_nan=False)]
    only: dict[str, tuple[str | int, ...]] = field(default_factory=dict)
    description: str = ""

    def applies(self, axes: dict[str, object]) -> bool:
        """Whether a row with these axis values (the planned row's, `model` among them) is one this effect is for."""
        return all(str(axes.get(axis)) in {str(w) for w in wanted} for axis, wanted in self.only.items())


@frozen
class Measurements:
    cold: tuple[str, ...]
    warm: tuple[str, ...]
    # where set, each row's recorded cold_warm_ratio (first request over warm median) must not exceed it
    max_cold_warm_ratio: Annotated[float, rule(gt=0, allow_inf_nan=False)] | None = None


@frozen
class Acceptance:
    regression: Regression
    tolerance: Tolerance
    graph_replay: GraphReplay
    allowed_regression: AllowedRegression
    measurements: Measurements
    # what the change acts on, each judged against the fork without it (ci.results.criteria.effect); every imported
    # change names at least one (tests/unit/test_timing_criteria.py)
    effect: tuple[Effect, ...] = ()


@frozen
class Change:
    id: str
    title: str
    track: str
    # import: an upstream PR a fork carries; selftest (the harness's own rows) and composition (the seed table's
    # combinations) import nothing and name no upstream PR
    kind: Literal["import", "selftest", "composition"] = "import"
    upstream: Upstream | None = None  # None only where the change imports nothing
    # how its presence is found in the vLLM under test, and what its rows need of the engine beyond their axes: names
    # of suites/engine/tracked.py's PROBES and OPTIONS (the loader refuses one it does not hold: ci.stack.suite_names)
    probe: str
    engine_options: str = "default"
    models: tuple[str, ...]
    matrix: Matrix
    acceptance: Acceptance
    # A target the tracking issue names (targets.yaml `required`) on which this change has no row, and why
    # that is right; without an entry here, such a target leaves the matrix criterion missing.
    waived_targets: dict[str, str] = field(default_factory=dict)
    # Whether a build fails while this change is not ready (the gate reads report.json's `changes[].gating` and
    # `ready`). Off unless the file says `gating: true`: a change gates once the fork enables it by default; until
    # then its verdict is evidence, and a new change file does not fail every build before its rows first ran.
    gating: StrictBool = False
    notes: str = ""
