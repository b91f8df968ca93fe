"""`ci run` over a host's devices, on this machine's CPU with stand-in GPUs: rows packed by memory budget, a row of
N GPUs waiting for N free ones, every row its own JUnit, --resume after a SIGTERM, --deadline, a dead harness; a
timed schedule gives each run its GPU alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import pytest
from support.paths import REPO

from ci import cli
from ci.run.schedule import dispatch
from ci.run.schedule.packing import (
    BESIDE_KV_GIB,
    DUMMY_KV_GIB,
    DUMMY_ROW_GIB,
    MEASURED_MARGIN_GIB,
    SHARED_JOB_GIB,
    Device,
    Packing,
    jobs,
    next_jobs,
)
from ci.stack import loader, plan

STACK = loader.load(REPO / "stack")
BASE = next(r for r in plan.build(STACK).rows if r.target == "cpu")  # cpu-selftest: random weights


def row(n: int, *, gpus: int = 1, model: str = "cpu-selftest", change: str | None = None) -> plan.Row:
    return replace(BASE, id=f"c{n}.cpu.{model}.{n:08x}", change=change or f"c{n}", model=model, tp=gpus)


def test_random_weight_rows_share_a_device_by_budget_and_a_hub_row_takes_it_whole() -> None:
    devices = [Device("0", 2 * DUMMY_ROW_GIB), Device("1", 2 * DUMMY_ROW_GIB)]
    pending = jobs([row(n) for n in range(5)], STACK)
    packing = Packing(devices)
    started = next_jobs(pending, packing, set())
    assert sorted(ids for _, ids in started) == [("0",), ("0",), ("1",), ("1",)] and len(pending) == 1
    hub = jobs([row(9, model="llama-3-8b-eagle")], STACK)
    assert hub[0].memory_gib is None and next_jobs(hub, packing, set()) == []  # no device is idle
    for job, ids in started:
        if ids == ("0",):
            packing.release(job, ids)
    assert [ids for _, ids in next_jobs(hub, packing, set())] == [("0",)]  # device 0 idle: the hub row takes it


def test_a_row_of_two_gpus_waits_for_two_free_and_narrower_rows_do_not_take_them() -> None:
    devices = [Device("a", DUMMY_ROW_GIB), Device("b", DUMMY_ROW_GIB)]  # one random-weight row each
    packing = Packing(devices)
    first = next_jobs(jobs([row(1)], STACK), packing, set())
    pending = jobs([row(2, gpus=2), row(3)], STACK)
    assert pending[0].gpus == 2  # the widest first
    assert next_jobs(pending, packing, set()) == [] and len(pending) == 2  # row 3 would take the GPU row 2 waits for
    packing.release(*first[0])
    ((job, ids),) = next_jobs(pending, packing, set())
    assert job.gpus == 2 and sorted(ids) == ["a", "b"] and [j.row.id for j in pending] == [row(3).id]


def test_a_row_that_held_more_than_its_budget_last_time_is_budgeted_what_it_held() -> None:
    heavy, light = row(1), row(2)
    (a, b) = sorted(jobs([heavy, light], STACK, peaks={heavy.id: 31.4, light.id: 9.0}), key=lambda j: j.row.id)
    assert a.memory_gib == pytest.approx(31.4 + MEASURED_MARGIN_GIB) and b.memory_gib == DUMMY_ROW_GIB  # never less
    group = [row(3, change="g"), row(4, change="g")]
    (shared,) = jobs(group, STACK, share=True, peaks={group[1].id: 31.4})
    assert shared.memory_gib == pytest.approx(31.4 + MEASURED_MARGIN_GIB + DUMMY_KV_GIB)  # and its second engine
    (plain,) = jobs(group, STACK, share=True)
    assert plain.memory_gib == SHARED_JOB_GIB


def test_a_models_own_kv_budget_sizes_its_jobs_so_more_of_its_rows_share_a_device() -> None:
    """A tiny model's rows hold 2 GiB of KV (models.yaml kv_cache_gib): a row is budgeted 8 GiB and a shared process
    of its rows 10, where the default's are 18 and 30; an H200 then holds all six tiny groups at once."""
    tiny = [row(n, model="tiny-llama-eagle", change="48804") for n in range(3)]
    assert {j.memory_gib for j in jobs(tiny, STACK)} == {2 + BESIDE_KV_GIB}
    (shared,) = jobs(tiny, STACK, share=True)
    assert shared.memory_gib == shared.planned_gib == 2 * 2 + BESIDE_KV_GIB
    assert jobs([row(1)], STACK)[0].memory_gib == DUMMY_ROW_GIB  # cpu-selftest: the default
    groups = [[row(10 * g + n, model="tiny-llama-eagle", change=f"g{g}") for n in range(3)] for g in range(6)]
    pending = jobs([r for g in groups for r in g], STACK, share=True)
    started = next_jobs(pending, Packing([Device("0", 139.0)]), set())
    assert len(started) == 6 and not pending  # at 30 GiB a shared job, four
    (measured,) = jobs(tiny, STACK, share=True, peaks={tiny[0].id: 9.5})
    assert measured.memory_gib == pytest.approx(9.5 + MEASURED_MARGIN_GIB + 2) and measured.planned_gib == 10


