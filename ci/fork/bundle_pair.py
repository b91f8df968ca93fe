"""The two bundles `ci main --compare-without X --bundles DIR` times against each other, made by `ci fork bundle`
where the checkout is: DIR/fork.tar.gz holding X, and DIR/without-X.tar.gz. Each is read as data from elsewhere
(`ci.fork.bundle_read`), and they must be one fork commit over one base commit, each named: else every other
difference between the two builds would be timed as X (two bundles naming no commit are not "the same commit")."""

from __future__ import annotations

from pathlib import Path

from ci.common.errors import UsageError
from ci.common.escape import one_line
from ci.fork import bundle_read


def paired(folder: Path, change: str) -> dict[str, Path]:
    """{name: path} of the two bundles in `folder`, each the build it says it is, both of one fork commit over one
    base; a usage error naming what differs otherwise, before anything is built."""
    made = {name: _given(folder, name, without) for name, without in (("fork", None), (f"without-{change}", change))}
    (fork_path, fork), (without_path, without) = made.values()
    if change not in fork.changes:
        held = fork.held.get(change)
        raise UsageError(
            f"--bundles {one_line(folder)}: {fork_path.name} does not hold #{change} "
            f"({one_line(held.state) if held else 'not found'} in {fork.what()})",
            hint=f"make both bundles from a ref that carries #{change}: python -m ci fork --change {change} says which",
        )
    remake = (
        f"make both from one ref: python -m ci fork bundle --ref REF --out {fork_path.name}, then the same with "
        f"--without {change} --out {without_path.name}"
    )
    for key, a, b in (("fork", fork.fork.commit, without.fork.commit), ("base", fork.base.commit, without.base.commit)):
        unnamed = [p.name for p, c in ((fork_path, a), (without_path, b)) if not c]
        if unnamed:
            raise UsageError(
                f"--bundles {one_line(folder)}: {' and '.join(unnamed)} name(s) no {key} commit: nothing says the two "
                f"bundles are one {key} commit, so the comparison might not be #{change} alone",
                hint=remake,
            )
        if a != b:
            raise UsageError(
                f"--bundles {one_line(folder)}: {fork_path.name} is {fork.what()} and {without_path.name} is "
                f"{without.what()}: their {key} commits differ, so the comparison would not be #{change} alone",
                hint=remake,
            )
    return {name: path for name, (path, _) in made.items()}


def _given(folder: Path, name: str, without: str | None) -> tuple[Path, bundle_read.Manifest]:
    """A bundle `ci fork bundle` made elsewhere: <folder>/<name>.tar.gz, the build it says it is; and its manifest."""
    path = folder / f"{name}.tar.gz"
    fix = f"make it where the fork is: python -m ci fork bundle --out {path.name}" + (
        f" --without {without}" if without else ""
    )
    made = bundle_read.read(path, fix)
    if made.without != without:
        raise UsageError(
            f"--bundles {one_line(folder)}: {path.name} is the fork without {one_line(made.without or 'nothing')}, "
            f"not {'without #' + without if without else 'the fork itself'}",
            hint="name each bundle for what it holds: fork.tar.gz, without-<change>.tar.gz",
        )
    return path, made
