"""The suites' pytest plugin: rows as parameters, one fresh process per item, JUnit written as items finish.

Load it with `-p harness.plugin` (what `python -m ci run` does) or from a conftest's `pytest_plugins`.
The same plugin plays two parts. In the parent session it collects, then runs each item as a child
`python -m pytest <nodeid>` and writes the JUnit file itself. In a child (`--stackgate-child FILE`)
it runs the one item normally and writes that item's reports to FILE before the process can exit.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import harness
from harness import causes, hardware, isolate, jit, junit, missed, profile, progress, reaper
from harness.isolate import Outcome
from harness.jit_sentinel import UNREADABLE as UNREADABLE_LINE
from harness.measure import Measurement
from harness.measure import record as _record
from harness.rows import ENV_ROWS, Row, RowsDoc, RowsFileError
from harness.rows import load as load_rows

ENV_CHILD = "STACKGATE_CHILD"
ENV_CACHES_FROM = "STACKGATE_CACHES_FROM"
TRACED_AFTER_READY = "stackgate.jit.traced_after_ready"  # frames torch.compile traced during timed requests
FIRST_REQUEST_ONLY = "stackgate.first_request_only"  # once-per-process work inside timed requests (first_calls)
ENV_REFUSE_JIT = "STACKGATE_REFUSE_JIT"  # "1": a row that compiles anything errors (the images set it)
_rows_key = pytest.StashKey[RowsDoc | None]()


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("stackgate")
    g.addoption("--stackgate-rows", help=f"rows.json to parametrize by (default: ${ENV_ROWS})")
    g.addoption("--stackgate-junit", help="write the run's JUnit XML here, rewritten after every item")
    g.addoption(
        "--stackgate-timeout",
        type=float,
        help="seconds per item (default: rows.json timeout_s)",
    )
    g.addoption("--stackgate-shard", default="0", help="shard index, part of the JUnit suite name")
    g.addoption(
        "--stackgate-row", action="append", default=[], help="only this row id (repeatable); other tests deselected"
    )
    g.addoption("--stackgate-inprocess", action="store_true", help="debugging only: run items in this process")
    g.addoption("--stackgate-child", help=argparse.SUPPRESS)  # internal: the parent starts children with it


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "track(*ids): the tracks whose rows this test serves, one item per row")
    config.addinivalue_line("markers", f"jit_expected: this test compiles on purpose; ${ENV_REFUSE_JIT} spares it")
    path = config.getoption("stackgate_rows") or os.environ.get(ENV_ROWS)
    doc = None
    if path:
        try:
            doc = load_rows(path)
        except RowsFileError as exc:
            raise pytest.UsageError(str(exc)) from None
        os.environ[ENV_ROWS] = str(Path(path).resolve())  # children run from the rootdir
    config.stash[_rows_key] = doc
    if config.getoption("stackgate_child"):
        config.pluginmanager.register(_Child(Path(config.getoption("stackgate_child"))), "stackgate-child")
    elif not config.getoption("stackgate_inprocess"):
        config.pluginmanager.register(_Parent(config, doc), "stackgate-parent")


def rows_doc(config: pytest.Config) -> RowsDoc | None:
    return config.stash.get(_rows_key, None)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "row" not in metafunc.fixturenames:
        return
    doc = rows_doc(metafunc.config)
    if doc is None:
        raise RowsFileError(
            f"{metafunc.definition.nodeid} takes rows, but no rows file was given: "
            f"pass --stackgate-rows or set ${ENV_ROWS} (python -m ci run does)"
        )
    marker = metafunc.definition.get_closest_marker("track")
    tracks = set(marker.args) if marker else None
    only = set(metafunc.config.getoption("stackgate_row"))
    rows = [r for r in doc.rows if (tracks is None or r.track in tracks) and (not only or r.id in only)]
    metafunc.parametrize("row", rows, ids=[r.id for r in rows])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With --stackgate-row, a re-run of chosen rows: tests that serve no row are left out. A row test
    whose track has no row in this rows.json (pytest's empty-parameter item) is left out too: there is
    nothing for it to run, which is not a skip."""
    only_rows = bool(config.getoption("stackgate_row"))

    def drop(item: pytest.Item) -> bool:
        rowless = item_row(item) is None
        return rowless and (only_rows or "row" in getattr(item, "fixturenames", ()))

    dropped = [i for i in items if drop(i)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if not drop(i)]


