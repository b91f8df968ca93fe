"""The one place stackgate runs git. A fork's checkout is data from elsewhere, and so is its git configuration and its
work tree: every git process is started here, with fixed options and an environment that make what it answers
depend on the history alone.

- Its config may not change what is parsed or hashed: no colour, prefixes, signatures or quoted paths, patches
  diffed one way (patch-ids are recorded in the stack and compared with ones computed on another machine).
- Nothing it names runs: no hooks (`core.hooksPath` is /dev/null), no fsmonitor, no pager, no prompt, no external
  diff or textconv (`ci.upstream.git_streams.PATCH`), no network at all (every transport refused:
  `GIT_ALLOW_PROTOCOL` names none), so a partial clone's missing object is an error, never a fetch from its promisor
  remote (git 2.39 has no `GIT_NO_LAZY_FETCH`, set too for a git that has it). A fetch the user asked for passes
  `network=True`.
- History as committed, not as locally rewritten: no replace refs, no grafts.
- No attributes but the repository's committed state: no system or global attributes file, and a checkout's git is
  run inside its git directory (`Checkout.git_dir`), where git has no work tree: an untracked `.gitattributes`
  (`*.py -diff`, `merge=union`) is never read, nor the index's; a scratch index (ci.upstream.port.scratch) holds a
  commit's tree, its `.gitattributes` included, and nothing else.
- Nothing points it elsewhere: the variables that name another repository, index, object store or config are taken
  out of the environment it inherits.

tests/integration/test_hostile_git.py holds every git process stackgate starts to this, by a `git` on PATH that
records them.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

GIT = (
    "git",
    *("-c", "color.ui=never", "-c", "diff.noprefix=false", "-c", "diff.mnemonicPrefix=false"),
    *("-c", "log.showSignature=false", "-c", "core.quotePath=false", "-c", "log.showRoot=true"),
    *("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.pager=cat"),
    *("-c", "core.attributesFile=/dev/null", "-c", "protocol.allow=never"),
)
NO_PROTOCOL = "stackgate-none"  # GIT_ALLOW_PROTOCOL: a list naming no transport git has
NETWORK = "https:http:ssh:git:file"  # the transports of a fetch the user asked for (never ext::, which runs a command)
# what would point git at another repository, index, object store or config than the one named, or run something
_TAKEN = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_COMMON_DIR",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_EXTERNAL_DIFF",
    "GIT_DIFF_OPTS",
    "GIT_ATTR_SOURCE",
    "GIT_REPLACE_REF_BASE",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_PROXY_COMMAND",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
)
SAFE = {
    "LC_ALL": "C",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_NO_LAZY_FETCH": "1",
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_GRAFT_FILE": os.devnull,
    "GIT_ALLOW_PROTOCOL": NO_PROTOCOL,
}


def env(extra: Mapping[str, str] | None = None, *, network: bool = False) -> dict[str, str]:
    """The environment of every git process: the caller's, less what points git elsewhere, plus SAFE and `extra`
    (an index or object directory of stackgate's own, an author)."""
    kept = {
        k: v
        for k, v in os.environ.items()
        if k not in _TAKEN and not k.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_", "GIT_TRACE"))
    }
    return {**kept, **SAFE, **(extra or {}), **({"GIT_ALLOW_PROTOCOL": NETWORK} if network else {})}


def argv(where: Path, args: Sequence[str]) -> list[str]:
    return [*GIT, "-C", str(where), *args]


def run(
    where: Path,
    *args: str,
    stdin: str | bytes | None = None,
    pipe: IO[bytes] | None = None,
    text: bool = True,
    extra: Mapping[str, str] | None = None,
    network: bool = False,
) -> subprocess.CompletedProcess[Any]:
    """git ARGS in `where` (a checkout's git directory; stackgate's own checkout for its revision), its output
    captured (text: surrogate-escaped, as a path that is not UTF-8 comes back); its input `stdin`, or `pipe` (another
    process's output)."""
    return subprocess.run(
        argv(where, args),
        input=stdin,
        stdin=pipe,
        capture_output=True,
        text=text,
        errors="surrogateescape" if text else None,
        env=env(extra, network=network),
    )


def start(where: Path, *args: str, stderr: IO[bytes] | int | None = None) -> subprocess.Popen[bytes]:
    """git ARGS in `where`, its output a pipe to read (one stream into another process, as `log -p | patch-id`)."""
    return subprocess.Popen(argv(where, args), stdout=subprocess.PIPE, stderr=stderr, env=env())
