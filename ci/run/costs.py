"""What a row costs on a GPU, measured, per engine configuration and phase (bake, run): its first row's seconds (the
engine built in it), each further row's in the same process (the engine reused), and the process's beside its rows.

Every scheduled `ci run` and `ci bake --host` writes them to `costs.json` in its results folder and to the host's store
($STACKGATE_COSTS, else ~/.cache/stackgate/costs.json); the scheduler reads the store for its packing order and ETA,
`ci plan --estimate` projects a matrix from it. A configuration is named without its target (`config`), so another
target's measurement can stand in, said so. A costs file from elsewhere is data, checked field by field, and refused
naming the file and the field where it is not what it should be.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lxml import etree

from ci import contract, files, untrusted
from ci.errors import UsageError
from ci.escape import one_line
from ci.run import resume
from ci.stack.plan import Row

SCHEMA = 1
FILE = "costs.json"
PHASES = ("bake", "run")
ENV_STORE = "STACKGATE_COSTS"
_LIMIT = 32 << 20  # a store of every configuration of every target is a few hundred KB
_SKEW_S = 86400.0  # a measurement dated later than a day from now is no measurement (clocks drift, not by a day)

# what a row's engine is built from, less its target: the same configuration on another target (costs.config)
_NOT_CONFIG = (*contract.WORKLOAD, "target", "track", "gpus")
_NAMED = ("model", "change", "suite")


def config(row: Row) -> str:
    """A row's engine configuration, portable across targets: model, change, suite and every engine axis."""
    axes = ",".join(f"{k}={v}" for k, v in sorted(row.to_json().items()) if k not in (*_NOT_CONFIG, *_NAMED))
    return f"{row.model}/{row.change}/{row.suite}/{axes}"


@dataclass(frozen=True, kw_only=True)
class Measured:
    """One engine configuration in one process: what its rows took there."""

    phase: str  # "bake" or "run"
    target: str
    config: str
    model: str
    suite: str
    first_s: float  # the configuration's first row in the process: the engine built in it
    further_s: tuple[float, ...]  # each further row of it in that process: the engine reused
    process_s: float  # the process's seconds beside all its rows (imports, teardown), shared by its configurations
    configs_in_process: int  # how many configurations shared that process (process_s is split among them)
    host: str  # the GPUs it ran on, in words
    when: float  # seconds since the epoch

    @property
    def further(self) -> float:
        return statistics.median(self.further_s) if self.further_s else self.first_s

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "further_s": list(self.further_s)}


def _times(junit: Path) -> list[tuple[str, float]]:
    """(row, seconds) of each testcase of a JUnit file, in the order it ran."""
    try:
        root = etree.parse(str(junit)).getroot()
    except (OSError, etree.XMLSyntaxError):
        return []
    found = []
    for tc in root.iter("testcase"):
        if resume.testcase_outcome(tc) == "interrupted" or resume.lost_row(tc) is not None:
            continue  # a row a stop cut short, or one its session never reached: it measured nothing
        row = next((p.get("value") for p in tc.iter("property") if p.get("name") == contract.PREFIX + "row"), None)
        try:
            seconds = float(tc.get("time") or "nan")
        except ValueError:
            continue
        if row and math.isfinite(seconds) and seconds >= 0:
            found.append((row, seconds))
    return found


def measure_job(
    phase: str, rows: Sequence[Row], junit: Path, wall_s: float, host: str, when: float | None = None
) -> list[Measured]:
    """What one job (one process: a row, or a group's rows) cost, per engine configuration, from its JUnit and the
    wall time the scheduler saw. Rows without a testcase time (a crash before the first) measure nothing."""
    by_id = {r.id: r for r in rows}
    seen: dict[str, list[float]] = {}
    row_of: dict[str, Row] = {}
    total = 0.0
    for row_id, seconds in _times(junit):
        row = by_id.get(row_id)
        if row is None:
            continue
        key = config(row)
        seen.setdefault(key, []).append(seconds)
        row_of.setdefault(key, row)
        total += seconds
    if not seen:
        return []
    beside = max(0.0, wall_s - total)
    stamp = time.time() if when is None else when
    return [
        Measured(
            phase=phase,
            target=row_of[k].target,
            config=k,
            model=row_of[k].model,
            suite=row_of[k].suite,
            first_s=round(t[0], 3),
            further_s=tuple(round(s, 3) for s in t[1:]),
            process_s=round(beside, 3),
            configs_in_process=len(seen),
            host=host,
            when=round(stamp, 1),
        )
        for k, t in seen.items()
    ]


def store() -> Path:
    """The host's costs: every measurement its scheduled runs and bakes made, the newest per configuration."""
    found = os.environ.get(ENV_STORE)
    return Path(found) if found else Path.home() / ".cache" / "stackgate" / FILE


