"""ci report --upstream: each change's rebase state (ci upstream's JSON, of a real git repository) beside its verdict,
in report.md, report.html and report.json; an unusable document is an input problem the report shows."""

from __future__ import annotations

import json
from pathlib import Path

from support.git_repos import Repo, record_fork
from support.report_helpers import rows, write_rows

from ci.cli import main


def _upstream_json(tmp_path: Path, stack: Path, capsys) -> Path:
    """A fork carrying the warm-up port (two commits cherry-picked from its PR) on upstream's main."""
    r = Repo(tmp_path / "vllm")
    r.commit("base", {"vllm/runner.py": "runner\n"})
    r.upstream()
    r.git("checkout", "-q", "-b", "fork")
    r.commit("Warm spec-decode kernels at startup", {"vllm/warmup.py": "warm\n"})
    r.commit("Repair the integration conflict", {"vllm/runner.py": "runner\nwarm()\n"})
    record_fork(stack, r.path, {"48804": [r.git("rev-parse", "--short=9", "HEAD~1"),
                                          r.git("rev-parse", "--short=9", "HEAD")]})  # fmt: skip
    assert main(["--stack", str(stack), "upstream", "--fork", str(r.path), "--format", "json"]) == 0
    path = tmp_path / "upstream.json"
    path.write_text(capsys.readouterr().out)
    return path


def test_the_report_shows_each_changes_rebase_state_beside_its_verdict(tmp_path, stack_copy, capsys):
    doc = _upstream_json(tmp_path, stack_copy, capsys)
    write_rows(tmp_path / "junit", rows(change="selftest"))
    out = tmp_path / "report"
    argv = ["--stack", str(stack_copy), "report", str(tmp_path / "junit"), "--out", str(out), "--upstream", str(doc)]
    assert main(argv) == 0
    capsys.readouterr()
    md = (out / "report.md").read_text()
    verdicts = md.split("## Verdicts", 1)[1].split("###", 1)[0]
    assert "| Change | Track | Verdict | Why | Rows failing their test | Rebase state |" in verdicts
    assert "| #48804 | kernel-warmup | ✘ not ready |" in verdicts and "| ported |" in verdicts
    # #46514: its demo-fork port (stack/fork.yaml) is not in this history, nor its merge; stacked on an untracked PR
    assert "| #46514 | fp8-ds-mla |" in verdicts and "| absent; 1 flag |" in verdicts
    assert "Rebase state of " in verdicts and "2 own commits over upstream/main" in verdicts
    section = md.split("### #48804 ", 1)[1].split("###", 1)[0]
    assert "Rebase state: ported: port present: " in section
    html = (out / "report.html").read_text()
    assert "<th>Rebase state</th>" in html and '<p class="rebase">Rebase state: ported: port present: ' in html
    report = json.loads((out / "report.json").read_text())
    change = next(c for c in report["changes"] if c["id"] == "48804")
    assert change["rebase"]["state"] == "ported" and len(change["rebase"]["present"]) == 2
    assert report["upstream"]["upstream_ref"] == "upstream/main" and report["upstream"]["fork_commits"] == 2
    assert {"path": str(doc), "status": "ok", "problem": "", "role": "upstream", "testcases": 0} in report["inputs"]


def test_without_upstream_the_report_is_as_before(tmp_path, capsys):
    write_rows(tmp_path / "junit", rows(change="selftest"))
    assert main(["report", str(tmp_path / "junit"), "--out", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    assert "Rebase state" not in (tmp_path / "r" / "report.md").read_text()
    assert "Rebase state" not in (tmp_path / "r" / "report.html").read_text()
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert "upstream" not in report and all("rebase" not in c for c in report["changes"])


def test_an_unusable_upstream_document_is_an_input_problem(tmp_path, capsys):
    write_rows(tmp_path / "junit", rows(change="selftest"))
    bad = tmp_path / "upstream.json"
    bad.write_text('{"rows": []}')
    argv = ["report", str(tmp_path / "junit"), "--out", str(tmp_path / "r"), "--upstream", str(bad)]
    assert main(argv) == 0
    assert f"warning: upstream state {bad}: unreadable ({bad}: not an upstream.json" in capsys.readouterr().err
    md = (tmp_path / "r" / "report.md").read_text()
    assert f"| upstream state unreadable ({bad}) |".replace("_", "\\_") in md
    assert main([*argv, "--strict"]) == 7
