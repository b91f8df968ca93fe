"""Shrunk models: a real model's architecture, shrunk, with random weights, planned wherever the real one is.

A models.yaml entry with `shrunk_of: <model id>` names only what is its own (its config directory, a local
draft config, its TP and notes). Its traits (drafter type and method, attention layout and proof,
quantization, backends, runtime env) are copied from the real model here, so its eligibility is the real model's and
cannot drift from it. An entry may restate a trait; one that differs from the real model's is an error
naming both lines.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from ci.stack.model import Attention, Model
from ci.stack.schema import DrafterType, Gib, Positive, frozen

if TYPE_CHECKING:  # YAML is parsed only where a stack is loaded, not read back from the cache
    from ci.stack.yaml_lines import Loc, Source

_Entry = tuple[Any, "Source", "Loc"]


@frozen
class ShrunkDrafter:
    """A shrunk model's drafter: type and method are the real model's; `model` is its own draft config."""

    type: DrafterType | None = None
    method: str | None = None
    model: str | None = None


@frozen
class Shrunk:
    """A models.yaml entry with `shrunk_of`, before the real model's traits are copied in."""

    id: str
    shrunk_of: str
    weights: Literal["dummy"]
    config: str
    name: str | None = None
    drafter: ShrunkDrafter | None = None
    attention: Attention | None = None
    quantization: str | None = None
    backends: tuple[str, ...] | None = None
    kv_cache_dtypes: tuple[str, ...] | None = None
    tp: Positive = 1
    kv_cache_gib: Gib = 12.0  # its real model's shapes: the default budget, not the real model's (hub) share
    notes: str = ""


def resolve(entries: dict[str, _Entry]) -> dict[str, _Entry]:
    """Every Shrunk entry becomes a Model carrying its real model's traits; file order is kept."""
    shrunk_by: dict[str, str] = {}
    out: dict[str, _Entry] = {}
    for key, (obj, src, loc) in entries.items():
        if isinstance(obj, Shrunk):
            real, real_src, real_loc = _real(obj, src, loc, entries, shrunk_by)
            obj = _inherit(obj, src, loc, real, real_src, real_loc)
        out[key] = (obj, src, loc)
    return out


def _real(obj: Shrunk, src: Source, loc: Loc, entries: dict[str, _Entry], shrunk_by: dict[str, str]) -> _Entry:
    where = (*loc, "shrunk_of")
    if obj.shrunk_of not in entries:
        raise src.error(where, f"unknown model {obj.shrunk_of!r}", hint="shrunk_of names a real model's id")
    real = entries[obj.shrunk_of]
    if isinstance(real[0], Shrunk):
        raise src.error(where, f"{obj.shrunk_of!r} is itself shrunk", hint=f"name {real[0].shrunk_of!r}")
    if obj.shrunk_of in shrunk_by:
        raise src.error(
            where,
            f"{obj.shrunk_of!r} is already shrunk by {shrunk_by[obj.shrunk_of]!r}",
            hint="one shrunk model per real model: its rows sit beside the real model's",
        )
    shrunk_by[obj.shrunk_of] = obj.id
    return real


def _inherit(obj: Shrunk, src: Source, loc: Loc, real: Model, real_src: Source, real_loc: Loc) -> Model:
    def contradiction(key: tuple[str, ...], mine: object, theirs: object) -> Exception:
        there = f"{real_src.path.name}:{real_src.line((*real_loc, *key))}"
        return src.error(
            (*loc, *key),
            f"contradicts {real.id} ({there}): {theirs!r} there, {mine!r} here",
            hint=f"a shrunk model inherits {real.id}'s traits: drop the key, or change both",
        )

    for key in ("attention", "quantization", "backends", "kv_cache_dtypes"):
        mine = getattr(obj, key)
        if mine is not None and mine != getattr(real, key):
            raise contradiction((key,), mine, getattr(real, key))
    drafter = real.drafter
    if obj.drafter is not None:
        if drafter is None:
            raise contradiction(("drafter",), "a drafter", None)
        for key in ("type", "method"):
            mine = getattr(obj.drafter, key)
            if mine is not None and mine != getattr(drafter, key):
                raise contradiction(("drafter", key), mine, getattr(drafter, key))
        if obj.drafter.model and not drafter.model:
            raise src.error(
                (*loc, "drafter", "model"),
                f"{real.id} drafts with its own layers ({drafter.method}): no draft config to shrink",
                hint="drop drafter.model",
            )
    if drafter is not None and drafter.model:
        local = obj.drafter.model if obj.drafter else None
        if not local:
            why = f"{real.id} drafts with separate weights ({drafter.model}): a shrunk model needs its own draft config"
            raise src.error(loc, why, hint="add drafter: {model: suites/models/<draft>}")
        drafter = replace(drafter, model=local)
    return Model(
        id=obj.id,
        name=obj.name or f"{real.name}, shrunk (random weights)",
        weights="dummy",
        config=obj.config,
        drafter=drafter,
        attention=real.attention,
        quantization=real.quantization,
        backends=real.backends,
        kv_cache_dtypes=real.kv_cache_dtypes,
        env=real.env,
        tp=obj.tp,
        kv_cache_gib=obj.kv_cache_gib,
        notes=obj.notes,
        shrunk_of=real.id,
    )
