#!/usr/bin/env python3
"""Recreate the stackgate DEMO FORK of vLLM from public history.

Usage:
    python3 evidence/fork-demo/make_demo_fork.py \
        --upstream /work/.mirror/neuralmagic+vllm/repo \
        --wheel /path/vllm-0.26.0-cp38-abi3-manylinux_2_28_x86_64.whl \
        --out /work/demo-fork [--json PATH] [--force]

The result is a fresh git repository at --out (branch ``main``):

  1. base commit, tagged ``v0.26.0``: every text file under ``vllm/`` of the
     vLLM 0.26.0 wheel (compiled artefacts such as ``*.so``, the ``vllm-rs``
     executable and other non-text files are left out);
  2. one commit per imported upstream change, cherry-picked from the
     upstream snapshot by commit id (the ``vllm/`` part of each squash-merge's
     diff against its first parent), in the order of ``PORTS`` below.

Nothing of vLLM is stored with this script: it holds only commit ids.  All
identities and dates are fixed, so re-running it yields byte-identical commit
ids.  Needs python3 (stdlib only) and git on PATH.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

# --------------------------------------------------------------------------
# Fixed inputs (ids only)
# --------------------------------------------------------------------------

WHEEL_VERSION = "0.26.0"
WHEEL_COMMIT = "ffd46bfab"  # vllm/_version.py of the wheel (release branch)

DEMO_NAME = "stackgate demo fork"
DEMO_EMAIL = "demo-fork@stackgate.invalid"
BASE_DATE = "2026-08-21T00:00:00+00:00"  # committer date of the base commit
BASE_EPOCH = 1787270400  # == BASE_DATE; port N is committed N minutes later

# Each entry: (label, upstream commit, kind, extra)
#   kind "port":    apply the vllm/ diff; must apply cleanly.
#   kind "try":     apply only if `git apply --check` passes, else skip+record.
#   kind "prereq":  prerequisite of a later backport; must apply cleanly.
#   kind "backport": apply; files listed in extra["fuzz"] are context-only
#                   conflicts placed by trimmed-context hunk matching, and
#                   the result is verified to add/remove exactly the
#                   upstream lines.
PORTS = [
    ("#48407", "ba702e978e3bc6af3a601cee10fefdeb49e7e8b5", "port", {}),
    ("#52512", "01e56caaf2b2d6f62be5fd78e0a7733fc9c9ed5f", "try", {}),
    ("#46514", "63ff748f657af0e2a95a712fd2cc994f4299ff8c", "port", {}),
    (
        "#44492",
        "4ec199b66a791070348f3baf847b3a873c48cdd9",
        "prereq",
        {"for": "#46849"},
    ),
    (
        "#46849",
        "a311916a291c1fed3dbfb72e60f74cd778c8419d",
        "backport",
        {
            "prereqs": ["4ec199b66a791070348f3baf847b3a873c48cdd9"],
            "fuzz": [
                # context from #50302 a0cd2b69b3 (requires_block_table_width)
                "vllm/v1/attention/backend.py",
                # context from #50000 aeeb36b1f1 (Kimi K3 / DSpark non-causal)
                "vllm/v1/attention/backends/mla/triton_mla.py",
                # context from #50417 4a3447d200 and #47352 3e174bb73c
                "vllm/v1/worker/gpu/spec_decode/autoregressive/speculator.py",
            ],
        },
    ),
    # Found by stackgate's first H200 run of this fork (evidence/h200-fork, first run): every row failed importing
    # vllm/v1/worker/utils.py, NameError: name 'Mapping' is not defined (line 287, #46849's new method). Upstream
    # imports Mapping there since #50323, which 0.26.0 lacks; the fix takes that one hunk of #50323 by id.
    (
        "#46849 fix",
        "12292d94b25869be2af6b6d4f8eea6c2445e935f",
        "fixup",
        {"for": "#46849", "file": "vllm/v1/worker/utils.py", "hunks": [0]},
    ),
]

# Branches beside main: each is main with these ports on top (main itself stays as above, so its commit ids and every
# record of them hold). `warmup`: upstream's JIT warm-up series, the kernel-warmup track's road once #48804 was closed
# unmerged. #47451 applies cleanly; #49903 does not in two files, resolved as a fork maintainer would:
#   vllm/v1/worker/utils.py: the decorator change lands on 0.26.0's _zero_kv_blocks_kernel, whose next parameter
#     differs (context only: placed with trimmed context);
#   vllm/model_executor/warmup/qwen_triton_warmup.py: upstream's hunks 0 and 1 remove the Qwen-only zero-KV and
#     slot-mapping warm-ups (now run for every model by kernel_warmup); 0.26.0 holds older versions of the same
#     definitions, which are removed by name ("drop": the names come from upstream's removed lines, never from here).
BRANCH_PORTS = {
    "warmup": [
        ("#47451", "7ca017778fc04cfb1a96080e7c484b1b44fc3a64", "port", {}),
        (
            "#49903",
            "0d0504b54c73119ed643c80b4ed56ef3cf80e209",
            "backport",
            {
                "fuzz": ["vllm/v1/worker/utils.py"],
                "drop": {"vllm/model_executor/warmup/qwen_triton_warmup.py": [0, 1]},
            },
        ),
    ],
}

TEXT_SKIP_SUFFIXES = (".so",)


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def git_env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    # Ignore the caller's git configuration: determinism.
    env["GIT_CONFIG_GLOBAL"] = os.devnull
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    env["LC_ALL"] = "C"
    env.pop("GIT_DIR", None)
    env.pop("GIT_WORK_TREE", None)
    env.pop("GIT_INDEX_FILE", None)
    if extra:
        env.update(extra)
    return env


def git(args, cwd=None, git_dir=None, input=None, env=None, check=True):
    cmd = ["git"]
    if git_dir:
        cmd += ["--git-dir", str(git_dir)]
    cmd += list(args)
    r = subprocess.run(
        cmd,
        cwd=cwd,
        input=input,
        capture_output=True,
        env=git_env(env),
    )
    if check and r.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed ({r.returncode}):\n{r.stderr.decode(errors='replace')}")
    return r


def out(args, **kw) -> str:
    return git(args, **kw).stdout.decode()


def is_text_source(name: str, data: bytes) -> bool:
    if name.endswith(TEXT_SKIP_SUFFIXES):
        return False
    if b"\0" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def patch_id(diff: bytes) -> str:
    r = subprocess.run(
        ["git", "patch-id", "--stable"],
        input=diff,
        capture_output=True,
        env=git_env(),
        check=True,
    )
    return r.stdout.decode().split()[0] if r.stdout.strip() else ""


def upstream_diff(upstream: Path, commit: str) -> bytes:
    return git(
        [
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--no-renames",
            "--full-index",
            "--binary",
            f"{commit}^1",
            commit,
            "--",
            "vllm/",
        ],
        git_dir=upstream,
    ).stdout


def split_file_patches(diff: bytes) -> list[tuple[str, bytes]]:
    parts = re.split(rb"(?m)^(?=diff --git )", diff)
    res = []
    for p in parts:
        if not p:
            continue
        m = re.match(rb"diff --git a/(\S+) b/(\S+)", p)
        res.append((m.group(2).decode(), p))
    return res


# --------------------------------------------------------------------------
# trimmed-context hunk placement for context-only conflicts
# --------------------------------------------------------------------------

HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def select_hunks(diff: bytes, path: str, hunks: list[int]) -> bytes:
    """The file patch of `path` in `diff`, keeping only the hunks numbered (from 0) in `hunks`."""
    for name, fp in split_file_patches(diff):
        if name != path:
            continue
        text = fp.decode("utf-8")
        head, *parts = re.split(r"(?m)^(?=@@ )", text)
        return (head + "".join(parts[i] for i in hunks)).encode("utf-8")
    raise SystemExit(f"{path} is not in that commit's vllm/ diff")


def parse_hunks(file_patch: str):
    lines = file_patch.split("\n")
    hunks = []
    cur = None
    for ln in lines:
        m = HUNK_RE.match(ln)
        if m:
            cur = {"old_start": int(m.group(1)), "body": []}
            hunks.append(cur)
            continue
        if cur is None:
            continue
        if ln.startswith((" ", "+", "-")):
            cur["body"].append(ln)
        elif ln.startswith("\\"):
            raise SystemExit("'No newline at end of file' hunks not supported")
        elif ln == "":
            # trailing split artefact only (blank context lines start with " ")
            continue
    return hunks


def place_hunks(text: str, file_patch: str, path: str, log: list) -> str:
    """Apply hunks, trimming leading/trailing context independently.

    For each hunk, try (leading kept, trailing kept) from most context to
    least; the remaining pre-image (context + removed lines) must be non-empty
    and is searched for the match nearest to the expected line; an equally
    near second match is an error.  Hunks must land in increasing order.
    """
    src = text.split("\n")
    hunks = parse_hunks(file_patch)
    result = []
    pos = 0  # index in src up to which output has been emitted
    offset = 0
    for hi, h in enumerate(hunks):
        body = h["body"]
        first_change = next(i for i, b in enumerate(body) if b[0] != " ")
        last_change = max(i for i, b in enumerate(body) if b[0] != " ")
        lead = first_change
        trail = len(body) - 1 - last_change
        expected = h["old_start"] - 1 + offset
        best = None
        for total in range(0, lead + trail + 1):
            cands = []
            for tl in range(0, min(total, lead) + 1):
                tt = total - tl
                if tt > trail:
                    continue
                sub = body[tl : len(body) - tt] if tt else body[tl:]
                pre = [b[1:] for b in sub if b[0] in " -"]
                if not pre or all(not p.strip() for p in pre):
                    continue
                n = len(pre)
                for s in range(pos, len(src) - n + 1):
                    if src[s : s + n] == pre:
                        cands.append((abs(s - (expected + tl)), s, tl, tt, sub))
            if cands:
                cands.sort(key=lambda c: (c[0], c[2], c[1]))
                if len(cands) > 1 and cands[1][0] == cands[0][0] and (cands[1][1] != cands[0][1]):
                    raise SystemExit(f"{path}: hunk {hi + 1} ambiguous at trim {total}")
                best = cands[0]
                break
        if best is None:
            raise SystemExit(f"{path}: hunk {hi + 1} cannot be placed")
        _, s, tl, tt, sub = best
        pre = [b[1:] for b in sub if b[0] in " -"]
        post = [b[1:] for b in sub if b[0] in " +"]
        result.extend(src[pos:s])
        result.extend(post)
        pos = s + len(pre)
        # later hunks are expected shifted by as much as this one was
        offset = (s - tl) - (h["old_start"] - 1)
        log.append(
            {
                "file": path,
                "hunk": hi + 1,
                "old_start": h["old_start"],
                "placed_at_line": s + 1 - tl,
                "leading_context_dropped": tl,
                "trailing_context_dropped": tt,
            }
        )
    result.extend(src[pos:])
    return "\n".join(result)


def removed_names(file_patch: bytes, hunks: list[int]) -> list[str]:
    """The top-level names (def, class, assignment) whose definition lines the given hunks remove."""
    names = []
    for i, h in enumerate(parse_hunks(file_patch.decode("utf-8"))):
        if i not in hunks:
            continue
        for line in h["body"]:
            m = re.match(r"-(?:async def|def|class) (\w+)|-(\w+)\s*(?::[^=]+)?=", line)
            if m and (m.group(1) or m.group(2)) not in names:
                names.append(m.group(1) or m.group(2))
    return names


def drop_definitions(text: str, names: list[str], path: str, log: list) -> str:
    """`text` without the top-level definitions of `names` (decorators and the blank lines after each included);
    every name must be defined there."""
    tree = ast.parse(text)
    lines = text.split("\n")
    spans = []
    for node in tree.body:
        targets = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            targets = [node.name]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                targets += [n.id for n in ast.walk(t) if isinstance(n, ast.Name)]
        if any(t in names for t in targets):
            start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))]) - 1
            end = node.end_lineno or node.lineno
            while end < len(lines) and not lines[end].strip():
                end += 1
            spans.append((start, end, [t for t in targets if t in names]))
    missing = [n for n in names if not any(n in t for _, _, t in spans)]
    if missing:
        raise SystemExit(f"{path}: cannot drop {missing}: not defined at top level")
    for start, end, found in sorted(spans, reverse=True):
        del lines[start:end]
        log.append({"file": path, "dropped": found, "lines": end - start})
    return "\n".join(lines)


def added_removed(diff: bytes) -> dict:
    """Per file: (removed lines, added lines) in order."""
    res = {}
    for path, fp in split_file_patches(diff):
        rem, add = [], []
        for ln in fp.decode().split("\n"):
            if ln.startswith(("+++", "---")):
                continue
            if ln.startswith("-"):
                rem.append(ln[1:])
            elif ln.startswith("+"):
                add.append(ln[1:])
        res[path] = (rem, add)
    return res


# --------------------------------------------------------------------------
# checks on the resulting tree
# --------------------------------------------------------------------------


def module_defines(repo: Path, mod: str, name: str) -> bool | None:
    """True/False if vllm module `mod` defines `name`; None if unknowable."""
    parts = mod.split(".")
    base = repo.joinpath(*parts)
    if (base / name).is_dir() or (base / f"{name}.py").is_file():
        return True
    f = base.with_suffix(".py")
    if not f.is_file():
        f = base / "__init__.py"
        if not f.is_file():
            return False
    tree = ast.parse(f.read_bytes().decode("utf-8"))
    names = set()
    dynamic = False
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        names.add(n.id)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            if isinstance(node.target, ast.Name):
                names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                if a.name == "*":
                    dynamic = True
                names.add((a.asname or a.name).split(".")[0])
    if name in names:
        return True
    if "__getattr__" in names or dynamic:
        return None
    return False


def check_files(repo: Path, files: list[str]) -> dict:
    problems = []
    checked = 0
    for rel in files:
        p = repo / rel
        if not rel.endswith(".py") or not p.is_file():
            continue
        src = p.read_bytes().decode("utf-8")
        try:
            compile(src, rel, "exec")
        except SyntaxError as e:
            problems.append(f"{rel}: does not compile: {e}")
            continue
        for node in ast.walk(ast.parse(src)):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and (node.module == "vllm" or node.module.startswith("vllm."))
                and node.level == 0
            ):
                for a in node.names:
                    if a.name == "*":
                        continue
                    checked += 1
                    ok = module_defines(repo, node.module, a.name)
                    if ok is False:
                        problems.append(f"{rel}: from {node.module} import {a.name}: name not found in tree")
    return {"imports_checked": checked, "problems": problems}


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------


def apply_ports(
    outdir: Path, upstream: Path, head: str, ports: list, minute: int, branch: str, rows: list
) -> tuple[str, int]:
    """Commit `ports` on top of `head` (the index and refs/heads/main follow), a row of `rows` each; the new head."""
    git(["read-tree", "--reset", "-u", head], cwd=outdir)
    for label, commit, kind, extra in ports:
        subject, an, ae, ad = (
            out(["log", "-1", "--format=%s%x00%an%x00%ae%x00%ad", "--date=raw", commit], git_dir=upstream)
            .rstrip("\n")
            .split("\x00")
        )
        diff = upstream_diff(upstream, commit)
        if kind == "fixup":  # only the named hunks of one file of that commit
            diff = select_hunks(diff, extra["file"], extra["hunks"])
            subject = (
                f"Fix the {extra['for']} backport: take hunk(s) {extra['hunks']} of {extra['file']} "
                f"from {commit[:10]} ({subject})"
            )
            an, ae = DEMO_NAME, DEMO_EMAIL
        up_pid = patch_id(diff)
        files = [p for p, _ in split_file_patches(diff)]
        row = {
            "change": label,
            "branch": branch,
            "upstream": commit,
            "subject": subject,
            "files": files,
            "upstream_patch_id": up_pid,
        }

        check = git(["apply", "--check", "-"], cwd=outdir, input=diff, check=False)
        fuzz_log: list = []
        drop_log: list = []
        drop = extra.get("drop", {})
        if check.returncode == 0:
            git(["apply", "--index", "--whitespace=nowarn", "-"], cwd=outdir, input=diff)
        elif kind == "try":
            row.update(status="skipped", fork_commit=None, reason=check.stderr.decode().strip().splitlines())
            rows.append(row)
            continue
        elif kind == "backport":
            fuzz = set(extra.get("fuzz", []))
            for path, fp in split_file_patches(diff):
                f = outdir / path
                if path in drop:  # removal hunks resolved by name; the file's other hunks placed as they are
                    names = removed_names(fp, drop[path])
                    keep = [i for i in range(len(parse_hunks(fp.decode("utf-8")))) if i not in drop[path]]
                    text = f.read_bytes().decode("utf-8")
                    if keep:
                        rest = select_hunks(diff, path, keep)
                        text = place_hunks(text, rest.decode("utf-8"), path, fuzz_log)
                    f.write_bytes(drop_definitions(text, names, path, drop_log).encode("utf-8"))
                    git(["add", path], cwd=outdir)
                elif path in fuzz:
                    f.write_bytes(
                        place_hunks(f.read_bytes().decode("utf-8"), fp.decode("utf-8"), path, fuzz_log).encode("utf-8")
                    )
                    git(["add", path], cwd=outdir)
                else:
                    git(["apply", "--index", "--whitespace=nowarn", "-"], cwd=outdir, input=fp)
        else:
            raise SystemExit(f"{label} {commit} does not apply:\n" + check.stderr.decode())

        # the fork's change must add/remove exactly the upstream lines; a file resolved by name adds exactly them,
        # and the names upstream removes are gone
        fork_diff = git(["diff", "--cached", "--no-color", "--no-renames", "--full-index", "HEAD"], cwd=outdir).stdout
        mine, theirs = added_removed(fork_diff), added_removed(diff)
        for path in drop:
            if mine.get(path, ([], []))[1] != theirs[path][1]:
                raise SystemExit(f"{label}: {path}: the lines added differ from upstream")
            mine.pop(path, None)
            theirs.pop(path, None)
        if mine != theirs:
            raise SystemExit(f"{label}: applied change differs from upstream")

        msg = f"{subject}\n\n(cherry picked from commit {commit})\n"
        if extra.get("prereqs"):
            msg += "Backported onto vLLM 0.26.0 with prerequisites: " + ", ".join(extra["prereqs"]) + "\n"
        if fuzz_log:
            msg += (
                "Context-only conflicts, hunks placed with trimmed "
                "context: " + ", ".join(sorted({x["file"] for x in fuzz_log})) + "\n"
            )
        for path in sorted({d["file"] for d in drop_log}):
            dropped = [n for d in reversed(drop_log) if d["file"] == path for n in d["dropped"]]
            msg += f"Conflict resolved in {path}: upstream's removal of {', '.join(dropped)}, applied to this "
            msg += "tree's own definitions of the same names.\n"
        if kind == "prereq":
            msg += f"Prerequisite of {extra['for']}.\n"
        if kind == "fixup":
            msg = f"{subject}\n\n(hunks {extra['hunks']} of {extra['file']} from commit {commit})\n"
        minute += 1
        env = {
            "GIT_AUTHOR_NAME": an,
            "GIT_AUTHOR_EMAIL": ae,
            "GIT_AUTHOR_DATE": ad,
            "GIT_COMMITTER_NAME": DEMO_NAME,
            "GIT_COMMITTER_EMAIL": DEMO_EMAIL,
            "GIT_COMMITTER_DATE": f"{BASE_EPOCH + 60 * minute} +0000",
        }
        tree = out(["write-tree"], cwd=outdir).strip()
        head = out(["commit-tree", tree, "-p", head], cwd=outdir, env=env, input=msg.encode()).strip()
        git(["update-ref", "refs/heads/main", head], cwd=outdir)
        show = git(["show", "--no-color", "--format=", head], cwd=outdir).stdout
        row.update(
            status=kind,
            fork_commit=head,
            files_changed=len(files),
            patch_id=patch_id(show),
            checks=check_files(outdir, files),
        )
        row["patch_id_matches_upstream"] = row["patch_id"] == up_pid
        if fuzz_log:
            row["context_trimmed_hunks"] = fuzz_log
        if drop_log:
            row["resolved_by_name"] = drop_log
        if extra.get("prereqs"):
            row["prerequisites"] = extra["prereqs"]
        rows.append(row)
    return head, minute


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--upstream", required=True, type=Path, help="git dir of an upstream vLLM snapshot")
    ap.add_argument("--wheel", required=True, type=Path, help="vllm-0.26.0-*.whl")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--json", type=Path, default=None, help="default: <out>/../demo-fork.json")
    ap.add_argument("--force", action="store_true", help="remove --out first if it exists")
    args = ap.parse_args()
    t0 = time.monotonic()

    upstream = args.upstream.resolve()
    outdir = args.out.resolve()
    json_path = (args.json or (outdir.parent / "demo-fork.json")).resolve()

    for _, c, _, _ in [*PORTS, *(port for ports in BRANCH_PORTS.values() for port in ports)]:
        if git(["cat-file", "-e", f"{c}^{{commit}}"], git_dir=upstream, check=False).returncode:
            raise SystemExit(f"{upstream}: commit {c} missing")

    if outdir.exists():
        if not args.force:
            print(f"{outdir} exists; re-run with --force to recreate it", file=sys.stderr)
            return 2
        shutil.rmtree(outdir)
    outdir.mkdir(parents=True)

    git(["init", "-q", "-b", "main", str(outdir)])
    for k, v in (("core.autocrlf", "false"), ("core.fileMode", "true"), ("commit.gpgsign", "false"), ("gc.auto", "0")):
        git(["config", k, v], cwd=outdir)

    # ---- 1. base tree from the wheel ----------------------------------
    z = zipfile.ZipFile(args.wheel)
    ver = z.read("vllm/_version.py").decode()
    if f"'{WHEEL_VERSION}'" not in ver or WHEEL_COMMIT not in ver:
        raise SystemExit(f"{args.wheel}: not vLLM {WHEEL_VERSION} ({WHEEL_COMMIT})")
    kept, skipped = 0, []
    for info in sorted(z.infolist(), key=lambda i: i.filename):
        n = info.filename
        if not n.startswith("vllm/") or n.endswith("/"):
            continue
        data = z.read(info)
        if not is_text_source(n, data):
            skipped.append(n)
            continue
        dest = outdir / n
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        mode = (info.external_attr >> 16) & 0o777
        os.chmod(dest, 0o755 if mode & 0o111 else 0o644)
        kept += 1
    git(["add", "-A", "-f", "vllm"], cwd=outdir)
    tree = out(["write-tree"], cwd=outdir).strip()
    base_msg = (
        f"vLLM {WHEEL_VERSION} (wheel's Python tree, release commit "
        f"{WHEEL_COMMIT})\n\n"
        f"Every text file under vllm/ of {args.wheel.name}; left out "
        f"({len(skipped)} files): compiled or binary artefacts "
        "(*.so, vllm-rs, images).\n"
    )
    ident = {
        "GIT_AUTHOR_NAME": DEMO_NAME,
        "GIT_AUTHOR_EMAIL": DEMO_EMAIL,
        "GIT_COMMITTER_NAME": DEMO_NAME,
        "GIT_COMMITTER_EMAIL": DEMO_EMAIL,
        "GIT_AUTHOR_DATE": f"{BASE_EPOCH} +0000",
        "GIT_COMMITTER_DATE": f"{BASE_EPOCH} +0000",
    }
    head = out(["commit-tree", tree], cwd=outdir, env=ident, input=base_msg.encode()).strip()
    git(["update-ref", "refs/heads/main", head], cwd=outdir)
    git(["tag", "v0.26.0", head], cwd=outdir)
    base = head
    rows = [
        {
            "change": "base v0.26.0",
            "fork_commit": base,
            "upstream": f"release commit {WHEEL_COMMIT} (wheel)",
            "files_changed": kept,
            "patch_id": None,
            "status": "base",
        }
    ]

    # ---- 2. ports ------------------------------------------------------
    head, minute = apply_ports(outdir, upstream, head, PORTS, 0, "main", rows)
    branches = {}
    for branch, ports in BRANCH_PORTS.items():  # each: main with its ports on top
        tip, minute = apply_ports(outdir, upstream, head, ports, minute, branch, rows)
        git(["update-ref", f"refs/heads/{branch}", tip], cwd=outdir)
        git(["update-ref", "refs/heads/main", head], cwd=outdir)
        branches[branch] = tip
    git(["reset", "-q", "--hard", "main"], cwd=outdir)
    git(["checkout", "-q", "main"], cwd=outdir)

    problems = [p for r in rows for p in r.get("checks", {}).get("problems", [])]
    result = {
        "out": str(outdir),
        "base_tag": "v0.26.0",
        "wheel": args.wheel.name,
        "wheel_files_kept": kept,
        "wheel_files_left_out": skipped,
        "head": head,
        "branches": branches,
        "changes": rows,
        "seconds": round(time.monotonic() - t0, 1),
    }
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(result, indent=2) + "\n")

    print(f"demo fork at {outdir} (main = {head})")
    print(f"{'change':<14} {'fork commit':<40} {'upstream':<40} {'files':>5}  patch-id (--stable)")
    for r in rows:
        fc = r.get("fork_commit") or "-"
        pid = r.get("patch_id") or "-"
        st = "" if r.get("fork_commit") else f"  SKIPPED ({r['status']})"
        n = r.get("files_changed", len(r.get("files", [])))
        up = r["upstream"] if len(r["upstream"]) <= 40 else r["upstream"][:40]
        print(f"{r['change']:<14} {fc:<40} {up:<40} {n:>5}  {pid}{st}")
    for r in rows:
        if r.get("status") == "skipped":
            print(f"{r['change']} skipped: " + "; ".join(r["reason"][:3]))
    print(f"json: {json_path}   ({result['seconds']} s)")
    if problems:
        print("CHECK PROBLEMS:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
