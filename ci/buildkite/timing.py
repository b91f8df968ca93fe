"""The pipeline's timing steps (`ci pipeline --fork --compare-without X`): per target holding X's rows, one step on
one agent of its queue that runs the protocol, `ci main --compare-without X --runs N --aa` (the fork and the fork
without X built there, each arm's runs interleaved, every run alone on its GPU), and annotates the build with the
report of X as ported. One agent: the arms' runs must share the host to interleave, and a second agent's GPU is
another machine's noise."""

from __future__ import annotations

from ci.buildkite.pipeline_model import BUILD_MIN, REPORT, Options, Step, ci, key
from ci.stack.model import Target
from ci.stack.plan import Plan


def steps(targets: list[Target], chosen: Plan, opts: Options) -> list[Step]:
    out = []
    for change in opts.compare_without:
        for t in targets:
            rows = chosen.select(targets=[t.id], changes=[change]).rows
            if not rows:
                continue
            folder = f"compare-{change}-{t.id}"
            run = ci(
                "main",
                *opts.stack_args(),
                "--target",
                t.id,
                *opts.fork,
                "--compare-without",
                change,
                "--runs",
                str(opts.runs),
                "--aa",
                "--rows",
                ",".join(r.id for r in rows),
                "--out",
                folder,
            )
            out.append(
                Step(
                    key=key("compare", change, t.id),
                    label=f":stopwatch: #{change} as ported on {t.id} ({opts.runs} runs a side, A/A)",
                    queue=t.queue,
                    commands=(
                        "nox -s run --install-only",
                        f"status=0; {run} || status=$?",
                        f"buildkite-agent annotate --context compare-{change}-{t.id} < {folder}/{REPORT}/report.md",
                        'exit "$status"',
                    ),
                    artifact_paths=(f"{folder}/{REPORT}/*", f"{folder}/arms/**/junit-*.xml"),
                    timeout_min=BUILD_MIN + opts.runs * 3 * 60,
                    tags=((t.gpu_tag, str(max(r.gpus for r in rows))),) if t.gpus and t.gpu_tag else (),
                )
            )
    return out
