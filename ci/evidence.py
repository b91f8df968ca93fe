"""`python -m ci.evidence`: every committed report re-rendered from its committed JUnit, and set against what is
committed (`nox -s evidence`; `--write` puts today's rendering in place).

A report records the `python -m ci` arguments that made it (report.json `generator.argv`, paths as given from the
repository root). Each is made again with today's code, in memory, and its report.md, report.html and report.json
must equal the committed files byte for byte, but for report.json's `generator.revision`: the commit that made it.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import json
import os
import shutil
import sys
import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ci.common import options
from ci.common.tables import counted
from ci.report import report_verb
from ci.report.write import OUTPUTS, render, write_atomic
from ci.run import execute
from ci.stack.model import Stack

EVIDENCE = options.REPO / "evidence"


def reports(root: Path = EVIDENCE) -> list[Path]:
    """Every committed report folder under `root`: a folder holding a report.json."""
    return sorted(p.parent for p in root.rglob("report.json"))


def argv_of(folder: Path) -> list[str]:
    """The arguments that made the report in `folder`, from its report.json; a ValueError names what is missing."""
    doc = json.loads((folder / "report.json").read_text())
    argv = (doc.get("generator") or {}).get("argv")
    if not argv:
        raise ValueError(
            f"{folder / 'report.json'}: generator.argv is missing: it predates recorded arguments; "
            "render it once with python -m ci report ... --out, from the repository root"
        )
    return list(argv)


def rendered(folder: Path) -> dict[str, bytes]:
    """The report in `folder` as today's code renders it from its recorded arguments (run from the repository root),
    its campaigns' packed runs unpacked first where they are packed (`unpacked`)."""
    from ci.cli import parser  # the report's own command line reads the recorded arguments

    argv = argv_of(folder)
    args = parser().parse_args(argv)
    if args.func is not report_verb.cmd_report:
        raise ValueError(f"{folder / 'report.json'}: generator.argv is {argv[:1]}, not a `report` command")
    args.no_history, args.history = True, None  # committed evidence is its JUnit's rendering alone, every time
    if Path(args.out).resolve() != folder.resolve():
        raise ValueError(f"{folder / 'report.json'}: generator.argv writes to {args.out}, not to {folder}")
    with unpacked(_campaigns_of(folder)):
        return _rendered(folder, argv, args)


def _rendered(folder: Path, argv: list[str], args: argparse.Namespace) -> dict[str, bytes]:
    # The re-run lines would mount this machine's model cache where it has one: evidence is rendered as on a
    # machine without one, so that every machine renders the same bytes.
    before = os.environ.get(execute.ENV_MODEL_CACHE)
    os.environ[execute.ENV_MODEL_CACHE] = str(folder / "no-model-cache")
    try:
        return render(report_verb.from_args(args, argv))
    finally:
        if before is None:
            del os.environ[execute.ENV_MODEL_CACHE]
        else:
            os.environ[execute.ENV_MODEL_CACHE] = before


@dataclass(frozen=True, kw_only=True)
class RecordedFloor:
    """An A/A floor a committed report measured: for one change's row and metric, on the runs of one campaign."""

    report: Path
    change: str
    row: str
    metric: str
    pct: float
    runs: int


def recorded_floors(root: Path = EVIDENCE) -> list[RecordedFloor]:
    """Every A/A floor the committed reports record (report.json `comparison.ported[].floors`)."""
    out = []
    for folder in reports(root):
        doc = json.loads((folder / "report.json").read_text())
        for p in (doc.get("comparison") or {}).get("ported") or ():
            for f in p.get("floors") or ():
                if f.get("pct") is not None:
                    out.append(
                        RecordedFloor(
                            report=folder / "report.json",
                            change=str(p["change"]),
                            row=str(f["row"]),
                            metric=str(f["metric"]),
                            pct=float(f["pct"]),
                            runs=int(f["runs"]),
                        )
                    )
    return out


def too_narrow(stack: Stack, floors: Sequence[RecordedFloor]) -> list[str]:
    """Each timing bound of a gating change that a committed campaign's A/A floor is as wide as: a bound no run of
    that row has been able to judge, so it cannot gate a build. One line each: the change file, the bound, the floor
    and where it was measured."""
    out = []
    for change in stack.changes.values():
        if not change.gating:
            continue
        acc = change.acceptance
        bounds = [(e.metric, e.min_gain_pct, "effect") for e in acc.effect]
        bounds.append((acc.allowed_regression.metric, acc.allowed_regression.max_pct, "allowed_regression"))
        for metric, bound, field_name in bounds:
            for f in floors:
                if f.change == change.id and f.metric == metric and f.pct >= bound:
                    out.append(
                        f"stack/changes/{change.id}.yaml: gating, and its {field_name} bound on {metric} ({bound:g}%) "
                        f"is no wider than the A/A floor ±{f.pct:.1f}% measured on {f.row} at {f.runs} runs a side "
                        f"({f.report}): widen the bound, measure a narrower floor, or set gating: false"
                    )
    return out


