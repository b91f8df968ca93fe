"""The pipeline's steps, made from the plan: per target a build step on its queue, per target x suite the run
steps (shards of rows, each uploading its JUnit under its own name), a wait that lets the report run whatever
failed, the report (annotating the build), and the gate.

Every command goes through the nox sessions a person runs locally, with the pinned tools that
`.buildkite/tools.sh` installs. Steps retry only where the agent was lost (exit status -1): a test failure
is a result, and a retry would hide it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

# the parts, here too: ci.buildkite.render and the tests name them through this module
from ci.buildkite import port_groups, timing
from ci.buildkite.pipeline_model import (  # noqa: F401
    ABSENT,
    AGENT_LOST,
    BUILD_MIN,
    GATE_MIN,
    REPORT,
    REPORT_MIN,
    RESULTS,
    RUN_SETUP_MIN,
    TOOLS,
    VENV_PYTHON,
    Candidate,
    Group,
    Options,
    Step,
    Wait,
    ci,
    collector,
    key,
    nox,
    results_root,
)
from ci.buildkite.verdict_steps import gate_step, report_step
from ci.common import contract, options
from ci.common.escape import command, quote
from ci.stack.model import Stack, Target
from ci.stack.plan import Plan, Row


def shards(rows: Sequence[Row], size: int) -> list[tuple[Row, ...]]:
    return [tuple(rows[i : i + size]) for i in range(0, len(rows), size)]


def open_upstream(st: Stack, rows: Sequence[Row]) -> str:
    """Why rows of these changes may fail without failing the build: their upstream PR is still open."""
    prs = [c.upstream for c in (st.changes[i] for i in dict.fromkeys(r.change for r in rows)) if c.upstream]
    return ", ".join(f"{u.repo}#{u.pr} as of {u.as_of}" for u in prs if u.state == "open")


def image_key(target: Target, without: str = "") -> str:
    """The build meta-data key (and artifact name) that holds the target's pushed image, `repo@sha256:…` (`without`:
    the image of the fork without that change)."""
    return f"stackgate-image-{target.id}" + (f"-without-{without}" if without else "")


def ablation_tag(target: Target, without: str) -> str:
    return f"stackgate/{target.id}:without-{without}"  # never :latest, which the fork's own image holds


CACHES = "caches"  # where a host target's bake step writes its artefact, and its run steps download it


def caches_key(target: Target) -> str:
    """The build meta-data key that names a host target's bake artefact (its file name: kind, key hash, content)."""
    return f"stackgate-caches-{target.id}"


def host_bake_step(target: Target, opts: Options) -> Step:
    """A bare GPU host's build step: the warm-up on its GPU into an artefact (ci bake --host), uploaded as an
    artifact and named in meta-data, for every run step of the target to install."""
    pattern = f"{CACHES}/caches-{target.id}-*.tar.gz"
    name = f"$(cd {CACHES} && ls caches-{target.id}-*.tar.gz)"  # the one artefact the bake just wrote
    commands = (
        "nox -s run --install-only",
        f"rm -rf {CACHES}",
        ci("bake", *opts.stack_args(), target.id, "--host", "--out", CACHES),
        f'buildkite-agent meta-data set {caches_key(target)} "{name}"',
    )
    label = f":package: bake {target.id} (host)"
    return Step(
        key=key("build", target.id),
        label=label,
        queue=target.queue,
        commands=commands,
        artifact_paths=(pattern,),
        timeout_min=BUILD_MIN,
    )


