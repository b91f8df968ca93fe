"""The typed model of the stack: what the fork must prove, where, and how it is judged.

Every class is a frozen, keyword-only dataclass. `ci.stack.loader` fills them from `stack/*.yaml` once;
nothing past the loader passes dicts around. An imported change's own model is in `ci.stack.change`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ci.stack.change import Change
from ci.stack.flaky import Flaky
from ci.stack.schema import (
    CommitId,
    Count,
    DrafterType,
    Family,
    Gib,
    GitRef,
    GraphMode,
    Layout,
    PatchId,
    Platform,
    Positive,
    frozen,
)

# --- targets and backends --------------------------------------------------------------------


@frozen
class Devices:
    """How a container gets the target's accelerators."""

    gpus: Literal["all"] | None = None  # NVIDIA: a device request for every GPU
    paths: tuple[str, ...] = ()  # ROCm: /dev/kfd, /dev/dri
    groups: tuple[str, ...] = ()  # ROCm: video, render


@frozen
class Detect:
    """How `ci` recognises this target on the host it runs on."""

    nvidia_compute_capability: str | None = None
    amdgpu_gfx: str | None = None
    fallback: bool = False  # the target chosen when no accelerator is found


@frozen
class Bootstrap:
    """How to make the base offline from Debian packages where the pinned base cannot be pulled."""

    suite: str  # bookworm
    variant: Literal["apt", "minbase", "essential"] = "apt"
    include: tuple[str, ...] = ()
    mirror: str = "http://deb.debian.org/debian"


@frozen
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
    gpus: Count  # 0 for the cpu target
    devices: Devices
    queue: str
    detect: Detect
    backends: tuple[str, ...]
    quantizations: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)  # the image's runtime env: JIT refused here
    kernel_lists: tuple[str, ...] = ()  # containers/kernels/<name>: compiled ahead of time into the image
    bootstrap: Bootstrap | None = None  # offline base from Debian packages when base_image is absent
    package_indexes: tuple[str, ...] = ()  # extra indexes `ci lock` resolves the lock against
    session: str | None = None  # nox session prefix: <session>_<suite> (default: the id, "-" as "_")
    session_aliases: tuple[str, ...] = ()  # further prefixes for the same sessions
    required: bool = False  # named by the tracking issue: every change must cover it, or say why not
    # shared objects whose device code need not include this arch, each with the reason (ci verify shows it)
    sass_exempt: dict[str, str] = field(default_factory=dict)
    gpu_tag: str = "gpus"  # the Buildkite agent tag a run step asks for its rows' GPU count with: gpus=2
    # "host": its agents are bare GPU hosts (no docker): the pipeline bakes a caches artefact there (ci bake --host)
    # and its run steps install it and run on the host (ci run --host --caches)
    runs_on: Literal["image", "host"] = "image"
    notes: str = ""

    @property
    def sessions(self) -> tuple[str, ...]:
        """The nox session prefixes of this target, the primary one first."""
        return (self.session or self.id.replace("-", "_"), *self.session_aliases)

    @property
    def a_short(self) -> str:
        """The short name with its article, as its first letter is said: "an H200", "a GB10", "a Strix Halo"."""
        first = self.short.split()[0] if self.short.split() else "?"
        spelled = first.isupper() or any(ch.isdigit() for ch in first)  # H200, GB10, CPU: said letter by letter
        return ("an " if first[:1].upper() in ("AEFHILMNORSX" if spelled else "AEIOU") else "a ") + self.short


@frozen
class Backend:
    id: str
    layouts: tuple[Layout, ...]
    platforms: tuple[Family, ...]
    kv_cache_dtypes: tuple[str, ...]
    notes: str = ""


# --- models ----------------------------------------------------------------------------------


@frozen
class Drafter:
    type: DrafterType
    method: str  # speculative_config["method"]
    model: str | None = None  # draft weights; None where the target model carries its own MTP layers


