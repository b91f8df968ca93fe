"""`ci main --compare-without X --bundles DIR`: the fork's bundle and the one without X, made elsewhere (`ci fork
bundle` where the fork's checkout is), read and checked before anything is built: each the build it says it is, the
fork's holding X, both of one fork commit over one base (else every other difference between the commits is timed as
X)."""

from __future__ import annotations

from pathlib import Path

from ci.errors import UsageError


def paired(folder: Path, change: str) -> dict[str, Path]:
    """The two bundles `ci fork bundle` made elsewhere, {name: path}: <folder>/fork.tar.gz holding `change` and
    <folder>/without-<change>.tar.gz, each the build it says it is, both of one fork commit over one base (else the
    comparison would hold every other difference between the two commits too)."""
    made = {name: _read(folder, name, without) for name, without in (("fork", None), (f"without-{change}", change))}
    (fork_path, fork), (without_path, without) = made.values()
    if change not in fork.get("changes", []):
        state = fork.get("held", {}).get(change, {}).get("state", "not found")
        raise UsageError(
            f"--bundles {folder}: {fork_path.name} does not hold #{change} ({state} in {_what(fork)})",
            hint=f"make both bundles from a ref that carries #{change}: python -m ci fork --change {change} says which",
        )
    for key in ("fork", "base"):
        if fork.get(key, {}).get("commit") != without.get(key, {}).get("commit"):
            raise UsageError(
                f"--bundles {folder}: {fork_path.name} is {_what(fork)} and {without_path.name} is {_what(without)}: "
                f"their {key} commits differ, so the comparison would not be #{change} alone",
                hint=f"make both from one ref: python -m ci fork bundle --ref REF --out {fork_path.name}, "
                f"then the same with --without {change} --out {without_path.name}",
            )
    return {name: path for name, (path, _) in made.items()}


def _what(manifest: dict) -> str:
    fork, base = manifest.get("fork", {}), manifest.get("base", {})
    return (
        f"{fork.get('name')} {fork.get('ref')} ({str(fork.get('commit'))[:12]}) "
        f"over vLLM {base.get('version')} ({str(base.get('commit'))[:12]})"
    )


def _read(folder: Path, name: str, without: str | None) -> tuple[Path, dict]:
    """A bundle `ci fork bundle` made elsewhere: <folder>/<name>.tar.gz, the build it says it is; and its manifest."""
    from ci.fork import site

    path = folder / f"{name}.tar.gz"
    try:
        made = site.vllm_build().bundle_manifest(path)
    except (OSError, ValueError, KeyError, EOFError) as exc:
        raise UsageError(
            f"--bundles {folder}: {path.name}: {exc}",
            hint=f"make it where the fork is: python -m ci fork bundle --out {path.name}"
            + (f" --without {without}" if without else ""),
        ) from None
    if made.get("without") != without:
        raise UsageError(
            f"--bundles {folder}: {path.name} is the fork without {made.get('without') or 'nothing'}, not "
            f"{'without #' + without if without else 'the fork itself'}",
            hint="name each bundle for what it holds: fork.tar.gz, without-<change>.tar.gz",
        )
    return path, made