ARCHIVE = "runs.tar.xz"  # a campaign's runs, packed: JUnit, rows.json, costs, logs, JIT events, run locks
_RUN_SUFFIXES = (".xml", ".log", ".jsonl", ".lock")
_RUN_FILES = ("rows.json", "costs.json", "not-run.json")


def _campaigns_of(folder: Path) -> list[str]:
    """The campaigns a report's folder and its recorded inputs lie in."""
    return sorted({_campaign(Path(a)) for a in [str(folder), *argv_of(folder)]} - {""})


def _campaign(path: Path) -> str:
    """The campaign a path under evidence/ belongs to ("h200-bake" for evidence/h200-bake/host-e/report), or ""."""
    if path.is_absolute():
        try:
            path = path.resolve().relative_to(options.REPO)
        except ValueError:
            return ""
    parts = path.parts
    return parts[1] if len(parts) > 2 and parts[0] == "evidence" else ""


@contextlib.contextmanager
def unpacked(campaigns: Sequence[str], root: Path = EVIDENCE) -> Iterator[Path]:
    """The repository root, each of these campaigns with packed runs having them back in place beside its loose files
    for as long as the context holds (a report renders from them as from the files they were): what was unpacked is
    removed after, and nothing else."""
    made: list[Path] = []
    try:
        for c in campaigns:
            if (root / c / ARCHIVE).is_file():
                made += _extract(root / c / ARCHIVE, root / c)
        yield root.parent
    finally:
        for p in reversed(made):
            if p.is_dir():
                with contextlib.suppress(OSError):  # a folder something else also holds
                    p.rmdir()
            else:
                p.unlink(missing_ok=True)


def _extract(archive: Path, into: Path) -> list[Path]:
    """The archive's regular files under `into`, none written over (a loose file of that name wins); returns what it
    made, folders first. A member that is not a plain file, or names a path outside `into`, is refused."""
    made: list[Path] = []
    with tarfile.open(archive, "r:xz") as tar:
        for m in tar.getmembers():
            name = Path(m.name)
            if m.isdir():
                continue
            if not m.isfile() or name.is_absolute() or ".." in name.parts:
                raise ValueError(f"{archive}: member {m.name!r} is not a plain file inside the campaign")
            dest = into / name
            if dest.exists():
                continue
            for parent in reversed(dest.relative_to(into).parents[:-1]):
                if not (into / parent).exists():
                    (into / parent).mkdir()
                    made.append(into / parent)
            src = tar.extractfile(m)
            assert src is not None
            dest.write_bytes(src.read())
            made.append(dest)
    return made


def packable(campaign: Path, keep: Sequence[str] = ()) -> list[Path]:
    """The campaign's run files (JUnit, rows.json, costs, logs, JIT events, run locks), less what `keep` (globs relative
    to the campaign) names. A report's links to its failing rows' logs resolve again once the archive is unpacked in
    its folder, where they were."""
    kept = {p.resolve() for g in keep for p in campaign.glob(g)}
    out = []
    for p in sorted(campaign.rglob("*")):
        if not p.is_file() or "report" in p.relative_to(campaign).parts[:-1]:
            continue
        if (p.suffix in _RUN_SUFFIXES or p.name in _RUN_FILES) and p.resolve() not in kept:
            out.append(p)
    return out


