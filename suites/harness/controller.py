"""The controller (the session's own process): each item spawned as a child, its end classified (crash, hang, JIT,
processes left behind), and the JUnit rewritten after every item, so a stop never loses a finished row."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from harness import boundary, causes, hardware, isolate, jit_seen, junit_file, outcomes, progress, reaper, shared, space
from harness.isolate import Outcome
from harness.items import ENV_CACHES_FROM, ENV_ITEM_LOGS, ENV_REFUSE_JIT, item_row, log_name
from harness.rows import Row, RowsDoc


class Controller:
    def __init__(self, config: pytest.Config, doc: RowsDoc | None) -> None:
        self.config = config
        self.doc = doc
        junit_opt = config.getoption("stackgate_junit")
        self.junit = Path(junit_opt).resolve() if junit_opt else None
        self.workdir = Path(tempfile.mkdtemp(prefix="stackgate-items-"))
        self.logs = (self.junit.parent / "logs") if self.junit else self.workdir
        self.timeout = config.getoption("stackgate_timeout") or (doc.timeout_s if doc else None)
        self.cases: list[junit_file.Case] = []
        self.interrupted = ""  # the signal that stopped the run, if one did
        self.full = ""  # the disk under the JUnit's folder filled (harness.space): no item starts after
        self.all_rows_collected: set[str] = set()
        self.owner = _owner(self.junit.parent) if self.junit else None
        if not os.environ.get(jit_seen.ENV_LOG):
            os.environ[jit_seen.ENV_LOG] = str((self.junit.parent if self.junit else self.workdir) / "jit-events.jsonl")

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        # before -k/-m deselection: a deselected row is chosen away, not unserved
        self.all_rows_collected |= {r.id for r in map(item_row, items) if r}

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            text = report.longreprtext
            self._add(
                junit_file.Case(
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
            alone = self._run_shared(session, bar) if self.config.getoption("stackgate_share") else session.items
            for item in alone:
                bar.starting(item.nodeid)
                case = self._run_item(item) if not self.full else self._not_run(item, space.not_run(self.full))
                self._served(session, item, case, bar)
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

    def _served(
        self, session: pytest.Session, item: pytest.Item, case: junit_file.Case, bar: progress.Progress
    ) -> None:
        self._add(case)
        outcomes.tell_pytest(item, case.outcome)
        bar.finished(case)
        if self.interrupted:
            session.shouldstop = f"interrupted by {self.interrupted}"

    def _run_shared(self, session: pytest.Session, bar: progress.Progress) -> list[pytest.Item]:
        """The items that can share a child run in one (harness.shared); returns those left to run each alone: the
        ones the shared child never reached after a crash, and rows of several GPUs (their workers are processes
        of their own, started for the row that built the engine)."""
        items = [i for i in session.items if not self._absent(i)]
        together = [i for i in items if (r := item_row(i)) is None or r.gpus <= 1]
        if len(together) < 2:
            return list(session.items)
        together = shared.by_engine(together, [item_row(i) for i in together])
        by_id = {i.nodeid: i for i in together}
        folder = self.workdir / "shared"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / shared.ITEMS).write_text(json.dumps(list(by_id)))
        self.logs.mkdir(parents=True, exist_ok=True)
        argv, env = isolate.child_command(self.config, self.doc, [*by_id], folder, item_row(together[0]), share=True)
        env[ENV_ITEM_LOGS] = str(self.logs)

        def on_done(done: shared.Done) -> None:
            item = by_id[done.nodeid]
            self._served(session, item, self._finish(item, done.outcome, done.seen), bar)

        try:
            left = shared.run_group(
                argv,
                nodeids=list(by_id),
                cwd=self.config.rootpath,
                results=folder,
                logs=[self.logs / log_name(n) for n in by_id],
                group_log=self.logs / f"shared-{log_name(next(iter(by_id)))}",
                timeout_s=self.timeout,
                env=env,
                on_done=on_done,
            )
        except reaper.Interrupted as sig:
            self.interrupted = sig.name
            current = shared.current_index(folder)
            if current is not None and list(by_id)[current] not in {c.nodeid for c in self.cases}:
                item = together[current]
                self._served(session, item, self._finish(item, _interrupted(sig.name), None), bar)
            raise
        return [i for i in session.items if i.nodeid in left or i.nodeid not in by_id]

    def _absent(self, item: pytest.Item) -> bool:
        row = item_row(item)
        return bool(row and self.doc and hardware.absent_reason(self.doc.target, row.gpus))

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
                    junit_file.Case(
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
            for field in (boundary.ROW_CONTENT, boundary.ROW_MEANING):  # --resume's check; the report's (as given)
                if row.get(field):
                    props.append((boundary.PREFIX + field, str(row.get(field))))
        if row is not None or d is not None:
            props += [
                ("stackgate.target", row.target if row else d.target_id),
                ("stackgate.suite", row.suite if row else d.suite),
            ]
        if d is not None:
            props += [("stackgate.image_digest", d.image_digest or "none"), ("stackgate.git_revision", d.git_revision)]
        if d is not None and row is not None and (card := hardware.cards(d.target, row.gpus)):
            props.append((boundary.CARD, card))
        return tuple(props)

    def _not_run(self, item: pytest.Item, outcome: Outcome) -> junit_file.Case:
        return junit_file.Case(nodeid=item.nodeid, properties=self._base_props(item_row(item)), outcome=outcome)

    def _run_item(self, item: pytest.Item) -> junit_file.Case:
        """One item in a process of its own."""
        row = item_row(item)
        reason = hardware.absent_reason(self.doc.target, row.gpus) if row and self.doc else None
        if reason:
            return self._not_run(item, Outcome(status="skipped", message=reason))
        window = jit_seen.Window()
        try:
            outcome = self._spawn(item)
        except reaper.Interrupted as sig:
            self.interrupted = sig.name
            outcome = _interrupted(sig.name)
        left = [*outcome.left_behind, *reaper.sweep()]
        if left:
            outcome = outcomes.left_behind(outcome, left)
        return self._finish(item, outcome, window.seen())

    def _finish(self, item: pytest.Item, outcome: Outcome, seen: jit_seen.Seen | None) -> junit_file.Case:
        """The item's testcase: its outcome, looked at for its cause, its JIT (None: not known) and its log."""
        props = list(self._base_props(item_row(item)))
        if outcome.status in ("failed", "error") and outcome.log:  # why it crashed, from every process's output
            found = causes.cause(isolate.tail(Path(outcome.log), lines=100_000))
            if found:
                props.append(("stackgate.cause", found))
        seen = seen or jit_seen.Seen(compiles=None, kernels=(), cache_new_files=())
        if seen.available:
            props += [("stackgate.jit.compiles", str(seen.compiles)), ("stackgate.jit.kernels", ",".join(seen.named()))]
        props.append(("stackgate.jit.cache_new_files", str(len(seen.cache_new_files))))
        if os.environ.get(ENV_REFUSE_JIT) == "1" and not item.get_closest_marker("jit_expected"):
            outcome = outcomes.refuse_jit(outcome, seen)
        outcome = outcomes.torn_log(outcome, seen)
        return junit_file.Case(nodeid=item.nodeid, properties=(*props, *outcome.properties), outcome=outcome)

    def _spawn(self, item: pytest.Item) -> Outcome:
        self.logs.mkdir(parents=True, exist_ok=True)
        log = self.logs / log_name(item.nodeid)
        result = self.workdir / f"{log.stem}.result.json"
        argv, env = isolate.child_command(self.config, self.doc, [item.nodeid], result, item_row(item), share=False)
        outcome = isolate.run_child(
            argv, cwd=self.config.rootpath, result=result, log=log, timeout_s=self.timeout, env=env
        )
        self._own(log)
        return outcome

    def _add(self, case: junit_file.Case) -> None:
        self.cases.append(case)
        if self.junit is None:
            return
        d = self.doc
        target, suite = (d.target_id, d.suite) if d else ("local", Path(str(self.config.rootpath)).name)
        name = junit_file.suite_name(target, suite, self.config.getoption("stackgate_shard"))
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
        try:
            junit_file.write(self.junit, name, suite_props, self.cases, owner=self.owner)
        except OSError as exc:
            if not space.full(exc):
                raise
            self.full = self.full or space.said(exc, self.junit.parent)
            last = self.cases[-1]
            if last.outcome.log and space.cut(Path(last.outcome.log)):
                self.cases[-1] = replace(last, outcome=space.noted(last.outcome, self.full))
            with contextlib.suppress(OSError):  # still full: the file of the rows before stays
                junit_file.write(self.junit, name, suite_props, self.cases, owner=self.owner)
        self._own(Path(os.environ[jit_seen.ENV_LOG]))

    def _own(self, path: Path) -> None:
        if self.owner is not None and path.exists():
            os.chown(path, *self.owner)

    def pytest_report_teststatus(self, report: pytest.TestReport) -> tuple[str, str, str] | None:
        # our progress lines say what finished; pytest's letters would only interleave with them
        if report.when in ("setup", "call"):
            cat = "error" if report.failed and report.when == "setup" else report.outcome
            return cat, "", cat.upper()
        return None


def _interrupted(signal_name: str) -> Outcome:
    return Outcome(status="error", message=f"interrupted by {signal_name}: the run was stopped during this row")


def aot_cache() -> str:
    """Which ahead-of-time Triton cache the rows ran with: the image's baked one, this host's bake
    (`ci run --host`), or none. A "no runtime JIT" verdict needs one of the first two."""
    listed = os.environ.get("STACKGATE_KERNEL_LIST")
    if listed and Path(listed).is_file():
        return "image" if listed.startswith("/opt/stackgate/") else f"host:{listed}"
    return "image" if Path("/opt/stackgate/aot/manifest.json").is_file() else "none"


def _owner(folder: Path) -> tuple[int, int] | None:
    """Root in a container writes files the host user must be able to delete: give them the folder's owner."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return None
    st = folder.stat()
    return (st.st_uid, st.st_gid) if st.st_uid != 0 else None
