"""README's "Your fork" steps, run verbatim on a clone of a public fork.

    python3 evidence/fork-far/your_fork.py --fork CLONE --ref BRANCH --name NAME [--fix 'ARGS'] [--out DIR]

The shell block under README.md's "## Your fork" is read from the README itself: its `export` line is the user's
(STACKGATE_FORK and STACKGATE_FORK_REF set to --fork and --ref, the branch as a user types it), every other line runs
as it is written, from the repository root, in a fresh `bash -c`. For each: the exit code, the wall time and what it
said, kept to the lines a maintainer reads first (upstream commit subjects left out: only ids, paths and counts are
kept here). `--fix 'ARGS'`: then the session again with the options a fix line named (`nox -s … -- ARGS`), as the
maintainer would run it next. Writes your-fork-NAME.md.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_SUBJECT = re.compile(r"""([0-9a-f]{12}(?: #\d+)? )(['"]).*?\2(?=[,;)]|$| \(| and )""")  # a commit's subject
_STACKGATE = ("nox > ", "error:", "  fix:", "judging", "not run", "not scheduled", "warning:", "wrote", "$STACKGATE",
              "target:", "== ", "cpu runs")  # fmt: skip
_SHOWN = 40  # lines kept of one command's output


def block() -> list[str]:
    """The commands of README's "Your fork" shell block, its export line left out."""
    text = (REPO / "README.md").read_text().split("## Your fork", 1)[1]
    body = text.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in body.splitlines() if line and not line.startswith("export ")]


def kept(command: str, out: str) -> list[str]:
    """What a maintainer reads first: all `ci` says; of a nox session, nox's own lines and stackgate's (pip's left
    out). Upstream commit subjects are left out."""
    lines = out.splitlines()
    if command.startswith("nox"):
        lines = [line for line in lines if line.startswith(_STACKGATE)]
    return [_SUBJECT.sub(r"\1'…'", line) for line in lines]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fork", type=Path, required=True)
    ap.add_argument("--ref", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--fix", help="the options a fix line names, given to the README's nox session next")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = ap.parse_args()
    env = {**os.environ, "STACKGATE_FORK": str(args.fork), "STACKGATE_FORK_REF": args.ref}
    out = [f"`export STACKGATE_FORK={args.fork} STACKGATE_FORK_REF={args.ref}`, then README's lines as written:", ""]
    commands = block()
    if args.fix:
        commands.append(f"{next(c for c in commands if c.startswith('nox '))} -- {args.fix}")
    for command in commands:
        start = time.perf_counter()
        done = subprocess.run(["bash", "-c", command], cwd=REPO, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)  # fmt: skip
        took = time.perf_counter() - start
        said = kept(command, done.stdout)
        out += [f"`{command}`: exit {done.returncode}, {took:.1f} s", "", "```"]
        out += said[:_SHOWN] + ([f"… ({len(said) - _SHOWN} lines more)"] if len(said) > _SHOWN else []) + ["```", ""]
    (args.out / f"your-fork-{args.name}.md").write_text("\n".join(out))
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
