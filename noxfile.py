# /// script
# dependencies = ["nox>=2025.2.9", "pyyaml>=6.0.1", "pydantic>=2.7"]
# ///
"""One session per user-facing job; each calls `python -m ci <verb>` and holds no logic of its own.

The run sessions come from the stack: one per target and suite that has planned rows, named
`<target session>_<suite>` (`rocm_sparse_mla`, `sm121a_spec_decode`, ...; stack/targets.yaml `session`).
Adding a target there adds its sessions here. Reading the stack needs pyyaml and pydantic: where the
interpreter running nox lacks them, nox installs the script block above into .nox/_nox_script_mode.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nox

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ci.stack import loader, plan

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True

HOST_SUITES = "containers/locks/cpu.in"  # what the suites need on a host: the cpu image's own requirements
LOOK_AT_LINES = 400  # `nox -s lint` lists the modules longer than this, for a look (never a failure)


def _ci(session: nox.Session, *args: str, host_suites: bool = False) -> None:
    # pip's own lines show: a first install takes a minute or more, and a silent one looks hung
    session.install("-e", ".", *(["-r", HOST_SUITES] if host_suites else []), "--progress-bar", "off", silent=False)
    session.run("python", "-m", "ci", *args, *session.posargs)


@nox.session
def main(session: nox.Session) -> None:
    """The whole flow on this host's target (cpu where no GPU is found): build, verify, run, report to out/.
    Without a docker engine it runs the suites on this host's Python."""
    _ci(session, "main", host_suites=True)


@nox.session(name="plan")
def plan_rows(session: nox.Session) -> None:
    """Print the matrix of rows the fork must prove (options after --, e.g. -- --format json)."""
    _ci(session, "plan")


@nox.session
def report(session: nox.Session) -> None:
    """Combine JUnit into report.md/html/json: junit/ -> report/ (or -- FILES_OR_DIRS --out DIR [--baseline F])."""
    session.install("-e", ".")
    session.run("python", "-m", "ci", "report", *(session.posargs or ["junit", "--out", "report"]))


@nox.session(name="run")
def run_rows(session: nox.Session) -> None:
    """Run a target's rows of one suite in its image, JUnit out (-- TARGET SUITE --out DIR [--rows ...] [--shard N]).
    With --host, the suites' requirements are installed as well. A Buildkite run step makes this venv
    (--install-only) and calls its python, so that `ci run`'s exit status reaches the agent."""
    _ci(session, "run", host_suites="--host" in session.posargs)


@nox.session
def pipeline(session: nox.Session) -> None:
    """Print the Buildkite pipeline made from the plan (YAML alone on stdout: pipe it to the agent's upload).

    `nox -s pipeline | buildkite-agent pipeline upload`; options after --: --target T --change C --shard-size N.
    """
    _ci(session, "pipeline")


@nox.session
def gate(session: nox.Session) -> None:
    """Fail (exit 8) when a change the stack marks as gating is not ready (-- report/report.json [--style])."""
    _ci(session, "gate")


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks of planning, reporting 10,000 testcases, `ci upstream` and a row's overhead, side by side.

    Planning; merging and rendering 50 JUnit files (10,000 testcases); `ci upstream` on a 20,000-commit history
    (-- --only upstream for that alone); per-row overhead of `ci run` on the cpu target (-- --image REF).
    """
    _ci(session, "bench", host_suites=True)


@nox.session
def evidence(session: nox.Session) -> None:
    """Check every committed evidence report is today's rendering of its committed JUnit (-- --write re-renders).

    Fails where one differs from what is committed; -- FOLDER checks one.
    """
    session.install("-e", ".")
    session.run("python", "-m", "ci.evidence", *session.posargs)


@nox.session
def upstream(session: nox.Session) -> None:
    """Each imported change's state in a fork checkout, from git alone (-- --fork PATH [--format json|markdown]).

    Options after --: --fork PATH [--ref REF] [--upstream-ref REF] [--format json|markdown]; --record writes what
    the fork carries into stack/fork.yaml.
    """
    _ci(session, "upstream")


@nox.session
def build(session: nox.Session) -> None:
    """Build a target's image offline with BuildKit (e.g. -- cpu); prints its id."""
    _ci(session, "build")


@nox.session
def bake(session: nox.Session) -> None:
    """Run the image's warm-up on the target's devices and commit the caches (e.g. -- cuda-sm90)."""
    _ci(session, "bake")


@nox.session
def verify(session: nox.Session) -> None:
    """Check a target's image without a GPU: labels, pinned base, baked kernels, SASS, sentinel (e.g. -- cpu)."""
    _ci(session, "verify")


@nox.session
def lock(session: nox.Session) -> None:
    """Resolve a target's hashed lock with uv (e.g. -- rocm-gfx1151); needs the target's package index."""
    session.install("-e", ".", "uv")
    session.run("python", "-m", "ci", "lock", *session.posargs)


def _pytest(session: nox.Session, *folders: str) -> None:
    session.install("-e", ".[test]", "-r", HOST_SUITES)
    session.run("pytest", *folders, *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """Every test of ci/ and the suites' harness: tests/unit, then tests/integration (docker tests use the real engine).

    Options after -- go to pytest (-- --durations=15, -- tests/unit/test_x.py -x)."""
    _pytest(session)  # pyproject's testpaths: both folders, unit first


@nox.session
def unit(session: nox.Session) -> None:
    """The fast tests alone (tests/unit): no docker engine, no network, no image built; under two minutes."""
    _pytest(session, "tests/unit")


@nox.session
def integration(session: nox.Session) -> None:
    """The slow tests (tests/integration): images built and run, the cpu self-test, forks made by git, a browser."""
    _pytest(session, "tests/integration")


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (lint and formatting) and vulture (dead code, with .vulture-whitelist.py)."""
    session.install("ruff>=0.6", "vulture>=2.14")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("vulture", "ci", "suites", ".vulture-whitelist.py", "--min-confidence", "80")
    # a long module is a prompt to look for a concept in it, never a failure
    sizes = [
        (len(p.read_text().splitlines()), str(p)) for p in [*Path("ci").rglob("*.py"), *Path("suites").rglob("*.py")]
    ]
    long = ", ".join(f"{p} ({n})" for n, p in sorted(sizes, reverse=True) if n > LOOK_AT_LINES)
    session.log(f"modules over {LOOK_AT_LINES} lines, for a look: {long or 'none'}")


def _run_session(target: str, suite: str, primary: str, alias: bool):
    def session_fn(session: nox.Session) -> None:
        _ci(session, "main", "--target", target, "--suite", suite, "--out", f"out/{primary}", host_suites=True)

    session_fn.__doc__ = (
        f"Alias of {primary}."
        if alias
        else f"The whole flow for the {suite} rows of {target}: build and verify its image, run, report to "
        f"out/{primary}/ (-- --host: on this host's Python)."
    )
    return session_fn


_STACK = loader.load()
for _target in _STACK.targets.values():
    for _suite in sorted({r.suite for r in plan.build(_STACK).select(targets=[_target.id]).rows}):
        _primary = f"{_target.sessions[0]}_{_suite}"
        for _prefix in _target.sessions:
            _name = f"{_prefix}_{_suite}"
            nox.session(name=_name)(_run_session(_target.id, _suite, _primary, alias=_name != _primary))