@frozen
class Attention:
    layout: Layout
    proven: bool = True  # the implementation is shown to accept this model's attention representation
    note: str = ""


@frozen
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
    tp: Positive = 1  # the fewest GPUs (tensor parallel) its weights need
    # Random weights: the fixed KV-cache budget of its rows' engines (GiB), the same on every device, sized to hold
    # its largest row's batch x context (the harness checks vLLM's count of KV tokens against each engine's need);
    # what the scheduler packs a device by (ci.run.schedule.packing). Hub weights take a share of the device instead.
    kv_cache_gib: Gib = 12.0
    # The KV-cache dtypes vLLM accepts for this model, its default first (None: whatever the backend accepts);
    # a row planned with "auto" takes the first where "auto" is not among them
    kv_cache_dtypes: tuple[str, ...] | None = None
    # Runtime switches this model's rows set over the target's env (each row is its own process), for what its
    # checkpoint format needs: each with a comment in models.yaml saying why
    env: dict[str, str] = field(default_factory=dict)
    notes: str = ""
    # The real model whose architecture this one shrinks (random weights): its traits, and so its eligibility,
    # are that model's, copied by the loader (ci.stack.shrunk); a models.yaml entry never sets it by hand.
    shrunk_of: str | None = None


# --- capability tracks -----------------------------------------------------------------------


@frozen
class Requirements:
    """What a model must have to be eligible for a track. An absent key admits anything."""

    drafter: tuple[DrafterType, ...] | None = None
    attention: tuple[Layout, ...] | None = None
    attention_proven: bool = False
    quantization: tuple[str, ...] | None = None
    backend: tuple[str, ...] | None = None


@frozen
class Track:
    id: str
    title: str
    suite: str  # a folder of suites/: the suites are the ones the tracks name
    requires: Requirements
    notes: str = ""


# --- the seed table, kept as history ---------------------------------------------------------


@frozen
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


# --- the fork under test --------------------------------------------------------------------


@frozen
class ForkBase:
    """The upstream release whose wheel gives the fork's compiled parts; the fork's Python is laid over it."""

    version: str  # the vLLM release (its wheel is the lock's, or the host's installed one)
    ref: GitRef  # the ref in the fork's checkout that holds that release's tree: the overlay is base..ref
    commit: CommitId | None = None  # upstream's release commit, as the wheel's vllm/_version.py names it


@frozen
class Carried:
    """What this fork is recorded to carry of one change (`ci fork --record`): the fork commits that make it,
    prerequisites and fixes included, and each one's patch-id, so that a rebase that replaced the commits still
    finds their patches. A change found in the fork's history needs no entry; one the fork lacks, none either."""

    commits: tuple[CommitId, ...]
    patch_ids: dict[CommitId, PatchId] = field(default_factory=dict)


@frozen
class ForkSource:
    """stack/fork.yaml: one fork, its checkout (a path relative to the stack folder; --fork or $STACKGATE_FORK name
    another), the ref judged and its base; what it carries is found in its history, `carries` records the rest."""

    name: str
    checkout: str
    ref: GitRef
    # the fork's public repository (https://github.com/OWNER/vllm): another clone whose remote is this URL, or whose
    # remote is `checkout` itself, is this fork too, and its records apply there
    url: str | None = None
    # where left out, found from history: the release line where ref left upstream's main (ci.upstream.release)
    base: ForkBase | None = None
    # upstream's main in the checkout: a remote's name (its main) or a ref; where left out, $STACKGATE_UPSTREAM_REF,
    # else the main branch of the remote whose URL ends in vllm-project/vllm
    upstream: GitRef | None = None
    carries: dict[str, Carried] = field(default_factory=dict)
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
    flaky: Flaky  # stack/flaky.yaml: how a row is judged across builds (ci.history)
    fork: ForkSource | None = None  # stack/fork.yaml; None: the images hold a stock vLLM release
    digest: str = ""  # sha256 over every file read: results carry it, and a report flags another stack's
