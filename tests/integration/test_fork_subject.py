"""The fork is the subject wherever one is configured: the generated nox sessions' `ci main`, `ci plan` and `ci
pipeline` judge it without a flag, `--stock` judges the locked release; the pipeline writes the fork into its steps as
resolved; a relative --fork is relative to where the user stands; fix lines repeat the options the user gave."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from support.fork_world import World, make
from support.paths import REPO

from ci.cli import main
from ci.upstream.checkout import Checkout


@pytest.fixture
def world(tmp_path: Path, stack_copy: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    w = make(tmp_path, stack_copy)
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")  # no engine: nothing is built here
    return w


class Session:
    """What a generated nox session calls, recorded: the session's own `python -m ci` arguments."""

    def __init__(self, posargs: list[str]) -> None:
        self.posargs = posargs
        self.calls: list[tuple[str, ...]] = []

    def install(self, *args: str, **kw: object) -> None:
        pass

    def run(self, *args: str, **kw: object) -> None:
        self.calls.append(args)


def _session_call(target: str, suite: str, posargs: list[str]) -> list[str]:
    sys.path.insert(0, str(REPO))
    try:
        import noxfile
    finally:
        sys.path.remove(str(REPO))
    session = Session(posargs)
    primary = f"{target.split('-')[-1]}_{suite}"
    noxfile._run_session(target, suite, primary, alias=False)(session)
    (call,) = session.calls
    assert call[:3] == ("python", "-m", "ci")
    return list(call[3:])


def test_the_generated_session_judges_the_configured_fork_and_stock_judges_the_release(
    world, monkeypatch, tmp_path, capsys
):
    monkeypatch.setenv("STACKGATE_FORK", str(world.path))
    monkeypatch.setenv("STACKGATE_FORK_REF", "fork")
    out = tmp_path / "out"
    argv = _session_call("cuda-sm121a", "spec_decode", ["--stack", str(world.stack), "--out", str(out)])
    assert argv[:5] == ["main", "--target", "cuda-sm121a", "--suite", "spec_decode"] and "--fork" not in argv
    assert main(argv) == 6  # nothing runs on this host: the rows are reported as not run
    set_apart = [line for line in capsys.readouterr().out.splitlines() if line.startswith("not scheduled:")]
    assert len(set_apart) == 1 and " rows of cuda-sm121a/spec_decode, " in set_apart[0]  # the session's, no other's
    doc = json.loads((out / "report" / "report.json").read_text())
    assert doc["judged"]["subject"] == "fork" and doc["judged"]["fork"]["commit"] == world.ids["head"]
    assert doc["judged"]["said"].startswith(f"the fork vllm-fork fork ({world.ids['head'][:12]}) over vLLM 0.26.0")
    md = (out / "report" / "report.md").read_text().splitlines()
    assert md[2].startswith(f"**Judged: the fork vllm-fork fork ({world.ids['head'][:12]}) over vLLM 0.26.0")
    changes = {c["id"]: c for c in doc["changes"]}
    assert changes["46849"]["fork"]["state"] == "absent" and changes["46849"]["fork"]["commits"] == []
    rows = [r for r in doc["rows"] if r["change"] == "46849" and r["target"] == "cuda-sm121a"]
    assert rows and all(r["status"] == "not run" and "absent in the fork" in r["note"] for r in rows)
    assert (out / "fork-absent" / "cuda-sm121a-spec_decode-0" / "not-run.json").is_file()  # never scheduled

    sparse = tmp_path / "sparse"
    argv = _session_call("cuda-sm121a", "sparse_mla", ["--stack", str(world.stack), "--out", str(sparse)])
    assert main(argv) == 6
    doc = json.loads((sparse / "report" / "report.json").read_text())
    changes = {c["id"]: c for c in doc["changes"]}
    assert changes["48407"]["fork"]["state"] == "converged"
    assert changes["48407"]["fork"]["follow_ups_missing"] == ["vllm-project/vllm#52512"]
    assert changes["46514"]["fork"]["state"] == "partially ported"
    assert changes["46514"]["fork"]["commits"] == [world.ids["part"]]
    unrun = json.loads((sparse / "cuda-sm121a-sparse_mla-0" / "not-run.json").read_text())
    assert unrun["rows"] and f"nox -s sm121a_sparse_mla -- --fork {world.path} --ref fork" in unrun["fix"]

    stock = tmp_path / "stock"
    argv = _session_call("cuda-sm121a", "spec_decode", ["--stack", str(world.stack), "--out", str(stock), "--stock"])
    assert main(argv) == 6
    doc = json.loads((stock / "report" / "report.json").read_text())
    assert doc["judged"]["subject"] == "stock" and doc["judged"]["fork"] is None
    assert doc["judged"]["said"] == "stock vLLM 0.26.0, by --stock"
    assert not (stock / "fork-absent").exists()
    assert all(c["fork"] is None for c in doc["changes"])


