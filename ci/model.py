"""The typed model of the stack: what the fork must prove, where, and how it is judged.

Every class is a frozen, keyword-only dataclass. `ci.stack` fills them from `stack/*.yaml` once;
nothing past the loader passes dicts around.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import ConfigDict

Family = Literal["cuda", "rocm", "cpu"]
Platform = Literal["linux/amd64", "linux/arm64"]
Layout = Literal["dense", "hybrid", "mla", "sparse_mla"]
DrafterType = Literal["eagle", "eagle3", "dflash", "dspark", "mtp"]
Suite = Literal["spec_decode", "sparse_mla", "selftest"]
GraphMode = Literal["NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"]
Op = Literal["==", "<=", ">=", "<", ">"]

_STRICT = ConfigDict(extra="forbid")


def _frozen(cls: type) -> type:
    cls.__pydantic_config__ = _STRICT  # type: ignore[attr-defined]
    return dataclass(frozen=True, kw_only=True)(cls)


# --- targets and backends --------------------------------------------------------------------


@_frozen
class Devices:
    """How a container gets the target's accelerators."""

    gpus: Literal["all"] | None = None  # NVIDIA: a device request for every GPU
    paths: tuple[str, ...] = ()  # ROCm: /dev/kfd, /dev/dri
    groups: tuple[str, ...] = ()  # ROCm: video, render


@_frozen
class Detect:
    """How `ci` recognises this target on the host it runs on."""

    nvidia_compute_capability: str | None = None
    amdgpu_gfx: str | None = None
    fallback: bool = False  # the target chosen when no accelerator is found


@_frozen
class Bootstrap:
    """How to make the base offline from Debian packages where the pinned base cannot be pulled."""

    suite: str  # bookworm
    variant: Literal["apt", "minbase", "essential"] = "apt"
    include: tuple[str, ...] = ()
    mirror: str = "http://deb.debian.org/debian"


@_frozen
class Target:
    id: str
    name: str
    short: str  # the seed table's "Hardware" column
    hardware: tuple[str, ...]  # hardware names it covers, to match the seed's history
    family: Family  # containers/<family>/Dockerfile
    platform: Platform
    toolkit: str
    arch_list: tuple[str, ...]
    triton_targets: tuple[str, ...]  # "cuda:121", "hip:gfx1151": kernels baked ahead of time
    python: str
    base_image: str
    gpus: int
    devices: Devices
    queue: str
    detect: Detect
    backends: tuple[str, ...]
    quantizations: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)  # the image's runtime env: JIT refused here
    kernel_lists: tuple[str, ...] = ()  # containers/kernels/<name>: compiled ahead of time into the image
    bootstrap: Bootstrap | None = None  # offline base from Debian packages when base_image is absent
    notes: str = ""


@_frozen
class Backend:
    id: str
    layouts: tuple[Layout, ...]
    platforms: tuple[Family, ...]
    kv_cache_dtypes: tuple[str, ...]
    notes: str = ""


# --- models ----------------------------------------------------------------------------------


@_frozen
class Drafter:
    type: DrafterType
    method: str  # speculative_config["method"]
    model: str | None = None  # draft weights; None where the target model carries its own MTP layers


@_frozen
class Attention:
    layout: Layout
    proven: bool = True  # the implementation is shown to accept this model's attention representation
    note: str = ""


@_frozen
class Model:
    id: str
    name: str
    seed_name: str | None = None  # the name in the seed table, to match history rows
    weights: Literal["hub", "dummy"]
    hf: str | None = None
    config: str | None = None  # a local config directory for dummy weights (suites/models/...)
    drafter: Drafter | None = None
    attention: Attention
    quantization: str
    backends: tuple[str, ...]
    tp: int = 1  # the fewest GPUs (tensor parallel) its weights need
    notes: str = ""


# --- capability tracks -----------------------------------------------------------------------


@_frozen
class Requirements:
    """What a model must have to be eligible for a track. An absent key admits anything."""

    drafter: tuple[DrafterType, ...] | None = None
    attention: tuple[Layout, ...] | None = None
    attention_proven: bool = False
    quantization: tuple[str, ...] | None = None
    backend: tuple[str, ...] | None = None


@_frozen
class Track:
    id: str
    title: str
    suite: Suite
    requires: Requirements
    notes: str = ""