def item_row(item: pytest.Item) -> Row | None:
    params = getattr(item, "callspec", None)
    value = params.params.get("row") if params else None
    return value if isinstance(value, Row) else None


@pytest.fixture
def record_measurement(request: pytest.FixtureRequest):
    """Attach a Measurement to this test's JUnit testcase (unit, phase, repeats, spread, samples)."""

    def _rec(m: Measurement) -> Measurement:
        return _record(request.node, m)

    return _rec


@pytest.fixture
def jit_window() -> jit.Window:
    """Compiles in every process since this test started; `jit.expect_aot(jit_window.seen())` checks them."""
    return jit.Window()


# --- child: run one item, report it before anything can exit early ------------------------------------


class _Child:
    def __init__(self, result: Path) -> None:
        self.result = result
        self.reports: list[dict[str, Any]] = []

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        row, doc = item_row(item), rows_doc(item.config)
        if row is not None and doc is not None and not os.environ.get("STACKGATE_HW_CHECKED"):
            reason = hardware.absent_reason(doc.target, row.gpus)
            if reason:
                pytest.skip(reason)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        simple = _simple(report)
        if report.when == "call":  # what the timed requests did, after the engine was ready
            traced = profile.traced_in_requests()
            if traced:  # frames torch.compile traced
                simple["user_properties"].append([TRACED_AFTER_READY, profile.describe_traced(traced)])
            first = profile.describe_first_calls()
            if first:  # vLLM's once-per-process work, timed
                simple["user_properties"].append([FIRST_REQUEST_ONLY, first])
        self.reports.append(simple)

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        tmp = self.result.with_suffix(".tmp")
        tmp.write_text(json.dumps({"nodeid": nodeid, "reports": self.reports}))
        os.replace(tmp, self.result)


