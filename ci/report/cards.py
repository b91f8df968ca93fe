"""Which card a target's rows ran on, said the same way everywhere the report names hardware.

A target names the hardware it is planned for (`cuda-sm90`: H100 and H200, short name "H200"); a run records the card
it ran on ("NVIDIA H100 80GB HBM3", the JUnit's `card`). Wherever the report prints a card or a target's hardware (the
verdict per target, the next step's "on an H100 host", the status matrix's Hardware column), it takes it from here:
the recorded card's name among the target's hardware names where the rows ran on one, else the planned names."""

from __future__ import annotations

from collections.abc import Iterable

from ci.results.merge import RowResult
from ci.stack.model import Target


def recorded(rows: Iterable[RowResult], target: str) -> tuple[str, ...]:
    """The cards the target's rows recorded, sorted, each once."""
    return tuple(sorted({c.card for r in rows if r.target == target for c in r.ran if c.card}))


def named(target: Target, cards: Iterable[str]) -> str:
    """The hardware name for `cards` on `target`: the one of the target's hardware names that every card is ("H100"
    for "NVIDIA H100 80GB HBM3" on cuda-sm90); the target's short name where no card was recorded; the cards' own
    names where they are none or several of the target's."""
    cards = tuple(cards)
    if not cards:
        return target.short
    names = [_name_of(target, c) for c in cards]
    if all(names) and len(set(names)) == 1:
        return names[0]
    return " and ".join(sorted({n or c for n, c in zip(names, cards, strict=True)}))


def host(target: Target, cards: Iterable[str]) -> str:
    """Where a target's rows run next, with the article: "an H100 host" (the card its rows ran on), else the target's
    own label ("an H200 host")."""
    name = named(target, cards)
    return f"{_article(name)} {name} host"


def _name_of(target: Target, card: str) -> str:
    """The target's one hardware name found in the card's name; "" where none or several are."""
    found = [h for h in target.hardware if h.lower() in card.lower()]
    return found[0] if len(found) == 1 else ""


def _article(name: str) -> str:
    """As the first letter is said: "an H100", "a GB10", "an NVIDIA ...", "a Strix Halo"."""
    first = name.split()[0] if name.split() else "?"
    spelled = first.isupper() or any(ch.isdigit() for ch in first)  # H200, GB10, CPU: said letter by letter
    return "an" if first[:1].upper() in ("AEFHILMNORSX" if spelled else "AEIOU") else "a"
