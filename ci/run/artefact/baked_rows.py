"""Which of a run's rows a caches artefact's bake ran to a result: the rows a run from it finds warm.

A warm bake records its rows and their outcome in the artefact's manifest (`ci.run.artefact.jit_caches.pack`); a bake
stopped at its --deadline records only the rows it finished. A run from the artefact (`ci run`/`ci main --host
--caches`) says how many of its rows the bake did not reach (their first compile is refused where JIT is), and
`--rows-baked` runs only the rows the bake reached."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ci.common.errors import UsageError
from ci.common.escape import one_line
from ci.run.artefact import read
from ci.stack import plan


def recorded(artefact: Path) -> Mapping[str, str]:
    """The rows an artefact's bake ran to a result, and their outcome there; refused where it records none."""
    made = read.manifest(artefact)
    if made.rows is None:
        kind = made.key.get("kind", "warm")
        why = "an AOT bake warms no row" if kind == "aot" else "it was packed before artefacts recorded their rows"
        raise UsageError(
            f"{one_line(artefact)}: records no rows ({why}): --rows-baked cannot choose from it",
            hint="bake the rows into a warm artefact (python -m ci bake TARGET --host --out DIR), or drop --rows-baked",
        )
    return made.rows


def only_baked(rows: Sequence[plan.Row], artefact: Path) -> tuple[plan.Row, ...]:
    """`--rows-baked`: the rows of `rows` the artefact's bake ran to a result, and a line saying what was left out."""
    baked = recorded(artefact)
    kept = tuple(r for r in rows if r.id in baked)
    if not kept:
        raise UsageError(
            f"--rows-baked: none of the {len(rows)} rows chosen is among the {len(baked)} rows {one_line(artefact)} "
            "baked",
            hint="choose rows of its target and suites, or bake them: python -m ci bake TARGET --host --out DIR",
        )
    left = [r.id for r in rows if r.id not in baked]
    print(
        f"--rows-baked: {len(kept)} of the {len(rows)} rows chosen, the ones {artefact.name} baked"
        + (f"; {len(left)} left out, not reached by its bake (e.g. {left[0]})" if left else ""),
        flush=True,
    )
    return kept


def unreached(rows: Sequence[plan.Row], baked: Mapping[str, str] | None) -> str | None:
    """A line for a run from an artefact whose bake did not reach some of its rows (None where it reached all, or
    records none)."""
    if baked is None:
        return None
    left = [r.id for r in rows if r.id not in baked]
    if not left:
        return None
    return (
        f"caches: the artefact's bake did not reach {len(left)} of these {len(rows)} rows (e.g. {left[0]}): a "
        "kernel of theirs it lacks is compiled on first use, and fails the row where JIT is refused; --rows-baked "
        "runs only the rows it baked"
    )
