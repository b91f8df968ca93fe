"""`ci upstream` on a 20,000-commit history built by `git fast-import` in a second or two: upstream's main, a fork
branched 500 commits before its tip carrying 2,000 commits of its own (a port among them), and side branches holding
PR commits. Every change of the stack gets commits in it, so each state is exercised: converged, diverged,
partially ported, absent. The figure is the whole classification (`classify.survey`), and the whole command in a
fresh process; a second history puts all 20,000 commits in REF..HEAD, the patch-id stream's worst case."""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from ci.common import git, tables
from ci.stack import loader
from ci.upstream import scope
from ci.upstream.holds import classify

COMMITS, FORK_OWN, BEHIND = 20_000, 2_000, 500
BUDGET_S = 5.0
_EPOCH = 1_700_000_000


class _History:
    """A fast-import stream: one small file change per commit, marks numbered in order."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.mark = 0

    def commit(self, ref: str, message: str, path: str, text: str, parent: int | None = None) -> int:
        self.mark += 1
        msg, body = message.encode(), text.encode()
        head = f"commit {ref}\nmark :{self.mark}\ncommitter t <t@example.invalid> {_EPOCH + self.mark} +0000\n"
        self.parts += [head.encode(), b"data %d\n" % len(msg), msg, b"\n"]
        if parent is not None:
            self.parts.append(b"from :%d\n" % parent)
        self.parts += [f"M 100644 inline {path}\n".encode(), b"data %d\n" % len(body), body, b"\n\n"]
        return self.mark


def build(root: Path, own_only: bool = False, commits: int = COMMITS, fork_own: int = FORK_OWN) -> dict[str, str]:
    """The repository at `root` (`commits` in all, `fork_own` of them the fork's); returns the commit ids the stack's
    changes name. With `own_only`, upstream/main is the root commit, so nearly every commit is the fork's own."""
    h = _History()
    marks: dict[str, int] = {}
    upstream_n = commits - fork_own - 7  # 4 commits on PR branches, 3 of the fork's are the port and a half port
    base = upstream_n - min(BEHIND, upstream_n // 2)
    for i in range(1, upstream_n + 1):
        if i == base + 1:  # the PR branches start at the fork's base, as the port does
            at = marks["base"]
            marks["pr1"] = h.commit("refs/heads/pr-48804", "Warm kernels at startup", "vllm/warmup.py", "warm\n", at)
            marks["pr2"] = h.commit("refs/heads/pr-48804", "Call the warm-up", "vllm/runner.py", "runner\nwarm()\n")
            marks["gone"] = h.commit("refs/heads/pr-46514", "fp8 MTP", "vllm/fp8.py", "fp8\n", at)
            marks["pr46849"] = h.commit("refs/heads/pr-46849", "Fuse draft graphs", "vllm/graph.py", "fused\n", at)
        # every 50th commit changes the file the port changes: those after the base make it diverge
        path, text = ("vllm/runner.py", f"runner {i}\n") if i % 50 == 0 else (f"vllm/d{i % 20}/m{i % 400}.py", f"{i}\n")
        merged = i == upstream_n // 4  # #48407's squash merge, long before the fork's base
        mark = h.commit("refs/heads/main", f"upstream change {i}" + (" (#48407)" if merged else ""), path, text)
        marks.update({"merged": mark} if merged else {"base": mark} if i == base else {})
        marks["tip"] = mark
    parent: int | None = marks["base"]
    for i in range(fork_own):
        if i == min(100, fork_own // 2):  # the port, cherry-picked: the same patches as the PR's commits
            marks["port1"] = h.commit("refs/heads/fork", "Warm kernels at startup", "vllm/warmup.py", "warm\n", parent)
            marks["port2"] = h.commit("refs/heads/fork", "Call the warm-up", "vllm/runner.py", "runner\nwarm()\n")
            marks["half"] = h.commit("refs/heads/fork", "fp8 base", "vllm/fp8_base.py", "base\n")
            parent = None
        h.commit("refs/heads/fork", f"fork change {i}", f"fork/d{i % 15}/m{i % 300}.py", f"fork {i}\n", parent)
        parent = None
    upstream_at = 1 if own_only else marks["tip"]
    h.parts.append(f"reset refs/remotes/upstream/main\nfrom :{upstream_at}\n\n".encode())
    h.parts.append(b"done\n")
    root.mkdir(parents=True, exist_ok=True)
    marks_file = root / ".git" / "marks"
    for args, data in (
        (("init", "-q", "-b", "fork"), None),
        (("fast-import", "--quiet", "--done", f"--export-marks={marks_file}"), b"".join(h.parts)),
        (("reset", "-q", "--hard", "fork"), None),
    ):
        done = git.run(root, *args, stdin=data, text=False)
        if done.returncode:
            raise RuntimeError(f"git {args[0]} in {root}: {done.stderr.decode(errors='replace')[-2000:]}")
    ids = dict(line.split() for line in marks_file.read_text().splitlines())
    return {name: ids[f":{m}"] for name, m in marks.items()}


def stack_for(src: Path, dest: Path, ids: dict[str, str], checkout: Path) -> None:
    """A copy of the stack whose changes name commits of the benchmark's history, and whose fork.yaml names that
    history's checkout, recording the commits that carry #48804 and #46514 there."""
    shutil.copytree(src, dest)

    def edit(change: str, upstream: dict[str, Any]) -> None:
        path = dest / "changes" / f"{change}.yaml"
        doc = yaml.safe_load(path.read_text())
        doc["upstream"].update(upstream)
        doc["upstream"] = {k: v for k, v in doc["upstream"].items() if v is not None}
        path.write_text(yaml.safe_dump(doc, sort_keys=False))

    edit("48407", {"merge_commit": ids["merged"][:12], "patch_id": None, "file_ids": None})
    edit("48804", {"commits": [ids["pr1"][:10], ids["pr2"][:10]]})
    unmerged = {"state": "open", "merged_on": None, "first_release": None, "merge_commit": None, "patch_id": None}
    edit("46514", {**unmerged, "commits": [], "file_ids": {}})
    edit("46849", {"commits": [ids["pr46849"][:9]], "merge_commit": None, "patch_id": None, "file_ids": {}})
    carries = {
        "48804": {"commits": [ids["port1"][:9], ids["port2"][:9]]},
        "46514": {"commits": [ids["half"][:9], ids["gone"][:9]]},
    }
    fork = {"name": "bench-fork", "checkout": str(checkout), "ref": "HEAD", "carries": carries}
    (dest / "fork.yaml").write_text(yaml.safe_dump({"fork": fork}, sort_keys=False))


def main(stack_dir: Path, repeats: int) -> int:
    table: list[list[object]] = []
    ok = True
    with tempfile.TemporaryDirectory(prefix="stackgate-bench-upstream-") as tmp:
        for label, own_only in (
            ("fork 2,000 own commits over upstream/main", False),
            ("all 20,000 commits in upstream/main..HEAD", True),
        ):
            root = Path(tmp) / ("own" if own_only else "fork")
            start = time.perf_counter()
            ids = build(root, own_only)
            made = time.perf_counter() - start
            stack = root.parent / f"stack-{root.name}"
            stack_for(stack_dir, stack, ids, root)
            st = loader.load(stack)
            snap = classify.survey(st, scope.open_scope(st, upstream_ref="upstream/main"))
            samples = []
            for _ in range(repeats):
                start = time.perf_counter()
                classify.survey(st, scope.open_scope(st, upstream_ref="upstream/main"))
                samples.append(time.perf_counter() - start)
            cmd = [
                sys.executable,
                "-m",
                "ci",
                "--stack",
                str(stack),
                "upstream",
                "--fork",
                str(root),
                "--format=json",
                "--upstream-ref",
                "upstream/main",
            ]
            whole = []
            for _ in range(max(1, repeats // 2)):
                start = time.perf_counter()
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
                whole.append(time.perf_counter() - start)
            states = ", ".join(f"#{c.change} {c.state}" for c in snap.changes if c.state != "not imported")
            print(f"{label}: built in {made:.1f} s ({snap.fork_commits} commits in REF..HEAD); {states}")
            for what, xs in ((f"classify, in process: {label}", samples), (f"python -m ci upstream: {label}", whole)):
                med = statistics.median(xs)
                ok &= med < BUDGET_S
                table.append(
                    [
                        what,
                        len(xs),
                        f"{med:.2f}",
                        f"{min(xs):.2f}",
                        f"{max(xs):.2f}",
                        f"{BUDGET_S:.0f}",
                        "ok" if med < BUDGET_S else "OVER",
                    ]
                )
    print(f"\nci upstream on a history of {COMMITS:,} commits (seconds; medians over repeats)")
    sys.stdout.write(tables.text(("what", "n", "median s", "min s", "max s", "budget s", ""), table))
    return 0 if ok else 1
