"""Hg-Spark/vllm judged as its maintainer would: the fork and its ref set once in the environment, upstream found by
its remote's URL, no other flag; every answer checked against git.

    python3 evidence/fork-public/maintainer.py --fork /tmp/Hg-Spark-vllm.git [--out evidence/fork-public/maintainer]

`--fork` is the bare clone README.md's commands make (upstream's main, 7cfb97e33791, under a remote whose URL is
vLLM's). First without any release tag, as the snapshots come: the base is not known, and the commands that need
one say so with where the branch left upstream's main, its date, and the fix. Then with upstream's v0.27.1 tag as
`git fetch upstream --tags` would bring it: the tag's commit is 6e448d0ea9bf, the tip of Hg-Spark's `main` (a public
audit of vLLM 0.27.1 names that commit as the tag, peeled; no snapshot here holds upstream's tags, so the one tag is
set by hand in the scratch clone). Writes maintainer.md (commands, exit codes, seconds, what each said), the report's
Markdown and HTML and the first screen as headless Chromium shows it. Fails if any file under stack/ changed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BRANCH = "pcp-runahead-dev-v0.27.1"
TAG, TAG_COMMIT = "v0.27.1", "6e448d0ea9bf3d88d898b65449ca6dc2aec170ac"
LEFT = "f5bb701fa270f5c801f1572e1478b56f292d8dfc"  # where the branch left upstream's main (its merge base)
MERGES = {"48407": "ba702e978e3b", "46849": "a311916a291c", "46514": "63ff748f657a", "49903": "0d0504b54c73"}
FOLLOW_UP = ("52512", "01e56caaf2")  # #48407's follow-up fix


def git(fork: Path, *args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["git", "-C", str(fork), *args], capture_output=True, text=True)
    if done.returncode not in ok:
        raise SystemExit(f"git {' '.join(args[:3])}: {done.stderr.strip()}")
    return done


def ancestor(fork: Path, commit: str, of: str) -> bool:
    return git(fork, "merge-base", "--is-ancestor", commit, of, ok=(0, 1)).returncode == 0


class Session:
    """The maintainer's shell: STACKGATE_FORK and STACKGATE_FORK_REF set once; each command timed and kept."""

    def __init__(self, fork: Path) -> None:
        self.env = {**os.environ, "STACKGATE_FORK": str(fork), "STACKGATE_FORK_REF": BRANCH}
        self.env.pop("STACKGATE_UPSTREAM_REF", None)
        self.said: list[tuple[str, int, float, str]] = []

    def ci(self, *args: str, want: int = 0) -> str:
        start = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "ci", *args], cwd=REPO, env=self.env, capture_output=True,
                              text=True, timeout=600)  # fmt: skip
        seconds = time.monotonic() - start
        if done.returncode != want:
            raise SystemExit(f"python -m ci {' '.join(args)}: exit {done.returncode}, not {want}\n{done.stderr}")
        self.said.append((" ".join(args), done.returncode, seconds, (done.stdout + done.stderr).strip()))
        return done.stdout if want == 0 else done.stderr


def check(fork: Path, doc: dict, *, base: str | None) -> list[str]:
    """Each state set against git; the lines of the table."""
    states = {c["change"]: c for c in doc["changes"]}
    for change, merge in MERGES.items():
        held = ancestor(fork, merge, BRANCH)
        assert (states[change]["state"] == "converged") == held, (change, states[change]["state"], held)
    assert states["48804"]["state"] == "absent"  # closed unmerged: none of the files it adds is in the tree
    pr, commit = FOLLOW_UP
    assert not ancestor(fork, commit, BRANCH) and f"vllm-project/vllm#{pr}" in states["48407"]["follow_ups_missing"]
    assert (doc["base"] or {}).get("version") == base, doc["base"]
    assert doc["left_upstream"]["commit"] == LEFT
    return [f"| #{c} | {states[c]['state']} | {'; '.join(states[c]['follow_ups_missing']) or '—'} |" for c in states]


