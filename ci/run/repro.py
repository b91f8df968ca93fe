"""The exact command that re-runs one row, from a rows.json (`python -m ci repro`, in `ci.run.reproduce`).

`commands()` makes the docker line and the host line from a results folder's rows.json; `row_document()`
narrows that rows.json to one row, which the report carries so that a report alone re-runs it.
"""

from __future__ import annotations

import copy
import functools
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ci import contract, files
from ci.errors import UsageError
from ci.run import execute as run

_TEST_MODULE = re.compile(r"^(test_.*|.*_test)\Z")  # pytest's default python_files
ROW_ID = contract.SAFE_NAME  # no '/' and no '..': it names a folder


@dataclass(frozen=True, kw_only=True)
class Repro:
    row: str
    docker: str  # one line: docker run ... the row's image, devices, mounts and pytest
    host: str  # one line: the same pytest on this host's Python, from a checkout's suites/


def image_of(doc: dict[str, Any]) -> str:
    """The exact image: ref@digest where a registry digest is known, else the image id."""
    img = doc.get("image") or {}
    ref, digest, image_id = img.get("ref"), img.get("digest"), img.get("id")
    if ref and digest and digest != image_id and ref != "host":
        name = ref.split("@", 1)[0]
        repo, sep, tag = name.rpartition(":")
        return f"{repo if sep and '/' not in tag else name}@{digest}"
    return image_id or ref or ""


def check_row_id(row_id: str) -> None:
    if not ROW_ID.match(row_id):
        raise UsageError(
            f"{row_id!r} is not a row id", hint="python -m ci plan lists them: <change>.<target>.<model>.<hash>"
        )


def container_spec(
    doc: dict[str, Any],
    rows_json: Path,
    name: str,
    out: Path,
    *,
    image_ref: str,
    tests: tuple[str, ...] = (),
    suites_dir: Path | None = None,
    select: tuple[str, ...] | None = None,
):
    """The container that re-runs row `name` as its run did: the run's image, platform, devices, env and suites.
    `select`: the pytest options that pick what runs (default: `--stackgate-row name`; none for a test's node id)."""
    target = doc["target"]
    only = ("--stackgate-timeout", f"{doc['timeout_s']:g}", *(("--stackgate-row", name) if select is None else select))
    return run.make_container_spec(
        image=image_ref,
        devices=target.get("devices") or {},
        target_env=target.get("env") or {},
        rows_json=rows_json,
        out=out,
        suites_dir=suites_dir or _suites_dir(doc),
        suite=doc["suite"],
        junit_name=f"junit-repro-{name}.xml",
        extra=only,
        platform=target.get("platform"),
        tests=tests,
    )


def _suites_dir(doc: dict[str, Any]) -> Path | None:
    """The suites tree the run mounted, where it named one (else the image's own)."""
    return Path(doc["suites_dir"]).resolve() if doc.get("suites_dir") else None


def commands(
    rows_json: Path,
    row_id: str,
    *,
    image: str | None = None,
    out: Path | None = None,
    python: str = "python3",
    base: Path | None = None,
) -> Repro:
    """The docker line and the host line (run with `python`: the host's Python that has the suites' deps). With
    `base`, paths below it are written as `"$PWD"/…`: lines that work from that folder on any machine."""
    rows_json = rows_json.resolve()
    check_row_id(row_id)
    doc = _document(rows_json)
    known = {r["id"] for r in doc["rows"]}
    if row_id not in known:
        raise UsageError(
            f"row {row_id!r} is not in {rows_json}", hint=f"rows there: {', '.join(sorted(known)) or 'none'}"
        )
    out = (out or rows_json.parent / f"repro-{row_id}").resolve()
    return _lines(doc, rows_json, out, row_id, ("--stackgate-row", row_id), (), image=image, python=python, base=base)


def test_commands(
    rows_json: Path,
    test: str,
    *,
    image: str | None = None,
    out: Path | None = None,
    python: str = "python3",
    base: Path | None = None,
) -> Repro:
    """The lines that re-run one testcase outside the plan (a test naming no row) as its run did: its pytest node
    id under the run's suites tree. `test` is a node id (`selftest/test_x.py::test_y`) or the report's
    `classname::name` (`selftest.test_x::test_y`)."""
    rows_json = rows_json.resolve()
    doc = _document(rows_json)
    node = node_id(test, doc["suite"])
    if node is None:
        raise UsageError(
            f"{test!r} names no test of suite {doc['suite']} that pytest can select",
            hint="give its node id: SUITE/test_FILE.py::test_NAME",
        )
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", node.rsplit("::", 1)[-1])[:60]
    out = (out or rows_json.parent / f"repro-test-{name}").resolve()
    return _lines(doc, rows_json, out, name, (), (node,), image=image, python=python, base=base)


def node_id(test: str, suite: str) -> str | None:
    """A pytest node id relative to the suites root, from a node id or a JUnit `classname::name`; None where it
    names no test module of the suite."""
    if ".py::" in test:
        return test if test.startswith(f"{suite}/") and ".." not in test.split("::", 1)[0] else None
    classname, _, name = test.partition("::")
    parts = classname.split(".")
    split = next((i for i, p in enumerate(parts) if p[:1].isupper()), len(parts))
    module, classes = parts[:split], parts[split:]
    if len(module) < 2 or module[0] != suite or not _TEST_MODULE.match(module[-1]) or not name:
        return None
    return f"{'/'.join(module)}.py::{'::'.join([*classes, name])}"


