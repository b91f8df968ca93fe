"""Every input from elsewhere goes through one reader (ci.common.untrusted): a regular file within its kind's size,
strict JSON nested no deeper than its kind, finite numbers only, each field of its type; a tar's members bounded in
count and size before a byte of them is read. Whatever a file holds, the verb exits 2 (or its documented code) naming
the file and the field, never with a traceback, and never hangs on a FIFO."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from support.paths import REPO
from support.report_helpers import rows, write_rows

from ci import cli

DEEP = b"[" * 100_000 + b"]" * 100_000  # nested 100,000 deep: a recursive reader's RecursionError


def _ci(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`python -m ci` in a process of its own: a traceback, a hang or a crash shows as such."""
    return subprocess.run([sys.executable, "-m", "ci", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})  # fmt: skip


def _said(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done.stderr


def _tar(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_a_deep_report_json_is_refused_by_repro_and_gate_naming_it(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    report.write_bytes(b'{"rows": ' + DEEP + b"}")
    for argv in (["repro", "a.cpu.m.00000000", "--report", str(report), "--print"], ["gate", str(report)]):
        done = _ci(*argv)
        assert done.returncode == 2 and str(report) in _said(done) and "nested deeper than" in done.stderr
        assert "fix: point" in done.stderr


def test_a_deep_rows_json_is_refused_by_repro_and_passed_over_by_the_report(tmp_path: Path) -> None:
    rows_json = tmp_path / "rows.json"
    rows_json.write_bytes(b'{"suite": "selftest", "rows": ' + DEEP + b"}")
    done = _ci("repro", "a.cpu.m.00000000", "--rows-json", str(rows_json))
    assert done.returncode == 2 and "nested deeper than" in _said(done) and str(rows_json) in done.stderr
    from ci.report import defined

    assert defined._rows(rows_json) is None  # the report's "defined otherwise" check says nothing from it


def test_a_deep_upstream_json_is_an_input_the_report_lists_as_unreadable(tmp_path: Path) -> None:
    write_rows(tmp_path / "results", rows("selftest"))
    upstream = tmp_path / "upstream.json"
    upstream.write_bytes(DEEP)
    done = _ci("report", str(tmp_path / "results"), "--upstream", str(upstream), "--out", str(tmp_path / "r"))
    assert done.returncode in (0, 1), _said(done)
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    (read,) = [i for i in doc["inputs"] if i["role"] == "upstream"]
    assert read["status"] == "unreadable" and "nested deeper than" in read["problem"]


def test_a_deep_costs_file_or_store_is_refused_naming_it_and_never_stops_a_run(tmp_path: Path, capsys) -> None:
    path = tmp_path / "costs.json"
    path.write_bytes(b'{"schema": 1, "measured": ' + DEEP + b"}")
    argv = ["plan", "--estimate", "--target", "cpu", "--gpu-memory", "10"]
    done = _ci(*argv, "--costs", str(path))
    assert done.returncode == 2 and f"{path}: " in _said(done) and "nested deeper than" in done.stderr
    done = _ci(*argv, env={"STACKGATE_COSTS": str(path)})
    assert done.returncode == 2 and f"{path}: " in _said(done)
    from ci.run.schedule import estimate

    os.environ["STACKGATE_COSTS"] = str(path)  # the conftest's store for this test, replaced (monkeypatched back)
    assert not estimate.measured_in([])  # the schedule goes by plan order, said
    assert "the schedule goes by plan order alone" in capsys.readouterr().out


def test_a_costs_entry_dated_in_the_future_is_refused_and_new_measurements_replace_kept_ones(tmp_path: Path) -> None:
    from ci.common.errors import UsageError
    from ci.run.schedule import costs

    row = rows("selftest")[0]
    m = costs.Measured(
        phase="run",
        target=row.target,
        config=costs.config(row),
        model=row.model,
        suite=row.suite,
        first_s=250_000.0,
        further_s=(),
        process_s=0.0,
        configs_in_process=1,
        host="h",
        when=4102444800.0,
    )  # fmt: skip (2100-01-01)
    path = tmp_path / "costs.json"
    path.write_text(json.dumps({"schema": 1, "measured": [m.to_json()]}))
    with pytest.raises(UsageError, match=r"measured\[0\]\.when: 4102444800: after tomorrow"):
        costs.load([path])
    from dataclasses import replace

    now = replace(m, first_s=12.0, when=1.0)  # a clock that is wrong now still records what it measured
    costs.write(path, [now], keep=[replace(m, when=3.0)])
    (kept,) = costs.load([path])
    assert kept.first_s == 12.0


def test_estimate_prints_a_costs_files_host_escaped(tmp_path: Path, capsys) -> None:
    from ci.run.schedule import costs

    row = next(r for r in rows() if r.target == "cuda-sm90")
    m = costs.Measured(phase="run", target=row.target, config=costs.config(row), model=row.model, suite=row.suite,
                       first_s=10.0, further_s=(), process_s=1.0, configs_in_process=1,
                       host="H200\n  fix: curl x | sh\x1b[2J", when=1.0)  # fmt: skip
    path = costs.write(tmp_path / "costs.json", [m])
    argv = ["plan", "--estimate", "--target", "cuda-sm90", "--gpu-memory", "80", "--costs", str(path)]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\n  fix:" not in out and "H200\\n  fix: curl x | sh\\x1b[2J" in out


@pytest.mark.parametrize(
    ("manifest", "said"),
    [
        (b'{"key": {}, "files": ' + DEEP + b"}", "nested deeper than"),
        (
            b'{"key": {}, "files": [{"path": "a", "sha256": "' + b"0" * 64 + b'", "bytes": Infinity}]}',
            "files[0].bytes: Infinity: no JSON number",
        ),
        (
            b'{"key": {}, "files": [{"path": "a", "sha256": "' + b"0" * 64 + b'", "bytes": 1e400}]}',
            "files[0].bytes: 1e400: no JSON number",
        ),
        (b'{"key": {}, "files": [{"path": "a", "sha256": "x", "bytes": 1}]}', "files[0].sha256"),
        (b'{"key": {}, "files": [{"path": "a", "sha256": "' + b"0" * 64 + b'", "bytes": 1.5}]}', "files[0].bytes"),
        (b'{"key": {}, "files": [], "rows": {"x; rm -rf ~": "pass"}}', "rows.x; rm -rf ~.[key]"),
        (b'{"key": {}, "files": [], "rows": {"s.cpu.m.0123abcd": "fine"}}', "rows.s.cpu.m.0123abcd"),
        (b'{"key": {}, "files": [], "rows": ["s.cpu.m.0123abcd"]}', "rows: should be an object"),
    ],
    ids=["deep", "infinity", "overflow", "sha256", "bytes-not-whole", "row-id", "row-outcome", "rows-a-list"],
)
@pytest.mark.parametrize("verb", ["run --caches", "bake --from"])
def test_a_caches_artefact_with_a_bad_manifest_is_refused_naming_the_field(
    tmp_path: Path, verb: str, manifest: bytes, said: str
) -> None:
    art = _tar(tmp_path / "caches-cpu-warm.tar.gz", {"stackgate-caches.json": manifest})
    caches = {"STACKGATE_RUNTIME_CACHES": str(tmp_path / "root")}
    if verb == "run --caches":
        done = _ci("run", "cpu", "selftest", "--host", "--caches", str(art), "--out", str(tmp_path / "o"), env=caches)
    else:
        done = _ci("bake", "cpu", "--host", "--from", str(art), "--out", str(tmp_path / "o"), env=caches)
    assert done.returncode == 2 and said in _said(done) and str(art) in done.stderr, done.stderr


@pytest.mark.parametrize("verb", ["run --caches", "bake --from"])
def test_a_fifo_as_an_artefact_is_refused_at_once(tmp_path: Path, verb: str) -> None:
    fifo = tmp_path / "caches.tar.gz"
    os.mkfifo(fifo)
    caches = {"STACKGATE_RUNTIME_CACHES": str(tmp_path / "root")}
    if verb == "run --caches":
        done = _ci("run", "cpu", "selftest", "--host", "--caches", str(fifo), "--out", str(tmp_path / "o"), env=caches)
    else:
        done = _ci("bake", "cpu", "--host", "--from", str(fifo), "--out", str(tmp_path / "o"), env=caches)
    assert done.returncode == 2 and "a FIFO, not a regular file" in _said(done)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"schema": 1, "measured": [{"phase": "run", "further_s": [1, Infinity]}]}',
         "measured[0].further_s[1]: Infinity"),
        ('{"schema": 1, "measured": [{"phase": NaN}]}', "measured[0].phase: NaN"),
        ('{"schema": 1, "measured": [{"when": -Infinity}]}', "measured[0].when: -Infinity"),
        ('{"schema": 1, "measured": [1e400]}', "measured[0]: 1e400"),
        ('{"schema": NaN}', "schema: NaN"),
        ('{"schema": 1, "measured": [{"phase": "run", "x": [[{"y": NaN}]]}]}', "measured[0].x[0][0].y: NaN"),
    ],
)  # fmt: skip
def test_a_number_json_has_none_of_is_refused_naming_the_field_and_the_value(tmp_path: Path, text: str, said: str):
    from ci.common.errors import UsageError
    from ci.run.schedule import costs

    path = tmp_path / "costs.json"
    path.write_text(text)
    with pytest.raises(UsageError) as err:
        costs.load([path])
    assert f"{path}: {said}: no JSON number" in err.value.message, err.value.message
