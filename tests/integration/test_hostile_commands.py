"""Every command stackgate prints (a fix line, a next step, the commands that reproduce a conflict, a port, a pipeline's
step, a re-run line) is made of quoted values (`ci.common.escape.quote`, the one quoting function): pasted into a shell,
it runs with the very arguments stackgate meant, whatever a path, a ref or a URL holds (a space, `$(...)`, a newline,
U+2028, ESC, a token), prints on one line, and names no secret. The fork here lives at a path holding all of them."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from support.git_repos import ENV, bash_argv
from support.paths import REPO
from test_port_readiness import make_world

from ci.common import escape

HOSTILE = "a b$(touch PWNED)`touch PWNED`;x\n\u2028\x1b[2J'q\"\\"
TOKEN = "ghp_T0k3nInAPath"


VALUES = ["plain", "a b", "$(touch PWNED)", "`touch PWNED`", "a;b|c&&d", "'\"\\", "new\nline", "sep\u2028par\u2029",
          "esc\x1b[2J", "\x85", "tab\there", "-rf", HOSTILE, "/tmp/x\udcff"]  # fmt: skip


@pytest.mark.parametrize("value", VALUES)
def test_a_quoted_value_parses_back_to_itself_on_one_line(tmp_path: Path, value: str) -> None:
    argv = ["git", "-C", value, "fetch", "--", value]
    line = escape.command(argv)
    assert escape.first_hidden(line) is None  # one line of visible characters
    if "\udcff" not in value:  # bash reads a byte that is no UTF-8 back as that byte: not the same str
        assert bash_argv(line) == argv
    if escape.first_hidden(value) is None:
        assert shlex.split(line) == argv
    assert not (Path.cwd() / "PWNED").exists()


def test_a_token_in_a_quoted_url_is_never_printed() -> None:
    url = f"https://x-access-token:{TOKEN}@github.com/o/r.git"
    line = escape.command(["git", "fetch", url])
    assert TOKEN not in line and bash_argv(line) == ["git", "fetch", "https://***@github.com/o/r.git"]


def _ci(stack: Path, *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ci", "--stack", str(stack), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=180, env={**ENV, "PYTHONPATH": str(REPO)})  # fmt: skip


@pytest.fixture
def hostile(tmp_path: Path, stack_copy: Path):
    """test_port_readiness's world, its checkout at a path holding a space, `$(...)`, backticks, a newline, U+2028, ESC
    and quotes; a `pwned` folder where a pasted line would run `touch PWNED`."""
    root = tmp_path / HOSTILE
    root.mkdir()
    repo, ids, stack = make_world(root / "vllm", stack_copy)
    here = tmp_path / "pwned"
    here.mkdir()
    return repo, ids, stack, here


def _lines_with(text: str, *marks: str) -> list[str]:
    return [line for line in text.splitlines() if any(m in line for m in marks)]


def test_every_command_printed_for_a_fork_at_a_hostile_path_quotes_it(hostile, tmp_path: Path) -> None:
    repo, _, stack, here = hostile
    path = str(repo.path)
    fork = ("--fork", path, "--ref", "fork")
    said: dict[str, str] = {}
    for name, argv in {
        "fork": ("fork", *fork),
        "upstream": ("upstream", *fork),
        "upstream-md": ("upstream", *fork, "--format", "markdown"),
        "plan": ("plan", *fork, "--target", "cuda-sm90"),
        "port-conflict": ("fork", "port", "49903", *fork),
        "port-exists": ("fork", "port", "46514", *fork, "--branch", "fork"),
    }.items():
        done = _ci(stack, *argv, cwd=here)
        said[name] = done.stdout + done.stderr
        assert "Traceback" not in said[name], said[name]
        assert path not in said[name]  # never raw: its newline would start a line of its choosing
        assert "\x1b" not in said[name] and "\u2028" not in said[name]
    quoted = escape.quote(path)
    port = escape.command(["python", "-m", "ci", "fork", "port", "46514", *fork])
    for name in ("fork", "upstream", "plan"):
        assert port in said[name], (name, said[name])
    assert escape.command(["git", "-C", path, "branch", "-D", "fork"]) in said["port-exists"]
    for name, text in said.items():  # wherever a command names the checkout, it is quoted
        for line in _lines_with(text, "git -C ", "--fork "):
            for mark in ("git -C ", "--fork "):
                for after in line.split(mark)[1:]:
                    placeholder = after.startswith(("PATH", "THERE", "DIR", "[PATH]"))
                    assert after.startswith(quoted) or placeholder, (name, line)
    # the commands that reproduce the conflict, pasted into a shell anywhere, do it, and run nothing else
    steps = said["port-conflict"].split("To reproduce it and finish the port by hand (in a worktree of your own):\n")[1]
    block = []
    for line in steps.splitlines():
        block.append(line.strip())
        if line.strip().startswith("git status --short"):
            break
    shown = subprocess.run(["bash", "-c", "\n".join(block)], cwd=here, capture_output=True, text=True, env=ENV)
    assert "UU vllm/pre.py" in shown.stdout, shown.stdout + shown.stderr
    assert not list(here.iterdir()) and not list(tmp_path.rglob("PWNED"))


def test_the_reports_next_steps_and_the_pipeline_quote_the_hostile_path(hostile, tmp_path: Path) -> None:
    repo, _, stack, here = hostile
    fork = ("--fork", str(repo.path), "--ref", "fork")
    up = _ci(stack, "upstream", *fork, "--format", "json")
    assert up.returncode == 0, up.stderr
    (tmp_path / "upstream.json").write_text(up.stdout)
    assert _ci(stack, "plan", *fork, "--not-run", str(tmp_path / "results")).returncode == 0
    done = _ci(stack, "report", str(tmp_path / "results"), "--upstream", str(tmp_path / "upstream.json"),
               "--out", str(tmp_path / "report"))  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    md = (tmp_path / "report" / "report.md").read_text()
    spans = [(m.group(1) or m.group(2)).replace("\\|", "|") for m in re.finditer(r"`` (.+?) ``|`([^`]+)`", md)]
    ports = [s for s in spans if "fork port" in s]
    assert ports and all(bash_argv(s)[-4:] == list(fork) for s in ports)
    doc = json.loads((tmp_path / "report" / "report.json").read_text())
    assert doc["judged"]["fork"] is None or doc["judged"]["fork"]["checkout"] == str(repo.path)
    pipeline = _ci(stack, "pipeline", *fork, "--target", "cuda-sm90", cwd=here)
    assert pipeline.returncode == 2 and "holds the control character U+000A" in pipeline.stderr  # YAML would break
    assert str(repo.path) not in pipeline.stdout + pipeline.stderr and not list(here.iterdir())


@pytest.mark.parametrize("value", ["a b", "$(touch PWNED)", "`touch PWNED`", "a;b|c", "'\"\\", "--x=$HOME"])
def test_a_pipeline_steps_commands_parse_back_to_their_arguments(value: str) -> None:
    from ci.buildkite.pipeline_model import VENV_PYTHON, ci, nox

    assert bash_argv(ci("fork", "bundle", "--fork", value)) == [VENV_PYTHON, "-m", "ci", "fork", "bundle", "--fork",
                                                                value]  # fmt: skip
    assert bash_argv(nox("run", "--fork", value)) == ["nox", "-s", "run", "--", "--fork", value]


def test_the_fix_line_for_the_base_release_quotes_a_checkout_path_with_a_space_and_a_substitution(
    tmp_path: Path, stack_copy: Path
) -> None:
    from support.fork_world import make

    w = make(tmp_path / "my forks $(touch PWNED)", stack_copy)
    w.repo.git("tag", "-d", "v0.26.0")  # no release tag: the base is not known, and the fix fetches upstream's
    here = tmp_path / "pwned"
    here.mkdir()
    done = _ci(w.stack, "fork", "bundle", "--fork", str(w.path), "--ref", "fork", "--out", "b.tar.gz", cwd=here)
    assert done.returncode == 2, done.stderr
    fetch = escape.command(["git", "-C", str(w.path), "fetch", "--tags", "--", "upstream"])
    assert f"({fetch})" in done.stderr, done.stderr
    assert bash_argv(fetch) == ["git", "-C", str(w.path), "fetch", "--tags", "--", "upstream"]
    assert not list(here.iterdir()) and not list(tmp_path.rglob("PWNED"))
