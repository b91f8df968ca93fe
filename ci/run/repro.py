"""`python -m ci repro <row id>`: the exact command that re-runs one row, from a results folder's rows.json.

`commands()` is what the report calls: it needs nothing but rows.json (and optionally another image),
so a row can be re-run from a report alone.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ci import options
from ci.errors import UsageError
from ci.run import execute as run

ROW_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)+$")  # no '/' and no '..': it names a folder


@dataclass(frozen=True, kw_only=True)
class Repro:
    row: str
    docker: str  # one line: docker run ... the row's image, devices, mounts and pytest
    host: str  # one line: the same pytest on this host's Python, from a checkout's suites/


def _image(doc: dict[str, Any]) -> str:
    """The exact image: ref@digest where a registry digest is known, else the image id."""
    img = doc.get("image") or {}
    ref, digest, image_id = img.get("ref"), img.get("digest"), img.get("id")
    if ref and digest and digest != image_id and ref != "host":
        name = ref.split("@", 1)[0]
        repo, sep, tag = name.rpartition(":")
        return f"{repo if sep and '/' not in tag else name}@{digest}"
    return image_id or ref or ""


def commands(
    rows_json: Path, row_id: str, *, image: str | None = None, out: Path | None = None, python: str = "python3"
) -> Repro:
    """The docker line and the host line (run with `python`: the host's Python that has the suites' deps)."""
    rows_json = rows_json.resolve()
    if not ROW_ID.match(row_id):
        raise UsageError(
            f"{row_id!r} is not a row id", hint="python -m ci plan lists them: <change>.<target>.<model>.<hash>"
        )
    try:
        doc = _read(rows_json)
        known = {r["id"] for r in doc["rows"]}
        doc["suite"], doc["target"], doc["timeout_s"]
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise UsageError(f"{rows_json}: not a rows.json written by ci run ({type(exc).__name__}: {exc})",
                         hint="point --rows-json at the rows.json in a results folder") from None  # fmt: skip
    if row_id not in known:
        raise UsageError(
            f"row {row_id!r} is not in {rows_json}", hint=f"rows there: {', '.join(sorted(known)) or 'none'}"
        )
    out = (out or rows_json.parent / f"repro-{row_id}").resolve()
    suite, target = doc["suite"], doc["target"]
    junit_name = f"junit-repro-{row_id}.xml"
    only = ("--stackgate-timeout", f"{doc['timeout_s']:g}", "--stackgate-row", row_id)
    img = image or _image(doc)
    if not img or img == "host":
        img = "IMAGE"  # a host run names no image: the person picks one
    spec = run.make_container_spec(
        image=img, devices=target.get("devices") or {}, target_env=target.get("env") or {}, rows_json=rows_json,
        out=out, suites_dir=None, suite=suite, junit_name=junit_name, extra=only,
    )  # fmt: skip
    suites = run.DEFAULT_SUITES
    env = {**(target.get("env") or {}), "STACKGATE_ROWS": str(rows_json), "PYTHONPATH": f"{run.STARTUP}:{suites}",
           "STACKGATE_JIT_LOG": str(out / "jit-events.jsonl")}  # fmt: skip
    pytest = run.pytest_command(python, str(suites), suite, str(out / junit_name), *only)
    host = "mkdir -p " + shlex.quote(str(out)) + " && env " + shlex.join([f"{k}={v}" for k, v in env.items()] + pytest)
    return Repro(row=row_id, docker=f"mkdir -p {shlex.quote(str(out))} && {spec.cli()}", host=host)


@functools.lru_cache(maxsize=16)
def _read(path: Path) -> Any:
    """One parse per rows.json: the report asks for every failing row of a run."""
    return json.loads(path.read_text())


def main(args: argparse.Namespace) -> int:
    if not args.rows_json.exists():
        raise UsageError(f"{args.rows_json} not found", hint="point --rows-json at a results folder's rows.json")
    r = commands(args.rows_json, args.row, image=args.image, out=args.out)
    print(f"# docker\n{r.docker}\n# host (--host equivalent)\n{r.host}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = options.verb(
        sub, "repro", help="print the command that re-runs one row (docker, and on the host)", codes=(0, 2)
    )
    p.add_argument("row", help="a row id from rows.json")
    p.add_argument(
        "--rows-json",
        type=Path,
        default=Path("results/rows.json"),
        help="the rows.json of the run that held the row (default: %(default)s)",
    )
    p.add_argument("--image", help="another image than the one rows.json records")
    p.add_argument("--out", type=Path, help="results folder for the re-run (default: next to rows.json)")
    p.set_defaults(func=main)
