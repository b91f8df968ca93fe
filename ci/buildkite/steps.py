"""The pipeline's steps, made from the plan: per target a build step on its queue, per target x suite the run
steps (shards of rows, each uploading its JUnit under its own name), a wait that lets the report run whatever
failed, the report (annotating the build), and the gate.

Every command goes through the nox sessions a person runs locally, with the pinned tools that
`.buildkite/tools.sh` installs. Steps retry only where the agent was lost (exit status -1): a test failure
is a result, and a retry would hide it.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence

from ci import contract, options

# the parts, here too: ci.buildkite.render and the tests name them through this module
from ci.buildkite.step import (  # noqa: F401
    AGENT_LOST,
    BUILD_MIN,
    GATE_MIN,
    REPORT,
    REPORT_MIN,
    RESULTS,
    RUN_SETUP_MIN,
    TOOLS,
    VENV_PYTHON,
    Options,
    Step,
    Wait,
    ci,
    key,
    nox,
)
from ci.stack.model import Stack, Target
from ci.stack.plan import Plan, Row


def shards(rows: Sequence[Row], size: int) -> list[tuple[Row, ...]]:
    return [tuple(rows[i : i + size]) for i in range(0, len(rows), size)]


def open_upstream(st: Stack, rows: Sequence[Row]) -> str:
    """Why rows of these changes may fail without failing the build: their upstream PR is still open."""
    prs = [c.upstream for c in (st.changes[i] for i in dict.fromkeys(r.change for r in rows)) if c.upstream]
    return ", ".join(f"{u.repo}#{u.pr} as of {u.as_of}" for u in prs if u.state == "open")


def image_key(target: Target) -> str:
    """The build meta-data key (and artifact name) that holds the target's pushed image, `repo@sha256:…`."""
    return f"stackgate-image-{target.id}"


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


def build_step(target: Target, opts: Options) -> Step:
    """Build, verify and (on a GPU target) bake; with a registry, push the image and record it by digest."""
    if target.runs_on == "host":
        return host_bake_step(target, opts)
    verbs = ("build", "verify", "bake") if target.gpus else ("build", "verify")  # bake: the warm-up on its GPUs
    commands = [nox(v, *opts.stack_args(), target.id) for v in verbs]
    recorded: tuple[str, ...] = ()
    if opts.registry:
        ref_file = f"{image_key(target)}.ref"
        commands += [
            "nox -s run --install-only",
            ci("push", *opts.stack_args(), target.id, "--registry", opts.registry, "--digest-file", ref_file),
            f'buildkite-agent meta-data set {image_key(target)} "$(cat {ref_file})"',
        ]
        recorded = (ref_file,)
    return Step(
        key=key("build", target.id),
        label=f":docker: build {target.id}",
        queue=target.queue,
        commands=tuple(commands),
        artifact_paths=recorded,
        timeout_min=BUILD_MIN,
    )


def image_commands(target: Target, opts: Options) -> tuple[tuple[str, ...], list[str]]:
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
        return (nox("build", *opts.stack_args(), target.id),), []
    k = image_key(target)
    get = (
        f'ref="$(buildkite-agent meta-data get {k})" || {{ echo "the build step recorded no image for '
        f'{target.id} (meta-data {k}): see its log"; exit 4; }}'
    )
    return (get, f'{VENV_PYTHON} -m ci pull "$ref"'), ["--image", "$ref"]


def run_minutes(rows: Sequence[Row]) -> int:
    """A run step's timeout: every row at its whole per-item timeout, one after another (the most the harness lets
    them take), and the step's own setup."""
    return RUN_SETUP_MIN + math.ceil(len(rows) * options.DEFAULT_TIMEOUT_S / 60)