def build_step(target: Target, opts: Options, without: str = "", *, record_absent: bool = False) -> Step:
    """Build, verify and (on a GPU target) bake; with a registry, push the image and record it by digest. With
    `--fork`, the image holds the fork's vLLM; `without`: the fork without that change, under its own tag."""
    if target.runs_on == "host":
        return host_bake_step(target, opts)
    image = ["--image", ablation_tag(target, without)] if without else []
    fork = [*opts.fork_for(target.id), *(["--without", without, "--tag", image[1]] if without else [])]
    baked = ["--tag", f"{ablation_tag(target, without)}-baked"] if without else []
    commands = [
        nox("build", *opts.stack_args(), target.id, *fork),
        nox("verify", *opts.stack_args(), target.id, *image),
    ]
    if target.gpus:  # the warm-up on its GPUs
        commands.append(nox("bake", *opts.stack_args(), target.id, *image, *baked))
    recorded: tuple[str, ...] = ()
    if opts.registry:
        ref_file = f"{image_key(target, without)}.ref"
        pushed = ["--image", f"{ablation_tag(target, without)}{'-baked' if target.gpus else ''}"] if without else []
        commands += [
            "nox -s run --install-only",
            ci("push", *opts.stack_args(), target.id, *pushed, "--registry", opts.registry, "--digest-file", ref_file),
            f'buildkite-agent meta-data set {image_key(target, without)} "$(cat {ref_file})"',
        ]
        recorded = (ref_file,)
    if record_absent:  # the rows of changes the fork lacks, every target's: recorded as not run, never scheduled
        commands.append(ci("plan", *opts.stack_args(), *opts.fork, *opts.filters(), "--not-run", RESULTS))
        recorded += (f"{RESULTS}/{ABSENT}/*/{contract.NOT_RUN}",)
    what = f"{target.id} without #{without}" if without else target.id
    return Step(
        key=key("build", target.id, *(["without", without] if without else [])),
        label=f":docker: build {what}" + (" (fork)" if opts.fork_for(target.id) else ""),
        queue=target.queue,
        commands=tuple(commands),
        artifact_paths=recorded,
        timeout_min=BUILD_MIN,
    )


def image_commands(target: Target, opts: Options, without: str = "") -> tuple[tuple[str, ...], list[str]]:
    """A run step's commands that get what its rows run in, and the `ci run` arguments that name it. A host target:
    the bake step's artefact, downloaded and installed (--host --caches). With a registry: the image reference the
    build step recorded, pulled by digest (never built here). Without one (--one-agent): the build, a no-op where
    this agent's engine holds the current image."""
    if target.runs_on == "host":  # the artefact the bake step recorded; a key that differs is refused, naming it
        k = caches_key(target)
        get = (
            f'artefact="$(buildkite-agent meta-data get {k})" || {{ echo "the bake step recorded no artefact for '
            f'{target.id} (meta-data {k}): see its log"; exit 4; }}'
        )
        return (get, f'buildkite-agent artifact download "{CACHES}/$artefact" .'), [
            "--host",
            "--caches",
            f"{CACHES}/$artefact",
        ]
    if not opts.registry:
        if without:
            fork = [*opts.fork, "--without", without, "--tag", ablation_tag(target, without)]
            return (nox("build", *opts.stack_args(), target.id, *fork),), ["--image", ablation_tag(target, without)]
        return (nox("build", *opts.stack_args(), target.id, *opts.fork_for(target.id)),), []
    k = image_key(target, without)
    get = (
        f'ref="$(buildkite-agent meta-data get {k})" || {{ echo "the build step recorded no image for '
        f'{target.id} (meta-data {k}): see its log"; exit 4; }}'
    )
    return (get, f'{VENV_PYTHON} -m ci pull "$ref"'), ["--image", "$ref"]


def run_minutes(rows: Sequence[Row]) -> int:
    """A run step's timeout: every row at its whole per-item timeout, one after another (the most the harness lets
    them take), and the step's own setup."""
    return RUN_SETUP_MIN + math.ceil(len(rows) * options.DEFAULT_TIMEOUT_S / 60)