def test_the_report_first_screen_leads_with_the_fork_state_and_ports_what_it_lacks(world, monkeypatch, tmp_path):
    monkeypatch.setenv("STACKGATE_FORK", str(world.path))
    monkeypatch.setenv("STACKGATE_FORK_REF", "fork")
    out = tmp_path / "out"
    assert main(["--stack", str(world.stack), "main", "--target", "cuda-sm90", "--out", str(out)]) == 6
    md = (out / "report" / "report.md").read_text()
    summary = md.split("## Summary", 1)[1].split("## Verdicts", 1)[0]
    assert "| Change | In the fork | Verdict |" in summary
    lines = {line.split(" | ")[0].lstrip("| "): line for line in summary.splitlines() if line.startswith("| #")}
    assert "| converged; follow-up #52512 missing (it fixes GLM-5.2 repeated tokens" in lines["#48407"]
    assert "| partially ported |" in lines["#46514"]
    assert "| absent in the fork |" in lines["#46849"]
    # what it lacks: its port as the next step, with its verdict (ci.upstream.port.decision), not rows to run
    assert (
        f"`python -m ci fork port 46849 --fork {world.path} --ref fork` absent in the fork; its port: clean"
        in (lines["#46849"])
    )
    # held without its follow-up fix: that fix's port first, with the fork's options
    assert (
        f"`python -m ci fork port 52512 --fork {world.path} --ref fork` converged in the fork without its "
        in (lines["#48407"])
    )
    # held in part: the rest of its port, its verdict said
    assert "partially ported in the fork; its port: clean by three-way merge" in lines["#46514"]
    html = (out / "report" / "report.html").read_text()
    assert "<th>In the fork</th>" in html and "follow-up #52512 missing" in html


def _headline_and_column_agree(md: str) -> bool:
    """The report's first line names a fork exactly where its first screen has the "In the fork" column."""
    first = next(line for line in md.splitlines() if line.startswith("**Judged: "))
    return first.startswith("**Judged: the fork ") == ("| In the fork |" in md.split("## Verdicts", 1)[0])


def test_main_on_a_host_without_a_gpu_judges_the_configured_fork(world, monkeypatch, tmp_path, capsys):
    """`nox -s main` on a laptop (the cpu self-test): its rows run as they are, and the report judges the fork: its
    first line names it, every change leads with its state in the fork, and the next steps carry the fork."""
    monkeypatch.setenv("STACKGATE_FORK", str(world.path))
    monkeypatch.setenv("STACKGATE_FORK_REF", "fork")
    out = tmp_path / "out"
    # no --target: `nox -s main` on a host without a GPU finds the cpu target, and reports every planned row
    assert main(["--stack", str(world.stack), "main", "--out", str(out)]) in (0, 6)  # 6: this host lacks triton
    said = capsys.readouterr().out
    assert "cpu runs no imported change's rows: they run as they are; the report judges the fork vllm-fork fork" in said
    assert (
        f"(rows of its changes need a GPU target: nox -s sm121a_sparse_mla -- --fork {world.path} --ref fork)" in said
    )
    md = (out / "report" / "report.md").read_text()
    head = world.ids["head"][:12]
    assert md.splitlines()[2].startswith(f"**Judged: the fork vllm-fork fork ({head}) over vLLM 0.26.0")
    assert _headline_and_column_agree(md)
    summary = md.split("## Summary", 1)[1].split("## Verdicts", 1)[0]
    assert "| Change | In the fork | Verdict |" in summary
    lines = {line.split(" | ")[0].lstrip("| "): line for line in summary.splitlines() if line.startswith("| #")}
    assert "| absent in the fork |" in lines["#46849"]
    assert (
        f"`python -m ci fork port 46849 --fork {world.path} --ref fork` absent in the fork; its port: clean"
        in (lines["#46849"])
    )
    assert "| converged; follow-up #52512 missing" in lines["#48407"]
    assert f"`python -m ci fork port 52512 --fork {world.path} --ref fork`" in lines["#48407"]
    doc = json.loads((out / "report" / "report.json").read_text())
    assert doc["judged"]["subject"] == "fork" and doc["judged"]["fork"]["commit"] == world.ids["head"]
    assert {c["id"]: (c["fork"] or {}).get("state") for c in doc["changes"]}["46514"] == "partially ported"


