"""The pipeline as the YAML `buildkite-agent pipeline upload` reads, split into uploads of at most 500 jobs.

Buildkite interpolates `$NAME` in a pipeline when it is uploaded; every `$` here is meant for the step's
shell at run time, so each is written `$$`. Buildkite refuses an upload of more than 500 jobs: a longer
pipeline is cut into parts, each ending in a step that uploads the next (`--part N`); the wait, the report
and the gate come in the last part, after every run step of every part.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from ci.buildkite.steps import TOOLS, Group, Options, Step, Wait, key, nox
from ci.common.errors import UsageError
from ci.common.escape import command, one_line, redacted
from ci.common.tables import counted

MAX_JOBS = 500  # per upload: Buildkite rejects more ("exceeds your organization limit of 500")


def escape(value: Any) -> Any:
    """Every string with `$` written `$$`, so Buildkite leaves it to the step's shell."""
    if isinstance(value, str):
        return value.replace("$", "$$")
    if isinstance(value, dict):
        return {k: escape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [escape(v) for v in value]
    return value


def jobs(item: Step | Group | Wait) -> int:
    """The jobs an item of the pipeline makes: a step one, a group one per step, a wait none."""
    return 1 if isinstance(item, Step) else len(item.steps) if isinstance(item, Group) else 0


def parts(steps: Sequence[Step | Group | Wait], max_jobs: int = MAX_JOBS) -> list[list[Step | Group | Wait]]:
    """The steps cut into uploads: each non-final part leaves one job for the step that uploads the next one, and
    the final part holds the wait and everything after it whole (a group is never cut)."""
    cut = max(i for i, s in enumerate(steps) if isinstance(s, Wait))
    head, tail = list(steps[:cut]), list(steps[cut:])
    tail_jobs = sum(jobs(s) for s in tail)
    out: list[list[Step | Group | Wait]] = []
    while sum(jobs(s) for s in head) + tail_jobs > max_jobs:
        taken, n = 0, 0
        while n < len(head) and taken + jobs(head[n]) <= max_jobs - 1:
            taken += jobs(head[n])
            n += 1
        out.append(head[:n])
        head = head[n:]
    return [*out, head + tail]


def uploader(opts: Options, part: int, total: int, queue: str) -> Step:
    args = ["pipeline", *opts.argv(), "--part", str(part)]
    return Step(
        key=key("pipeline-part", part),
        label=f":pipeline: upload part {part} of {total}",
        queue=queue,
        commands=(f"set -o pipefail && {nox(*args)} | buildkite-agent pipeline upload",),
    )


def render(
    steps: Sequence[Step | Group | Wait],
    opts: Options,
    part: int,
    queue: str,
    *,
    max_jobs: int = MAX_JOBS,
    notes: Sequence[str] = (),
) -> str:
    """Part `part` (1-based) of the pipeline as YAML text, comments saying what it holds (and `notes`) and why a step
    soft-fails."""
    cut = parts(steps, max_jobs)
    if not 1 <= part <= len(cut):
        raise UsageError(f"--part {part}: this pipeline has {counted(len(cut), 'part')}", hint="give --part 1 to 1")
    chosen: list[Step | Group | Wait] = list(cut[part - 1])
    if part < len(cut):
        chosen.append(uploader(opts, part + 1, len(cut), queue))
    count = sum(jobs(s) for s in chosen)
    lines = [
        comment(f"Generated from the stack by: python -m ci pipeline {command(opts.argv())}")
        + (f" --part {part}" if part > 1 else ""),
        f"# Part {part} of {len(cut)}: {count} jobs (Buildkite takes at most {max_jobs} per upload).",
        f"# Each step starts with `{TOOLS}` (the pinned nox and uv); every $ is written $$ so that the step's",
        "# shell, not the upload, expands it. Steps retry only where the agent was lost (exit status -1).",
        "steps:",
    ]
    lines[2:2] = [comment(note) for note in notes]  # e.g. the ports tried, counted before anything runs
    for step in chosen:
        if isinstance(step, Step) and step.soft_fail and step.soft_status != 1:
            lines.append("  " + comment(f"soft_fail (exit {step.soft_status}): {step.soft_fail}"))
        elif isinstance(step, Step) and step.soft_fail:
            lines.append(
                "  " + comment(f"soft_fail: the upstream PR of these rows' change is still open ({step.soft_fail}):")
            )
            lines.append("  # their test failures (exit 1) are reported without failing the build")
        if isinstance(step, Wait):
            lines.append("  # the report runs whatever failed above: failing rows are what it reports")
        lines += _item(escape(step.to_yaml()))
    return redacted("\n".join(lines) + "\n")


def comment(text: str) -> str:
    """A YAML comment of one line, whatever `text` holds: YAML ends a comment at U+0085, U+2028 and U+2029 as at a
    newline, and what follows would be a key of the pipeline (an `env:` with LD_PRELOAD, say)."""
    return "# " + one_line(text)


def _item(data: dict[str, Any]) -> list[str]:
    text = yaml.safe_dump(data, sort_keys=False, width=2**31 - 1, default_flow_style=False)
    body = text.rstrip("\n").split("\n")
    return ["  - " + body[0], *("    " + line for line in body[1:])]