def test_shared_jobs_of_more_engine_configurations_start_first() -> None:
    """A shared job's length is the engines it builds: the job of three backends starts before one of four rows that
    differ only in batch and context, which the plan lists first."""
    one = [replace(row(n, change="one"), batch=n + 1) for n in range(4)]
    three = [replace(row(10 + n, change="three"), backend=b) for n, b in enumerate(("A", "B", "C"))]
    assert [j.group.split("/")[1] for j in jobs([*one, *three], STACK, share=True)] == ["three", "one"]
    assert [j.group.split("/")[1] for j in jobs([*one, *three], STACK)][:1] == ["one"]  # a row a process: its rows


def test_rows_of_one_model_and_change_run_one_after_another() -> None:
    packing = Packing([Device("0", 1000.0)])
    pending = jobs([row(1, change="same"), row(2, change="same"), row(3)], STACK)
    started = next_jobs(pending, packing, set())
    assert sorted(j.row.id for j, _ in started) == sorted([row(1, change="same").id, row(3).id])


# A stand-in for the harness: records when and where it ran, sleeps, writes its rows' JUnit (several rows, one after
# another, where they share a process); on SIGTERM it writes the row in flight as interrupted, as the harness does.
# A row named dies... makes it die without writing.
WORKER = textwrap.dedent("""
    import os, signal, sys, time
    junit, rows, seconds = sys.argv[1], sys.argv[2].split(","), float(sys.argv[3])
    cases = []
    def case(row, result):
        return (f'<testcase name="t[{row}]"><properties><property name="stackgate.row" value="{row}"/>'
                f'<property name="gpus" value="{os.environ.get("CUDA_VISIBLE_DEVICES", "")}"/>'
                f'<property name="pid" value="{os.getpid()}"/>'
                f'<property name="span" value="{start} {time.time()}"/></properties>{result}</testcase>')
    def write():
        with open(junit + ".tmp", "w") as fh:
            fh.write('<testsuites><testsuite name="s">' + "".join(cases) + '</testsuite></testsuites>')
        os.replace(junit + ".tmp", junit)
    def stop(signum, frame):
        cases.append(case(row, '<error message="interrupted by SIGTERM: the run was stopped during this row"/>'))
        write()
        sys.exit(143)
    signal.signal(signal.SIGTERM, stop)
    for row in rows:
        start = time.time()
        time.sleep(seconds)
        if row.startswith("dies"):
            sys.exit(3)
        cases.append(case(row, ""))
        write()
""")

DRIVER = textwrap.dedent("""
    import json, sys
    from dataclasses import replace
    from pathlib import Path
    from ci.run.schedule import dispatch
    from ci.run.schedule.packing import Device
    from ci.stack import loader, plan
    out, spec = Path(sys.argv[1]), json.loads(sys.argv[2])
    st = loader.load(Path(spec["stack"]))
    base = next(r for r in plan.build(st).rows if r.target == "cpu")
    # a row: [prefix, gpus] or [prefix, gpus, suite]; another suite's results go to out/<suite>
    rows = [replace(base, id=f"{p}{n}.cpu.cpu-selftest.{n:08x}", change=spec.get("change") or f"{p}{n}", tp=g,
                    suite=(s or [base.suite])[0]) for n, (p, g, *s) in enumerate(spec["rows"])]
    folder = {r.suite: out if r.suite == base.suite else out / r.suite for r in rows}
    worker = out / "worker.py"
    def command(job, ids, junit):
        return [sys.executable, str(worker), str(junit), ",".join(r.id for r in job.rows), str(spec["seconds"])], \\
            {"CUDA_VISIBLE_DEVICES": ",".join(ids)}, None
    junit = lambda job: folder[job.row.suite] / f"junit-{job.row.id}.xml"
    plans = {suite: dispatch.Plan(command=command, junit=junit, out=f) for suite, f in folder.items()}
    for f in folder.values():
        f.mkdir(parents=True, exist_ok=True)
    devices = [Device(i, spec["memory"]) for i in spec["devices"]]
    try:
        code = dispatch.run(st, rows, devices, plans,
                             resume=spec.get("resume", False), deadline_s=spec.get("deadline"),
                             share=spec.get("share", False), alone=spec.get("alone", False))
    except Exception as exc:
        print("raised", type(exc).__name__, getattr(exc, "exit_code", None), exc, flush=True)
        sys.exit(getattr(exc, "exit_code", 99))
    sys.exit(code)
""")


