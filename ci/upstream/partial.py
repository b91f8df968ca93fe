"""A partial clone (`git clone --filter=blob:none`), found before anything is read from it. Git fetches what such a
clone lacks from its promisor remote as it reads, one object at a time: a network call the user did not ask for, to
whatever that remote's URL names. stackgate runs git with every transport refused (ci.common.git), so it would fail
half-way instead; it says so first: the clone is refused with the commands that fill it, unless the user asks stackgate
to fetch what it lacks (`--fetch-missing`), which it then does in one fetch, saying from where and how many objects."""

from __future__ import annotations

import sys

from ci.common.errors import UsageError
from ci.upstream.checkout import Checkout, git_lines
from ci.upstream.git_streams import last


def promisors(co: Checkout) -> list[str]:
    """The remotes a partial clone fetches its missing objects from (none: a whole clone)."""
    out = co.git("config", "--null", "--get-regexp", r"^(remote\..*\.promisor|extensions\.partialclone)$", ok=(0, 1))
    names: list[str] = []
    for entry in out.split("\0"):
        key, _, value = entry.partition("\n")
        if key.lower() == "extensions.partialclone" and value:
            names.append(value)
        elif key.startswith("remote.") and value.lower() in ("true", "yes", "on", "1"):
            names.append(key.removeprefix("remote.").removesuffix(".promisor"))
    # A promisor pack with no promisor remote (a clone made from a snapshot that lacks some blobs) has nothing to
    # fetch from: git cannot reach the network for it, and an object it lacks is an error where one is read.
    return list(dict.fromkeys(names))


def require(co: Checkout, fetch_missing: bool) -> None:
    """Refuse a partial clone, naming its promisor remote and the commands that fill it; with `fetch_missing`, fill it
    here in one fetch."""
    remotes = promisors(co)
    if not remotes:
        return
    name = remotes[0]
    url = co.remotes().get(name, "")
    said = f"remote {name}" + (f" ({url})" if url else "")
    if not fetch_missing:
        fill = (
            f"{co.command('config', '--unset', f'remote.{name}.partialclonefilter')} && "
            f"{co.command('fetch', '--refetch', '--', name)}"
        )
        raise UsageError(
            f"{co.path} is a partial clone: git would fetch each object it lacks from its promisor, {said}, one at a "
            "time as it reads history; stackgate reads a checkout offline and fetches nothing it was not asked to",
            hint=f"fill the clone ({fill}), or pass --fetch-missing: stackgate then fetches what it lacks from {name} "
            "in one fetch, saying how many objects",
        )
    missing = _missing(co)
    if not missing:
        return
    print(f"fetching {len(missing):,} objects the partial clone lacks from {said}, in one fetch", file=sys.stderr)
    done = co.run(
        "-c",
        "fetch.negotiationAlgorithm=noop",
        "fetch",
        "--no-tags",
        "--no-write-fetch-head",
        "--recurse-submodules=no",
        "--filter=blob:none",
        "--stdin",
        "--",
        name,
        stdin="".join(f"{oid}\n" for oid in missing),
        ok=(0, 1, 128),
        network=True,
    )
    left = _missing(co) if done.returncode == 0 else missing
    if left:
        raise UsageError(
            f"{co.path}: the fetch from {said} left {len(left):,} objects missing ({last(done.stderr)})",
            hint=f"fill the clone by hand: {co.command('fetch', '--refetch', '--', name)}",
        )


def _missing(co: Checkout) -> list[str]:
    """The objects every ref reaches that the clone lacks (read without fetching them)."""
    out = co.git("rev-list", "--objects", "--missing=print", "--all")
    return [line[1:] for line in git_lines(out) if line.startswith("?")]
