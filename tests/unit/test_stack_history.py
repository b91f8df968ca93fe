"""The upstream facts the change files record agree with each other: a merged PR names its merge commit and date, no
date lies after the day it was recorded, follow-ups come after what they follow, a stacked change after its base.
(Checked against the real history: neuralmagic/vllm, Hg-Spark/vllm, drakosha/vllm; the ids are its.)"""

from __future__ import annotations

from ci.stack import loader

STACK = loader.load()
UPSTREAM = {c.id: c.upstream for c in STACK.changes.values() if c.upstream}


def test_every_merged_change_records_its_merge_commit_and_date_and_no_date_is_after_it_was_recorded() -> None:
    merged = {k: u for k, u in UPSTREAM.items() if u.state == "merged"}
    assert merged, "the stack tracks merged changes"
    for change, up in merged.items():
        assert up.merge_commit and up.merged_on, change
        assert up.merged_on <= up.as_of, change
        assert up.patch_id and up.file_ids, f"{change}: the merge's patch-id and file patch-ids are recorded"
    for change, up in UPSTREAM.items():
        if up.state != "merged":
            assert not up.merge_commit and not up.merged_on and not up.patch_id, change
    commits = [u.merge_commit for u in merged.values()]
    assert len(set(commits)) == len(commits)


def test_follow_ups_are_merged_after_the_change_they_follow() -> None:
    for change in STACK.changes.values():
        up = change.upstream
        for f in up.follow_ups if up else ():
            assert bool(f.merge_commit) == bool(f.merged_on), f.ref
            if f.merged_on and up and up.merged_on:
                assert f.merged_on >= up.merged_on, f"{change.id}: {f.ref} before the change it follows"
                assert f.merged_on <= up.as_of, f.ref


def test_a_stacked_change_is_merged_after_its_tracked_base() -> None:
    by_pr = {u.pr: u for u in UPSTREAM.values()}
    for change, up in UPSTREAM.items():
        for pr in up.stacked_on:
            base = by_pr.get(pr)
            if base and base.merged_on and up.merged_on:
                assert base.merged_on <= up.merged_on, f"{change} merged before #{pr}, which it is stacked on"


def test_the_recorded_facts_of_the_four_merged_changes() -> None:
    got = {k: (u.merge_commit, str(u.merged_on)) for k, u in UPSTREAM.items() if u.state == "merged"}
    assert got == {"46514": ("63ff748f657a", "2026-08-19"), "46849": ("a311916a291c", "2026-08-11"),
                   "48407": ("ba702e978e3b", "2026-07-28"), "49903": ("0d0504b54c73", "2026-07-28")}  # fmt: skip
    follow = {f.ref: (f.merge_commit, str(f.merged_on)) for f in STACK.changes["48407"].upstream.follow_ups}
    assert follow == {"vllm-project/vllm#51298": ("4a11ed5bc4", "2026-08-07"),
                      "vllm-project/vllm#52512": ("01e56caaf2", "2026-08-18")}  # fmt: skip


def test_a_proven_regression_test_names_both_builds_and_evidence_that_exists() -> None:
    """#52512's guard is #48407's regression test: the stack names the build it failed on, the build it passed on
    and the campaign that shows both; the report's change heading says so."""
    from ci.common import options
    from ci.report.view import change_heading
    from ci.results.acceptance import Verdict

    (guard,) = [f for f in STACK.changes["48407"].upstream.follow_ups if f.regression_test]
    assert guard.proven is not None and guard.proven.fails_on != guard.proven.passes_on
    assert (options.REPO / guard.proven.evidence / "README.md").is_file()
    verdict = Verdict(change=STACK.changes["48407"], criteria=())
    assert f"regression test {guard.ref}" in change_heading(verdict)[1]
    assert f"fails on vLLM {guard.proven.fails_on}" in change_heading(verdict)[1]
