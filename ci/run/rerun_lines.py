"""The lines that re-run one row or one test, and the block printed around them: the one module that makes them, for
`ci repro` (which prints them, and runs the docker line) and for the report (which prints them).

They are made from a `Rerun`, every field of which is checked data: the target is the stack's (its platform, devices
and env: never what a rows.json or a report says they were), the image is named by content (`sha256:…` or
`repo@sha256:…`), the suite a suite's name, the tests pytest node ids inside that suite, the row a row id. A report or
a rows.json from elsewhere chooses none of the flags, mounts or devices; the lines are quoted argv, never text of
theirs, and a block's comments print what they name through `ci.escape`: pasted into a shell, a block runs its
commands and nothing else, and a terminal shows it as it is.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ci import contract, engine, options
from ci.errors import UsageError
from ci.escape import one_line, quote
from ci.run import rows_json_read
from ci.run.harness_command import DEFAULT_SUITES, STARTUP, make_container_spec, pytest_command
from ci.stack.model import Stack, Target

_TEST_MODULE = re.compile(r"^(test_.*|.*_test)\Z")  # pytest's default python_files
_SUITE = re.compile(r"[a-z][a-z0-9_]*")
ROW_ID = contract.SAFE_NAME  # no '/' and no '..': it names a folder
IMAGE = re.compile(r"(?:[a-z0-9][a-z0-9._/:-]*@)?sha256:[0-9a-f]{64}")  # an image by content: id, or repo@digest
REFUSE_JIT = contract.ENV_REFUSE_JIT  # the one env key a run sets apart from the target's (ci run --host, allowed JIT)


@dataclass(frozen=True, kw_only=True)
class Repro:
    row: str
    docker: str  # one line: docker run ... the row's image, devices, mounts and pytest
    host: str  # one line: the same pytest on this host's Python, from a checkout's suites/

    def block(self) -> str:
        """What `ci repro --rows-json` prints: both lines, each under its comment."""
        return f"{comment('docker')}\n{self.docker}\n{comment('host (--host equivalent)')}\n{self.host}"


@dataclass(frozen=True, kw_only=True)
class Rerun:
    """What re-runs one row or one test, each field checked by `rerun`: the command is made from this alone."""

    target: Target  # the stack's: platform, devices, env
    suite: str
    name: str  # the row id, or the test's name: names the re-run's JUnit and folder
    select: tuple[str, ...]  # pytest options choosing what runs: ("--stackgate-row", id), or () for a test's node id
    tests: tuple[str, ...]  # pytest node ids under the suites root
    image: str  # by content (IMAGE), or "" where the run named none (a host run)
    timeout_s: float
    suites_dir: Path | None  # the suites tree to mount (None: the image's own)
    env: dict[str, str] = field(default_factory=dict)  # the target's env, with STACKGATE_REFUSE_JIT as the run had it


def check_row_id(row_id: str) -> None:
    if not ROW_ID.match(row_id):
        raise UsageError(
            f"{row_id!r} is not a row id", hint="python -m ci plan lists them: <change>.<target>.<model>.<hash>"
        )


def checked_image(ref: str, where: str) -> str:
    """`ref`, where it names an image by content; a usage error naming `where` it came from otherwise."""
    if not IMAGE.fullmatch(ref):
        raise UsageError(
            f"{where}: {ref!r} does not name an image by content (sha256:<64 hex>, or repo@sha256:<64 hex>)",
            hint="name the image by its id or digest (docker image inspect --format '{{.Id}}' REF)",
        )
    return ref


def image_of(image: Any) -> str:
    """The image a rows.json's image block names, by content (repo@digest where a registry digest is known, else the
    image id), or "" where it names none that checks (a host run, a tag, a malformed block)."""
    if not isinstance(image, dict):
        return ""
    ref, digest, image_id = (image.get(k) if isinstance(image.get(k), str) else None for k in ("ref", "digest", "id"))
    made = image_id or ""
    if ref and digest and digest != image_id and ref != "host":
        name = ref.split("@", 1)[0]
        repo, sep, tag = name.rpartition(":")
        made = f"{repo if sep and '/' not in tag else name}@{digest}"
    return made if IMAGE.fullmatch(made) else ""


def rerun(
    st: Stack,
    *,
    target: str,
    suite: str,
    row: str | None = None,
    test: str | None = None,
    tests: tuple[str, ...] = (),
    image: str = "",
    timeout_s: Any = None,
    suites_dir: Path | None = None,
    refuse_jit: Any = None,
) -> Rerun:
    """A `Rerun` of `row` (its failing `tests` where known) or of the test `test`, each value checked here."""
    if target not in st.targets:
        raise UsageError(f"unknown target {target!r} in the run's record", hint=f"one of {', '.join(st.targets)}")
    if not _SUITE.fullmatch(suite):
        raise UsageError(f"{suite!r} is not a suite's name", hint="a suite is a folder of the suites tree: selftest")
    if test is not None:
        node = node_id(test, suite)
        if node is None:
            raise UsageError(
                f"{test!r} names no test of suite {suite} that pytest can select",
                hint="give its node id: SUITE/test_FILE.py::test_NAME",
            )
        name, select, tests = re.sub(r"[^A-Za-z0-9_.-]", "_", node.rsplit("::", 1)[-1])[:60], (), (node,)
    else:
        check_row_id(row or "")
        name, select = row or "", ("--stackgate-row", row or "")
        if any(node_id(t, suite) != t for t in tests):
            raise UsageError(f"row {row}: a test to re-run is not a node id of suite {suite}", hint=", ".join(tests))
    env = dict(st.targets[target].env)
    if refuse_jit in ("0", "1"):  # as `ci run` wrote it for its rows: JIT allowed drops the switches that fail it
        env = engine.without_jit_refusal({**env, REFUSE_JIT: refuse_jit})
    good = isinstance(timeout_s, (int, float)) and not isinstance(timeout_s, bool) and 0 < timeout_s < math.inf
    return Rerun(
        target=st.targets[target],
        suite=suite,
        name=name,
        select=select,
        tests=tests,
        image=checked_image(image, "the run's image") if image else "",
        timeout_s=float(timeout_s) if good else options.DEFAULT_TIMEOUT_S,
        suites_dir=suites_dir,
        env=env,
    )


def docker_spec(r: Rerun, rows_json: Path, out: Path, image: str | None = None) -> engine.ContainerSpec:
    """The `docker run` of `r`, its flags from the target alone (`image`: another than the run's, the person's)."""
    only = ("--stackgate-timeout", f"{r.timeout_s:g}", *r.select)
    return make_container_spec(
        image=image or r.image or "IMAGE",  # a host run names no image: the person picks one
        devices=asdict(r.target.devices),
        target_env=r.env,
        rows_json=rows_json,
        out=out,
        suites_dir=r.suites_dir,
        suite=r.suite,
        junit_name=f"junit-repro-{r.name}.xml",
        extra=only,
        platform=r.target.platform,
        tests=r.tests,
    )


def lines(
    r: Rerun, rows_json: Path, out: Path, *, image: str | None = None, python: str = "python3", base: Path | None = None
) -> Repro:
    """The docker line and the host line (run with `python`: the host's Python that has the suites' deps). With
    `base`, paths below it are written as `"$PWD"/…`: lines that work from that folder on any machine."""
    spec = docker_spec(r, rows_json, out, image)
    env = {
        **r.env,
        contract.ENV_ROWS: str(rows_json),
        "PYTHONPATH": f"{STARTUP}:{DEFAULT_SUITES}",
        contract.ENV_JIT_LOG: str(out / "jit-events.jsonl"),
    }
    only = ("--stackgate-timeout", f"{r.timeout_s:g}", *r.select)
    junit = str(out / f"junit-repro-{r.name}.xml")
    pytest = pytest_command(python, str(r.suites_dir or DEFAULT_SUITES), r.suite, junit, *only, tests=r.tests)
    mkdir = f"mkdir -p {join([str(out)], base)} && "
    host = mkdir + "env " + join([f"{k}={v}" for k, v in env.items()] + pytest, base)
    return Repro(row=r.name, docker=mkdir + join(spec.argv(), base), host=host)


def default_out(name: str) -> Path:
    """Where a re-run writes by default: out/repro/<name> under the current folder, the results folder a checkout
    ignores; never beside the run it re-runs (that may be committed evidence, or another user's folder)."""
    return Path.cwd() / "out" / "repro" / name


def from_rows_json(
    st: Stack,
    rows_json: Path,
    wanted: str,
    *,
    image: str | None = None,
    out: Path | None = None,
    python: str = "python3",
    base: Path | None = None,
) -> Repro:
    """The lines that re-run the row or test `wanted` (a node id, or the report's `classname::name`) from the
    rows.json of its run, which the re-run mounts as it is; the rest of the line is made by `rerun`."""
    rows_json = rows_json.resolve()
    if "::" not in wanted:
        check_row_id(wanted)  # before the file is read: a name that is no row id is the first thing wrong
    doc, _ = rows_json_read.read(rows_json)
    given = doc.suites_dir
    common = {
        "target": doc.target.id,
        "suite": doc.suite,
        "image": image_of(doc.image.model_dump() if doc.image else None),
        "timeout_s": doc.timeout_s,
        "suites_dir": Path(given).resolve() if given and given.startswith("/") else None,
        "refuse_jit": doc.target.env.get(REFUSE_JIT),
    }
    if "::" in wanted:
        r = rerun(st, test=wanted, **common)
        default = default_out(f"test-{r.name}")
    else:
        known = {x.id for x in doc.rows}
        if wanted not in known:
            raise UsageError(
                f"row {wanted!r} is not in {rows_json}",
                hint=f"rows there: {one_line(', '.join(sorted(known))) or 'none'}",
            )
        r = rerun(st, row=wanted, **common)
        default = default_out(wanted)
    return lines(r, rows_json, (out or default).resolve(), image=image, python=python, base=base)


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


def join(argv: list[str], base: Path | None = None) -> str:
    """The argv as one shell line, each argument `quote`d, except that every path below `base` is written
    `"$PWD"/<relative>`: the line then works from that folder (a checkout, a build's downloaded artifacts) on any
    machine, and names none of the machine that made it. Each piece around a path is quoted on its own, so the shell
    reads the same argument back."""
    if base is None:
        return " ".join(quote(a) for a in argv)
    prefix = str(base.resolve()).rstrip("/") + "/"
    return " ".join(_portable(arg, prefix) for arg in argv)


def _portable(arg: str, prefix: str) -> str:
    if prefix not in arg:
        return quote(arg)
    pieces = arg.split(prefix)
    return '"$PWD"/'.join(quote(p) if p else "" for p in pieces)


def repro_line(row: str, rows_json: str | None = None) -> str:
    """The command that prints a row's re-run lines (a report's hint): quoted, so pasting it runs that alone."""
    return join(["python", "-m", "ci", "repro", row, *(["--rows-json", rows_json] if rows_json else [])])


def on_host_block(row_id: str, target: Target, builds: Sequence[str], report: Path, argv: Sequence[str]) -> str:
    """What `ci repro --report` prints for a row that ran on a host's Python: the line to paste on a host of its
    target, and what that runs there. `builds` are the report's words (the vLLM versions its runs recorded)."""
    built = f" on vLLM {', '.join(builds)}" if builds else ""
    here = Path.cwd()
    said = f"{row_id} ran on a host's Python{built}: re-run it on {target.a_short} host ({target.id}) whose Python"
    return "\n".join(
        [
            comment(f"{said} holds that build, from a checkout:"),
            join(["python", "-m", "ci", "repro", row_id, "--report", str(report)], here),
            comment(f"which runs, there: {join(['python', *argv[1:]], here)}"),
        ]
    )


def comment(text: str) -> str:
    """A comment line of a printed block: one line, whatever `text` quotes from a report or a rows.json."""
    return "# " + one_line(text)
