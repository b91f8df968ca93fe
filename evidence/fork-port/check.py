"""Port readiness on a public fork, each verdict checked by hand against `git apply --3way` in a scratch worktree.

    python3 evidence/fork-port/check.py --fork /tmp/hg.git [--out evidence/fork-port]

`--fork` is the bare clone evidence/fork-public/README.md makes (Hg-Spark/vllm with upstream's main fetched as
`refs/remotes/upstream/main`). For every change `ci fork` finds absent or partially ported, and every follow-up it
finds missing, the script takes stackgate's verdict (`ci fork --format json`), then asks git itself in a detached
worktree of the branch (sparse: the snapshot lacks two docs blobs): `git apply --check` of upstream's `vllm/` diff
(clean as it is?), else `git apply --3way` (which files conflict, how many conflict regions each holds). It times
`ci fork` (five runs) and writes port.md; only ids, paths and counts, no vLLM code. The worktree is removed after.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BRANCH, BASE, VERSION = "pcp-runahead-dev-v0.27.1", "main", "0.27.1"


def git(where: Path, *args: str, ok: tuple[int, ...] = (0,), stdin: str | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True, input=stdin)
    if done.returncode not in ok:
        raise SystemExit(f"git {' '.join(args[:3])}: {done.stderr.strip()}")
    return done


def ci(*args: str) -> tuple[subprocess.CompletedProcess, float]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "ci", *args], cwd=REPO, capture_output=True, text=True)
    return done, time.perf_counter() - start


def by_hand(wt: Path, commit: str) -> dict[str, object]:
    """git's own answer for upstream's `vllm/` diff of `commit` on the worktree's branch; the worktree reset after."""
    patch = git(wt, "diff", "--binary", f"{commit}^", commit, "--", "vllm/").stdout
    if git(wt, "apply", "--check", stdin=patch, ok=(0, 1)).returncode == 0:
        return {"verdict": "clean", "conflicts": {}}
    three = git(wt, "apply", "--3way", stdin=patch, ok=(0, 1))
    unmerged = sorted(set(git(wt, "diff", "--name-only", "--diff-filter=U").stdout.split()))
    regions = {p: (wt / p).read_text(errors="replace").count("\n<<<<<<< ") for p in unmerged}
    git(wt, "reset", "-q", "--hard")
    verdict = "clean by three-way merge" if three.returncode == 0 else "conflicts"
    return {"verdict": verdict, "conflicts": regions}


def worktree(fork: Path, where: Path) -> Path:
    """A detached worktree of BRANCH without the blobs the snapshot lacks (sparse)."""
    wt = where / "wt"
    git(fork, "worktree", "add", "-q", "--no-checkout", "--detach", str(wt), BRANCH)
    entries = git(wt, "ls-tree", "-r", "HEAD").stdout.splitlines()
    batch = "".join(e.split()[2] + "\n" for e in entries)
    present = git(wt, "cat-file", "--batch-check", stdin=batch).stdout.splitlines()
    missing = [e.split("\t", 1)[1] for e, p in zip(entries, present, strict=True) if p.endswith("missing")]
    git(wt, "sparse-checkout", "set", "--no-cone", "/*", *(f"!/{p}" for p in missing))
    git(wt, "checkout", "-q", "--detach", BRANCH)
    return wt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fork", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = ap.parse_args()
    flags = ["--fork", str(args.fork), "--ref", BRANCH, "--base-ref", BASE, "--base-version", VERSION]
    runs = [ci("fork", *flags, "--format", "json") for _ in range(5)]
    done = runs[0][0]
    assert done.returncode == 0, done.stderr
    times = sorted(t for _, t in runs)
    ports = []
    for c in json.loads(done.stdout)["changes"]:
        if c["port"]:
            ports.append((f"#{c['change']} ({c['state']})", c["port"]))
        ports += [(f"#{f['pr']} (follow-up of #{c['change']})", f) for f in c["follow_up_ports"]]
    lines = [
        f"`python -m ci fork --fork FORK --ref {BRANCH} --base-ref {BASE} --base-version {VERSION} --format json`: "
        f"{times[0]:.2f} / {statistics.median(times):.2f} / {times[-1]:.2f} s (min / median / max of 5 runs, the "
        "whole command: the fork's state and the port readiness of every change)",
        "",
        "| change | stackgate | conflicting files (hunks) | possible prerequisites it names | "
        "`git apply --check`, then `--3way` | conflict regions git marks | agrees |",
        "|---|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        wt = worktree(args.fork, Path(tmp))
        try:
            for label, r in ports:
                if r["verdict"] in ("unknown", "in the fork") or len(r["patch"]) != 1:
                    lines.append(f"| {label} | {r['verdict']} | — | — | not tried: {r['detail']} | — | — |")
                    continue
                hand = by_hand(wt, r["patch"][0])
                ours = {c["file"]: len(c["hunks"]) for c in r["conflicts"]}
                agrees = hand["verdict"] == r["verdict"] and ours == hand["conflicts"]
                named = ", ".join(f"`{p['commit'][:12]}` #{p['pr']}" for p in r["prerequisites"]) or "—"
                shown = lambda d: ", ".join(f"`{f}` ({n})" for f, n in d.items()) or "—"  # noqa: E731
                lines.append(f"| {label} | {r['verdict']} | {shown(ours)} | {named} | {hand['verdict']} | "
                             f"{shown(hand['conflicts'])} | {'yes' if agrees else '**no**'} |")  # fmt: skip
        finally:
            git(args.fork, "worktree", "remove", "--force", str(wt))
    (args.out / "port.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