def run_step(target: Target, suite: str, shard: int, rows: Sequence[Row], *, soft_fail: str, opts: Options) -> Step:
    out = f"{RESULTS}/{contract.results_folder(target.id, suite, shard)}"
    gpus = max((r.gpus for r in rows), default=1)
    get_image, image_args = image_commands(target, opts)
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
    return Step(
        key=key("run", target.id, suite, shard),
        label=f":pytest: {target.id} {suite} #{shard} ({len(rows)} rows)",
        queue=target.queue,
        depends_on=(key("build", target.id),),
        # `ci run` itself runs the rows, from nox's venv: its exit status (1: a row failed) reaches the agent
        commands=("nox -s run --install-only", *get_image, " ".join([shlex.join(run), *_shell_words(image_args)])),
        artifact_paths=(
            f"{out}/{contract.junit_glob(target.id, suite, shard)}",
            f"{out}/rows.json",
            f"{out}/not-run.json",
            f"{out}/logs/**/*",
        ),  # one JUnit per row where the agent schedules them
        soft_fail=soft_fail,
        timeout_min=run_minutes(rows),
        tags=((target.gpu_tag, str(gpus)),) if target.gpus and target.gpu_tag else (),
    )


def _shell_words(args: list[str]) -> list[str]:
    """Arguments for a command line, quoted; a `$name` is left for the shell to expand, in double quotes."""
    return [f'"{a}"' if "$" in a else shlex.quote(a) for a in args]


def run_steps(st: Stack, plan: Plan, target: Target, suite: str, opts: Options) -> list[Step]:
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
    return [run_step(target, suite, n, g, soft_fail=why, opts=opts) for n, (g, why) in enumerate(groups)]


def report_step(opts: Options, queue: str) -> Step:
    report = ["report", *opts.stack_args(), RESULTS, "--out", REPORT, *opts.filters()]
    report += ["--baseline", opts.baseline] if opts.baseline else []
    json_path = f"{REPORT}/report.json"
    return Step(
        key="report",
        label=":bar_chart: acceptance report",
        queue=queue,
        commands=(
            f"mkdir -p {RESULTS}",
            f'buildkite-agent artifact download "{RESULTS}/*/junit-*.xml" . || echo "no JUnit was uploaded"',
            f'buildkite-agent artifact download "{RESULTS}/*/rows.json" . || echo "no rows.json was uploaded"',
            "nox -s run --install-only",
            # a failing row fails the report (exit 1; 5, 7 as the README says) after the annotation is made
            f"status=0; {ci(*report)} || status=$?",
            f"style=$({ci('gate', *opts.stack_args(), json_path, '--style')} || echo error)",
            f'buildkite-agent annotate --context acceptance --style "$style" < {REPORT}/report.md',
            'exit "$status"',
        ),
        artifact_paths=tuple(f"{REPORT}/{name}" for name in ("report.md", "report.html", "report.json")),
        timeout_min=REPORT_MIN,
    )


def gate_step(opts: Options, queue: str) -> Step:
    json_path = f"{REPORT}/report.json"
    return Step(
        key="gate",
        label=":vertical_traffic_light: gate: gating changes ready",
        queue=queue,
        depends_on=("report",),
        timeout_min=GATE_MIN,
        commands=(
            f"buildkite-agent artifact download {json_path} .",
            "nox -s run --install-only",
            ci("gate", *opts.stack_args(), json_path),
        ),
    )


def steps(st: Stack, plan: Plan, opts: Options) -> list[Step | Wait]:
    """Every step of the pipeline, in order: builds, runs, the wait, the report, the gate."""
    chosen = plan.select(targets=opts.targets, suites=opts.suites, changes=opts.changes)
    targets = [t for t in st.targets.values() if any(r.target == t.id for r in chosen.rows)]
    out: list[Step | Wait] = [build_step(t, opts) for t in targets]
    for t in targets:
        for suite in sorted({r.suite for r in chosen.rows if r.target == t.id}):
            out += run_steps(st, chosen, t, suite, opts)
    queue = next(t.queue for t in st.targets.values() if t.detect.fallback)  # no GPU needed to report
    return [*out, Wait(continue_on_failure=True), report_step(opts, queue), gate_step(opts, queue)]
