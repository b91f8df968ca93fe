"""The command line behaves like the tools people know: --version, quiet on a closed pipe, one way to
reject unknown names, help for every option, exit codes in every verb's help."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import REPO

import ci
from ci import cli
from ci.common.errors import EXIT_CODES
from ci.common.tables import md_cell

NO_ENGINE = {**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"}


def _ci(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ci", *args], cwd=REPO, env=env or NO_ENGINE,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def test_version() -> None:
    done = _ci("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"stackgate {ci.__version__}"


@pytest.mark.parametrize("fmt", ["table", "json", "markdown"])
def test_a_closed_pipe_ends_quietly(fmt: str) -> None:
    done = subprocess.run(f"set -o pipefail; {sys.executable} -m ci plan --format {fmt} | head -1", shell=True,
                          executable="/bin/bash", cwd=REPO, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and len(done.stdout.splitlines()) == 1


VERBS_NAMING_A_TARGET = [
    ["plan", "--target", "cuda-sm80"],
    ["main", "--target", "cuda-sm80"],
    ["build", "cuda-sm80"],
    ["bake", "cuda-sm80"],
    ["verify", "cuda-sm80"],
    ["lock", "cuda-sm80"],
    ["run", "cuda-sm80", "selftest", "--out", "unused"],
    ["report", "unused", "--out", "unused", "--target", "cuda-sm80"],
]


@pytest.mark.parametrize("argv", VERBS_NAMING_A_TARGET, ids=lambda a: a[0])
def test_an_unknown_target_is_rejected_the_same_way_by_every_verb(argv: list[str]) -> None:
    done = _ci(*argv)  # no engine answers: a verb that asked one first would say so instead
    assert done.returncode == 2
    assert done.stderr.splitlines()[:2] == [
        "error: unknown target 'cuda-sm80'",
        "  fix: one of cuda-sm121a, rocm-gfx1151, cuda-sm90, cpu",
    ]
    assert not (REPO / "unused").exists()


UNKNOWN_SUITE = [
    ["plan", "--suite", "sparse-mla"],
    ["run", "cpu", "sparse-mla", "--out", "x"],
    ["main", "--suite", "sparse-mla"],
    ["report", "x", "--out", "x", "--suite", "sparse-mla"],
]


@pytest.mark.parametrize("argv", UNKNOWN_SUITE, ids=lambda a: a[0])
def test_an_unknown_suite_is_rejected_the_same_way(argv: list[str]) -> None:
    done = _ci(*argv)
    assert done.returncode == 2 and done.stderr.startswith("error: unknown suite 'sparse-mla'\n  fix: one of ")


def test_filters_repeat_or_take_commas(capsys) -> None:
    assert cli.main(["plan", "--format", "json", "--target", "cpu,cuda-sm90", "--change", "selftest"]) == 0
    commas = json.loads(capsys.readouterr().out)
    assert (
        cli.main(["plan", "--format", "json", "--target", "cpu", "--target", "cuda-sm90", "--change", "selftest"]) == 0
    )
    assert json.loads(capsys.readouterr().out) == commas and len(commas["rows"]) == 4


def test_rows_narrow_plan_and_report_and_an_unknown_row_is_named(tmp_path: Path, capsys) -> None:
    assert cli.main(["plan", "--format", "json", "--change", "selftest"]) == 0
    ids = [r["id"] for r in json.loads(capsys.readouterr().out)["rows"]]
    assert cli.main(["plan", "--format", "json", "--rows", ids[1]]) == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)["rows"]] == [ids[1]]
    assert cli.main(["report", str(tmp_path), "--out", str(tmp_path / "r"), "--rows", f"{ids[0]},{ids[1]}"]) == 0
    assert sorted(r["id"] for r in json.loads((tmp_path / "r" / "report.json").read_text())["rows"]) == sorted(ids[:2])
    capsys.readouterr()
    assert cli.main(["plan", "--rows", "selftest.cpu.nope.12345678"]) == 2
    assert "row(s) not planned: selftest.cpu.nope.12345678" in capsys.readouterr().err


def test_a_target_is_named_by_its_session_prefix_too(capsys) -> None:
    assert cli.main(["plan", "--format", "json", "--target", "rocm", "--suite", "sparse_mla"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows and {r["target"] for r in rows} == {"rocm-gfx1151"}


def test_an_option_a_verb_lacks_is_refused_with_that_verbs_usage() -> None:
    done = _ci("upstream", "--rows", "x")
    assert done.returncode == 2
    assert done.stderr.startswith("usage: python -m ci upstream ") and "unrecognized arguments: --rows x" in done.stderr


def test_a_verb_that_runs_no_rows_says_success_for_exit_0() -> None:
    assert "  0  success\n" in _verbs()["plan"].format_help()
    assert "a report, where one was asked for, was written" in _verbs()["main"].format_help()


def _verbs() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


@pytest.mark.parametrize("verb", sorted(_verbs()))
def test_every_option_has_help_and_every_verb_lists_its_exit_codes(verb: str) -> None:
    p = _verbs()[verb]
    undocumented = [a.dest for a in p._actions if not a.help and not isinstance(a, argparse._HelpAction)]
    assert undocumented == []
    text = p.format_help()
    assert "exit codes:" in text and "  0  " in text and "  2  " in text


def test_the_readme_lists_every_exit_code() -> None:
    readme = (REPO / "README.md").read_text()
    for code, meaning in EXIT_CODES.items():
        assert f"| {code} | {meaning} |" in readme


def test_report_on_a_mistyped_path_warns_and_strict_fails(tmp_path: Path) -> None:
    missing = tmp_path / "reslts"
    done = _ci("report", str(missing), "--out", str(tmp_path / "r"))
    assert done.returncode == 0
    assert f"warning: input {missing}: not found (no such file)" in done.stderr
    assert "warning: no testcase was read from the inputs" in done.stderr
    md = (tmp_path / "r" / "report.md").read_text()
    assert "**Warnings** (2 kinds)" in md and md_cell(f"input {missing}: not found") in md
    assert md.index("## Summary") < md.index("**Warnings**")  # the verdicts first, then what to be wary of
    html = (tmp_path / "r" / "report.html").read_text()
    assert 'class="banner"' in html and "not found" in html
    strict = _ci("report", str(missing), "--out", str(tmp_path / "s"), "--strict")
    assert strict.returncode == 7 and (tmp_path / "s" / "report.json").is_file()


def test_report_on_an_empty_folder_warns(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    done = _ci("report", str(tmp_path / "empty"), "--out", str(tmp_path / "r"), "--strict")
    assert done.returncode == 7 and "directory holds no *.xml file" in done.stderr


def test_each_verb_is_defined_by_the_module_cli_imports_for_it_and_ci_upstream_loads_no_other_stage() -> None:
    import subprocess
    import sys

    full = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction))
    listed = [v for verbs in cli.MODULES.values() for v in verbs]
    assert sorted(full.choices) == sorted(listed)
    for verbs in cli.MODULES.values():
        only = next(a for a in cli.parser(verbs[0])._actions if isinstance(a, argparse._SubParsersAction))
        assert set(only.choices) == set(verbs)
    probe = ("import sys; from ci import cli; cli.main(['upstream', '--help']) if False else None; "
             "cli.parser(cli._verb(['--stack', 'stack', 'upstream', '--fork', '.'])); "
             "print(sorted(m for m in sys.modules if m.startswith(('ci.run', 'ci.images', 'ci.report', 'ci.flow', "
             "'ci.engine', 'ci.bench', 'ci.buildkite'))))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
