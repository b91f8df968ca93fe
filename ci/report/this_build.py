"""What a report's build is, as its history records it (`ci.history.record`): the build (its key, when its rows ran,
its branch, the fork commit, the images, Buildkite's number where it ran there), each row's run and each criterion's
verdict per change and target. Made from the results alone, so that the report can set this build beside the earlier
ones before it is written, and the same results make the same build."""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime

from ci.history.record import STATUSES, Build, Judged, Run, Seen
from ci.results.acceptance import Verdict
from ci.results.junit import Case
from ci.results.merge import Results, RowResult
from ci.stack.model import Stack

_HEX = set("0123456789abcdef")


def fork_of(case: Case) -> tuple[str, str]:
    """(ref, commit) of the fork build a case ran (`stackgate.fork`: "<name> <ref> <commit>"), ("", "") where none."""
    words = (case.fork or "").split()
    if len(words) < 3 or not set(words[-1]) <= _HEX:
        return "", ""
    return words[1], words[-1]


def commit_of(r: RowResult) -> str:
    """The build a row ran: its fork commit, else "vllm <build>" (the stock vLLM it ran, by content where recorded)."""
    for c in r.cases:
        if commit := fork_of(c)[1]:
            return commit
    vllm = next((c.vllm_build or c.vllm_version for c in r.cases if c.vllm_build or c.vllm_version), "")
    return f"vllm {vllm}" if vllm else ""


def runs(results: Results) -> tuple[Run, ...]:
    """Each row that has a result, as a run (a row not run has none)."""
    out = []
    for r in results.rows:
        if r.status not in STATUSES:
            continue
        image = next((c.image_digest for c in r.cases if c.image_digest), "")
        metrics = tuple((m.name, float(m.value), m.unit) for m in r.metrics.values())
        out.append(
            Run(
                row=r.id,
                change=r.change,
                target=r.target,
                status=r.status,
                image=image,
                commit=commit_of(r),
                metrics=metrics,
            )
        )
    return tuple(out)


def key(results: Results) -> str:
    """The build's key: Buildkite's build id where it ran there; else a digest of what its results hold (each
    testcase's row, test, status, time, image and vLLM, and when each suite ran), the same wherever they are read."""
    if bk := os.environ.get("BUILDKITE_BUILD_ID"):
        return f"buildkite:{bk}"
    h = hashlib.sha256()
    cases = sorted(
        f"{c.row}\t{c.classname}::{c.name}\t{c.status}\t{c.time}\t{c.image_digest}\t{c.vllm_build}\t{c.fork}"
        for r in results.rows
        for c in r.cases
    )
    stamps = sorted(s.timestamp for f in results.inputs for s in f.scopes)
    for part in (*cases, "", *stamps):
        h.update(part.encode("utf-8", "surrogateescape") + b"\n")
    return f"results:{h.hexdigest()}"


def when(results: Results) -> datetime:
    """When its rows ran: the newest suite timestamp (UTC where it says no zone), else now."""
    found = []
    for f in results.inputs:
        for s in f.scopes:
            try:
                at = datetime.fromisoformat(s.timestamp)
            except ValueError:
                continue
            found.append(at if at.tzinfo else at.replace(tzinfo=UTC))
    return max(found).astimezone(UTC) if found else datetime.now(UTC)


def branch(results: Results) -> str:
    """$BUILDKITE_BRANCH, else the fork ref most of its rows ran, else ""."""
    if bk := os.environ.get("BUILDKITE_BRANCH"):
        return bk
    refs = Counter(ref for r in results.rows for c in r.cases if (ref := fork_of(c)[0]))
    return refs.most_common(1)[0][0] if refs else ""


def build(stack: Stack, results: Results, verdicts: Sequence[Verdict], criterion_ids: dict[str, str]) -> Build:
    """The build a report of `results` records."""
    cases = [c for r in results.rows for c in r.cases]
    commits = Counter(commit for c in cases if (commit := fork_of(c)[1]))
    number = os.environ.get("BUILDKITE_BUILD_NUMBER", "")
    return Build(
        key=key(results),
        at=when(results),
        branch=branch(results),
        commit=commits.most_common(1)[0][0] if commits else "",
        stack=stack.digest,
        vllm=tuple(sorted({v for c in cases if (v := c.vllm_build or c.vllm_version)})),
        images=tuple(sorted({(r.target, c.image_digest) for r in results.rows for c in r.cases if c.image_digest})),
        number=int(number) if number.isdigit() else None,
        url=os.environ.get("BUILDKITE_BUILD_URL", ""),
        runs=runs(results),
        verdicts=judged(verdicts, criterion_ids),
    )


def judged(verdicts: Sequence[Verdict], criterion_ids: dict[str, str]) -> tuple[Judged, ...]:
    """Each criterion's verdict on each change, per target where it was judged per target, else as a whole ("")."""
    return tuple(
        Judged(change=v.change.id, target=target, criterion=criterion_ids.get(c.name, c.name), status=status)
        for v in verdicts
        for c in v.criteria
        for target, status in (c.by_target or (("", c.status),))
    )


def seen(b: Build) -> dict[str, Seen]:
    """Each run of `b` as the rules read it, as this build (build 0: not yet written)."""
    return {
        r.row: Seen(
            build=0,
            number=b.number,
            at=b.at,
            branch=b.branch,
            status=r.status,
            image=r.image,
            commit=r.commit,
            metrics=tuple((n, v) for n, v, _ in r.metrics),
        )
        for r in b.runs
    }