def run_step(
    target: Target, suite: str, shard: int, rows: Sequence[Row], *, soft_fail: str, opts: Options, without: str = ""
) -> Step:
    out = f"{results_root(without)}/{contract.results_folder(target.id, suite, shard)}"
    gpus = max((r.gpus for r in rows), default=1)
    get_image, image_args = image_commands(target, opts, without)
    run = [
        VENV_PYTHON,
        "-m",
        "ci",
        "run",
        *opts.stack_args(),
        target.id,
        suite,
        "--shard",
        str(shard),
        "--rows",
        ",".join(r.id for r in rows),
        "--out",
        out,
    ]
    side = ["without", without] if without else []
    return Step(
        key=key("run", target.id, suite, shard, *side),
        label=f":pytest: {target.id} {suite} #{shard} ({len(rows)} rows)" + (f" without #{without}" if without else ""),
        queue=target.queue,
        depends_on=(key("build", target.id, *side),),
        # `ci run` itself runs the rows, from nox's venv: its exit status (1: a row failed) reaches the agent
        commands=("nox -s run --install-only", *get_image, " ".join([command(run), *_shell_words(image_args)])),
        artifact_paths=(
            f"{out}/{contract.junit_glob(target.id, suite, shard)}",
            f"{out}/rows.json",
            f"{out}/not-run.json",
            f"{out}/logs/**/*",
        ),  # one JUnit per row where the agent schedules them
        soft_fail=soft_fail,
        timeout_min=run_minutes(rows),
        tags=((target.gpu_tag, str(gpus)),) if target.gpus and target.gpu_tag else (),
        plugins=collector(f"{out}/{contract.junit_glob(target.id, suite, shard)}") if opts.test_engine else (),
    )


def _shell_words(args: list[str]) -> list[str]:
    """Arguments for a command line, quoted; a `$name` is left for the shell to expand, in double quotes."""
    return [f'"{a}"' if "$" in a else quote(a) for a in args]


def run_steps(st: Stack, plan: Plan, target: Target, suite: str, opts: Options, without: str = "") -> list[Step]:
    """A suite's rows in shards of `size`, each of one GPU count (its job asks an agent with that many); rows of
    changes whose upstream PR is open shard apart, soft-failing."""
    rows = plan.select(targets=[target.id], suites=[suite]).rows
    size = opts.shard_size
    groups: list[tuple[tuple[Row, ...], str]] = []
    for gpus in sorted({r.gpus for r in rows}):
        same = [r for r in rows if r.gpus == gpus]
        firm = [r for r in same if not open_upstream(st, [r])]
        soft = [r for r in same if open_upstream(st, [r])]
        groups += [(g, "") for g in shards(firm, size)] + [(g, open_upstream(st, g)) for g in shards(soft, size)]
    return [
        run_step(target, suite, n, g, soft_fail=why, opts=opts, without=without) for n, (g, why) in enumerate(groups)
    ]


def steps(st: Stack, plan: Plan, opts: Options, whole: Plan | None = None) -> list[Step | Group | Wait]:
    """Every step of the pipeline, in order: builds, runs, the wait, the report, the gate. With `--fork`, `plan` is
    the rows the fork can run; each change of `--without` gets, per target holding its rows, a build of the fork
    without it and run steps of its rows on that build; each candidate of `--try-ports`, its group (`whole`: every
    planned row, those of the changes the fork lacks among them)."""
    chosen = plan.select(targets=opts.targets, suites=opts.suites, changes=opts.changes)
    targets = [t for t in st.targets.values() if any(r.target == t.id for r in chosen.rows)]
    first = targets[0].id if opts.fork and targets else ""  # its build step records the rows the fork lacks
    queue = next(t.queue for t in st.targets.values() if t.detect.fallback)  # no GPU needed to report
    out: list[Step | Group | Wait] = [build_step(t, opts, record_absent=t.id == first) for t in targets]
    for change in opts.without:
        out += [build_step(t, opts, change) for t in targets if any(r.change == change for r in chosen.rows)]
    out += timing.steps(targets, chosen, opts)
    out += port_groups.steps(st, whole or plan, opts, queue)
    for t in targets:
        for suite in sorted({r.suite for r in chosen.rows if r.target == t.id}):
            out += run_steps(st, chosen, t, suite, opts)
            for change in opts.without:
                out += run_steps(st, chosen.select(changes=[change]), t, suite, opts, change)
    return [*out, Wait(continue_on_failure=True), report_step(opts, queue), gate_step(opts, queue)]
