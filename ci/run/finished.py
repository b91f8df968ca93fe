"""What a results folder already holds, for `ci run --resume`: each row's outcome in the JUnit files there, and
whether it is this row's result at all.

A result counts only where it was made with the row as it is now: its testcases record the row's content digest
(`stackgate.row_content`: the row's parameters and acceptance numbers, its target, the image it ran in), which must
equal the one in the rows.json just written; a host run's rows also recorded the vLLM tree they imported
(`stackgate.vllm_build`), which must be this host's. Any other result is run again, and says why. Testcases naming
no row (tests outside the plan) cannot be chosen again by a resumed run: one that a stop interrupted makes --resume
refuse, before any result in the folder changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lxml import etree

from ci.common import contract, files
from ci.common.errors import UsageError
from ci.common.tables import counted

_WORST = ("skipped", "pass", "failure", "error", "interrupted")  # a row of several testcases says its worst


def outcome(junit: Path) -> str:
    """What a row's JUnit says: pass, failure, error, skipped, interrupted (a stop cut it: run it again) or missing."""
    said = set(row_outcomes(junit).values())
    return max(said, key=_WORST.index) if said else "missing"


def row_outcomes(junit: Path) -> dict[str, str]:
    """Per row a JUnit file holds (several where rows shared a process), what it says: as `outcome`. Testcases
    that name no row count under ""."""
    try:
        root = etree.parse(str(junit)).getroot()
    except (OSError, etree.XMLSyntaxError):
        return {}
    found: dict[str, str] = {}
    for tc in root.iter("testcase"):
        said = testcase_outcome(tc)
        row = next((p.get("value") for p in tc.iter("property") if p.get("name") == "stackgate.row"), "") or ""
        found[row] = max(found.get(row, said), said, key=_WORST.index)
    return found


def testcase_outcome(tc: Any) -> str:
    """A <testcase>'s outcome: pass, failure, error, skipped, or interrupted (a stop cut it)."""
    results = {child.tag: child for child in tc if child.tag in ("error", "failure", "skipped")}
    said = next((k for k in ("error", "failure", "skipped") if k in results), "pass")
    return "interrupted" if (results.get("error", tc).get("message") or "").startswith("interrupted by ") else said


def lost_case(row_id: str) -> str:
    """The name of the testcase the scheduler writes for a row whose session ended without its result."""
    return f"session[{row_id}]"


def lost_row(tc: Any) -> str | None:
    """The row a testcase stands for where it is the scheduler's record of a lost session (`lost_case`), else None."""
    name = tc.get("name") or ""
    return name[len("session[") : -1] if name.startswith("session[") and name.endswith("]") else None


def _records(junit: Path) -> dict[str, tuple[str, set[str | None], set[str | None]]]:
    """Per row a JUnit file holds: its worst outcome, and the row contents and vLLM builds its testcases recorded."""
    try:
        root = etree.parse(str(junit)).getroot()
    except (OSError, etree.XMLSyntaxError):
        return {}
    found: dict[str, tuple[str, set[str | None], set[str | None]]] = {}
    for tc in root.iter("testcase"):
        props = {p.get("name"): p.get("value") for p in tc.iter("property")}
        said = testcase_outcome(tc)
        row = props.get("stackgate.row") or ""
        was, contents, builds = found.get(row, (said, set(), set()))
        contents.add(props.get(_CONTENT))
        builds.add(props.get("stackgate.vllm_build"))
        found[row] = (max(was, said, key=_WORST.index), contents, builds)
    return found


_CONTENT = contract.PREFIX + contract.ROW_CONTENT


def resume_from(folders: Sequence[Path], rows: Sequence[Any], contents: Mapping[str, str]) -> dict[str, str]:
    """The rows of `rows` whose result in `folders` counts (row id -> outcome); the others are taken out of the files
    they are in, to run again. Refused (exit 2) where a test outside the plan was interrupted there."""
    found: dict[str, tuple[str, set[str | None], set[str | None]]] = {}
    cut: list[str] = []
    for folder in folders:
        for junit in sorted(folder.glob("junit-*.xml")):
            for row_id, (said, made, builds) in _records(junit).items():
                if not row_id:
                    cut += [f"{junit.name}"] if said == "interrupted" else []
                    continue
                was = found.get(row_id, (said, set(), set()))
                found[row_id] = (max(was[0], said, key=_WORST.index), was[1] | made, was[2] | builds)
    if cut:
        raise UsageError(
            f"--resume runs planned rows again, and a stop interrupted tests outside the plan in {', '.join(cut)}: "
            "a resumed run cannot choose them, and would report them as they were left",
            hint="run the same command without --resume (it runs every test again)",
        )
    here = _host_build() if any(len(f[2] - {None}) for f in found.values()) else None
    done, stale = {}, []
    for r in rows:
        said, made, builds = found.get(r.id, ("interrupted", set(), set()))
        if said == "interrupted":
            continue
        if made != {contents.get(r.id)} or (here is not None and builds - {None} and builds != {here}):
            stale.append(r.id)
            continue
        done[r.id] = said
    for folder in folders:  # as a row's own file is written anew
        _forget(folder, {r.id for r in rows if r.id not in done})
    where = ", ".join(map(str, folders))
    have = f"{counted(len(done), 'row')} {'has' if len(done) == 1 else 'have'}"
    print(f"--resume: {have} a result in {where}, {len(rows) - len(done)} to run", flush=True)
    if stale:
        print(
            f"--resume: {len(stale)} of them ran as another row (its parameters, acceptance numbers, target or "
            f"image have changed since): run again: {', '.join(stale[:5])}{' …' if len(stale) > 5 else ''}",
            flush=True,
        )
    return done


def _host_build() -> str | None:
    """The vLLM tree this host's Python imports, for a host run's results (None where results came from images)."""
    from ci.run.artefact import jit_caches

    return jit_caches.vllm_build_here()


def _forget(out: Path, row_ids: set[str]) -> None:
    """Take the rows about to run again (a stop interrupted them) out of the JUnit files an earlier run wrote."""
    for junit in sorted(out.glob("junit-*.xml")):
        if not row_ids & set(row_outcomes(junit)):
            continue
        tree = etree.parse(str(junit))
        for tc in list(tree.iter("testcase")):
            named = {p.get("value") for p in tc.iter("property") if p.get("name") == "stackgate.row"}
            if named & row_ids:
                tc.getparent().remove(tc)
        for suite in tree.iter("testsuite"):
            recount(suite)
        with files.staged(junit) as fh:
            tree.write(fh, encoding="utf-8", xml_declaration=True)


def recount(suite: etree._Element) -> None:
    """A <testsuite>'s counts, as its testcases now are."""
    cases = suite.findall("testcase")
    for attr, tag in (("tests", None), ("failures", "failure"), ("errors", "error"), ("skipped", "skipped")):
        if suite.get(attr) is not None:
            suite.set(attr, str(sum(1 for c in cases if tag is None or c.find(tag) is not None)))