def _simple(report: pytest.TestReport) -> dict[str, Any]:
    message = ""
    if report.skipped:
        if hasattr(report, "wasxfail"):
            message = f"xfail: {report.wasxfail}"
        elif isinstance(report.longrepr, tuple):
            message = str(report.longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(report.longrepr, "reprcrash", None)
    if report.failed and crash is not None:
        message = crash.message.splitlines()[0] if crash.message else ""
        if message.isidentifier():  # a bare `assert` or exception in library code: say where, and what it checked
            message = _bare_failure(message, crash, report.longreprtext)
    return {
        "when": report.when,
        "outcome": report.outcome,
        "duration": report.duration,
        "message": message,
        "longrepr": report.longreprtext if report.failed else "",
        "user_properties": [[str(k), v if isinstance(v, str) else json.dumps(v)] for k, v in report.user_properties],
    }


def _bare_failure(name: str, crash: Any, text: str) -> str:
    """`AssertionError` alone names nothing: add the crash site (path from its package on) and the source line
    pytest marked with '>' last, e.g. "AssertionError at vllm/models/.../model.py:882: assert self.x is not None"."""
    path = causes.short_path(str(getattr(crash, "path", "")))
    source = next((ln[1:].strip() for ln in reversed(text.splitlines()) if ln.startswith(">")), "")
    return f"{name} at {path}:{getattr(crash, 'lineno', '?')}" + (f": {source}" if source else "")


# --- parent: spawn, classify, write -----------------------------------------------------------------------


class _Parent:
    def __init__(self, config: pytest.Config, doc: RowsDoc | None) -> None:
        self.config = config
        self.doc = doc
        junit_opt = config.getoption("stackgate_junit")
        self.junit = Path(junit_opt).resolve() if junit_opt else None
        self.workdir = Path(tempfile.mkdtemp(prefix="stackgate-items-"))
        self.logs = (self.junit.parent / "logs") if self.junit else self.workdir
        self.timeout = config.getoption("stackgate_timeout") or (doc.timeout_s if doc else None)
        self.cases: list[junit.Case] = []
        self.interrupted = ""  # the signal that stopped the run, if one did
        self.all_rows_collected: set[str] = set()
        self.owner = _owner(self.junit.parent) if self.junit else None
        if not os.environ.get(jit.ENV_LOG):
            os.environ[jit.ENV_LOG] = str((self.junit.parent if self.junit else self.workdir) / "jit-events.jsonl")

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        # before -k/-m deselection: a deselected row is chosen away, not unserved
        self.all_rows_collected |= {r.id for r in map(item_row, items) if r}

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            text = report.longreprtext
            self._add(
                junit.Case(
                    nodeid=report.nodeid or "collection",
                    properties=self._base_props(None),
                    outcome=Outcome(
                        status="error", message="collection error: " + isolate._first_line(text), details=text
                    ),
                )
            )

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        if session.config.option.collectonly:
            return False  # type: ignore[return-value]  # pytest's own loop handles --collect-only
        self._unserved_rows(session)
        bar = progress.Progress(len(session.items), self._write)
        reaper.become_subreaper()  # processes that escape an item's group come back to us, not to init
        reaper.install_handlers()
        try:
            for item in session.items:
                bar.starting(item.nodeid)
                case = self._run_item(item)
                self._add(case)
                self._report(item, case.outcome)
                bar.finished(case)
                if self.interrupted:
                    session.shouldstop = f"interrupted by {self.interrupted}"
                if session.shouldfail or session.shouldstop:
                    break
        except reaper.Interrupted as sig:  # between items: the finished ones are written, the rest never started
            self.interrupted = sig.name
            session.shouldstop = f"interrupted by {sig.name}"
        finally:
            reaper.sweep()
            shutil.rmtree(self.workdir, ignore_errors=True)
        self._write(progress.summary(self.cases, bar.elapsed(), str(self.junit or "(not written)")))
        return True

    def _write(self, line: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(line)
        else:
            print(line, flush=True)

    def _unserved_rows(self, session: pytest.Session) -> None:
        narrowed = any("::" in str(a) for a in self.config.invocation_params.args) or self.config.getoption(
            "stackgate_row"
        )
        if self.doc is None or narrowed:
            return
        for r in self.doc.rows:
            if r.id not in self.all_rows_collected:
                self._add(
                    junit.Case(
                        nodeid=f"{self.doc.suite}::{r.id}",
                        properties=self._base_props(r),
                        outcome=Outcome(status="error", message=f"no test serves track {r.track} in this suite"),
                    )
                )

    def _base_props(self, row: Row | None) -> tuple[tuple[str, str], ...]:
        d = self.doc
        props = []
        if row is not None:
            props += [("stackgate.row", row.id), ("stackgate.change", row.change), ("stackgate.track", row.track)]
        if row is not None or d is not None:
            props += [
                ("stackgate.target", row.target if row else d.target_id),
                ("stackgate.suite", row.suite if row else d.suite),
            ]
        if d is not None:
            props += [("stackgate.image_digest", d.image_digest or "none"), ("stackgate.git_revision", d.git_revision)]
        return tuple(props)

    def _run_item(self, item: pytest.Item) -> junit.Case:
        row = item_row(item)
        props = list(self._base_props(row))
        reason = hardware.absent_reason(self.doc.target, row.gpus) if row and self.doc else None
        if reason:
            return junit.Case(
                nodeid=item.nodeid, properties=tuple(props), outcome=Outcome(status="skipped", message=reason)
            )
        window = jit.Window()
        try:
            outcome = self._spawn(item)
        except reaper.Interrupted as sig:
            self.interrupted = sig.name
            outcome = Outcome(status="error", message=f"interrupted by {sig.name}: the run was stopped during this row")
        left = [*outcome.left_behind, *reaper.sweep()]
        if left:
            outcome = _left_behind(outcome, left)
        if outcome.status in ("failed", "error") and outcome.log:  # why it crashed, from every process's output
            found = causes.cause(isolate.tail(Path(outcome.log), lines=100_000))
            if found:
                props.append(("stackgate.cause", found))
        seen = window.seen()
        if seen.available:
            props += [("stackgate.jit.compiles", str(seen.compiles)), ("stackgate.jit.kernels", ",".join(seen.kernels))]
        props.append(("stackgate.jit.cache_new_files", str(len(seen.cache_new_files))))
        if os.environ.get(ENV_REFUSE_JIT) == "1" and not item.get_closest_marker("jit_expected"):
            outcome = _refuse_jit(outcome, seen)
        outcome = _torn_log(outcome, seen)
        return junit.Case(nodeid=item.nodeid, properties=(*props, *outcome.properties), outcome=outcome)

    def _spawn(self, item: pytest.Item) -> Outcome:
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in item.nodeid)[-150:]
        self.logs.mkdir(parents=True, exist_ok=True)
        log = self.logs / f"{safe}.log"
        result = self.workdir / f"{safe}.result.json"
        cfg = self.config
        argv = [
            "-m",
            "pytest",
            item.nodeid,
            "-p",
            "harness.plugin",
            "--stackgate-child",
            str(result),
            "--rootdir",
            str(cfg.rootpath),
            "-p",
            "no:cacheprovider",
            "-q",
            "-s",  # no capture: the row's output reaches its log as it is written, so a hung row's log is not empty
        ]
        if cfg.inipath:
            argv += ["-c", str(cfg.inipath)]
        row = item_row(item)
        env = dict(os.environ, **{ENV_CHILD: "1", "STACKGATE_HW_CHECKED": "1"}, **hardware.NO_MULTICAST)
        env["STACKGATE_ROW_ID"] = row.id if row else ""  # the JIT sentinel names the row that compiled
        if row is not None and self.doc is not None:  # the row's own GPUs: tp x dp of them, the same first ones
            env.update(hardware.assign(self.doc.target, row.gpus))
        if row is not None:  # what the model's checkpoint needs over the target's env (models.yaml says why)
            env.update({str(k): str(v) for k, v in (row.model_info.get("env") or {}).items()})
        harness_root = str(Path(harness.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (harness_root, env.get("PYTHONPATH", "")) if p)
        outcome = isolate.run_child(argv, cwd=cfg.rootpath, result=result, log=log, timeout_s=self.timeout, env=env)
        self._own(log)
        return outcome

    def _add(self, case: junit.Case) -> None:
        self.cases.append(case)
        if self.junit is None:
            return
        d = self.doc
        target, suite = (d.target_id, d.suite) if d else ("local", Path(str(self.config.rootpath)).name)
        name = junit.suite_name(target, suite, self.config.getoption("stackgate_shard"))
        suite_props = {
            "stackgate.target": target,
            "stackgate.suite": suite,
            "stackgate.image_digest": (d.image_digest or "none") if d else "none",
            "stackgate.git_revision": d.git_revision if d else "",
            "stackgate.host": os.uname().nodename,
            "stackgate.stack_digest": d.stack_digest if d else "",
            "stackgate.aot": aot_cache(),
            # what the JIT caches held at the start: empty, the AOT bake only, or a bake artefact (ci run --host)
            "stackgate.caches": os.environ.get(ENV_CACHES_FROM) or ("image" if aot_cache() == "image" else "unknown"),
        }
        junit.write(self.junit, name, suite_props, self.cases, owner=self.owner)
        self._own(Path(os.environ[jit.ENV_LOG]))

    def _own(self, path: Path) -> None:
        if self.owner is not None and path.exists():
            os.chown(path, *self.owner)

    def _report(self, item: pytest.Item, o: Outcome) -> None:
        """Tell pytest what happened, so its summary and exit status agree with the JUnit file."""
        if o.status == "skipped":
            rep = pytest.TestReport(
                item.nodeid,
                item.location,
                {},
                "skipped",
                (str(item.path), (item.location[1] or 0) + 1, f"Skipped: {o.message}"),
                "setup",
            )
        else:
            outcome = "passed" if o.status == "passed" else "failed"
            when = "setup" if o.status == "error" else "call"
            text = f"{o.message}\n{o.details}".strip() + (f"\n(full log: {o.log})" if o.log else "")
            rep = pytest.TestReport(
                item.nodeid,
                item.location,
                {},
                outcome,
                text if outcome == "failed" else None,
                when,
                duration=o.duration_s,
                user_properties=list(o.properties),
            )
        item.ihook.pytest_runtest_logreport(report=rep)

    def pytest_report_teststatus(self, report: pytest.TestReport) -> tuple[str, str, str] | None:
        # our progress lines say what finished; pytest's letters would only interleave with them
        if report.when in ("setup", "call"):
            cat = "error" if report.failed and report.when == "setup" else report.outcome
            return cat, "", cat.upper()
        return None


def aot_cache() -> str:
    """Which ahead-of-time Triton cache the rows ran with: the image's baked one, this host's bake
    (`ci run --host`), or none. A "no runtime JIT" verdict needs one of the first two."""
    listed = os.environ.get("STACKGATE_KERNEL_LIST")
    if listed and Path(listed).is_file():
        return "image" if listed.startswith("/opt/stackgate/") else f"host:{listed}"
    return "image" if Path("/opt/stackgate/aot/manifest.json").is_file() else "none"


def _refuse_jit(outcome: Outcome, seen: jit.Seen) -> Outcome:
    """With JIT refused, a row that compiled anything (a Triton kernel, files new in a JIT cache: inductor,
    vLLM's compile cache, DeepGEMM, FlashInfer, CUDA's; or a frame torch.compile traced during a request)
    errors, naming what compiled where."""
    found = []
    traced = dict(outcome.properties).get(TRACED_AFTER_READY)
    if traced:  # Dynamo traces in each process: with its graph in inductor's cache nothing new is written
        found.append(f"torch.compile traced after ready (Dynamo, once per process: no cache carries it, only a "
                     f"warm-up at engine start does): {traced}")  # fmt: skip
    if seen.compiles:
        cache = os.environ.get("TRITON_CACHE_DIR", "~/.triton/cache")
        found.append(f"{seen.compiles} Triton compile(s) into {cache}: {', '.join(seen.kernels[:8])}")
        why = missed.explain(seen.events, missed.baked())
        if why:
            found.append(f"the bake compiled {len(why)} of their specialisations too: {' | '.join(why[:3])}")
    if seen.cache_new_files:
        dirs = sorted({str(Path(f).parent) for f in seen.cache_new_files})
        found.append(f"{len(seen.cache_new_files)} new JIT cache file(s) under {', '.join(dirs[:3])}")
        found += missed.explain_compile_cache(seen.cache_new_files)[:3]
    if not found:
        return outcome
    what = f"JIT refused (${ENV_REFUSE_JIT}=1): " + "; ".join(found)
    if outcome.status in ("passed", "skipped"):
        return replace(outcome, status="error", message=what)
    return replace(outcome, message=f"{outcome.message}; {what}")


def _torn_log(outcome: Outcome, seen: jit.Seen) -> Outcome:
    """A row whose JIT-log lines cannot all be read does not pass: what it compiled is not known."""
    torn = [e.get("torn", "") for e in seen.events if e.get("kernel") == UNREADABLE_LINE]
    if not torn:
        return outcome
    what = (f"{len(torn)} unreadable JIT-log line(s) (a process killed mid-write, or a short write on a full disk), "
            f"so its compiles cannot be counted: {torn[0][:80]!r}")  # fmt: skip
    if outcome.status in ("passed", "skipped"):
        return replace(outcome, status="error", message=what)
    return replace(outcome, message=f"{outcome.message}; {what}")


def _left_behind(outcome: Outcome, left: list[str]) -> Outcome:
    """A row whose processes outlive it does not pass: they would hold the GPU and skew the next row."""
    what = f"left {len(left)} process(es) running after the test, killed: {', '.join(left[:5])}"
    if outcome.status in ("passed", "skipped"):
        return replace(outcome, status="error", message=what)
    return replace(outcome, message=f"{outcome.message}; {what}")


def _owner(folder: Path) -> tuple[int, int] | None:
    """Root in a container writes files the host user must be able to delete: give them the folder's owner."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return None
    st = folder.stat()
    return (st.st_uid, st.st_gid) if st.st_uid != 0 else None