# --- imported changes ------------------------------------------------------------------------


@_frozen
class Upstream:
    repo: str
    pr: int
    title: str
    state: Literal["open", "merged", "closed"]
    as_of: dt.date
    merged_on: dt.date | None = None
    stacked_on: tuple[int, ...] = ()
    related: tuple[int, ...] = ()


@_frozen
class FollowUp:
    ref: str  # "vllm-project/vllm#52512"
    what: str
    regression_test: bool = False


@_frozen
class Fork:
    kind: Literal["port", "convergence", "pending", "selftest"]
    commits: tuple[str, ...] = ()
    tests: tuple[str, ...] = ()
    follow_ups: tuple[FollowUp, ...] = ()


@_frozen
class Combo:
    """One partial assignment of axis values (matrix include/exclude entries)."""

    context: int | None = None
    batch: int | None = None
    speculative: bool | None = None
    num_speculative_tokens: int | None = None
    tp: int | None = None
    dp: int | None = None
    ep: bool | None = None
    cudagraph_mode: GraphMode | None = None
    dcp: int | None = None
    dbo: bool | None = None
    kv_cache_dtype: str | None = None


@_frozen
class Matrix:
    """Axes are expanded as a cartesian product; `include` adds combos, `exclude` drops matches.

    An omitted `tp` takes each model's own; every other omitted axis takes its first default.
    """

    context: tuple[int, ...]
    batch: tuple[int, ...]
    speculative: tuple[bool, ...] = (True,)
    num_speculative_tokens: tuple[int, ...] = (1,)
    tp: tuple[int, ...] | None = None
    dp: tuple[int, ...] = (1,)
    ep: tuple[bool, ...] = (False,)
    cudagraph_mode: tuple[GraphMode, ...] = ("FULL_AND_PIECEWISE",)
    dcp: tuple[int, ...] = (1,)
    dbo: tuple[bool, ...] = (False,)
    kv_cache_dtype: tuple[str, ...] = ("auto",)
    include: tuple[Combo, ...] = ()
    exclude: tuple[Combo, ...] = ()


@_frozen
class Regression:
    tests: tuple[str, ...]  # pytest node ids or files that tie the change
    benchmark: str  # what is measured, in words a reviewer can check


@_frozen
class Reference:
    backend: str  # a backend id, or "row": the row's own backend in another configuration
    kv_cache_dtype: str | None = None
    variant: str = ""  # what differs from the row ("warm-up disabled", "non-speculative")


@_frozen
class Tolerance:
    metric: str
    max: float
    unit: str
    reference: Reference


@_frozen
class GraphReplay:
    metric: str
    op: Op
    value: float
    description: str


@_frozen
class AllowedRegression:
    metric: str
    better: Literal["higher", "lower"]
    max_pct: float
    description: str = ""


@_frozen
class Measurements:
    cold: tuple[str, ...]
    warm: tuple[str, ...]


@_frozen
class Acceptance:
    regression: Regression
    tolerance: Tolerance
    graph_replay: GraphReplay
    allowed_regression: AllowedRegression
    measurements: Measurements


@_frozen
class Change:
    id: str
    title: str
    track: str
    upstream: Upstream | None = None  # None only for the harness self-test, which imports nothing
    fork: Fork
    models: tuple[str, ...]
    matrix: Matrix
    acceptance: Acceptance
    notes: str = ""


# --- the seed table, kept as history ---------------------------------------------------------


@_frozen
class HistoryRow:
    model: str  # a model's seed_name
    hardware: str
    spec: str  # "-" for none
    tp: int
    dp: int
    ep: bool
    cudagraph_mode: GraphMode
    dcp: int
    dbo: bool
    kv_cache_dtype: str
    backend: str
    runs: Literal["ok", "fail", "partial", "unknown"]
    score: float | None = None
    notes: str = ""


@dataclass(frozen=True, kw_only=True)
class Stack:
    """Everything under one stack directory, cross-checked. Mappings keep file order."""

    root: Path
    targets: Mapping[str, Target]
    backends: Mapping[str, Backend]
    models: Mapping[str, Model]
    tracks: Mapping[str, Track]
    changes: Mapping[str, Change]
    history: tuple[HistoryRow, ...]
    history_source: str
