"""A public vLLM fork nobody here wrote, judged by `ci upstream` and `ci fork`, each answer checked against git.

    python3 evidence/fork-public/check.py --fork /tmp/hg.git [--out evidence/fork-public]

`--fork` is a bare clone of `Hg-Spark/vllm` (its `pcp-runahead-dev-v0.27.1` branch: the v0.27.x release line, its
`main`, plus 149 commits of its own) with upstream's history fetched from `neuralmagic/vllm` as
`refs/remotes/upstream/main` (at 7cfb97e337, upstream's main of 2026-08-20) under a remote whose URL is vLLM's. The
script adds one branch there, `pcp-with-46849`: the fork's branch with upstream's #46849 (`a311916a291c`)
cherry-picked, its conflicts resolved to upstream's side (`-X theirs`), made with git plumbing because the snapshot
lacks two docs blobs; only commit ids are in this repository. For each branch and each change it records what `ci
upstream` and `ci fork` say, and what git says: whether the merge commit is an ancestor of the branch and of its base
(`git merge-base --is-ancestor`), and which of the fork's own commits carries the merge's patch (`git patch-id
--stable`). Then it makes the fork's bundle and the bundles without a change (`ci fork bundle --without`), and
writes table.md. Nothing under stack/ is edited: the script fails if a stack file changed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BRANCH, BASE, VERSION = "pcp-runahead-dev-v0.27.1", "main", "0.27.1"
PICK = "a311916a291c1fed3dbfb72e60f74cd778c8419d"  # upstream's squash merge of #46849
IDENT = {"GIT_AUTHOR_NAME": "stackgate evidence", "GIT_AUTHOR_EMAIL": "evidence@localhost",
         "GIT_COMMITTER_NAME": "stackgate evidence", "GIT_COMMITTER_EMAIL": "evidence@localhost",
         "GIT_AUTHOR_DATE": "2026-12-04T12:00:00Z", "GIT_COMMITTER_DATE": "2026-12-04T12:00:00Z",
         "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}  # fmt: skip


def git(fork: Path, *args: str, stdin: str | None = None, ok: tuple[int, ...] = (0,), env: dict | None = None) -> str:
    done = subprocess.run(["git", "-C", str(fork), *args], input=stdin, capture_output=True, text=True,
                          env={**os.environ, **IDENT, **(env or {})})  # fmt: skip
    if done.returncode not in ok:
        raise SystemExit(f"git {' '.join(args[:3])}: {done.stderr.strip()}")
    return done.stdout.strip()


def pick_branch(fork: Path) -> str:
    """BRANCH with #46849 cherry-picked (-X theirs), as `pcp-with-46849`; the same commit id on every run."""
    with tempfile.TemporaryDirectory() as tmp:
        wt = Path(tmp) / "wt"
        git(fork, "worktree", "add", "-q", "--no-checkout", "--detach", str(wt), BRANCH)
        try:
            missing = [p for line in git(wt, "ls-tree", "-r", "HEAD").splitlines()
                       for _, _, obj, p in [line.replace("\t", " ").split(" ", 3)]
                       if subprocess.run(["git", "-C", str(wt), "cat-file", "-e", obj]).returncode]  # fmt: skip
            git(wt, "sparse-checkout", "set", "--no-cone", "/*", *(f"!/{p}" for p in missing))
            git(wt, "checkout", "-q", "--detach", BRANCH)
            git(wt, "rm", "-q", "--sparse", "--cached", *missing)
            git(wt, "commit", "-q", "-m", "scratch: drop the blobs the snapshot lacks")
            git(wt, "cherry-pick", "-x", "-X", "theirs", PICK)
            picked = git(wt, "rev-parse", "HEAD^{tree}")
        finally:
            git(fork, "worktree", "remove", "--force", str(wt))
    # the picked tree with the dropped blobs put back (their tree objects exist; the blobs do not): one commit on BRANCH
    root = picked
    for path in sorted({str(Path(p).parent) for p in missing}):
        root = _graft(fork, root, git(fork, "rev-parse", f"{BRANCH}^{{tree}}"), path)
    message = git(fork, "log", "-1", "--format=%B", PICK) + f"\n(cherry picked from commit {PICK})\n"
    commit = git(fork, "commit-tree", root, "-p", BRANCH, stdin=message)
    git(fork, "update-ref", "refs/heads/pcp-with-46849", commit)
    return commit


def _graft(fork: Path, tree: str, source: str, path: str) -> str:
    """`tree` with its folder `path` replaced by that folder of the tree `source`."""
    head, _, rest = path.partition("/")
    theirs = git(fork, "rev-parse", f"{source}:{head}")
    sub = _graft(fork, git(fork, "rev-parse", f"{tree}:{head}"), theirs, rest) if rest else theirs
    entries = [e for e in git(fork, "ls-tree", tree).splitlines() if e.split("\t")[1] != head]
    entries.append(f"040000 tree {sub}\t{head}")
    return git(fork, "mktree", "--missing", stdin="\n".join(entries) + "\n")