def _drive(out: Path, **spec) -> subprocess.Popen[str]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "worker.py").write_text(WORKER)
    spec = {"stack": str(REPO / "stack"), "seconds": 1.5, "memory": 2 * DUMMY_ROW_GIB, "devices": ["0", "1"], **spec}
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", DRIVER, str(out), json.dumps(spec)], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip


def _props(out: Path) -> dict[str, dict[str, str]]:
    from lxml import etree

    found = {}
    for f in out.glob("junit-*.xml"):
        tc = etree.parse(str(f)).getroot().find(".//testcase")
        found[f.stem.removeprefix("junit-")] = {p.get("name"): p.get("value") for p in tc.iter("property")}
    return found


def test_four_rows_run_at_once_two_per_stand_in_gpu_each_with_its_junit(tmp_path: Path) -> None:
    proc = _drive(tmp_path, rows=[["r", 1]] * 4)
    said, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, said
    props = _props(tmp_path)
    assert len(props) == 4 and sorted(p["gpus"] for p in props.values()) == ["0", "0", "1", "1"]
    spans = [tuple(map(float, p["span"].split())) for p in props.values()]
    assert max(s for s, _ in spans) < min(e for _, e in spans)  # all four ran at the same time
    assert "[4/4] pass" in said and "ETA" in said


def test_two_suites_share_the_stand_in_gpus_in_one_schedule_each_in_its_own_folder(tmp_path: Path) -> None:
    """`ci main` on a GPU host: the suites' rows are packed together, not one suite after the other, so a suite
    of few groups leaves no GPU idle; each suite's JUnit files stay in its own results folder."""
    proc = _drive(tmp_path, rows=[["a", 1, "s1"], ["b", 1, "s1"], ["c", 1, "s2"], ["d", 1, "s2"]])
    said, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, said
    first, second = _props(tmp_path / "s1"), _props(tmp_path / "s2")
    assert len(first) == 2 and len(second) == 2 and not list(tmp_path.glob("junit-*.xml"))
    spans = [tuple(map(float, p["span"].split())) for p in [*first.values(), *second.values()]]
    assert max(s for s, _ in spans) < min(e for _, e in spans)  # the two suites' rows ran at the same time


def test_the_deadline_records_each_suites_rows_not_started_in_its_own_folder(tmp_path: Path) -> None:
    rows = [["a", 1, "s1"], ["b", 1, "s2"], ["c", 1, "s1"], ["d", 1, "s2"], ["e", 1, "s1"], ["f", 1, "s2"]]
    proc = _drive(tmp_path, rows=rows, memory=DUMMY_ROW_GIB, devices=["0"], seconds=2.0, deadline=6.0)
    said, _ = proc.communicate(timeout=60)
    assert proc.returncode == dispatch.DEADLINE_EXIT, said
    left = {s: json.loads((tmp_path / s / dispatch.NOT_RUN).read_text()) for s in ("s1", "s2")}
    assert left["s1"]["suite"] == "s1" and left["s2"]["suite"] == "s2"
    assert {r[0] for r in left["s1"]["rows"]} <= set("ace") and {r[0] for r in left["s2"]["rows"]} <= set("bdf")
    ran = {s: len(list((tmp_path / s).glob("junit-*.xml"))) for s in ("s1", "s2")}
    assert ran["s1"] + len(left["s1"]["rows"]) == 3 and ran["s2"] + len(left["s2"]["rows"]) == 3


