"""`python -m ci history pull` (ci/buildkite/history.py), as the pipeline's report step runs it: the last builds of the
branch listed through Buildkite's REST API (a local server standing in for it), their history artifacts downloaded by
`buildkite-agent artifact download --build` (a stand-in serving a folder per build), and joined: two builds that ran
at once and each appended to the history they were given both reach the next build. This build, a build that
uploaded none and a file that is no history are left out; no token, no API, or an answer that is no list of builds
pull nothing, and say why."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from support.history_builds import T0, build
from support.paths import REPO

from ci.history import past, store

AGENT = """\
import os, shutil, sys
args = sys.argv[1:]
assert args[:2] == ["artifact", "download"] and args[4] == "--build", args
source = os.path.join(os.environ["FAKE_BUILDS"], args[5], args[2])
if not os.path.isfile(source):
    sys.exit(f"no artifact matches {args[2]}")
os.makedirs(os.path.join(args[3], os.path.dirname(args[2])), exist_ok=True)
shutil.copy(source, os.path.join(args[3], args[2]))
"""


def uuid(n: int) -> str:
    return f"0000000{n}-0000-4000-8000-{n:012d}"


class _Api(http.server.BaseHTTPRequestHandler):
    answer: ClassVar[bytes] = b"[]"
    asked: ClassVar[list[tuple[str, str]]] = []

    def do_GET(self) -> None:
        type(self).asked.append((self.path, self.headers.get("Authorization", "")))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(type(self).answer)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def api() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Api.asked = []
    yield f"http://127.0.0.1:{server.server_address[1]}/v2"
    server.shutdown()


def pull(tmp_path: Path, api: str, builds: list[dict], **env: str) -> tuple[subprocess.CompletedProcess, Path]:
    _Api.answer = json.dumps(builds).encode()
    fakes = tmp_path / "bin"
    fakes.mkdir(exist_ok=True)
    (fakes / "buildkite-agent").write_text(f"#!{sys.executable}\n{AGENT}")
    (fakes / "buildkite-agent").chmod(0o755)
    given = {
        "PATH": f"{fakes}:{os.environ['PATH']}", "PYTHONPATH": str(REPO), "FAKE_BUILDS": str(tmp_path / "builds"),
        "STACKGATE_BUILDKITE_API": api, "BUILDKITE_API_TOKEN": "t0ken", "BUILDKITE_ORGANIZATION_SLUG": "acme",
        "BUILDKITE_PIPELINE_SLUG": "fork ci", "BUILDKITE_BRANCH": "main", "BUILDKITE_BUILD_ID": uuid(9), **env,
    }  # fmt: skip
    out = tmp_path / "work" / "history" / "history.sqlite"
    out.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "ci", "history", "pull", str(out)], cwd=out.parent.parent,
                          env={k: v for k, v in given.items() if v}, capture_output=True, text=True)  # fmt: skip
    return done, out


def uploaded(tmp_path: Path, n: int, *keys: int) -> None:
    """Build `n` uploaded a history holding the builds `keys`."""
    path = tmp_path / "builds" / uuid(n) / "history" / "history.sqlite"
    path.parent.mkdir(parents=True)
    for k in keys:
        store.append(path, build(k))


def keys(path: Path) -> list[str]:
    return [b.key for b in past.read(path, since=T0, last=0).builds]


def test_the_last_builds_histories_are_joined_this_one_and_a_broken_one_left_out(tmp_path: Path, api: str) -> None:
    uploaded(tmp_path, 8, 1, 2, 4)  # two builds that ran at once: each added its own to the history of build 6
    uploaded(tmp_path, 7, 1, 2, 3)
    (tmp_path / "builds" / uuid(5) / "history").mkdir(parents=True)  # build 5 uploaded a file that is no history
    (tmp_path / "builds" / uuid(5) / "history" / "history.sqlite").write_text("garbage " * 64)
    uploaded(tmp_path, 3, 1)
    uploaded(tmp_path, 9, 99)  # this build's own (a retried report step): never pulled
    listed = [{"id": uuid(n), "number": 100 + n, "state": "passed"} for n in (9, 8, 7, 6, 5, 3)]
    done, out = pull(tmp_path, api, listed)
    assert done.returncode == 0, done.stderr
    assert "build 105's history left out: " in done.stderr and "not a readable stackgate history" in done.stderr
    assert done.stdout.strip() == f"history: joined into {out}: build 108 (+3), build 107 (+1), build 103 (+0) " \
                                  "(builds added)"  # fmt: skip
    assert sorted(keys(out)) == ["results:1", "results:2", "results:3", "results:4"]
    (path, auth), = _Api.asked  # fmt: skip
    assert path == "/v2/organizations/acme/pipelines/fork%20ci/builds?branch=main&per_page=20"
    assert auth == "Bearer t0ken"


@pytest.mark.parametrize(
    ("env", "answer", "said"),
    [
        ({"BUILDKITE_API_TOKEN": ""}, [], "$BUILDKITE_API_TOKEN is unset"),
        ({"BUILDKITE_BRANCH": ""}, [], "not a Buildkite job"),
        ({}, {"message": "Unauthorized"}, "could not be listed (not a list of builds); none pulled"),
        ({}, [{"id": "; rm -rf /", "number": 1}], "could not be listed (a build without a Buildkite id and number"),
        ({}, [{"id": uuid(4), "number": 104}], "none of the last 1 builds of main uploaded one"),
    ],
    ids=["no-token", "no-buildkite", "not-a-list", "a-bad-id", "none-uploaded"],
)
def test_nothing_is_pulled_where_nothing_can_be_and_it_says_why(
    tmp_path: Path, api: str, env: dict, answer: object, said: str
) -> None:
    done, out = pull(tmp_path, api, answer, **env)  # type: ignore[arg-type]
    assert done.returncode == 0, done.stderr
    assert said in done.stdout
    assert not out.exists()


def test_merge_joins_histories_by_hand(tmp_path: Path) -> None:
    for n, ks in ((1, (1, 2)), (2, (2, 3))):
        for k in ks:
            store.append(tmp_path / f"h{n}.sqlite", build(k))
    argv = [sys.executable, "-m", "ci", "history", "merge", str(tmp_path / "h1.sqlite"), str(tmp_path / "h2.sqlite")]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip().endswith("1 build added"), done.stderr
    assert keys(tmp_path / "h1.sqlite") == ["results:1", "results:2", "results:3"]