def screenshot(html: Path, out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    shots = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for width, height in ((1366, 900), (390, 844)):
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(html.as_uri())
            shots.append(out / f"first-screen-{width}x{height}.png")
            page.screenshot(path=str(shots[-1]))
            page.close()
        browser.close()
    return shots


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fork", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "maintainer")
    args = ap.parse_args()
    stack_before = {p: p.read_bytes() for p in (REPO / "stack").rglob("*") if p.is_file()}
    fork, out = args.fork.resolve(), args.out
    out.mkdir(parents=True, exist_ok=True)
    git(fork, "tag", "-d", TAG, ok=(0, 1))  # as the snapshot comes: no release tag
    sh = Session(fork)

    sh.ci("fork")
    untagged = check(fork, json.loads(sh.ci("fork", "--format", "json")), base=None)
    sh.ci("fork", "bundle", "--out", "/tmp/stackgate-hg-spark-unused.tar.gz", want=2)
    sh.ci("main", "--target", "cuda-sm121a", "--out", "/tmp/stackgate-hg-spark-unused", want=2)

    git(fork, "update-ref", f"refs/tags/{TAG}", TAG_COMMIT)  # what `git fetch upstream --tags` brings for it
    sh.ci("fork")
    tagged = check(fork, json.loads(sh.ci("fork", "--format", "json")), base="0.27.1")
    sh.ci("upstream")
    sh.ci("plan", "--target", "cuda-sm121a")
    steps = sh.ci("pipeline", "--one-agent", "--target", "cuda-sm121a")
    head = git(fork, "rev-parse", BRANCH).stdout.strip()
    assert f"--fork {fork} --ref {head} --upstream-ref " in steps and f"--base-ref {TAG_COMMIT}" in steps
    bundle = Path("/tmp/stackgate-hg-spark-bundle.tar.gz")
    sh.ci("fork", "bundle", "--out", str(bundle))
    bundle.unlink()
    refused = [
        sh.ci(*verb, "--without", "48407", want=2)
        for verb in (["fork", "bundle", "--out", str(bundle)], ["pipeline", "--one-agent", "--target", "cuda-sm121a"])
    ]
    assert refused[0] == refused[1] and "cannot drop #48407 alone" in refused[0], refused  # fmt: skip
    results = Path("/tmp/stackgate-hg-spark-main")
    shutil.rmtree(results, ignore_errors=True)
    sh.ci("main", "--target", "cuda-sm121a", "--out", str(results), want=6)  # no GB10 here: the rows are not run

    report = out / "report"
    report.mkdir(exist_ok=True)
    for name in ("report.md", "report.html"):
        shutil.copy(results / "report" / name, report / name)
    doc = json.loads((results / "report" / "report.json").read_text())
    kept = {"judged": doc["judged"], "changes": [{"id": c["id"], "fork": c["fork"]} for c in doc["changes"]]}
    (report / "judged.json").write_text(json.dumps(kept, indent=2) + "\n")
    shots = screenshot(report / "report.html", out)

    lines = ["# Hg-Spark/vllm as its maintainer runs it", "",
             f"`STACKGATE_FORK={fork} STACKGATE_FORK_REF={BRANCH}`; upstream: the remote whose URL is vLLM's. "
             "Written by `evidence/fork-public/maintainer.py`.", "",
             "| change | state (no tag, then with v0.27.1) | follow-ups missing |", "|---|---|---|",
             *tagged, "", "| command | exit | seconds | said (first lines) |", "|---|---|---|---|"]  # fmt: skip
    assert [t.split(" | ")[1] for t in untagged] == [t.split(" | ")[1] for t in tagged]  # the same states
    for command, code, seconds, said in sh.said:
        first = " ⏎ ".join(said.splitlines()[:3]).replace("|", "\\|")
        lines.append(f"| `ci {command}` | {code} | {seconds:.2f} | {first[:600]} |")
    lines += ["", *(f"![first screen]({s.name})" for s in shots), ""]
    (out / "maintainer.md").write_text("\n".join(lines))
    after = {p: p.read_bytes() for p in (REPO / "stack").rglob("*") if p.is_file()}
    assert after == stack_before, "a stack file changed"
    print(f"wrote {out / 'maintainer.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
