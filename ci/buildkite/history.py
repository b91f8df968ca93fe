"""`python -m ci history`: the history carried from build to build, so that agents never share a file system.

`history pull PATH`, in the pipeline's report step: the history artifacts (`history/history.sqlite`) of the last
builds of this pipeline on this branch, joined into PATH (`ci.history.join.merge`: each build once, by its key). It
takes the last `PULLED` builds that uploaded one, not only the last: two builds of one branch that ran at once each
appended to the history they were given, and the next build joins both. Finding those builds takes Buildkite's REST
API (a token with read_builds in $BUILDKITE_API_TOKEN); the artifacts come through `buildkite-agent artifact download
--build`. Without a token, or outside a Buildkite job, it says so and pulls nothing: the history starts from this
build. What the API answers is data: validated, never run.

`history merge INTO FROM...`: histories joined by hand (each build of FROM that INTO lacks, added)."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

import orjson

from ci.common import options
from ci.common.errors import StackgateError
from ci.common.tables import counted

API = "https://api.buildkite.com/v2"
ENV_API = "STACKGATE_BUILDKITE_API"  # another API root (a proxy, or a test's server)
ENV_TOKEN = "BUILDKITE_API_TOKEN"
ARTIFACT = "history/history.sqlite"  # where the report step keeps it, and uploads it from
PULLED = 3  # the last builds whose histories are joined
_LISTED = 20  # builds asked for: the last ones of the branch, some of which may have uploaded none
_BODY_MAX = 4 << 20  # bytes of the API's answer read at most
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
_NEEDED = ("BUILDKITE_ORGANIZATION_SLUG", "BUILDKITE_PIPELINE_SLUG", "BUILDKITE_BRANCH")


def earlier_builds(env: dict[str, str]) -> list[tuple[str, int]]:
    """The builds of this pipeline on this branch, newest first, this one left out: (id, number) each."""
    org, pipeline, branch = (env[k] for k in _NEEDED)
    query = urllib.parse.urlencode({"branch": branch, "per_page": _LISTED})
    root = env.get(ENV_API, API).rstrip("/")
    url = f"{root}/organizations/{urllib.parse.quote(org, safe='')}/pipelines/{urllib.parse.quote(pipeline, safe='')}"
    request = urllib.request.Request(f"{url}/builds?{query}", headers={"Authorization": f"Bearer {env[ENV_TOKEN]}"})
    with urllib.request.urlopen(request, timeout=30) as answer:  # https, or the root the user set
        body = answer.read(_BODY_MAX + 1)
    if len(body) > _BODY_MAX:
        raise ValueError(f"an answer over {_BODY_MAX:,} bytes")
    doc = orjson.loads(body)
    if not isinstance(doc, list):
        raise ValueError("not a list of builds")
    found = []
    for build in doc:
        uid, number = (build.get("id"), build.get("number")) if isinstance(build, dict) else (None, None)
        if not isinstance(uid, str) or not _UUID.match(uid) or type(number) is not int:
            raise ValueError(f"a build without a Buildkite id and number: {str(build)[:120]}")
        if uid != env.get("BUILDKITE_BUILD_ID"):
            found.append((uid, number))
    return sorted(found, key=lambda b: -b[1])


def pull(path: Path, env: dict[str, str]) -> str:
    """The last builds' histories joined into `path`; what was done, in a line."""
    missing = [k for k in (*_NEEDED, ENV_TOKEN) if not env.get(k)]
    if missing:
        why = "not a Buildkite job" if set(missing) & set(_NEEDED) else f"${ENV_TOKEN} is unset"
        return (
            f"history: no earlier build's history pulled ({why}: set {', '.join('$' + m for m in missing)}; a token "
            "with read_builds finds the last builds of this branch); the history starts from this build"
        )
    try:
        builds = earlier_builds(env)
    except (OSError, ValueError) as exc:
        return f"history: the builds of {env['BUILDKITE_BRANCH']} could not be listed ({exc}); none pulled"
    joined: list[str] = []
    for uid, number in builds:
        with tempfile.TemporaryDirectory(prefix="stackgate-history-") as tmp:
            got = subprocess.run(
                ["buildkite-agent", "artifact", "download", ARTIFACT, tmp, "--build", uid],
                capture_output=True,
                text=True,
                check=False,
            )
            if got.returncode != 0 or not (Path(tmp) / ARTIFACT).is_file():
                continue  # that build uploaded none (its report step did not run, or failed before)
            try:
                from ci.history import join

                added = join.merge(path, Path(tmp) / ARTIFACT)
            except StackgateError as exc:
                print(f"warning: build {number}'s history left out: {exc.message}", file=sys.stderr)
                continue
        joined.append(f"build {number} (+{added})")
        if len(joined) == PULLED:
            break
    if not joined:
        return f"history: none of the last {len(builds)} builds of {env['BUILDKITE_BRANCH']} uploaded one"
    return f"history: joined into {path}: {', '.join(joined)} (builds added)"


def cmd_history(args: argparse.Namespace) -> int:
    from ci.history import join

    if args.action == "pull":
        print(pull(args.path, dict(os.environ)))
        return 0
    added = sum(join.merge(args.path, other) for other in args.others)
    print(f"{args.path}: {counted(added, 'build')} added")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    h = options.verb(
        sub, "history", help="the history of builds: pulled from earlier Buildkite builds, or merged", codes=(0, 2, 5)
    )
    actions = h.add_subparsers(dest="action", required=True, metavar="ACTION", help="pull or merge")
    p = actions.add_parser(
        "pull",
        help=f"join the last {PULLED} builds' histories of this branch into PATH "
        f"(Buildkite: ${ENV_TOKEN} with read_builds)",
    )
    p.add_argument("path", type=Path, metavar="PATH")
    m = actions.add_parser("merge", help="add to INTO every build of each FROM that it lacks")
    m.add_argument("path", type=Path, metavar="INTO")
    m.add_argument("others", type=Path, nargs="+", metavar="FROM")
    h.set_defaults(func=cmd_history)
