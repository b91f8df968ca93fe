"""Repeated-token degeneration (vllm#52512): a greedy output whose tail collapses into one token, or a short cycle,
repeated to the end. Random weights repeat tokens by themselves, so an output only counts as degenerated where
the same request's reference output (the same engine configuration, the condition not forced) does not."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MAX_PERIOD = 4  # the longest cycle looked for: one token, or a short phrase
MIN_REPEATS = 8  # times the cycle must close the output to count as degeneration


@dataclass(frozen=True)
class Tail:
    """The repeating tail of a token sequence: `cycle` repeated `repeats` times ends it (repeats 1: none)."""

    cycle: tuple[int, ...]
    repeats: int

    @property
    def length(self) -> int:
        return len(self.cycle) * self.repeats

    def degenerate(self, min_repeats: int = MIN_REPEATS) -> bool:
        return self.repeats >= min_repeats


def repeating_tail(tokens: Sequence[int], max_period: int = MAX_PERIOD) -> Tail:
    """The cycle of at most `max_period` tokens that covers most of the end of `tokens` (the shorter on a tie)."""
    seq = list(tokens)
    best = Tail(cycle=tuple(seq[-1:]), repeats=1 if seq else 0)
    for period in range(1, min(max_period, len(seq)) + 1):
        cycle = seq[-period:]
        repeats = 1
        while len(seq) >= (repeats + 1) * period and seq[-(repeats + 1) * period : -repeats * period] == cycle:
            repeats += 1
        if repeats > 1 and repeats * period > best.length:
            best = Tail(cycle=tuple(cycle), repeats=repeats)
    return best


@dataclass(frozen=True)
class Judgement:
    degenerated: tuple[str, ...]  # one message per request that degenerated where its reference did not
    inconclusive: int  # requests whose reference repeats as much: random weights, nothing to tell

    def to_json(self) -> dict[str, object]:
        return {"degenerated": list(self.degenerated), "inconclusive": self.inconclusive}


def judge(outputs: Sequence[Sequence[int]], references: Sequence[Sequence[int]]) -> Judgement:
    """Each output against the same request's reference output."""
    if len(outputs) != len(references):
        raise ValueError(f"{len(outputs)} outputs against {len(references)} references")
    messages: list[str] = []
    inconclusive = 0
    for i, (out, ref) in enumerate(zip(outputs, references, strict=True)):
        tail, ref_tail = repeating_tail(out), repeating_tail(ref)
        if not tail.degenerate():
            continue
        if ref_tail.degenerate():
            inconclusive += 1
            continue
        messages.append(
            f"request {i}: its last {tail.length} tokens repeat {list(tail.cycle)} x{tail.repeats}; "
            f"the reference's repeat at most x{ref_tail.repeats}"
        )
    return Judgement(degenerated=tuple(messages), inconclusive=inconclusive)
