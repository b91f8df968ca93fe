"""Results of a row defined otherwise when it ran: another model, parameters, target, or bound the test asserts
(`ci.stack.meaning`). A stack edited in prose, upstream facts or resources since leaves its results its own.

Each result is checked row by row against today's plan: by the digest its testcases record (`stackgate.meaning`),
else by the rows.json its run wrote beside its JUnit (field by field, so the warning names what differs). A result
with neither (written before either existed) is matched by its row id alone, which spells the row's parameters."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ci.common import contract
from ci.results.merge import Results
from ci.run.rerun import rows_json_read
from ci.stack import meaning, rows_json
from ci.stack.model import Stack


def lines(st: Stack, results: Results) -> list[str]:
    """One line per input holding rows defined otherwise, with how many and what differs."""
    today: dict[str, dict[str, Any]] = {}  # row id -> today's meaning, made for every row at the first asked about
    targets: dict[str, dict[str, Any]] = {}
    written: dict[Path, Mapping[str, dict[str, Any]] | None] = {}
    by_file: dict[str, dict[str, str | None]] = {}  # input -> row id -> recorded digest (None: not recorded)
    planned = {r.id: r.planned for r in results.rows if r.planned is not None}
    for r in results.rows:
        for c in r.cases if r.planned is not None else ():
            by_file.setdefault(c.file, {}).setdefault(r.id, c.meaning)

    def now(row_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
        if not today:  # every row an input holds, at once: a row's document is made against the whole plan
            asked = list({i: planned[i] for rows in by_file.values() for i in rows}.values())
            for row, doc in zip(asked, rows_json.row_documents(st, asked), strict=True):
                today[row.id] = meaning.of_row(doc)
                if row.target not in targets:
                    targets[row.target] = meaning.of_target(rows_json.target_document(st.targets[row.target]))
        row = today[row_id]
        return row, targets[str(row["row"]["target"])]

    out = []
    for file, recorded in by_file.items():
        other: list[str] = []
        said: list[str] = []
        beside = Path(file).parent / contract.ROWS_JSON
        for row_id, digest in recorded.items():
            if digest:
                mine, target = now(row_id)
                if digest != meaning.digest({"row": mine, "target": target}):
                    other.append(row_id)
                continue
            if beside not in written:
                written[beside] = _rows(beside)
            doc = (written[beside] or {}).get(row_id)
            if doc is not None and (diff := meaning.differences(meaning.of_row(doc), now(row_id)[0])):
                other.append(row_id)
                said += [d for d in diff if d not in said]
        if other:
            what = f" ({'; '.join(said[:3])}{'; …' if len(said) > 3 else ''})" if said else ""
            out.append(
                f"input {file}: {len(other)} of {len(recorded)} rows were defined otherwise when they ran{what}; "
                f"this report judges them as {st.root.name}/ defines them today"
            )
    return out


def _rows(path: Path) -> Mapping[str, dict[str, Any]] | None:
    """The row documents of a rows.json, by id; None where there is none or it is not one (then nothing is said
    from it: the row id still matched). Read as data from elsewhere (`ci.run.rerun.rows_json_read`)."""
    return rows_json_read.rows_by_id(path) if path.is_file() else None
