"""Each change's state and port readiness on a public fork, its prerequisite chain included, set against git by hand.

    python3 evidence/fork-far/check.py --fork CLONE --ref REF --name NAME [--out DIR]

For every change `ci fork` finds the fork lacking and every follow-up it finds missing, the script takes stackgate's
answer (`ci fork --format json`: the verdict, the files it lacks or that conflict, the chain and its outcome), then asks
git itself in a detached worktree of REF (sparse: the snapshots lack a few large docs blobs):

- the change alone: upstream's `vllm/` diff of each of its commits through `git apply --3way` (a file stackgate says the
  fork moved is named at the fork's path in the patch's header, as stackgate's recipe does): clean, clean by a
  three-way merge, the files git leaves unmerged, or the files git says do not exist;
- then, where stackgate names a chain, the chain by hand: each prerequisite, oldest first, applied the same way and
  committed; where one conflicts (where git stops, and why), its conflicting files taken as upstream has them (a
  maintainer resolving it upstream's way) and on to the next, then the change itself.

It writes NAME.md (a table: only ids, paths and counts, no vLLM code) and removes the worktree. It fails where any
answer disagrees with git's, and where any file under stack/ changed.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
IDENT = {"GIT_AUTHOR_NAME": "check", "GIT_AUTHOR_EMAIL": "check@localhost", "GIT_COMMITTER_NAME": "check",
         "GIT_COMMITTER_EMAIL": "check@localhost"}  # fmt: skip
_ABSENT = re.compile(r"^error: (\S+): does not exist in index$", re.M)
_ADDED = re.compile(r"^error: (\S+): already exists in (?:index|working directory)$", re.M)
_FAILED = re.compile(r"^error: (\S+): (?:patch does not apply|wrong type)$", re.M)


def git(where: Path, *args: str, ok: tuple[int, ...] = (0,), stdin: str | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True, input=stdin,
                          env={**__import__("os").environ, **IDENT})  # fmt: skip
    if done.returncode not in ok:
        raise SystemExit(f"git {' '.join(args[:3])}: {done.stderr.strip()}")
    return done


def moved_to(patch: str, moved: dict[str, str]) -> str:
    """The patch with each moved file's header at the fork's path."""
    out, header = [], False
    for line in patch.split("\n"):
        header = True if line.startswith("diff --git ") else False if line.startswith("@@") else header
        if header:
            for old, new in moved.items():
                line = re.sub(rf"(^| )(a/|b/){re.escape(old)}(?= |$)", rf"\g<1>\g<2>{new}", line)
                line = re.sub(rf"^((?:rename|copy) from ){re.escape(old)}$", rf"\g<1>{new}", line)
        out.append(line)
    return "\n".join(out)


def apply(wt: Path, commit: str, moved: dict[str, str]) -> tuple[str, list[str]]:
    """git's word on one upstream commit's `vllm/` diff: (clean | clean by three-way merge | conflicts | lacks files |
    in the fork, the files concerned); the worktree holds the result (conflict markers included)."""
    patch = moved_to(git(wt, "diff", "--binary", "--find-renames", f"{commit}^", commit, "--", "vllm/").stdout, moved)
    if not patch.strip():
        return "in the fork", []
    if git(wt, "apply", "--check", stdin=patch, ok=(0, 1)).returncode == 0:
        git(wt, "apply", stdin=patch)
        return "clean", []
    if git(wt, "apply", "--check", "-R", stdin=patch, ok=(0, 1)).returncode == 0:
        return "in the fork", []
    three = git(wt, "apply", "--3way", stdin=patch, ok=(0, 1))
    absent = _ABSENT.findall(three.stderr)
    if absent:
        return "lacks files", sorted(absent)
    unmerged = sorted(set(git(wt, "diff", "--name-only", "--diff-filter=U").stdout.split()))
    if three.returncode == 0:
        return "clean by three-way merge", []
    # no file left unmerged: git refused the patch whole (a file it deletes that the fork changed, one it adds that the
    # fork has): the files it names
    return "conflicts", unmerged or sorted(set(_ADDED.findall(three.stderr) + _FAILED.findall(three.stderr)))


def upstreams(wt: Path, upstream: str, files: list[str]) -> None:
    """Conflicting (or lacking) files taken as upstream has them after `upstream`: a maintainer resolving its way."""
    there = set(git(wt, "ls-tree", "-r", "--name-only", upstream, "--", *files).stdout.split())
    if there:
        git(wt, "checkout", upstream, "--", *sorted(there))
    gone = [f for f in files if f not in there]
    if gone:
        git(wt, "rm", "-q", "--ignore-unmatch", "-f", "--", *gone)


def commit(wt: Path, upstream: str) -> None:
    git(wt, "add", "-A", "--", "vllm/")
    git(wt, "commit", "-q", "--allow-empty", "-m", f"by hand: {upstream}")


def reset(wt: Path, head: str) -> None:
    git(wt, "reset", "-q", "--hard", head)
    git(wt, "clean", "-fdq", "--", "vllm/")


def worktree(fork: Path, head: str, where: Path) -> Path:
    """A detached worktree of `head` without the blobs the snapshot lacks (sparse)."""
    wt = where / "wt"
    git(fork, "worktree", "add", "-q", "--no-checkout", "--detach", str(wt), head)
    entries = git(wt, "ls-tree", "-r", "HEAD").stdout.splitlines()
    batch = "".join(e.split()[2] + "\n" for e in entries)
    present = git(wt, "cat-file", "--batch-check", stdin=batch).stdout.splitlines()
    missing = [e.split("\t", 1)[1] for e, p in zip(entries, present, strict=True) if p.endswith("missing")]
    git(wt, "sparse-checkout", "set", "--no-cone", "/*", *(f"!/{p}" for p in missing))
    git(wt, "checkout", "-q", "--detach", head)
    return wt


def label(p: dict) -> str:
    return f"#{p['pr']}" if p.get("pr") else f"`{p['commit'][:12]}`"


def check(wt: Path, head: str, r: dict) -> tuple[list[str], bool]:
    """One readiness against git: the table's cells after stackgate's, and whether they agree."""
    moved = dict(r["moved"])
    reset(wt, head)
    said, files = "clean", []
    for unit in r["patch"]:
        said, files = apply(wt, unit, moved)
        if said in ("conflicts", "lacks files"):
            break
        commit(wt, unit)
    ours = {"needs prerequisites": "lacks files"}.get(r["verdict"], r["verdict"])
    mine = sorted(m["file"] for m in r["missing"]) if r["missing"] else sorted(c["file"] for c in r["conflicts"])
    alone_ok = said == ours and (said not in ("conflicts", "lacks files") or files == mine)
    alone = f"{said}" + (f": {', '.join(f'`{f}`' for f in files)}" if files else "")
    if not r["prerequisites"]:
        return [alone, "—"], alone_ok
    reset(wt, head)
    stops: list[tuple[str, list[str]]] = []  # where git stops, and the files; each taken as upstream has it to go on
    for p in r["prerequisites"]:
        how, files = apply(wt, p["commit"], moved)
        if how in ("conflicts", "lacks files"):
            stops.append((p["commit"], files))
            merged = git(wt, "diff", "--name-only", "--diff-filter=U").stdout.split()
            # where git took none of the patch (it refused it whole), all of its files go as upstream has them
            touched = git(wt, "diff", "--name-only", "--find-renames", f"{p['commit']}^", p["commit"], "--", "vllm/")
            upstreams(wt, p["commit"], files if merged or how == "lacks files" else touched.stdout.split())
        commit(wt, p["commit"])
    after, files = "clean", []
    for unit in r["patch"]:
        after, files = apply(wt, unit, moved)
        if after in ("conflicts", "lacks files"):
            break
        commit(wt, unit)
    named = {p["commit"]: label(p) for p in r["prerequisites"]}
    if stops:
        first, at = stops[0]
        chain = f"stops at {named[first]}: conflicts: {', '.join(f'`{f}`' for f in at)}"
        if len(stops) > 1:
            chain += f"; past it (taken as upstream has it), at {', '.join(named[c] for c, _ in stops[1:])}"
        said = r["chain"].split("conflicts in ", 1)[-1].split(";", 1)[0].split(", ") if "conflicts in " in r[
            "chain"] else []  # fmt: skip
        order = [p["commit"] for p in r["prerequisites"]]
        mine = [c for c, _ in stops]
        if r["cut"]:  # what follows the cut was not looked for: git's stops up to it
            mine = [c for c in mine if order.index(c) <= order.index(r["stops"][-1])]
        chain_ok = r["stopped_at"] == first and r["after_prerequisites"] in ("conflicts", "needs prerequisites")
        chain_ok = chain_ok and sorted(said) == sorted(at) and mine == [c for c in r["stops"] if c in named]
    else:
        theirs = {"lacks files": "needs prerequisites"}.get(after, after)
        chain = f"all {len(r['prerequisites'])} apply; then the change: {after}"
        if files:
            chain += f": {', '.join(f'`{f}`' for f in files)}"
        chain_ok = not r["stopped_at"] or r["stopped_at"] in r["patch"]
        chain_ok = chain_ok and (theirs == r["after_prerequisites"] or (theirs, r["after_prerequisites"]) == (
            "clean by three-way merge", "clean"))  # fmt: skip
    return [alone, chain], alone_ok and chain_ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fork", type=Path, required=True)
    ap.add_argument("--ref", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = ap.parse_args()
    stack_before = git(REPO, "status", "--porcelain", "--", "stack").stdout
    done = subprocess.run([sys.executable, "-m", "ci", "fork", "--fork", str(args.fork), "--ref", args.ref, "--format",
                           "json"], cwd=REPO, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    head = doc["commit"]
    lines = [
        f"`{args.name}`: {doc['ref']} = `{head[:12]}`, left upstream's main at `{doc['left_upstream']['commit'][:12]}` "
        f"({doc['left_upstream']['date']}); its own commits: {doc['own']}",
        "",
        "| change | in the fork | stackgate: its port | stackgate: its chain (oldest first) and outcome | git: the "
        "change alone | git: the chain by hand, then the change | agrees |",
        "|---|---|---|---|---|---|---|",
    ]
    every = True
    with tempfile.TemporaryDirectory() as tmp:
        wt = worktree(args.fork, head, Path(tmp))
        try:
            for c in doc["changes"]:
                todo = [(f"#{c['change']}", c["port"])] if c["port"] else []
                todo += [(f"#{f['pr']} (follow-up of #{c['change']})", f) for f in c["follow_up_ports"]]
                if not todo:
                    lines.append(f"| #{c['change']} | {c['state']} | — | — | — | — | — |")
                for name, r in todo:
                    port = r["verdict"]
                    if r["missing"]:
                        port += ": lacks " + ", ".join(f"`{m['file']}`" for m in r["missing"])
                    elif r["conflicts"]:
                        port += ": " + ", ".join(f"`{x['file']}`" for x in r["conflicts"])
                    if r["moved"]:
                        port += "; follows " + ", ".join(f"`{a}` as `{b}`" for a, b in r["moved"])
                    chain = ", ".join(label(p) for p in r["prerequisites"])
                    chain = f"{chain}: {r['chain']}" if chain else "—"
                    if r["verdict"] in ("unknown", "in the fork"):
                        lines.append(f"| {name} | {c['state']} | {port} | {chain} | not tried | not tried | — |")
                        continue
                    cells, ok = check(wt, head, r)
                    every &= ok
                    lines.append(f"| {name} | {c['state']} | {port} | {chain} | {' | '.join(cells)} | "
                                 f"{'yes' if ok else '**no**'} |")  # fmt: skip
        finally:
            git(args.fork, "worktree", "remove", "--force", str(wt))
    assert git(REPO, "status", "--porcelain", "--", "stack").stdout == stack_before, "a stack file changed"
    (args.out / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if every else 1


if __name__ == "__main__":
    raise SystemExit(main())