def pack(campaign: Path, keep: Sequence[str] = ()) -> int:
    """The campaign's run files into its `runs.tar.xz` (with what an older raw.tar.xz held), then removed: the same
    bytes for the same files (sorted, no times or owners). Returns how many files it packed."""
    files_ = packable(campaign, keep)
    members: dict[str, bytes] = {}
    raw = campaign / "raw.tar.xz"
    for old in (campaign / ARCHIVE, raw):
        if old.is_file():
            with tempfile.TemporaryDirectory() as tmp:
                _extract(old, Path(tmp))
                members.update({str(p.relative_to(tmp)): p.read_bytes() for p in Path(tmp).rglob("*") if p.is_file()})
    members.update({str(p.relative_to(campaign)): p.read_bytes() for p in files_})
    if not members:
        return 0
    staged = campaign / (ARCHIVE + ".part")
    with tarfile.open(staged, "w:xz", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(members):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(members[name]), 0o644, 0
            tar.addfile(info, io.BytesIO(members[name]))
    staged.replace(campaign / ARCHIVE)
    for p in files_:
        p.unlink()
    if raw.is_file():
        raw.unlink()
    for d in sorted((d for d in campaign.rglob("*") if d.is_dir()), key=lambda d: -len(d.parts)):
        if not any(d.iterdir()):
            d.rmdir()
    return len(members)


def differences(folder: Path, fresh: dict[str, bytes]) -> list[str]:
    """What differs between the committed files and `fresh`, as the first lines of a unified diff per file."""
    out = []
    for name in OUTPUTS:
        path = folder / name
        old = path.read_bytes() if path.is_file() else b""
        new = fresh[name]
        if name == "report.json":
            old, new = _without_revision(old), _without_revision(new)
        if old != new:
            diff = difflib.unified_diff(_lines(old), _lines(new), f"{path} (committed)", f"{path} (today)", n=0)
            out.append("\n".join(list(diff)[:12]))
    return out


def _without_revision(raw: bytes) -> bytes:
    if not raw:
        return raw
    doc = json.loads(raw)
    doc.get("generator", {}).pop("revision", None)
    return json.dumps(doc, ensure_ascii=False, indent=0, sort_keys=True).encode()


def _lines(raw: bytes) -> list[str]:
    return raw.decode(errors="replace").splitlines()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ci.evidence", description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="*", type=Path, help="report folders (default: every report under evidence/)")
    ap.add_argument("--write", action="store_true", help="write today's rendering in place of what differs")
    ap.add_argument(
        "--pack",
        metavar="CAMPAIGN",
        action="append",
        default=[],
        help=f"pack a campaign's run files into evidence/CAMPAIGN/{ARCHIVE} (repeatable); its reports must re-render "
        "the same from it, or nothing is packed",
    )
    ap.add_argument("--keep", metavar="GLOB", action="append", default=[], help="with --pack: files to leave loose")
    args = ap.parse_args(argv)
    os.chdir(options.REPO)  # recorded paths are relative to the repository root
    if args.pack:
        return _pack_checked(args.pack, args.keep)
    failed = 0
    for folder in args.folders or [p.relative_to(options.REPO) for p in reports()]:
        try:
            fresh = rendered(folder)
        except (ValueError, OSError) as exc:
            print(f"{folder}: cannot re-render: {exc}", file=sys.stderr)
            failed += 1
            continue
        found = differences(folder, fresh)
        if found and args.write:
            write_atomic(folder, fresh)
            print(f"{folder}: re-rendered ({counted(len(found), 'file')} changed)")
        elif found:
            failed += 1
            print(f"{folder}: differs from today's rendering of its JUnit:\n" + "\n".join(found), file=sys.stderr)
        else:
            print(f"{folder}: as today's code renders it")
    if failed and not args.write:
        print(
            f"{counted(failed, 'report')} differ or cannot be re-rendered: "
            "python -m ci.evidence --write re-renders them",
            file=sys.stderr,
        )
    return 1 if failed else 0


def _pack_checked(campaigns: Sequence[str], keep: Sequence[str]) -> int:
    """Each campaign packed, then every committed report re-rendered from the packed runs: where one differs, the
    campaign is put back as it was (the loose files restored) and said, exit 1."""
    failed = 0
    for name in campaigns:
        campaign = Path("evidence") / name
        if not campaign.is_dir():
            print(f"--pack {name}: no folder {campaign}", file=sys.stderr)
            failed += 1
            continue
        with tempfile.TemporaryDirectory() as tmp:
            backup = Path(tmp) / name
            shutil.copytree(campaign, backup, symlinks=True)
            n = pack(campaign, keep)
            reading = [f for f in (p.relative_to(options.REPO) for p in reports()) if name in _campaigns_of(f)]
            bad = [f for f in reading if differences(f, rendered(f))]
            if bad:
                shutil.rmtree(campaign)
                shutil.copytree(backup, campaign, symlinks=True)
                print(f"{campaign}: not packed: {', '.join(map(str, bad))} would render otherwise", file=sys.stderr)
                failed += 1
                continue
        print(f"{campaign}: {counted(n, 'file')} in {campaign / ARCHIVE}; every report renders the same")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
