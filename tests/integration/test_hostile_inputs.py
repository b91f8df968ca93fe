"""Bad input never costs a result, and a gate never opens on a verdict that was never given."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.paths import REPO
from support.report_helpers import rows, write_rows

from ci import cli
from ci.common.errors import GATE_CLOSED


def test_a_gating_change_the_report_never_judged_closes_the_gate(
    tmp_path: Path, stack_copy: Path, edit, capsys
) -> None:
    edit(
        stack_copy / "changes" / "selftest.yaml", "track: harness-selftest\n", "track: harness-selftest\ngating: true\n"
    )
    [junit] = write_rows(tmp_path / "j", rows("selftest"))
    out = tmp_path / "r"
    # a report filtered to another change: no verdict for the gating one
    cli.main(["--stack", str(stack_copy), "report", str(junit), "--change", "48804", "--out", str(out)])
    capsys.readouterr()
    assert cli.main(["--stack", str(stack_copy), "gate", str(out / "report.json")]) == GATE_CLOSED
    said = capsys.readouterr().out
    assert "NOT JUDGED: change selftest is gating" in said and "gate closed" in said
    assert cli.main(["--stack", str(stack_copy), "gate", str(out / "report.json"), "--style"]) == 0
    assert capsys.readouterr().out.strip() == "error"
    # the same report judged in full: the verdict decides again
    cli.main(["--stack", str(stack_copy), "report", str(junit), "--out", str(out)])
    capsys.readouterr()
    cli.main(["--stack", str(stack_copy), "gate", str(out / "report.json")])
    assert "NOT JUDGED" not in capsys.readouterr().out


@pytest.mark.parametrize("record", ['{"rows": ["a"], "reas', "[1, 2, 3]", '{"rows": "abc", "reason": "x"}'],
                         ids=["truncated", "a-list", "rows-not-a-list"])  # fmt: skip
def test_a_bad_not_run_record_is_an_input_problem_and_the_report_is_still_written(tmp_path: Path, record: str) -> None:
    results = tmp_path / "results"
    write_rows(results / "cpu-selftest", rows("selftest"))
    (results / "cpu-selftest" / "not-run.json").write_text(record)
    out = tmp_path / "r"
    assert cli.main(["report", str(results), "--out", str(out)]) == 0  # the rows' own verdict: they passed
    doc = json.loads((out / "report.json").read_text())
    bad = [i for i in doc["inputs"] if i["path"].endswith("not-run.json")]
    assert bad and bad[0]["status"] == "unreadable" and "not a not-run record" in bad[0]["problem"]
    assert any(r["status"] == "pass" for r in doc["rows"])
    assert cli.main(["report", str(results), "--out", str(out), "--strict"]) == 7


def test_a_refused_run_leaves_the_previous_runs_results_as_they_were(tmp_path: Path, monkeypatch) -> None:
    """A mistyped --caches, or --unbaked on a caches root that is not empty, is refused before --out is touched."""
    monkeypatch.setenv("STACKGATE_RUNTIME_CACHES", str(tmp_path / "caches"))
    out = tmp_path / "out"
    assert cli.main(["run", "cpu", "selftest", "--host", "--out", str(out)]) == 0
    junit = out / "junit-cpu-selftest-0.xml"
    before = junit.read_bytes(), (out / "rows.json").read_bytes()
    assert (
        cli.main(["run", "cpu", "selftest", "--host", "--caches", str(tmp_path / "typo.tar.gz"), "--out", str(out)])
        == 2
    )
    (tmp_path / "caches" / "cpu" / "triton").mkdir(parents=True, exist_ok=True)
    (tmp_path / "caches" / "cpu" / "triton" / "left.bin").write_bytes(b"x")
    assert cli.main(["run", "cpu", "selftest", "--host", "--unbaked", "--out", str(out)]) == 2
    assert (junit.read_bytes(), (out / "rows.json").read_bytes()) == before


def test_a_fifo_or_a_device_as_input_is_refused_at_once_not_read(tmp_path: Path, stack_copy: Path) -> None:
    """A FIFO would block the reader until someone writes; /dev/zero would never end."""
    import os

    fifo = tmp_path / "junit-fifo.xml"
    os.mkfifo(fifo)
    zero = tmp_path / "junit-zero.xml"
    zero.symlink_to("/dev/zero")
    out = tmp_path / "r"
    assert cli.main(["report", str(fifo), str(zero), "--out", str(out), "--baseline", str(fifo)]) == 0
    doc = json.loads((out / "report.json").read_text())
    junit = {Path(i["path"]).name: (i["status"], i["problem"]) for i in doc["inputs"] if i["role"] == "junit"}
    assert junit["junit-fifo.xml"] == ("unreadable", "a FIFO, not a regular file")
    assert junit["junit-zero.xml"] == ("unreadable", "a character device, not a regular file")
    (baseline,) = [i["problem"] for i in doc["inputs"] if i["role"] == "baseline"]
    assert baseline == f"{fifo}: baseline cannot be read: a FIFO, not a regular file"
    (stack_copy / "tracks.yaml").unlink()
    os.mkfifo(stack_copy / "tracks.yaml")
    assert cli.main(["--stack", str(stack_copy), "plan"]) == 2


@pytest.mark.parametrize("flag", ["--baseline", "--stack"])
def test_a_control_character_in_a_pipeline_path_is_refused_not_written_into_the_yaml(flag: str, capsys) -> None:
    value = "report.json\nenv:\n  LD_PRELOAD: /tmp/x.so"
    args = ["pipeline", flag, value] if flag == "--baseline" else [flag, value, "pipeline"]
    assert cli.main(args) == 2
    said = capsys.readouterr()
    assert "control character" in said.err and "LD_PRELOAD" not in said.out


def test_ctrl_c_before_anything_ran_is_exit_130_without_a_traceback(monkeypatch, capsys) -> None:
    from ci.stack import loader

    def interrupted(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(loader, "load", interrupted)
    assert cli.main(["plan"]) == 130
    assert "stopped by SIGINT" in capsys.readouterr().err


def test_ctrl_c_while_the_verbs_modules_import_is_held_until_they_have_then_exit_130() -> None:
    """Raised mid-import, it could land where Python prints its own traceback (3.11: a class body's __set_name__
    wraps it in a RuntimeError) or swallows it (an import lock's weakref callback): held, the imports finish. In a
    fresh interpreter started with SIGINT at its default, as a terminal starts `stackgate`: a test run started in the
    background has SIGINT ignored, which stackgate leaves as it is (startup.Held), and every child inherits it."""
    import subprocess
    import sys

    child = """
import os, signal, sys
from ci import cli
real, finished = cli.parser, []

def interrupted_while_importing(verb=None):
    os.kill(os.getpid(), signal.SIGINT)  # the handler runs at the next bytecode: here, mid-"import"
    finished.append(real(verb))
    return finished[-1]

cli.parser = interrupted_while_importing
code = cli.main(["plan"])
assert finished, "the verb's modules were never imported"
assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # raised again as it comes, after
sys.exit(code)
"""
    import signal

    def as_a_terminal_starts_it() -> None:  # a job started in the background inherits SIGINT ignored, and keeps it
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    done = subprocess.run([sys.executable, "-c", child], cwd=REPO, capture_output=True, text=True, timeout=120,
                          preexec_fn=as_a_terminal_starts_it)  # fmt: skip
    assert done.returncode == 130, done.stderr
    assert "stopped by SIGINT before anything ran" in done.stderr and "Traceback" not in done.stderr


def test_a_matrix_past_the_bound_is_refused_naming_the_change_and_its_count(stack_copy: Path, edit, capsys) -> None:
    change = stack_copy / "changes" / "46849.yaml"
    contexts = ", ".join(str(1024 + n) for n in range(50))
    batches = ", ".join(str(1 + n) for n in range(45))
    edit(change, "  context: [1024]\n  batch: [1, 8, 32]\n", f"  context: [{contexts}]\n  batch: [{batches}]\n")
    assert cli.main(["--stack", str(stack_copy), "plan"]) == 2
    err = capsys.readouterr().err
    assert "change 46849's matrix has 2,250 combinations (context 50, batch 45)" in err and "46849.yaml" in err


def test_a_matrix_near_the_bound_plans(stack_copy: Path, edit) -> None:
    from ci.stack import loader, plan

    change = stack_copy / "changes" / "46849.yaml"
    contexts = ", ".join(str(1024 + n) for n in range(40))
    batches = ", ".join(str(1 + n) for n in range(50))
    edit(change, "  context: [1024]\n  batch: [1, 8, 32]\n", f"  context: [{contexts}]\n  batch: [{batches}]\n")
    rows = plan.build(loader.load(stack_copy)).select(changes=["46849"]).rows
    assert len(rows) > 2000 * 10 and len({r.id for r in rows}) == len(rows)


def _artefact(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    """A real artefact of the cpu target's root (caches.pack), and that root emptied again."""
    import shutil

    from ci.run.artefact import jit_caches
    from ci.stack import loader

    monkeypatch.setenv("STACKGATE_RUNTIME_CACHES", str(tmp_path / "rt"))
    target = loader.load().targets["cpu"]
    top = jit_caches.root(target)
    (top / "triton" / "k1").mkdir(parents=True)
    (top / "triton" / "k1" / "kernel.bin").write_bytes(b"\x01" * 4096)
    (top / "triton" / "k2").mkdir(parents=True)
    (top / "triton" / "k2" / "kernel.json").write_text('{"name": "k2"}\n')
    art = jit_caches.pack(target, tmp_path / "art", kind="aot")  # the AOT bake's kind: no GPU or switch in its key
    shutil.rmtree(top)
    return art, top


def _retar(art: Path, out: Path, edit) -> Path:
    """The artefact rewritten member by member, `edit(info, data)` returning what to write (or None to drop)."""
    import io
    import tarfile

    with tarfile.open(art, "r:gz") as src, tarfile.open(out, "w:gz") as dst:
        for m in src.getmembers():
            data = src.extractfile(m).read() if m.isfile() else b""
            done = edit(m, data)
            if done is not None:
                info, blob = done
                info.size = len(blob)
                dst.addfile(info, io.BytesIO(blob))
    return out


@pytest.mark.parametrize("tamper", ["extra-member", "changed-bytes", "cut-trailer", "manifest-shape"])
def test_an_artefact_that_is_not_what_its_manifest_says_is_refused_and_nothing_installed(
    tmp_path: Path, monkeypatch, capsys, tamper: str
) -> None:
    import io
    import tarfile

    art, top = _artefact(tmp_path, monkeypatch)
    bad = tmp_path / "bad.tar.gz"
    if tamper == "extra-member":  # a file the manifest does not list, beside the listed ones
        with tarfile.open(art, "r:gz") as src, tarfile.open(bad, "w:gz") as dst:
            for m in src.getmembers():
                dst.addfile(m, src.extractfile(m) if m.isfile() else None)
            extra = tarfile.TarInfo("root/triton/k1/planted.so")
            extra.size = 1 << 16
            dst.addfile(extra, io.BytesIO(b"\0" * (1 << 16)))
        said = "not in its manifest"
    elif tamper == "changed-bytes":
        _retar(art, bad, lambda m, data: (m, b"\x02" * len(data) if m.name.endswith("kernel.bin") else data))
        said = "is not the file its manifest names"
    elif tamper == "cut-trailer":
        bad.write_bytes(art.read_bytes()[:-6])  # the gzip trailer's CRC and length cut off
        said = "not a caches artefact"
    else:
        _retar(art, bad, lambda m, data: (m, b'{"key": [], "files": 3}' if m.name == "stackgate-caches.json" else data))
        said = "not a caches artefact"
    out = tmp_path / "out"
    assert cli.main(["run", "cpu", "selftest", "--host", "--caches", str(bad), "--out", str(out)]) == 2
    assert said in capsys.readouterr().err
    assert not top.exists() or not any(p.is_file() for p in top.rglob("*"))  # nothing moved into the root
    assert cli.main(["run", "cpu", "selftest", "--host", "--caches", str(art), "--out", str(out)]) == 0
    assert (top / "triton" / "k1" / "kernel.bin").read_bytes() == b"\x01" * 4096


@pytest.mark.parametrize(
    ("verb", "doc", "said"),
    [
        ("gate", {"changes": [1, 2]}, "changes[0]: should be an object, not a number"),
        ("gate", {"changes": "all"}, "changes: should be a list, not a string"),
        ("repro", {"suite": "selftest", "target": "cpu", "timeout_s": 1, "rows": [{"id": "x.cpu.m.00000000"}]},
         "target: should be an object, not a string"),
        ("repro", {"suite": "selftest", "target": {"id": "cpu", "env": [1]}, "timeout_s": 1,
                   "rows": [{"id": "x.cpu.m.00000000"}]}, "target.env: should be an object, not a list"),
        ("repro", [], "(the document): should be an object, not a list"),
    ],
    ids=["gate-changes-not-objects", "gate-changes-not-a-list", "repro-target", "repro-env", "repro-list"],
)  # fmt: skip
def test_tampered_json_is_exit_2_naming_the_field(tmp_path: Path, capsys, verb: str, doc, said: str) -> None:
    path = tmp_path / ("report.json" if verb == "gate" else "rows.json")
    path.write_text(json.dumps(doc))
    argv = ["gate", str(path)] if verb == "gate" else ["repro", "x.cpu.m.00000000", "--rows-json", str(path)]
    assert cli.main(argv) == 2
    assert said in capsys.readouterr().err


def test_the_report_set_is_replaced_whole_when_a_rename_fails(tmp_path: Path, monkeypatch) -> None:
    import os

    from ci.common.errors import ReportError
    from ci.report import write

    out = tmp_path / "report"
    write.write_atomic(out, {"report.md": b"old md", "report.html": b"old html", "report.json": b"old json"})
    real = os.replace
    calls = []

    def third_fails(src, dst):
        calls.append(dst)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", third_fails)
    with pytest.raises(ReportError):
        write.write_atomic(out, {"report.md": b"new md", "report.html": b"new html", "report.json": b"new json"})
    monkeypatch.setattr(os, "replace", real)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == {
        "report.md": b"old md", "report.html": b"old html", "report.json": b"old json"}  # fmt: skip


def test_a_mount_of_a_path_holding_a_colon_or_a_comma_reads_back_whole() -> None:
    """`-v SRC:DST:ro` splits a path at ':'; --mount takes its fields as CSV, a field with a comma quoted."""
    import csv
    import shlex

    from ci.engine import ContainerSpec, Mount

    odd = '/data/run:2026-12-02,"b"/rows.json'
    spec = ContainerSpec(
        image="img", command=("true",), env={}, mounts=(Mount(source=odd, target="/x", read_only=True),)
    )
    argv = shlex.split(spec.cli())
    value = argv[argv.index("--mount") + 1]
    fields = next(csv.reader([value]))
    assert fields == ["type=bind", f"source={odd}", "target=/x", "readonly"]


def test_a_sigterm_while_the_harness_collects_is_143_and_every_row_not_run(tmp_path: Path) -> None:
    """Told to stop before a row ran, the run ends as told (128 + 15), not as a run that could not start (4)."""
    import signal
    import subprocess
    import sys
    import time

    tree = tmp_path / "suites" / "selftest"
    tree.mkdir(parents=True)
    # collection itself takes a while: the stop arrives before any row can start
    (tree / "conftest.py").write_text("import time\ntime.sleep(30)\n")
    (tree / "test_rows.py").write_text("def test_row(row):\n    pass\n")
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "ci", "run", "cpu", "selftest", "--host", "--suites-dir",
                             str(tmp_path / "suites"), "--out", str(out)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    deadline = time.monotonic() + 60
    while not (out / "rows.json").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(2.0)  # the harness is collecting (its conftest sleeps)
    proc.send_signal(signal.SIGTERM)
    said, _ = proc.communicate(timeout=60)
    assert proc.returncode == 143, said
    assert "Traceback" not in said


def test_a_pack_cut_short_leaves_no_file_under_an_artefact_name(tmp_path: Path, monkeypatch) -> None:
    import tarfile

    from ci.run.artefact import jit_caches
    from ci.stack import loader

    monkeypatch.setenv("STACKGATE_RUNTIME_CACHES", str(tmp_path / "rt"))
    target = loader.load().targets["cpu"]
    (jit_caches.root(target) / "triton").mkdir(parents=True)
    (jit_caches.root(target) / "triton" / "k.bin").write_bytes(b"x" * 100)

    def full_disk(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tarfile.TarFile, "add", full_disk)
    with pytest.raises(OSError):
        jit_caches.pack(target, tmp_path / "art", kind="aot")
    assert list((tmp_path / "art").iterdir()) == []


def test_a_full_filesystem_under_out_is_a_run_error_naming_the_file(tmp_path: Path, monkeypatch, capsys) -> None:
    from ci.stack import rows_json

    def full(path, doc):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(rows_json, "write", full)
    assert cli.main(["run", "cpu", "selftest", "--host", "--out", str(tmp_path / "out")]) == 4
    err = capsys.readouterr().err
    assert "rows.json: No space left on device" in err and "Traceback" not in err


def test_many_empty_inputs_are_one_warning_and_a_few_lines_of_the_inputs_table(tmp_path: Path, capsys) -> None:
    given = tmp_path / "in"
    given.mkdir()
    for n in range(300):
        (given / f"junit-{n:03}.xml").write_bytes(b"")
    out = tmp_path / "r"
    cli.main(["report", str(given), "--out", str(out)])
    err = capsys.readouterr().err
    assert err.count("empty (the file is empty)") == 1 and "300 alike" in err
    md = (out / "report.md").read_text()
    assert md.count("the file is empty") == 1 + 5 + 1  # the banner's one line, five named, one count of the rest
    assert "… 295 more alike (every one in report.json)" in md
    assert len(json.loads((out / "report.json").read_text())["inputs"]) == 300
