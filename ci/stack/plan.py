"""Expand imported changes x targets x eligible models x matrix into rows with stable ids.

A row id depends on the row's own identity only (change, target, model, backend and the axis
values that differ from their defaults), never on its position, so adding a model, a change or a
new defaulted axis renames nothing that existed before.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, fields

from ci.common import contract
from ci.common.errors import StackError, UsageError
from ci.stack.change import Change, Combo, Matrix
from ci.stack.checks.eligibility import (
    kv_supported,
    model_kv,
    pending_proof,
    row_backends,
    target_mismatch,
    trait_mismatch,
)
from ci.stack.model import HistoryRow, Model, Stack, Target

PINS = ("models", "backend")  # include/exclude entries only: which models and backend an entry applies to
AXES = tuple(f.name for f in fields(Combo) if f.name not in PINS)
# Axis values that are left out of a row's id hash: a new axis added later with its default keeps ids.
ID_DEFAULTS: dict[str, object] = {
    "speculative": True,
    "dp": 1,
    "ep": False,
    "cudagraph_mode": "FULL_AND_PIECEWISE",
    "dcp": 1,
    "dbo": False,
    "kv_cache_dtype": "auto",
}


@dataclass(frozen=True, kw_only=True)
class Row:
    id: str
    change: str
    track: str
    suite: str
    target: str
    model: str
    backend: str
    spec_method: str | None  # None: speculative decoding off
    num_speculative_tokens: int
    tp: int
    dp: int
    ep: bool
    cudagraph_mode: str
    dcp: int
    dbo: bool
    kv_cache_dtype: str
    context: int
    batch: int

    @property
    def gpus(self) -> int:
        """The GPUs the row takes: tp x dp (DCP splits the TP ranks' KV cache, EP spreads experts over the
        TP x DP ranks: neither adds GPUs in vLLM)."""
        return self.tp * self.dp

    def to_json(self) -> dict[str, object]:
        return {**self.__dict__, "gpus": self.gpus}  # its fields, each a str, int, bool or None: asdict without a copy


@dataclass(frozen=True, kw_only=True)
class Excluded:
    """A pairing the stack lists but the plan leaves out, with the reason (shown by --explain)."""

    change: str
    target: str
    model: str
    reason: str

    def to_json(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Plan:
    rows: tuple[Row, ...]
    excluded: tuple[Excluded, ...]

    def select(self, *, targets: Iterable[str] = (), suites: Iterable[str] = (), changes: Iterable[str] = ()) -> Plan:
        t, s, c = set(targets), set(suites), set(changes)

        def keep(r: Row | Excluded) -> bool:
            suite_ok = not s or isinstance(r, Excluded) or r.suite in s
            return (not t or r.target in t) and (not c or r.change in c) and suite_ok

        return Plan(tuple(r for r in self.rows if keep(r)), tuple(e for e in self.excluded if keep(e)))

    def pick(self, ids: Iterable[str], *, where: str) -> tuple[Row, ...]:
        """These rows, in the order given (every row where `ids` is empty); an id not in this plan is an
        error naming it and `where` the plan was narrowed to."""
        wanted = list(ids)
        if not wanted:
            return self.rows
        by_id = {r.id: r for r in self.rows}
        unknown = [i for i in wanted if i not in by_id]
        if unknown:
            raise UsageError(
                f"row(s) not planned{f' for {where}' if where else ''}: {', '.join(unknown)}",
                hint=f"python -m ci plan {where_flags(where) if where else '--target T --suite S'} lists the row ids",
            )
        return tuple(by_id[i] for i in wanted)

    def only(self, ids: Iterable[str]) -> Plan:
        """The plan narrowed to these row ids (all of it where `ids` is empty); an id it lacks is an error."""
        keep = {r.id for r in self.pick(ids, where="")} if ids else None
        return Plan(tuple(r for r in self.rows if r.id in keep), ()) if keep is not None else self


def build(stack: Stack) -> Plan:
    """Rows in change, target and listed-model order; a shrunk model's rows follow its real model's."""
    rows: list[Row] = []
    excluded: list[Excluded] = []
    shrunk = {m.shrunk_of: m for m in stack.models.values() if m.shrunk_of}
    for change in stack.changes.values():
        _bounded(stack, change)
        track = stack.tracks[change.track]
        for target in stack.targets.values():
            listed = [stack.models[m] for m in change.models]
            for model in (m for real in listed for m in (real, shrunk.get(real.id)) if m is not None):
                why = (
                    trait_mismatch(model, track) or pending_proof(model, track) or target_mismatch(model, track, target)
                )
                if why:
                    excluded.append(Excluded(change=change.id, target=target.id, model=model.id, reason=why))
                    continue
                made, refused = _expand(stack, change, target, model)
                rows.extend(made)
                if refused and not made:
                    excluded.append(Excluded(change=change.id, target=target.id, model=model.id, reason=refused))
    _check_unique(stack, rows)
    return Plan(tuple(rows), tuple(excluded))


def _expand(stack: Stack, change: Change, target: Target, model: Model) -> tuple[list[Row], str]:
    """The rows of one (change, target, model), and every distinct reason a combination was refused."""
    track = stack.tracks[change.track]
    rows: list[Row] = []
    ids: set[str] = set()
    reasons: dict[str, None] = {}
    for combo in _combos(change.matrix):
        pinned_models, pinned_backend = combo.pop("models"), combo.pop("backend")
        if pinned_models is not None and not {model.id, model.shrunk_of} & set(pinned_models):
            continue  # an entry for other models: no refusal
        tp = combo["tp"] if combo["tp"] is not None else model.tp
        if (tp * combo["dp"] if combo["ep"] else tp) < model.tp:  # with EP, the experts spread over tp x dp
            reasons[f"needs tp >= {model.tp}"] = None
            continue
        if tp % combo["dcp"]:
            reasons[f"dcp {combo['dcp']} does not divide tp {tp}"] = None
            continue
        # a target without GPUs still runs one process per row (the CPU self-test)
        if tp * combo["dp"] > max(target.gpus, 1):
            reasons[f"needs {tp * combo['dp']} GPUs; {target.id} has {target.gpus}"] = None
            continue
        if combo["speculative"] and model.drafter is None:
            reasons["no drafter to speculate with"] = None
            continue
        kv = model_kv(model, combo["kv_cache_dtype"])
        if kv is None:
            reasons[f"vLLM does not take kv_cache_dtype {combo['kv_cache_dtype']} for {model.id}"] = None
            continue
        combo["kv_cache_dtype"] = kv
        backends = row_backends(model, track, target)
        if pinned_backend is not None:
            backends = (pinned_backend,) if pinned_backend in backends else ()
            if not backends:
                reasons[f"{pinned_backend} is not a backend of {model.id} that {target.id} offers"] = None
        for backend in backends:
            if not kv_supported(stack.backends[backend], combo["kv_cache_dtype"]):
                reasons[f"{backend} does not accept kv_cache_dtype {combo['kv_cache_dtype']}"] = None
                continue
            values = dict(combo, tp=tp)
            if not values["speculative"]:
                values["num_speculative_tokens"] = 0
            row = _row(change, track.id, track.suite, target.id, model, backend, values)
            if row.id not in ids:  # "auto" and the model's own dtype can make the same row
                ids.add(row.id)
                rows.append(row)
    return rows, "; ".join(reasons)


MAX_COMBINATIONS = 2048  # per change: each is a row on every eligible model and target; a matrix is written by hand


def _bounded(stack: Stack, change: Change) -> None:
    """A matrix whose axes multiply past MAX_COMBINATIONS is refused before it is expanded, naming the change."""
    axes = [len(getattr(change.matrix, name) or (None,)) for name in AXES]
    count = math.prod(axes) + len(change.matrix.include)
    if count > MAX_COMBINATIONS:
        sizes = ", ".join(f"{name} {n}" for name, n in zip(AXES, axes, strict=True) if n > 1)
        raise StackError(
            stack.root / "changes" / f"{change.id}.yaml",
            None,
            "matrix",
            f"change {change.id}'s matrix has {count:,} combinations ({sizes}), over the "
            f"{MAX_COMBINATIONS:,} a change may plan",
            hint="narrow an axis, or exclude combinations",
        )


def _combos(matrix: Matrix) -> Iterator[dict]:
    """Cartesian product of the axes, minus `exclude` matches, then `include` combos (GitHub-style)."""
    axes = {name: getattr(matrix, name) or (None,) for name in AXES}
    seen: set[tuple] = set()
    product = matrix.context is not None and matrix.batch is not None  # else: the include entries alone
    for values in itertools.product(*axes.values()) if product else ():
        combo = dict(zip(axes, values, strict=True), models=None, backend=None)
        if any(_matches(combo, ex) for ex in matrix.exclude):
            continue
        seen.add(tuple(combo.values()))
        yield combo
    firsts = {name: values[0] for name, values in axes.items()} | {"models": None, "backend": None}
    for inc in matrix.include:
        combo = dict(firsts, **{k: v for k, v in vars(inc).items() if v is not None})
        if tuple(combo.values()) not in seen:
            seen.add(tuple(combo.values()))
            yield combo


def _matches(combo: dict, partial: Combo) -> bool:
    # vars(): a combo's fields as they are (asdict deep-copied every value at every match: plan.build 27 -> 21 ms)
    return all(v is None or combo[k] == v for k, v in vars(partial).items())


def _row(change: Change, track: str, suite: str, target: str, model: Model, backend: str, values: dict) -> Row:
    spec_method = model.drafter.method if values["speculative"] and model.drafter else None
    identity = {"change": change.id, "target": target, "model": model.id, "backend": backend}
    identity.update({k: v for k, v in values.items() if ID_DEFAULTS.get(k, object()) != v})
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:8]
    return Row(
        id=str(contract.RowId(change.id, target, model.id, digest)),
        change=change.id,
        track=track,
        suite=suite,
        target=target,
        model=model.id,
        backend=backend,
        spec_method=spec_method,
        num_speculative_tokens=values["num_speculative_tokens"],
        tp=values["tp"],
        dp=values["dp"],
        ep=values["ep"],
        cudagraph_mode=values["cudagraph_mode"],
        dcp=values["dcp"],
        dbo=values["dbo"],
        kv_cache_dtype=values["kv_cache_dtype"],
        context=values["context"],
        batch=values["batch"],
    )


def _check_unique(stack: Stack, rows: list[Row]) -> None:
    seen: dict[str, Row] = {}
    for row in rows:
        if row.id in seen:
            # Two rows with the same identity: the matrix lists one combination twice (e.g. via include).
            path = stack.root / "changes" / f"{row.change}.yaml"
            raise StackError(
                path,
                None,
                "matrix",
                f"the matrix yields row {row.id} twice",
                hint="drop the include entry that repeats it",
            )
        seen[row.id] = row


def history_for(stack: Stack, row: Row) -> HistoryRow | None:
    """The seed-table entry describing this exact configuration on this target's hardware, if any."""
    model = stack.models[row.model]
    target = stack.targets[row.target]
    if not model.seed_name:
        return None
    spec = (model.drafter.type.upper() if model.drafter else "-") if row.spec_method else "-"
    for h in stack.history:
        if (
            h.model == model.seed_name
            and h.hardware in target.hardware
            and h.spec.upper() == spec
            and (h.tp, h.dp, h.ep, h.cudagraph_mode, h.dcp, h.dbo, h.kv_cache_dtype, h.backend)
            == (row.tp, row.dp, row.ep, row.cudagraph_mode, row.dcp, row.dbo, row.kv_cache_dtype, row.backend)
        ):
            return h
    return None


def where_flags(where: str) -> str:
    """`cuda-sm90/sparse_mla` as the plan command's flags."""
    target, _, suite = where.partition("/")
    return f"--target {target}" + (f" --suite {suite}" if suite and suite != "*" else "")