def ci(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ci", *args], cwd=REPO, capture_output=True, text=True)


def truth(fork: Path, ref: str, merge: str | None) -> dict[str, str]:
    """What git says of one change: ancestry of its merge commit, and the fork commit carrying its patch."""
    if not merge or git(fork, "cat-file", "-t", merge, ok=(0, 128)) != "commit":
        return {"in_ref": "—", "in_base": "—", "patch": "—"}
    anc = lambda a, b: subprocess.run(["git", "-C", str(fork), "merge-base", "--is-ancestor", a, b]).returncode == 0  # noqa: E731
    log = subprocess.run(["git", "-C", str(fork), "log", "-p", "--no-merges", ref, "^upstream/main", f"^{BASE}"],
                         capture_output=True)  # fmt: skip
    ids = subprocess.run(["git", "patch-id", "--stable"], input=log.stdout, capture_output=True).stdout.decode()
    merge_log = subprocess.run(["git", "-C", str(fork), "show", "-p", merge], capture_output=True).stdout
    want = subprocess.run(["git", "patch-id", "--stable"], input=merge_log, capture_output=True).stdout.decode()
    want_id = want.split()[0] if want else ""
    hit = next((c for line in ids.splitlines() for p, c in [line.split()] if p == want_id), "")
    return {"in_ref": "yes" if anc(merge, ref) else "no", "in_base": "yes" if anc(merge, BASE) else "no",
            "patch": hit[:12] or "none"}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fork", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = ap.parse_args()
    stack = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((REPO / "stack").rglob("*.yaml"))}
    picked = pick_branch(args.fork)
    flags = ["--fork", str(args.fork), "--base-ref", BASE, "--base-version", VERSION]
    merges = {c: d["upstream"].get("merge_commit") for c, d in _changes().items()}
    lines = ["| branch | change | `ci upstream` | `ci fork` | commits that carry it | merge in branch | merge in base "
             f"({BASE}) | fork commit with the merge's patch | agrees |", "|" + "---|" * 9]  # fmt: skip
    for ref in (BRANCH, "pcp-with-46849"):
        up = ci("upstream", *flags, "--ref", ref, "--format", "json")
        fk = ci("fork", *flags, "--ref", ref, "--format", "json")
        assert up.returncode == 0 and fk.returncode == 0, up.stderr + fk.stderr
        said_up = {c["change"]: c for c in json.loads(up.stdout)["changes"] if c["pr"]}
        said_fk = {c["change"]: c for c in json.loads(fk.stdout)["changes"]}
        for change, merge in merges.items():
            if change not in said_fk:
                continue
            full = git(args.fork, "rev-parse", "--verify", "-q", f"{merge}^{{commit}}", ok=(0, 1)) if merge else ""
            t = truth(args.fork, ref, full)
            state, carried = said_fk[change]["state"], said_fk[change]["commits"]
            agrees = said_up[change]["state"] == state and _consistent(state, t, carried)
            lines.append(f"| `{ref}` | #{change} | {said_up[change]['state']} | {state} | "
                         f"{', '.join(c[:12] for c in carried) or '—'} | {t['in_ref']} | {t['in_base']} | {t['patch']} "
                         f"| {'yes' if agrees else '**no**'} |")  # fmt: skip
    picked_ref = "pcp-with-46849"
    bundles = [("the fork", BRANCH, None), ("without #48407", BRANCH, "48407"),
               ("#46849 cherry-picked", picked_ref, None), ("it without #46849", picked_ref, "46849")]  # fmt: skip
    made = ["", "| bundle | command | exit | said |", "|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for label, ref, without in bundles:
            argv = ["fork", "bundle", *flags, "--ref", ref, "--out", f"{tmp}/b.tar.gz"]
            argv += ["--without", without] if without else []
            done = ci(*argv)
            said = (done.stdout.strip() or done.stderr.strip()).replace(tmp, "OUT").replace("\n", " ")
            shown = " ".join(a if a != f"{tmp}/b.tar.gz" else "OUT.tar.gz" for a in argv).replace(
                str(args.fork), "FORK"
            )
            made.append(f"| {label} | `python -m ci {shown}` | {done.returncode} | {said.replace('|', '/')} |")
    after = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((REPO / "stack").rglob("*.yaml"))}
    assert after == stack, "a stack file changed"
    head = [f"`pcp-with-46849` = `{picked}` (made by this script from `{BRANCH}` and `{PICK[:12]}`)", ""]
    (args.out / "table.md").write_text("\n".join([*head, *lines, *made]) + "\n")
    print("\n".join([*head, *lines, *made]))
    return 0


def _changes() -> dict[str, dict]:
    import yaml

    out = {}
    for path in sorted((REPO / "stack" / "changes").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        if doc.get("upstream"):
            out[str(doc["id"])] = doc
    return out


def _consistent(state: str, t: dict[str, str], carried: list[str]) -> bool:
    """The state against git's own answer: converged where the merge is an ancestor; ported where a fork commit
    carries its patch; absent where neither (an edited port carries neither, by construction)."""
    if state == "converged":
        return t["in_ref"] == "yes" and (t["in_base"] == "yes") == (not carried)
    if state == "ported":
        return t["in_ref"] != "yes" and (t["patch"] in ("—", "none") or t["patch"] == carried[0][:12])
    if state in ("absent", "ported, edited"):
        return t["in_ref"] != "yes" and t["patch"] in ("none", "—")
    return False


if __name__ == "__main__":
    raise SystemExit(main())