def load(paths: Iterable[Path]) -> list[Measured]:
    """Every measurement in `paths` (costs files, or results folders holding one); a path that does not exist adds
    nothing, one that is not a costs file is refused, naming it and what was wrong."""
    files_ = [p / FILE if p.is_dir() else p for p in paths]
    return [m for path in files_ if path.is_file() for m in _read(path)]


def _read(path: Path) -> list[Measured]:
    fix = f"remove {path} (it is rewritten by the next scheduled run), or pass another --costs"
    kind = untrusted.Kind(what="a costs file", limit=_LIMIT, fix=fix, depth=8)
    doc = untrusted.json_value(untrusted.read_bytes(path, kind), kind, str(path))
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(doc.get("measured"), list):
        found = "schema" if not isinstance(doc, dict) or doc.get("schema") != SCHEMA else "measured"
        value = _said(doc.get(found) if isinstance(doc, dict) else doc)
        raise UsageError(
            f"{one_line(path)}: {found}: {value}: not a costs file of schema {SCHEMA} (an object with a list "
            "'measured')",
            hint=fix,
        )
    out = []
    for n, entry in enumerate(doc["measured"]):
        try:
            out.append(_entry(entry))
        except KeyError as exc:
            raise UsageError(f"{one_line(path)}: measured[{n}].{one_line(exc.args[0])}: missing", hint=fix) from None
        except (TypeError, ValueError) as exc:
            raise UsageError(f"{one_line(path)}: measured[{n}]{one_line(exc)}", hint=fix) from None
    return out


def _said(value: Any) -> str:
    """A value a refusal names, on one line and short."""
    text = one_line(repr(value))
    return text if len(text) <= 80 else text[:77] + "..."


def _entry(e: Any) -> Measured:
    """One measurement; a TypeError or ValueError whose words start with the field (".phase: ...") and name the
    value."""
    if not isinstance(e, dict):
        raise TypeError(f": {_said(e)}: not an object")

    def text(name: str) -> str:
        v = e[name]
        if not isinstance(v, str) or len(v) > 1000:
            raise TypeError(f".{name}: {_said(v)}: not a string (of at most 1,000 characters)")
        return v

    def seconds(v: Any, name: str) -> float:
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or not 0 <= v < 1e6:
            raise ValueError(f".{name}: {_said(v)}: not a number of seconds (0 to 1e6)")
        return float(v)

    phase = text("phase")
    if phase not in PHASES:
        raise ValueError(f".phase: {_said(phase)}: not one of {', '.join(PHASES)}")
    further = e["further_s"]
    if not isinstance(further, list) or len(further) > 10_000:
        raise TypeError(f".further_s: {_said(further)}: not a list (of at most 10,000)")
    n = e["configs_in_process"]
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 100_000:
        raise ValueError(f".configs_in_process: {_said(n)}: not a count (1 to 100,000)")
    return Measured(
        phase=phase,
        target=text("target"),
        config=text("config"),
        model=text("model"),
        suite=text("suite"),
        first_s=seconds(e["first_s"], "first_s"),
        further_s=tuple(seconds(s, f"further_s[{i}]") for i, s in enumerate(further)),
        process_s=seconds(e["process_s"], "process_s"),
        configs_in_process=n,
        host=text("host"),
        when=_epoch(e["when"]),
    )


def _epoch(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
        raise ValueError(f".when: {_said(v)}: not a time (seconds since the epoch)")
    if v > time.time() + _SKEW_S:  # it would outlive every measurement after it: the newest wins
        raise ValueError(f".when: {v:.0f}: after tomorrow (seconds since the epoch): no measurement is dated so")
    return float(v)


def write(path: Path, measured: Sequence[Measured], *, keep: Sequence[Measured] = ()) -> Path:
    """`measured` with what `keep` holds of other configurations (the newest measurement of each wins, and one made
    now is newer than any kept)."""
    newest: dict[tuple[str, str, str], Measured] = {}
    for m in [*sorted(keep, key=lambda m: m.when), *measured]:  # what was measured now replaces what was kept
        newest[(m.phase, m.target, m.config)] = m
    doc = {"schema": SCHEMA, "measured": [m.to_json() for m in newest.values()]}
    return files.replace(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")


def record(folder: Path, measured: Sequence[Measured]) -> None:
    """Into the results folder's costs file and the host's store, each merged with what it held. A store that cannot
    be read or written is said and skipped: a run's results never depend on it."""
    if not measured:
        return
    write(folder / FILE, measured, keep=_kept(folder / FILE))
    try:
        write(store(), measured, keep=_kept(store()))
    except OSError as exc:
        print(f"costs: not recorded in {store()} ({exc.strerror or exc}); they are in {folder / FILE}", flush=True)


def _kept(path: Path) -> list[Measured]:
    try:
        return load([path])
    except UsageError as exc:
        print(f"costs: {exc.message}; it is written anew", flush=True)
        return []
