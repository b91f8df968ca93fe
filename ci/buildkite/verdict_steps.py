"""The steps after the wait: the report (the build's annotation; the history pulled from the last builds of the branch,
this build added, and uploaded again) and the gate on its verdicts."""

from __future__ import annotations

from pathlib import Path

from ci.buildkite.pipeline_model import (
    ABSENT,
    GATE_MIN,
    HISTORY,
    REPORT,
    REPORT_MIN,
    RESULTS,
    Options,
    Step,
    ci,
    results_root,
)
from ci.common import contract


def report_step(opts: Options, queue: str) -> Step:
    report = ["report", *opts.stack_args(), RESULTS, "--out", REPORT, "--history", HISTORY, *opts.filters()]
    report += ["--baseline", opts.baseline] if opts.baseline else []
    for change in opts.without:  # each change as ported: the fork against the fork without it
        report += ["--compare", results_root(change)]
    if opts.without:
        report += ["--label", "fork", *(a for c in opts.without for a in ("--label", f"without-{c}"))]
    downloads = [
        f'buildkite-agent artifact download "{root}/*/{what}" . || echo "no {what} was uploaded to {root}/"'
        for root in (RESULTS, *map(results_root, opts.without))
        for what in ("junit-*.xml", "rows.json")
    ]
    if opts.fork:
        where = f"{RESULTS}/{ABSENT}/*/{contract.NOT_RUN}"
        downloads.append(f'buildkite-agent artifact download "{where}" . || echo "no row was set apart as absent"')
    json_path = f"{REPORT}/report.json"
    return Step(
        key="report",
        label=":bar_chart: acceptance report",
        queue=queue,
        commands=(
            f"mkdir -p {' '.join((RESULTS, *map(results_root, opts.without)))}",
            *downloads,
            "nox -s run --install-only",
            # the last builds' histories of this branch, joined (none where no API token is set: it starts here)
            f"mkdir -p {Path(HISTORY).parent}",
            ci("history", "pull", HISTORY),
            # a failing row fails the report (exit 1; 5, 7 as the README says) after the annotation is made
            f"status=0; {ci(*report)} || status=$?",
            f"style=$({ci('gate', *opts.stack_args(), json_path, '--style')} || echo error)",
            f'buildkite-agent annotate --context acceptance --style "$style" < {REPORT}/report.md',
            'exit "$status"',
        ),
        artifact_paths=(*(f"{REPORT}/{name}" for name in ("report.md", "report.html", "report.json")), HISTORY),
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