def test_the_peaks_an_earlier_run_left_in_the_folder_keep_two_heavy_rows_apart(tmp_path: Path) -> None:
    """Two rows fit one stand-in GPU side by side at their default budgets; once an earlier run in the folder
    recorded one of them holding 31.4 GiB, the next run starts them one after the other."""
    first = _drive(tmp_path, rows=[["h", 1], ["l", 1]], devices=["0"])
    said, _ = first.communicate(timeout=60)
    assert first.returncode == 0 and "memory budgets" not in said, said
    spans = sorted(tuple(map(float, p["span"].split())) for p in _props(tmp_path).values())
    assert spans[1][0] < spans[0][1]  # side by side
    heavy = next(f for f in tmp_path.glob("junit-h0.*.xml"))
    text = heavy.read_text().replace(
        "<properties>", '<properties><property name="stackgate.gpu_peak_gib" value="31.4"/>'
    )
    heavy.write_text(text)
    second = _drive(tmp_path, rows=[["h", 1], ["l", 1]], devices=["0"])
    said, _ = second.communicate(timeout=60)
    assert second.returncode == 0 and "1 job(s) above their planned budget, up to 33.4 GiB" in said, said
    spans = sorted(tuple(map(float, p["span"].split())) for p in _props(tmp_path).values())
    assert spans[0][1] <= spans[1][0]  # one after the other


def test_a_sigterm_keeps_what_finished_and_resume_runs_the_rest_and_the_interrupted_row(tmp_path: Path) -> None:
    # one stand-in GPU of 18 GiB: one row at a time, 1.5 s each
    proc = _drive(tmp_path, rows=[["r", 1]] * 4, memory=DUMMY_ROW_GIB, devices=["0"])
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("junit-*.xml"))) < 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)  # the second row is in flight
    proc.send_signal(signal.SIGTERM)
    said, _ = proc.communicate(timeout=60)
    assert proc.returncode == 143, said
    outcomes = {f.name: dispatch.outcome(f) for f in tmp_path.glob("junit-*.xml")}
    assert sorted(outcomes.values()) == ["interrupted", "pass"], outcomes
    proc = _drive(tmp_path, rows=[["r", 1]] * 4, memory=DUMMY_ROW_GIB, devices=["0"], resume=True)
    said, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, said
    assert "--resume: 1 row has a result" in said and "[3/3]" in said
    assert sorted(dispatch.outcome(f) for f in tmp_path.glob("junit-*.xml")) == ["pass"] * 4


def test_the_deadline_stops_starting_rows_and_every_started_row_has_its_junit_in_time(tmp_path: Path) -> None:
    start = time.time()
    proc = _drive(tmp_path, rows=[["r", 1]] * 5, memory=DUMMY_ROW_GIB, devices=["0"], seconds=2.0, deadline=8.0)
    said, _ = proc.communicate(timeout=60)
    assert proc.returncode == dispatch.DEADLINE_EXIT, said
    files = list(tmp_path.glob("junit-*.xml"))
    assert 1 <= len(files) < 5 and all(f.stat().st_mtime <= start + 8.0 for f in files)
    left = json.loads((tmp_path / dispatch.NOT_RUN).read_text())
    assert len(left["rows"]) + len(files) == 5 and "--resume" in left["fix"]
    assert "run the same command with --resume" in said


def test_when_no_row_can_end_before_the_deadline_the_run_ends_at_once(tmp_path: Path) -> None:
    """Nothing in flight and the next row would end after the deadline: the run stops now rather than hold the GPUs
    idle until the deadline (on the H200 a 108 s row left 82 s of waiting before a 220 s deadline)."""
    proc = _drive(tmp_path, rows=[["r", 1]] * 2, memory=DUMMY_ROW_GIB, devices=["0"], seconds=4.0, deadline=10.0)
    said, _ = proc.communicate(timeout=60)
    assert proc.returncode == dispatch.DEADLINE_EXIT, said
    (ran,) = tmp_path.glob("junit-*.xml")
    waited = (tmp_path / dispatch.NOT_RUN).stat().st_mtime - ran.stat().st_mtime
    assert waited < 2.0, f"{waited:.1f} s between the last row's end and the stop"  # the reserve alone is 2.5 s


def test_a_session_that_dies_without_junit_fails_its_row_saying_so(tmp_path: Path) -> None:
    proc = _drive(tmp_path, rows=[["dies", 1], ["r", 1]])
    said, _ = proc.communicate(timeout=60)
    assert proc.returncode == 1, said
    (dead,) = [f for f in tmp_path.glob("junit-dies*.xml")]
    assert dispatch.outcome(dead) == "error"  # the JUnit written in its place
    assert "without writing its JUnit" in dead.read_text() and "missing" in said
    assert 'tests="1"' in dead.read_text() and 'errors="1"' in dead.read_text()  # its counts agree with its testcase


