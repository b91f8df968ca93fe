"""The pipeline's ports tried (`ci pipeline --fork --try-ports`): for each change the fork lacks whose port is clean,
as it is or after its prerequisite chain, a group of steps, one per target holding its rows, each on one agent of the
target's queue: `ci main --try-port X --port-tip TIP --runs N --aa` makes the port there on a scratch ref (pinned: it
must end at the tip the pipeline carries, else the fork or upstream moved and nothing is built), builds the fork with
it and the fork as it is into images (by their content ids), runs X's rows on both interleaved with the A/A arm, and
annotates the build with its report (report/ uploaded). A change that does not port cleanly gets one step that says
its readiness and the fix, and fails soft (exit 2): the maintainer's to resolve, not the build's failure. The fork and
every port are carried by commit id; the candidates and their rows are counted where the pipeline is made."""

from __future__ import annotations

from ci.buildkite.pipeline_model import BUILD_MIN, REPORT, REPORT_MIN, Candidate, Group, Options, Step, ci, key
from ci.stack.model import Stack, Target
from ci.stack.plan import Plan

PORTS = ":twisted_rightwards_arrows:"


def steps(st: Stack, whole: Plan, opts: Options, queue: str) -> list[Step | Group]:
    """Each candidate's group (or its readiness step, on `queue`: no GPU needed to say it), in the stack's order."""
    gpus = {r.id: r.gpus for r in whole.rows}
    out: list[Step | Group] = []
    for c in opts.candidates:
        held = [(st.targets[t], ids) for t, ids in c.rows]
        if c.tip:
            tries = tuple(_try(c, t, ids, max(gpus.get(i, 1) for i in ids), opts) for t, ids in held)
            label = f"{PORTS} #{c.change} tried as a port ({c.said}; tip {c.tip[:12]})"
            out.append(Group(key=key("try-port", c.change), label=label, steps=tries))
        elif held:
            out.append(_readiness(c, held[0][0], opts, queue))
    return out


def _try(c: Candidate, t: Target, ids: tuple[str, ...], gpus: int, opts: Options) -> Step:
    folder = f"try-port-{c.change}-{t.id}"
    run = ci(
        "main",
        *opts.stack_args(),
        "--target",
        t.id,
        *opts.fork,
        "--try-port",
        c.change,
        "--port-tip",
        c.tip,
        "--runs",
        str(opts.runs),
        "--aa",
        "--rows",
        ",".join(ids),
        "--out",
        folder,
    )
    return Step(
        key=key("try-port", c.change, t.id),
        label=f"{PORTS} #{c.change} on {t.id} ({len(ids)} rows; {opts.runs} runs a side, A/A)",
        queue=t.queue,
        commands=(
            "nox -s run --install-only",
            f"status=0; {run} || status=$?",
            f"if [ -f {folder}/{REPORT}/report.md ]; then buildkite-agent annotate --context {folder} "
            f"< {folder}/{REPORT}/report.md; fi",
            'exit "$status"',
        ),
        artifact_paths=(f"{folder}/{REPORT}/*", f"{folder}/arms/**/junit-*.xml"),
        timeout_min=2 * BUILD_MIN + opts.runs * 3 * 60,  # two builds: the fork with the port, the fork as it is
        tags=((t.gpu_tag, str(gpus)),) if t.gpus and t.gpu_tag else (),
    )


def _readiness(c: Candidate, t: Target, opts: Options, queue: str) -> Step:
    """One step: `ci main --try-port X` stops before anything is built (exit 2) saying why X does not port and the
    fix; the build annotated with it, the step failing soft."""
    said = f"try-port-{c.change}.txt"
    run = ci("main", *opts.stack_args(), "--target", t.id, *opts.fork, "--try-port", c.change)
    note = f"#{c.change} is not tried as a port: it does not port cleanly onto the fork ({c.said})"
    return Step(
        key=key("try-port", c.change),
        label=f":no_entry_sign: #{c.change} not tried: it does not port cleanly",
        queue=queue,
        commands=(
            "nox -s run --install-only",
            f"status=0; {run} > {said} 2>&1 || status=$?",
            f"cat {said}",
            f"{{ echo '**#{c.change} is not tried as a port**'; echo; echo '```'; cat {said}; echo '```'; }} | "
            f"buildkite-agent annotate --style warning --context try-port-{c.change}",
            'exit "$status"',
        ),
        artifact_paths=(said,),
        soft_fail=note,
        soft_status=2,
        timeout_min=REPORT_MIN,
    )
