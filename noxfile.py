"""One session per user-facing job. Each calls `python -m ci <verb>`; the logic lives in ci/."""

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True


def _ci(session: nox.Session, *args: str) -> None:
    session.install("-e", ".")
    session.run("python", "-m", "ci", *args, *session.posargs)


@nox.session
def main(session: nox.Session) -> None:
    """The main job on this host's target (the cpu target where no GPU is found)."""
    _ci(session, "main")


@nox.session
def plan(session: nox.Session) -> None:
    """Print the matrix of rows the fork must prove (options after --, e.g. -- --format json)."""
    _ci(session, "plan")


@nox.session
def report(session: nox.Session) -> None:
    """Combine JUnit into report.md/html/json: junit/ -> report/ (or -- FILES_OR_DIRS --out DIR [--baseline F])."""
    session.install("-e", ".")
    session.run("python", "-m", "ci", "report", *(session.posargs or ["junit", "--out", "report"]))


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks: planning; merging and rendering 50 JUnit files (10,000 testcases); per-row overhead of `ci run`
    on the cpu target (-- --image REF for docker)."""
    _ci(session, "bench")


# One session per target and suite: `nox -s rocm_sparse_mla`, and `nox -s cuda_spec_decode -- --host`.
# cuda_* is the GB10 (cuda-sm121a), sm90_* the H100/H200 (cuda-sm90). Results go to results/<target>-<suite>/.
RUNS = {
    "cpu_selftest": ("cpu", "selftest"),
    "cuda_spec_decode": ("cuda-sm121a", "spec_decode"),
    "cuda_sparse_mla": ("cuda-sm121a", "sparse_mla"),
    "rocm_spec_decode": ("rocm-gfx1151", "spec_decode"),
    "rocm_sparse_mla": ("rocm-gfx1151", "sparse_mla"),
    "sm90_spec_decode": ("cuda-sm90", "spec_decode"),
    "sm90_sparse_mla": ("cuda-sm90", "sparse_mla"),
}


def _run_session(target: str, suite: str):
    def session_fn(session: nox.Session) -> None:
        _ci(session, "run", target, suite, "--out", f"results/{target}-{suite}")

    session_fn.__doc__ = f"Run the {suite} rows of {target} in its image (options after --: --host, --image, --rows)."
    return session_fn


for _name, (_target, _suite) in RUNS.items():
    nox.session(name=_name)(_run_session(_target, _suite))


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
    """Check an image without a GPU: labels, pinned base, baked kernels, SASS, sentinel (e.g. -- cpu)."""
    _ci(session, "verify")


@nox.session
def tests(session: nox.Session) -> None:
    """Unit and integration tests of ci/ (docker tests use the real engine)."""
    session.install("-e", ".[test]")
    session.run("pytest", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff: lint and formatting."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
