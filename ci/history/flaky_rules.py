"""The rules the history judges a row by across builds, as the stack states them (stack/flaky.yaml):

- **Flaky, quarantined**: in the window of days up to a build, the row ran at least `min_runs` times (a run: a pass
  or a failure; a skip or a cut-short run says neither), failed in a share of them inside the fail-rate band (both
  ends counted), and passed and failed on one build's ids (the same image and fork commit: no change of code or image
  between them, so not a change's doing). Its last `reinstate_after` runs all passing reinstate it.
- **New, or not**: a failing row's streak on its branch, back to its last pass: new since the last build where that
  build passed it; "new, unconfirmed" while the streak's failures were seen on fewer distinct fork commits than
  `confirm_on_commits`; else confirmed, failing since the streak's first build. Where the last pass and the first
  failure ran different fork commits, the commits between them are the bisect range.

Pure functions of the runs: the same history gives the same answer, whatever order it was written in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from ci.history.record import Seen
from ci.stack.flaky import Quarantine


@dataclass(frozen=True, kw_only=True)
class Flakiness:
    """A row judged by the quarantine rule at one build."""

    runs: int  # its runs in the window
    fails: int  # of them, failures
    both_on: tuple[str, str] | None  # the build ids (image, fork commit) it both passed and failed on, in the window
    quarantined: bool
    reinstated: bool  # the window would quarantine it, and its last passes in a row brought it back
    window_days: int

    @property
    def rate(self) -> float:
        return self.fails / self.runs if self.runs else 0.0

    @property
    def flaky(self) -> bool:
        return self.both_on is not None

    def words(self) -> str:
        """What the rule found, in a line: "3 of 8 runs failed in 7 days (38%), passed and failed on one build"."""
        said = f"{self.fails} of {self.runs} runs failed in the {self.window_days} days up to this build"
        said += f" ({self.rate:.0%})"
        if self.both_on:
            image, commit = self.both_on
            named = (f"image {image[:19]}" if image else "", f"commit {commit[:12]}" if commit else "")
            ids = ", ".join(x for x in named if x)
            said += f"; passed and failed on one build ({ids})"
        return said


def _window(runs: Sequence[Seen], at: datetime, days: int) -> list[Seen]:
    """The counted runs from `days` before `at` up to it, a run exactly `days` old included, oldest first."""
    start = at - timedelta(days=days)
    return [r for r in runs if r.counted and start <= r.at <= at]


def flakiness(runs: Sequence[Seen], at: datetime, rule: Quarantine) -> Flakiness:
    """The row whose runs (oldest first, the build judged among them) are `runs`, judged at `at` by `rule`."""
    window = _window(runs, at, rule.window_days)
    fails = sum(r.failed for r in window)
    by_ids: dict[tuple[str, str], set[bool]] = {}
    for r in window:
        if r.image or r.commit:  # a run that recorded neither is no build the rule can name
            by_ids.setdefault(r.ids, set()).update({True, False} if r.status == "conflict" else {r.failed})
    both = next((ids for ids, outcomes in by_ids.items() if len(outcomes) == 2), None)
    low, high = rule.fail_rate
    held = len(window) >= rule.min_runs and low <= fails / max(len(window), 1) <= high and both is not None
    tail = window[-rule.reinstate_after :]
    back = len(tail) == rule.reinstate_after and all(r.status == "pass" for r in tail)
    return Flakiness(
        runs=len(window),
        fails=fails,
        both_on=both,
        quarantined=held and not back,
        reinstated=held and back,
        window_days=rule.window_days,
    )


@dataclass(frozen=True, kw_only=True)
class Failing:
    """A failing row's streak on its branch."""

    since: Seen  # the streak's first failing run
    builds: int  # failing runs in the streak, this build's included
    commits: tuple[str, ...]  # the distinct fork commits the streak failed on, oldest first
    last_pass: Seen | None  # the run before the streak, where it passed; None where none did on the branch
    confirmed: bool
    new: bool  # the streak is this build alone

    @property
    def bisect(self) -> tuple[str, str] | None:
        """(last passing commit, first failing commit), where both are fork commits and differ."""
        if self.last_pass is None:
            return None
        good, bad = self.last_pass.commit, self.since.commit
        return (good, bad) if _fork_commit(good) and _fork_commit(bad) and good != bad else None

    def words(self) -> str:
        n = len(self.commits)
        on = f"seen on {n} fork commit{'' if n == 1 else 's'}" if self.commits else "on no recorded commit"
        if self.new and self.last_pass is not None:
            head = f"new since {self.last_pass.called} (passed there)"
        elif self.new:
            head = "new: its first run on this branch in the history"
        else:
            head = f"failing since {self.since.called} ({self.builds} builds)"
        return f"{head}; {on}" + ("" if self.confirmed else ": new, unconfirmed")


def _fork_commit(commit: str) -> bool:
    return len(commit) >= 7 and all(c in "0123456789abcdef" for c in commit)


def failing(runs: Sequence[Seen], confirm_on_commits: int) -> Failing:
    """The streak ending at the last of `runs` (one row's runs on one branch, oldest first; the last failed)."""
    streak: list[Seen] = []
    last_pass = None
    for r in reversed(runs):
        if r.status == "pass":
            last_pass = r
            break
        if r.failed:
            streak.append(r)
    streak.reverse()
    commits = tuple(dict.fromkeys(r.commit for r in streak if r.commit))
    return Failing(
        since=streak[0],
        builds=len(streak),
        commits=commits,
        last_pass=last_pass,
        confirmed=len(commits) >= confirm_on_commits,
        new=len(streak) == 1,
    )