def _lines(
    doc: dict[str, Any],
    rows_json: Path,
    out: Path,
    name: str,
    select: tuple[str, ...],
    tests: tuple[str, ...],
    *,
    image: str | None,
    python: str,
    base: Path | None,
) -> Repro:
    img = image or image_of(doc)
    if not img or img == "host":
        img = "IMAGE"  # a host run names no image: the person picks one
    target = doc["target"]
    only = ("--stackgate-timeout", f"{doc['timeout_s']:g}", *select)
    spec = container_spec(doc, rows_json, name, out, image_ref=img, tests=tests, select=select)
    suites = _suites_dir(doc) or run.DEFAULT_SUITES
    env = {
        **(target.get("env") or {}),
        "STACKGATE_ROWS": str(rows_json),
        "PYTHONPATH": f"{run.STARTUP}:{run.DEFAULT_SUITES}",
        "STACKGATE_JIT_LOG": str(out / "jit-events.jsonl"),
    }
    junit = str(out / f"junit-repro-{name}.xml")
    pytest = run.pytest_command(python, str(suites), doc["suite"], junit, *only, tests=tests)
    mkdir = f"mkdir -p {join([str(out)], base)} && "
    host = mkdir + "env " + join([f"{k}={v}" for k, v in env.items()] + pytest, base)
    return Repro(row=name, docker=mkdir + join(spec.argv(), base), host=host)


def join(argv: list[str], base: Path | None = None) -> str:
    """`shlex.join`, except that every path below `base` is written `"$PWD"/<relative>`: the line then works from
    that folder (a checkout, a build's downloaded artifacts) on any machine, and names none of the machine that
    made it. Each piece around a path is quoted on its own, so the shell reads the same argument back."""
    if base is None:
        return shlex.join(argv)
    prefix = str(base.resolve()).rstrip("/") + "/"
    return " ".join(_portable(arg, prefix) for arg in argv)


def _portable(arg: str, prefix: str) -> str:
    if prefix not in arg:
        return shlex.quote(arg)
    pieces = arg.split(prefix)
    return '"$PWD"/'.join(shlex.quote(p) if p else "" for p in pieces)


def row_document(rows_json: Path, row_id: str) -> dict[str, Any] | None:
    """The rows.json of a run narrowed to one row (what `--report` re-runs it from), or None where that rows.json
    is unusable or lacks the row."""
    try:
        doc = _document(rows_json.resolve())
    except UsageError:
        return None
    rows = [r for r in doc["rows"] if r.get("id") == row_id]
    if not rows:
        return None
    return {**copy.deepcopy({k: v for k, v in doc.items() if k != "rows"}), "rows": copy.deepcopy(rows)}


# rows.json's fields that the re-run lines are made from, with the JSON type each must have
_SHAPE = {"suite": str, "target": dict, "timeout_s": (int, float), "rows": list}


def _document(rows_json: Path) -> dict[str, Any]:
    try:
        return _shaped(_read(rows_json))
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise UsageError(
            f"{rows_json}: not a rows.json written by ci run ({type(exc).__name__}: {exc})",
            hint="point --rows-json at the rows.json in a results folder",
        ) from None


def checked(doc: Any, where: str) -> dict[str, Any]:
    """A rows.json document carried elsewhere (report.json's rows[].rows_json), its shape checked as a file's."""
    try:
        return _shaped(doc)
    except (KeyError, TypeError) as exc:
        raise UsageError(
            f"{where}: not a rows.json written by ci run ({type(exc).__name__}: {exc})",
            hint="write the report again: python -m ci report RESULTS --out DIR",
        ) from None


def _shaped(doc: Any) -> dict[str, Any]:
    """`doc`, where it has the fields and JSON types the re-run lines are made from; else a KeyError or TypeError."""
    if not isinstance(doc, dict):
        raise TypeError(f"a {type(doc).__name__}, not an object")
    missing = [k for k in _SHAPE if k not in doc]
    if missing or not all(isinstance(r, dict) and isinstance(r.get("id"), str) for r in doc["rows"]):
        raise KeyError(", ".join(missing) or "rows[].id")
    wrong = [f"{k} is a {type(doc[k]).__name__}" for k, t in _SHAPE.items() if not isinstance(doc[k], t)]
    if wrong:
        raise TypeError("; ".join(wrong))
    wrong += [
        f"{k} is a {type(doc[k]).__name__}"
        for k, t in (("image", dict), ("suites_dir", str))
        if doc.get(k) is not None and not isinstance(doc[k], t)
    ]
    target = doc["target"]
    wrong += [
        f"target.{k} is a {type(target[k]).__name__}"
        for k, t in (("env", dict), ("devices", dict), ("platform", str))
        if target.get(k) is not None and not isinstance(target[k], t)
    ]
    if wrong:
        raise TypeError("; ".join(wrong))
    return doc


@functools.lru_cache(maxsize=16)
def _read(path: Path) -> Any:
    """One parse per rows.json: the report asks for every failing row of a run."""
    return json.loads(files.read_regular(path, 64 << 20).decode("utf-8"))  # a rows.json of thousands of rows: a few MB
