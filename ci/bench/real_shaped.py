"""Real-shaped JUnit for the report's benchmark: testcases cloned from JUnit the harness actually wrote
(the H200 runs under evidence/, and any file given), every property, metric and failure text kept, each
clone re-keyed to a planned row. The synthetic cases (`ci.bench.synthetic`) carry only what the contract
needs; these carry what a real run carries."""

from __future__ import annotations

import copy
from pathlib import Path

from lxml import etree

from ci.common import options
from ci.stack.model import Stack
from ci.stack.plan import build

TEMPLATES = options.REPO / "evidence"


def templates(sources: list[Path] | None = None) -> list[etree._Element]:
    files = sources or sorted(TEMPLATES.rglob("junit-*.xml"))
    out = [tc for f in files for tc in etree.parse(str(f)).getroot().iter("testcase")]
    if not out:
        raise FileNotFoundError(f"no <testcase> in {', '.join(map(str, files)) or TEMPLATES}")
    return out


def make(st: Stack, folder: Path, files: int, cases: int, sources: list[Path] | None = None) -> None:
    """`cases` cloned testcases spread over every planned row, in `files` files named as `ci run` names them."""
    rows = build(st).rows
    tpl = templates(sources)
    scopes: dict[tuple[str, str], list[etree._Element]] = {}
    for n in range(cases):
        row = rows[n % len(rows)]
        tc = copy.deepcopy(tpl[n % len(tpl)])
        tc.set("name", f"{tc.get('name', 'test').split('[', 1)[0]}_{n // len(rows)}[{row.id}]")
        for prop in tc.iter("property"):
            key = prop.get("name", "")
            for field in ("row", "change", "target", "suite"):
                if key == f"stackgate.{field}":
                    prop.set("value", str(getattr(row, "id" if field == "row" else field)))
        scopes.setdefault((row.target, row.suite), []).append(tc)
    shards = {k: max(1, round(files * len(v) / cases)) for k, v in scopes.items()}
    biggest = max(shards, key=lambda k: len(scopes[k]))
    shards[biggest] += files - sum(shards.values())
    folder.mkdir(parents=True, exist_ok=True)
    for (target, suite), items in scopes.items():
        n = shards[(target, suite)]
        for i in range(n):
            root = etree.Element("testsuites")
            ts = etree.SubElement(root, "testsuite", name=f"stackgate.{target}.{suite}.{i}")
            props = etree.SubElement(ts, "properties")
            for key, value in (("target", target), ("suite", suite)):
                etree.SubElement(props, "property", name=f"stackgate.{key}", value=value)
            ts.extend(items[i::n])
            etree.ElementTree(root).write(
                str(folder / f"junit-{target}-{suite}-{i}.xml"), encoding="utf-8", xml_declaration=True
            )
