"""stack/flaky.yaml: how a row is judged across builds. A row that fails now and then is told apart from one that
broke by a rule modelled on vLLM CI's for flaky tests (a window of days, a least number of runs, a band of fail rates,
reinstatement after passes in a row), and a failure is called confirmed only once seen on enough distinct commits.
The numbers are data; `ci.history.flaky_rules` applies them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from ci.stack.schema import Positive, frozen, rule, validate

Fraction = Annotated[float, rule(ge=0, le=1, allow_inf_nan=False)]


@frozen
class Quarantine:
    """A row is quarantined as flaky where, in the `window_days` up to a build, it ran at least `min_runs` times,
    failed in a share of them from `fail_rate[0]` to `fail_rate[1]` (both counted), and both passed and failed on
    one build's ids (the same image and fork commit); `reinstate_after` passes in a row bring it back."""

    window_days: Positive
    min_runs: Positive
    fail_rate: tuple[Fraction, Fraction]
    reinstate_after: Positive
    # hold: a quarantined row still holds its change back; waive: its change is judged without it (the first screen
    # says so, and what the verdict would be were it counted)
    gate: Literal["hold", "waive"] = "hold"


@frozen
class Flaky:
    quarantine: Quarantine
    confirm_on_commits: Positive  # a failure seen on fewer distinct fork commits is "new, unconfirmed"


def load(path: Path) -> Flaky:
    from ci.stack import yaml_lines

    src = yaml_lines.load(path)
    if not isinstance(src.data, dict):
        raise src.error((), "expected a mapping with keys quarantine, confirm_on_commits")
    flaky = validate(src, src.data, (), Flaky)
    low, high = flaky.quarantine.fail_rate
    if low > high:
        raise src.error(
            ("quarantine", "fail_rate"), f"[{low:g}, {high:g}] is empty", hint="the lower fail rate first: [0.1, 0.9]"
        )
    return flaky