def test_the_headline_and_the_fork_column_read_one_source(world, tmp_path, capsys):
    """A report given a fork's state (`--upstream`) names that fork first; one given none names the stock release and
    has no fork column: the two never disagree."""
    fork = ["--fork", str(world.path), "--ref", "fork"]
    assert main(["--stack", str(world.stack), "upstream", *fork, "--format", "json"]) == 0
    (tmp_path / "upstream.json").write_text(capsys.readouterr().out)
    assert main(["--stack", str(world.stack), "plan", *fork, "--not-run", str(tmp_path / "results")]) == 0
    for given in (["--upstream", str(tmp_path / "upstream.json")], []):
        out = tmp_path / f"report{len(given)}"
        assert main(["--stack", str(world.stack), "report", str(tmp_path / "results"), *given, "--out", str(out)]) == 0
        md = (out / "report.md").read_text()
        assert _headline_and_column_agree(md), md.splitlines()[2]
        assert ("the fork vllm-fork fork" in md.splitlines()[2]) == bool(given)


def test_a_stock_flag_with_a_named_fork_is_refused(world, capsys) -> None:
    assert main(["--stack", str(world.stack), "plan", "--stock", "--fork", str(world.path)]) == 2
    assert "--stock judges the locked release" in capsys.readouterr().err


def test_the_pipeline_names_the_fork_as_resolved_with_the_path_only_in_the_environment(world, monkeypatch, capsys):
    monkeypatch.setenv("STACKGATE_FORK", str(world.path))
    monkeypatch.setenv("STACKGATE_FORK_REF", "fork")
    assert main(["--stack", str(world.stack), "pipeline", "--one-agent", "--target", "cuda-sm90"]) == 0
    steps = yaml.safe_load(capsys.readouterr().out)["steps"]
    build = next(s for s in steps if s.get("key") == "build-cuda-sm90")
    co = Checkout.open(world.path)
    fork = (
        f"--fork {world.path} --ref {world.ids['head']} --upstream-ref {co.commit('upstream/main')} "
        f"--base-ref {co.commit('v0.26.0')} --base-version 0.26.0"
    )
    assert any(f"cuda-sm90 {fork}" in c for c in build["commands"]), build["commands"]
    assert not any(r.startswith("46849.") for s in steps for c in s.get("commands", ()) if "--rows" in c
                   for r in c.split("--rows ")[1].split()[0].split(","))  # fmt: skip
    assert main(["--stack", str(world.stack), "pipeline", "--one-agent", "--target", "cuda-sm90", "--stock"]) == 0
    assert "--fork" not in capsys.readouterr().out


def test_a_relative_fork_is_relative_to_where_the_user_stands(world, monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.chdir(world.path.parent)
    assert main(["--stack", str(world.stack), "fork", "--fork", world.path.name, "--ref", "fork"]) == 0
    assert f"in {world.path}," in capsys.readouterr().out
    monkeypatch.chdir(world.path)
    assert main(["--stack", str(world.stack), "fork", "--fork", ".", "--ref", "fork", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["checkout"] == str(world.path)


def test_fix_lines_repeat_the_options_given(world, tmp_path, capsys) -> None:
    given = ["--upstream-ref", "upstream/main", "--base-ref", "v0.26.0", "--base-version", "0.26.0"]
    out = tmp_path / "not-run"
    args = ["plan", "--fork", str(world.path), "--ref", "fork", *given, "--not-run", str(out), "--format", "json"]
    assert main(["--stack", str(world.stack), *args]) == 0
    capsys.readouterr()
    recorded = sorted(out.rglob("not-run.json"))
    assert recorded
    fix = json.loads(recorded[0].read_text())["fix"]
    assert f"python -m ci fork --fork {world.path} --ref fork {' '.join(given)} says what is looked for" in fix


def test_the_bare_host_fix_line_builds_the_same_fork(world, capsys) -> None:
    """`ci main --host` with a fork names `ci fork build --host` for that fork, every option the user gave repeated."""
    given = ["--upstream-ref", "upstream/main", "--base-ref", "v0.26.0", "--base-version", "0.26.0"]
    argv = ["main", "--host", "--target", "cpu", "--fork", str(world.path), "--ref", "fork", *given]
    assert main(["--stack", str(world.stack), *argv]) == 2
    fix = capsys.readouterr().err
    assert "this run has no image" in fix
    assert f"python -m ci fork build --host --fork {world.path} --ref fork {' '.join(given)} --base-site SITE" in fix
