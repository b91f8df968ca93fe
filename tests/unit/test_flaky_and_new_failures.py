"""The rules a row is judged by across builds (ci/history/flaky_rules.py, with stack/flaky.yaml's numbers): quarantined
as flaky at the rule's boundaries (runs, fail-rate band, window, one build's ids) and reinstated after its passes in a
row; a failure new, new and unconfirmed, or confirmed on enough distinct commits; the bisect range; the trends."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from ci.history import flaky_rules, trends
from ci.history.record import Seen
from ci.stack import loader
from ci.stack.flaky import Quarantine

AT = datetime(2026, 12, 20, 3, 0, tzinfo=UTC)
RULE = loader.load().flaky.quarantine  # the stack's own numbers
IMAGE = "sha256:" + "1" * 64


def runs(outcomes: str, *, commit: str = "aaaaaaa1", step: timedelta = timedelta(hours=6), **kw) -> list[Seen]:
    """One run per letter, oldest first, the last at AT: p pass, f failure, c conflict, s skipped."""
    status = {"p": "pass", "f": "failure", "c": "conflict", "s": "skipped", "e": "error"}
    n = len(outcomes)
    return [
        Seen(
            build=i + 1,
            number=None,
            at=AT - step * (n - 1 - i),
            branch="main",
            status=status[o],
            image=kw.get("image", IMAGE),
            commit=commit,
        )
        for i, o in enumerate(outcomes)
    ]


def test_the_stack_states_vllm_cis_rule() -> None:
    assert Quarantine(window_days=7, min_runs=5, fail_rate=(0.1, 0.9), reinstate_after=5, gate="hold") == RULE
    assert loader.load().flaky.confirm_on_commits == 2


@pytest.mark.parametrize(("outcomes", "quarantined"), [("pfpf", False), ("pfpfp", True)], ids=["4-runs", "5-runs"])
def test_quarantine_needs_the_least_number_of_runs(outcomes: str, quarantined: bool) -> None:
    assert flaky_rules.flakiness(runs(outcomes), AT, RULE).quarantined is quarantined


@pytest.mark.parametrize(
    ("outcomes", "quarantined", "rate"),
    [
        ("pppppppfpf", True, 0.2),
        ("ppppppppfp", True, 0.1),  # 1 of 10: 10%, counted
        ("pppppppppfp", False, 1 / 11),  # 1 of 11: under 10%
        ("fffffffffp", True, 0.9),  # 9 of 10: 90%, counted
        ("ffffffffffp", False, 10 / 11),  # 10 of 11: over 90%
    ],
    ids=["20%", "10%-counted", "1-of-11", "90%-counted", "10-of-11"],
)
def test_the_fail_rate_band_counts_both_ends(outcomes: str, quarantined: bool, rate: float) -> None:
    found = flaky_rules.flakiness(runs(outcomes), AT, RULE)
    assert found.rate == pytest.approx(rate)
    assert found.quarantined is quarantined


def test_a_run_exactly_window_days_old_counts_and_one_a_second_older_does_not() -> None:
    window = timedelta(days=RULE.window_days)
    base = runs("fpfpp")  # the oldest run failed

    def judged(oldest_at: datetime) -> flaky_rules.Flakiness:
        return flaky_rules.flakiness([replace(base[0], at=oldest_at), *base[1:]], AT, RULE)

    on_edge, past_edge = judged(AT - window), judged(AT - window - timedelta(seconds=1))
    assert (on_edge.runs, on_edge.fails, on_edge.quarantined) == (5, 2, True)
    assert (past_edge.runs, past_edge.fails, past_edge.quarantined) == (4, 1, False)


def test_a_row_that_failed_only_on_other_build_ids_is_not_flaky_it_broke() -> None:
    passed = runs("ppp", commit="aaaaaaa1")
    failed = [replace(s, build=s.build + 3) for s in runs("ff", commit="bbbbbbb2")]
    found = flaky_rules.flakiness([*passed, *failed], AT, RULE)
    assert (found.runs, found.fails, found.both_on, found.quarantined) == (5, 2, None, False)


def test_a_conflict_is_a_pass_and_a_failure_on_one_builds_ids() -> None:
    found = flaky_rules.flakiness(runs("pppcp", commit="aaaaaaa1", image=""), AT, RULE)
    assert found.both_on == ("", "aaaaaaa1") and found.fails == 1 and found.quarantined
    assert "passed and failed on one build (commit aaaaaaa1)" in found.words()


def test_skips_are_no_runs() -> None:
    assert flaky_rules.flakiness(runs("pfsss"), AT, RULE).runs == 2


@pytest.mark.parametrize(
    ("outcomes", "quarantined", "reinstated"),
    [
        ("ffpf" + "pppp", True, False),  # 4 passes in a row: still quarantined
        ("ffpf" + "ppppp", False, True),  # 5 passes in a row: reinstated
        ("ffpf" + "ppppp" + "f", True, False),  # it fails again: quarantined again
    ],
    ids=["4-passes", "5-passes", "fails-again"],
)
def test_passes_in_a_row_reinstate_a_quarantined_row(outcomes: str, quarantined: bool, reinstated: bool) -> None:
    found = flaky_rules.flakiness(runs(outcomes, step=timedelta(hours=12)), AT, RULE)
    assert (found.quarantined, found.reinstated) == (quarantined, reinstated)


def on(commits: str, outcomes: str) -> list[Seen]:
    """Runs on the fork commits named by letter (a -> aaaaaaa0), one per build, oldest first."""
    return [
        Seen(
            build=i + 1,
            number=100 + i,
            at=AT - timedelta(days=len(outcomes) - 1 - i),
            branch="main",
            status={"p": "pass", "f": "failure", "s": "skipped"}[o],
            image=IMAGE,
            commit=c * 7 + "0",
        )
        for i, (c, o) in enumerate(zip(commits, outcomes, strict=True))
    ]


def test_a_failure_after_a_pass_is_new_and_unconfirmed() -> None:
    found = flaky_rules.failing(on("aab", "ppf"), confirm_on_commits=2)
    assert (found.new, found.confirmed, found.builds, found.commits) == (True, False, 1, ("bbbbbbb0",))
    assert found.words() == "new since build 101 (passed there); seen on 1 fork commit: new, unconfirmed"
    assert found.bisect == ("aaaaaaa0", "bbbbbbb0")


def test_a_failure_on_one_commit_stays_unconfirmed_however_many_builds() -> None:
    found = flaky_rules.failing(on("abbbb", "pffff"), confirm_on_commits=2)
    assert (found.new, found.confirmed, found.builds) == (False, False, 4)
    assert found.words() == "failing since build 101 (4 builds); seen on 1 fork commit: new, unconfirmed"


def test_a_failure_seen_on_two_distinct_commits_is_confirmed() -> None:
    found = flaky_rules.failing(on("abbc", "pfff"), confirm_on_commits=2)
    assert found.confirmed and found.commits == ("bbbbbbb0", "ccccccc0")
    assert found.words() == "failing since build 101 (3 builds); seen on 2 fork commits"
    assert flaky_rules.failing(on("abbc", "pfff"), confirm_on_commits=3).confirmed is False


def test_skipped_runs_neither_break_nor_lengthen_a_streak() -> None:
    found = flaky_rules.failing(on("abbbc", "pfsff"), confirm_on_commits=2)
    assert (found.builds, found.since.number, found.last_pass.number) == (3, 101, 100)


def test_no_bisect_range_where_the_pass_and_the_failure_ran_one_commit() -> None:
    assert flaky_rules.failing(on("aaa", "pff"), confirm_on_commits=2).bisect is None
    found = flaky_rules.failing(on("aa", "ff"), confirm_on_commits=2)
    assert found.last_pass is None and found.bisect is None
    assert found.words().startswith("failing since build 100 (2 builds)")


def test_a_first_run_that_fails_is_new() -> None:
    said = flaky_rules.failing(on("a", "f"), 2).words()
    assert said == "new: its first run on this branch in the history; seen on 1 fork commit: new, unconfirmed"


def _metric_runs(values: list[tuple[float, str]], days: list[float]) -> list[Seen]:
    return [
        Seen(
            build=i + 1 if i < len(values) - 1 else 0,
            number=None,
            at=AT - timedelta(days=d),
            branch="main",
            status="pass",
            image=IMAGE,
            commit=commit,
            metrics=(("warm_itl_ms", v), ("decode_tok_s", 1.0)),
        )
        for i, ((v, commit), d) in enumerate(zip(values, days, strict=True))
    ]


def test_a_trend_gives_the_7_day_mean_the_30_day_best_and_the_move_against_the_floor() -> None:
    seen = _metric_runs(
        [(3.0, "a" * 8), (5.0, "b" * 8), (5.2, "b" * 8), (4.8, "b" * 8), (6.0, "c" * 8)], [40, 20, 6, 3, 0]
    )
    (t,) = trends.trends({"r": ("46849", "cuda-sm90")}, {"r": seen}, {"warm_itl_ms": "ms"}, AT)
    assert (t.change, t.target, t.metric, t.unit) == ("46849", "cuda-sm90", "warm_itl_ms", "ms")
    assert [p.value for p in t.points] == [3.0, 5.0, 5.2, 4.8, 6.0] and t.current.value == 6.0
    assert t.mean == pytest.approx((5.2 + 4.8 + 6.0) / 3)  # the builds of the last 7 days
    assert t.best == 4.8  # the least of the last 30 days (the 3.0 was 40 days ago)
    assert t.floor_pct == pytest.approx(4.0)  # commit b's three builds: 4.8 and 5.2 lie 4% from their median 5.0
    assert t.moved_pct == pytest.approx(25.0) and t.headline


def test_a_move_inside_the_floor_or_without_one_is_no_headline() -> None:
    inside = _metric_runs([(5.0, "b" * 8), (5.2, "b" * 8), (4.8, "b" * 8), (4.9, "c" * 8)], [3, 2, 1, 0])
    (t,) = trends.trends({"r": ("46849", "cuda-sm90")}, {"r": inside}, {}, AT)
    assert t.moved_pct == pytest.approx(100 * (4.9 - 4.8) / 4.8) and not t.headline
    no_floor = _metric_runs([(5.0, "a" * 8), (9.0, "c" * 8)], [1, 0])
    (t,) = trends.trends({"r": ("46849", "cuda-sm90")}, {"r": no_floor}, {}, AT)
    assert t.floor_pct is None and t.moved_pct == pytest.approx(80.0) and not t.headline


def test_a_fail_rate_band_given_upside_down_is_refused_naming_its_line(stack_copy, edit) -> None:
    from ci.common.errors import StackError

    edit(stack_copy / "flaky.yaml", "fail_rate: [0.10, 0.90]", "fail_rate: [0.90, 0.10]")
    with pytest.raises(StackError, match=r"flaky.yaml:\d+: \[quarantine.fail_rate\] \[0.9, 0.1\] is empty"):
        loader.load(stack_copy, cached=False)
