"""A port whose patch was edited (a conflict resolved while cherry-picking) has another patch-id than its source, so
patch-ids alone call it absent. File patch-ids (`Checkout.file_ids`) find it: the fork commit that changes the same
files as the source, most of them with the same edit, is the port, edited; the files whose edit differs are named."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ci.upstream.checkout import Checkout

MIN_OVERLAP = 0.5  # of the source's files, the fork commit must change at least this share
PACKAGE = "vllm/"  # what a build runs: a fork that leaves out a change's tests or docs runs its code as it is


@dataclass(frozen=True, kw_only=True)
class Edited:
    source: str  # what it was compared with: "merge commit 63ff748f657a", "port commit c8d5679daf49"
    commit: str  # the fork commit carrying it
    same: tuple[str, ...]  # files with the source's edit
    differ: tuple[str, ...]  # files it changes otherwise than the source
    dropped: tuple[str, ...]  # files of the source it leaves alone
    partial: bool = False  # fewer than MIN_OVERLAP of the source's files: those with its edit are a part of it

    @property
    def code_as_is(self) -> bool:
        """Every file of the package the source changes has the source's edit: only tests or docs differ."""
        return not any(p.startswith(PACKAGE) for p in (*self.differ, *self.dropped)) and any(
            p.startswith(PACKAGE) for p in self.same
        )

    def describe(self) -> str:
        if self.partial:
            rest = ", ".join((*self.differ, *self.dropped))
            return (
                f"{self.commit[:12]} carries {self.source}'s edit of {', '.join(self.same)} alone; "
                f"not the edit of {rest}"
            )
        parts = [f"{len(self.same)} of {len(self.same) + len(self.differ) + len(self.dropped)} files as in it"]
        if self.differ:
            parts.append(f"edited: {', '.join(self.differ)}")
        if self.dropped:
            parts.append(f"left out: {', '.join(self.dropped)}")
        if self.code_as_is:
            return f"{self.commit[:12]} carries {self.source}'s {PACKAGE} edit as it is ({'; '.join(parts)})"
        return f"{self.commit[:12]} carries {self.source} with edits ({'; '.join(parts)})"


def find(
    co: Checkout,
    revs: Sequence[str],
    sources: Mapping[str, Mapping[str, str]],
    subjects: Mapping[str, str],
    undone: frozenset[str] = frozenset(),
) -> Edited | None:
    """The fork commit (of the range `revs`) that best carries one of `sources` (label -> {path: file patch-id})
    with edits, or None. A candidate changes at least MIN_OVERLAP of the source's files and either makes the same
    edit to one of them or has the source's subject (`subjects`: label -> subject); failing that, one that makes the
    same edit to fewer of them carries a part of it (`partial`). A commit the fork took back (`undone`) carries
    nothing."""
    files = sorted({p for ids in sources.values() for p in ids})
    if not files:
        return None
    candidates = [t.commit for t in co.touching(revs, files) if t.commit not in undone]
    theirs = co.file_ids(candidates)
    titles = co.titles(*candidates, walk=False) if candidates else {}
    best: tuple[tuple[int, int, int], Edited] | None = None
    for label, ids in sources.items():
        for commit in candidates:
            mine = theirs.get(commit, {})
            shared = [p for p in ids if p in mine]
            same = tuple(p for p in shared if mine[p] == ids[p])
            partial = len(shared) < MIN_OVERLAP * len(ids)
            # a part of it: a file or more with its very edit (absent means none of its files carries its edit)
            if (partial and not same) or (not same and titles.get(commit) != subjects.get(label)):
                continue
            found = Edited(
                source=label,
                commit=commit,
                same=same,
                differ=tuple(p for p in shared if p not in same),
                dropped=tuple(p for p in ids if p not in mine),
                partial=partial,
            )
            score = (not partial, len(same), len(shared))
            if best is None or score > best[0]:
                best = (score, found)
    return best[1] if best else None