def test_ci_run_schedules_the_cpu_rows_on_stand_in_gpus_and_the_report_reads_every_row(tmp_path: Path) -> None:
    out = tmp_path / "r"
    argv = ["run", "cpu", "selftest", "--host", "--gpus", "a,b", "--gpu-memory", "36", "--out", str(out)]
    assert cli.main([*argv, "--isolate"]) == 0
    files = sorted(out.glob("junit-cpu-selftest-0.*.xml"))
    assert len(files) == 4 and (out / "rows.json").is_file()
    assert cli.main(argv) == 0  # shared: the four rows of one model and change are one job, one JUnit
    (file,) = out.glob("junit-cpu-selftest-0.*.xml")
    assert sorted(dispatch.row_outcomes(file).values()) == ["pass"] * 4
    assert cli.main(["report", str(out), "--out", str(tmp_path / "report"), "--target", "cpu"]) == 0
    rows = [r for r in json.loads((tmp_path / "report" / "report.json").read_text())["rows"] if r["target"] == "cpu"]
    assert rows and all(r["status"] == "pass" for r in rows)
    assert cli.main(["run", "cpu", "selftest", "--host", "--one-session", "--resume", "--out", str(out)]) == 2


def test_ci_main_runs_the_rows_named_on_stand_in_gpus_and_reports_those_rows(tmp_path: Path) -> None:
    """A campaign as one command: `ci main --host` narrowed by --rows, scheduled on the given GPUs; the report
    judges the rows asked for, not every planned row."""
    ids = [r.id for r in plan.build(STACK).select(targets=["cpu"]).rows][:2]
    out = tmp_path / "campaign"
    argv = ["main", "--host", "--target", "cpu", "--rows", ",".join(ids), "--gpus", "a,b", "--gpu-memory", "36"]
    assert cli.main([*argv, "--isolate", "--out", str(out)]) == 0
    assert len(list((out / "cpu-selftest-0").glob("junit-cpu-selftest-0.*.xml"))) == 2
    reported = json.loads((out / "report" / "report.json").read_text())["rows"]
    assert sorted(r["id"] for r in reported) == sorted(ids) and all(r["status"] == "pass" for r in reported)
    assert cli.main([*argv[:4], "--rows", "selftest.cpu.nope.00000000", "--out", str(out)]) == 2


@pytest.mark.parametrize("given", [["--gpus", "0"], ["--deadline", "60"]])
def test_schedule_options_ask_for_the_schedule(given: list[str], tmp_path: Path) -> None:
    from ci.run import run_verb

    args = cli.parser().parse_args(["run", "cpu", "selftest", *given, "--out", str(tmp_path)])
    assert run_verb.schedule(args, STACK.targets["cpu"]) is not None
    plain = cli.parser().parse_args(["run", "cpu", "selftest", "--out", str(tmp_path)])
    assert run_verb.schedule(plain, STACK.targets["cpu"]) is None


def test_rows_side_by_side_each_write_their_own_jit_log(tmp_path: Path) -> None:
    """A row's compiles are read from the JIT log its processes write: rows running at once each get their own, or
    one row's compiles would count as another's."""
    tree = tmp_path / "suites" / "selftest"
    tree.mkdir(parents=True)
    (tree / "test_rows.py").write_text(
        "import os\nimport pytest\n\n@pytest.mark.track('harness-selftest')\n"
        "def test_row(row, record_property):\n    record_property('jit_log', os.environ['STACKGATE_JIT_LOG'])\n"
    )
    out = tmp_path / "r"
    argv = ["run", "cpu", "selftest", "--host", "--suites-dir", str(tmp_path / "suites"), "--gpus", "a,b",
            "--gpu-memory", "36", "--isolate", "--out", str(out)]  # fmt: skip
    assert cli.main(argv) == 0
    from lxml import etree

    logs = [p.get("value") for f in out.glob("junit-*.xml") for p in etree.parse(str(f)).iter("property")
            if p.get("name") == "jit_log"]  # fmt: skip
    assert len(logs) == 4 and len(set(logs)) == 4 and all(Path(p).parent == out.resolve() for p in logs)


FAULT_SUITE = """\
import os, signal
import pytest

@pytest.mark.track("harness-selftest")
def test_row(row, record_property):
    record_property("pid", str(os.getpid()))
    if row.id == os.environ.get("CRASH_ROW"):
        os.kill(os.getpid(), signal.SIGSEGV)
"""


def test_a_crash_in_a_shared_process_fails_that_row_alone_and_the_group_still_passes(tmp_path, monkeypatch) -> None:
    tree = tmp_path / "suites" / "selftest"
    tree.mkdir(parents=True)
    (tree / "test_rows.py").write_text(FAULT_SUITE)
    rows = [r for r in plan.build(STACK).rows if r.target == "cpu" and r.suite == "selftest"]
    monkeypatch.setenv("CRASH_ROW", rows[1].id)
    out = tmp_path / "r"
    argv = ["run", "cpu", "selftest", "--host", "--suites-dir", str(tmp_path / "suites"), "--gpus", "a",
            "--gpu-memory", "36", "--out", str(out)]  # fmt: skip
    assert cli.main(argv) == 1
    (file,) = out.glob("junit-*.xml")
    said = dispatch.row_outcomes(file)
    assert said.pop(rows[1].id) == "error" and set(said.values()) == {"pass"} and len(said) == len(rows) - 1
    from lxml import etree

    cases = {
        next(p.get("value") for p in tc.iter("property") if p.get("name") == "stackgate.row"): tc
        for tc in etree.parse(str(file)).iter("testcase")
    }
    assert cases[rows[1].id].find("error").get("message").startswith("signal 11 (SIGSEGV), in a shared process")
    pid = {r: next(p.get("value") for p in tc.iter("property") if p.get("name") == "pid") for r, tc in cases.items()
           if r != rows[1].id}  # fmt: skip
    assert pid[rows[0].id] != pid[rows[2].id]  # the row before the crash shared its process; those after, not


def test_a_shared_job_stopped_mid_way_resumes_at_the_row_it_was_in(tmp_path: Path) -> None:
    """Four rows of one model and change share one process; a SIGTERM during the third: the two before keep their
    result, and --resume runs the interrupted row and the one never reached, in a new job."""
    spec = {"rows": [["r", 1]] * 4, "change": "same", "share": True, "seconds": 1.0}
    proc = _drive(tmp_path, **spec)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and sum(len(dispatch.row_outcomes(f)) for f in tmp_path.glob("junit-*.xml")) < 2:
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    said, _ = proc.communicate(timeout=60)
    assert proc.returncode == 143, said
    (file,) = tmp_path.glob("junit-*.xml")
    first = dispatch.row_outcomes(file)
    assert sorted(first.values()) == ["interrupted", "pass", "pass"], first
    assert len({p["pid"] for p in _all_props(file)}) == 1  # one process for the job's rows
    proc = _drive(tmp_path, **spec, resume=True)
    said, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, said
    assert "--resume: 2 rows have a result" in said and "[2/2]" in said and "(one process, 2 rows)" in said
    found = {r: said for f in tmp_path.glob("junit-*.xml") for r, said in dispatch.row_outcomes(f).items() if r}
    assert sorted(found.values()) == ["pass"] * 4


def _all_props(file: Path) -> list[dict[str, str]]:
    from lxml import etree

    return [
        {p.get("name"): p.get("value") for p in tc.iter("property")} for tc in etree.parse(str(file)).iter("testcase")
    ]


def test_packed_sessions_record_their_gpus_co_tenants_and_alone_ones_share_nothing(tmp_path: Path) -> None:
    """Four rows on two stand-in GPUs: packed, two run at once on each GPU and each records the other; with
    `alone`, no two sessions overlap on a GPU, and none records a co-tenant."""
    packed = _drive(tmp_path / "packed", rows=[["r", 1]] * 4, seconds=1.0)
    said, _ = packed.communicate(timeout=120)
    assert packed.returncode == 0, said
    props = _props(tmp_path / "packed")
    assert len(props) == 4 and all(p.get("stackgate.gpu_shared_with") for p in props.values())
    for row, p in props.items():
        other = p["stackgate.gpu_shared_with"]
        assert other != row and props[other]["gpus"] == p["gpus"]
    alone = _drive(tmp_path / "alone", rows=[["r", 1]] * 4, seconds=1.0, alone=True)
    said, _ = alone.communicate(timeout=120)
    assert alone.returncode == 0, said
    props = _props(tmp_path / "alone")
    assert len(props) == 4 and not any("stackgate.gpu_shared_with" in p for p in props.values())
    spans: dict[str, list[tuple[float, float]]] = {}
    for p in props.values():
        spans.setdefault(p["gpus"], []).append(tuple(map(float, p["span"].split())))
    for gpu in spans.values():
        gpu.sort()
        assert all(a[1] <= b[0] for a, b in pairwise(gpu))  # one at a time on each GPU
