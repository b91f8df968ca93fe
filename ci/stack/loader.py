"""Load `stack/` into one validated, frozen `Stack`. Every error names the file, line and key."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from ci.common import options
from ci.common.errors import StackError
from ci.stack import cache, digest, flaky, fork_file, shrunk, suite_names
from ci.stack.change import Change, Matrix
from ci.stack.checks import pins, provenance
from ci.stack.checks.eligibility import trait_mismatch
from ci.stack.model import Backend, HistoryRow, Model, Stack, Target, Track
from ci.stack.schema import validate as _validate

if TYPE_CHECKING:
    from ci.stack.yaml_lines import Loc, Source

T = TypeVar("T")
AXIS_NAMES = tuple(f.name for f in fields(Matrix) if f.name not in ("include", "exclude"))

DEFAULT_STACK = options.REPO / "stack"  # the repository's own; $STACKGATE_STACK or --stack choose another
_TRITON_TARGET = re.compile(r"^(cuda:\d{2,3}|hip:gfx[0-9a-f]{3,4})\Z")
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")  # printed into shell lines by ci repro
_SUITE = re.compile(r"^[a-z][a-z0-9_]*\Z")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]*\Z")


def load(root: Path | str | None = None, *, cached: bool = True) -> Stack:
    """The stack under `root`, validated, or as it was validated last (`ci.stack.cache`; `cached=False`: anew)."""
    root = Path(root) if root is not None else options.default_stack()
    if not root.is_dir():
        raise StackError(root, None, "", "stack directory not found", hint="pass --stack DIR pointing at a stack/")
    return cache.loaded(root, _load, cached=cached)


def _parsed(path: Path) -> Source:
    from ci.stack import yaml_lines  # YAML only where a stack is parsed, not where it is read back from the cache

    return yaml_lines.load(path)


def _load(root: Path) -> Stack:
    backends = _collection(root / "backends.yaml", "backends", Backend)
    targets = _collection(root / "targets.yaml", "targets", Target)
    models = _models(root / "models.yaml")
    tracks = _collection(root / "tracks.yaml", "tracks", Track)
    changes = _changes(root / "changes")
    history_src = _parsed(root / "history.yaml")
    history_doc = _mapping(history_src, ("source", "rows"))
    history = _validate(history_src, history_doc["rows"], ("rows",), tuple[HistoryRow, ...])
    if not isinstance(history_doc["source"], str):
        raise history_src.error(("source",), "expected a string naming where the history comes from")

    _check_targets(targets, backends)
    _check_models(models, backends)
    _check_tracks(tracks, backends)
    _check_changes(changes, tracks, models, backends, targets)
    _check_history(history_src, history, models, backends)
    fork = fork_file.load(root / "fork.yaml", {c: ch for c, (ch, _, _) in changes.items()})

    stack = Stack(
        root=root,
        targets=_frozen_map(targets),
        backends=_frozen_map(backends),
        models=_frozen_map(models),
        tracks=_frozen_map(tracks),
        changes=_frozen_map(changes),
        history=history,
        history_source=history_doc["source"],
        flaky=flaky.load(root / "flaky.yaml"),
        fork=fork,
    )
    return replace(stack, digest=digest.of(stack))


# An entry keeps its Source and location so that cross-reference errors can point at it.
_Entry = tuple[Any, "Source", "Loc"]


def _frozen_map(entries: dict[str, _Entry]) -> MappingProxyType:
    return MappingProxyType({key: obj for key, (obj, _, _) in entries.items()})


def _mapping(src: Source, keys: Sequence[str]) -> dict[str, Any]:
    if not isinstance(src.data, dict):
        raise src.error((), f"expected a mapping with keys {', '.join(keys)}")
    for key in keys:
        if key not in src.data:
            raise src.error((), f"missing top-level key '{key}'")
    for key in src.data:
        if key not in keys:
            raise src.error((key,), f"unknown top-level key '{key}'", hint=f"expected only {', '.join(keys)}")
    return src.data


def _collection(path: Path, key: str, cls: type[T]) -> dict[str, _Entry]:
    src = _parsed(path)
    items = _mapping(src, (key,))[key]
    if not isinstance(items, list):
        raise src.error((key,), "expected a list")
    objs = _validate(src, items, (key,), tuple[cls, ...])  # type: ignore[valid-type]
    return _index(((obj, src, (key, i)) for i, obj in enumerate(objs)), noun=key[:-1])


def _models(path: Path) -> dict[str, _Entry]:
    """models.yaml: real models, and shrunk ones (`shrunk_of`) that take their real model's traits."""
    src = _parsed(path)
    items = _mapping(src, ("models",))["models"]
    if not isinstance(items, list):
        raise src.error(("models",), "expected a list")
    kinds = [shrunk.Shrunk if isinstance(item, dict) and "shrunk_of" in item else Model for item in items]
    objs = [_validate(src, item, ("models", i), kind) for i, (item, kind) in enumerate(zip(items, kinds, strict=True))]
    return shrunk.resolve(_index(((obj, src, ("models", i)) for i, obj in enumerate(objs)), noun="model"))


def _changes(folder: Path) -> dict[str, _Entry]:
    if not folder.is_dir():
        raise StackError(folder, None, "", "changes folder not found", hint="one YAML file per imported change")
    strays = sorted(p.name for p in folder.iterdir() if p.suffix in (".yml", ".json") or p.name.endswith(".yaml~"))
    if strays:
        raise StackError(
            folder / strays[0],
            None,
            "",
            "change files end in .yaml; this one would be ignored",
            hint=f"rename it to {Path(strays[0]).stem}.yaml",
        )
    entries = []
    for path in sorted(folder.glob("*.yaml")):
        src = _parsed(path)
        if not isinstance(src.data, dict):
            raise src.error((), "expected a mapping describing one imported change")
        provenance.refuse_fork_facts(src.data, src)
        entries.append((_validate(src, src.data, (), Change), src, ()))
    return _index(entries, noun="change")


def _index(entries: Iterable[_Entry], noun: str) -> dict[str, _Entry]:
    out: dict[str, _Entry] = {}
    for obj, src, loc in entries:
        if not _ID.match(obj.id):
            raise src.error((*loc, "id"), f"{noun} id {obj.id!r} may hold only letters, digits, '.', '_' and '-'")
        if obj.id in out:
            first = out[obj.id]
            raise src.error(
                (*loc, "id"),
                f"duplicate {noun} id {obj.id!r} (first at {first[1].path}:{first[1].line((*first[2], 'id'))})",
                hint="ids must be unique; rename one",
            )
        out[obj.id] = (obj, src, loc)
    return out


def _unknown(src: Source, loc: Loc, noun: str, value: str, known: Iterable[str]) -> StackError:
    return src.error(loc, f"unknown {noun} {value!r}", hint=f"known {noun}s: {', '.join(sorted(known))}")


def _check_targets(targets: dict[str, _Entry], backends: dict[str, _Entry]) -> None:
    fallbacks = [t for t, _, _ in targets.values() if t.detect.fallback]
    for target, src, loc in targets.values():
        for i, b in enumerate(target.backends):
            if b not in backends:
                raise _unknown(src, (*loc, "backends", i), "backend", b, backends)
            if target.family not in backends[b][0].platforms:
                raise src.error((*loc, "backends", i), f"backend {b} does not run on {target.family}")
        for i, tt in enumerate(target.triton_targets):
            if not _TRITON_TARGET.match(tt):
                raise src.error((*loc, "triton_targets", i), f"{tt!r} is not 'cuda:<sm>' or 'hip:gfx<id>'")
        _check_env(target.env, src, loc)
        for name in target.sessions:
            if not _SUITE.match(name):
                raise src.error((*loc, "session"), f"session name {name!r}: letters, digits and _ only")
    if len(fallbacks) != 1:
        _, src, loc = next(iter(targets.values()))
        raise src.error(loc, f"exactly one target needs detect.fallback: true; found {len(fallbacks)}")


def _check_env(env: dict[str, str], src: Source, loc: Loc) -> None:  # a target's or a model's: ci repro prints them
    for key in env:
        if not _ENV_KEY.match(key):
            raise src.error(
                (*loc, "env", key),
                f"{key!r} is not an environment variable name",
                hint="letters, digits and _, not starting with a digit",
            )


def _check_models(models: dict[str, _Entry], backends: dict[str, _Entry]) -> None:
    for model, src, loc in models.values():
        _check_env(model.env, src, loc)
        for i, b in enumerate(model.backends):
            if b not in backends:
                raise _unknown(src, (*loc, "backends", i), "backend", b, backends)
            if model.attention.layout not in backends[b][0].layouts:
                raise src.error((*loc, "backends", i), f"backend {b} does not serve {model.attention.layout} attention")
        for i, kv in enumerate(model.kv_cache_dtypes or ()):
            if not any(kv in backends[b][0].kv_cache_dtypes for b in model.backends):
                raise src.error(
                    (*loc, "kv_cache_dtypes", i), f"none of {model.id}'s backends takes kv_cache_dtype {kv}"
                )
        if model.weights == "dummy" and not model.config:
            raise src.error((*loc, "weights"), "dummy weights need a local 'config' directory")
        if model.weights == "hub" and not model.hf:
            raise src.error((*loc, "weights"), "hub weights need an 'hf' repository id")


def _check_tracks(tracks: dict[str, _Entry], backends: dict[str, _Entry]) -> None:
    for track, src, loc in tracks.values():
        if not _SUITE.match(track.suite):
            raise src.error(
                (*loc, "suite"),
                f"suite {track.suite!r} is not a folder name of suites/",
                hint="letters, digits and _ only (it names a pytest folder and nox sessions), e.g. sparse_mla",
            )
        for i, b in enumerate(track.requires.backend or ()):
            if b not in backends:
                raise _unknown(src, (*loc, "requires", "backend", i), "backend", b, backends)


def _check_changes(
    changes: dict[str, _Entry],
    tracks: dict[str, _Entry],
    models: dict[str, _Entry],
    backends: dict[str, _Entry],
    targets: dict[str, _Entry],
) -> None:
    kv_known = {kv for b, _, _ in backends.values() for kv in b.kv_cache_dtypes}
    in_suites = suite_names.names()
    for change, src, _ in changes.values():
        _check_tracked(change, src, in_suites)
        if change.track not in tracks:
            raise _unknown(src, ("track",), "track", change.track, tracks)
        track = tracks[change.track][0]
        seen: set[str] = set()
        for i, m in enumerate(change.models):
            if m not in models:
                raise _unknown(src, ("models", i), "model", m, models)
            if m in seen:
                raise src.error(("models", i), f"model {m!r} listed twice")
            if real := models[m][0].shrunk_of:
                raise src.error(
                    ("models", i),
                    f"model {m!r} shrinks {real!r}: it is planned wherever {real!r} is",
                    hint=f"list {real!r} instead",
                )
            seen.add(m)
            why = trait_mismatch(models[m][0], track)
            if why:
                raise src.error(
                    ("models", i),
                    f"model {m!r} is not eligible for track {track.id!r}: {why}",
                    hint="remove it, or correct the model's traits in models.yaml",
                )
        for axis in AXIS_NAMES:
            values = getattr(change.matrix, axis) or ()
            for i, value in enumerate(values):
                if value in values[:i]:
                    raise src.error(("matrix", axis, i), f"{axis} value {value!r} listed twice", hint="keep one")
        for i, kv in enumerate(change.matrix.kv_cache_dtype):
            if kv not in kv_known:
                raise src.error(("matrix", "kv_cache_dtype", i), f"no backend supports kv_cache_dtype {kv!r}")
        for target in change.waived_targets:
            if target not in targets:
                raise _unknown(src, ("waived_targets", target), "target", target, targets)
        ref = change.acceptance.tolerance.reference
        if ref.backend != "row" and ref.backend not in backends:
            raise _unknown(src, ("acceptance", "tolerance", "reference", "backend"), "backend", ref.backend, backends)
        if not change.acceptance.regression.tests:
            raise src.error(("acceptance", "regression", "tests"), "no focused regression test named")
        if not (change.acceptance.measurements.cold and change.acceptance.measurements.warm):
            raise src.error(("acceptance", "measurements"), "cold and warm measurements must both be named")
        pins.check(change, src, backends)
        provenance.check(change, src)


def _check_tracked(change: Change, src: Source, known: suite_names.Names) -> None:
    """The change's probe and engine options are ones the suites hold (suites/engine/tracked.py)."""
    if change.probe not in known.probes:
        raise src.error(
            ("probe",),
            f"unknown probe {change.probe!r}: suites/engine/tracked.py's PROBES has no such name",
            hint=f"name one of {', '.join(sorted(known.probes))}, or add one to PROBES in suites/engine/tracked.py",
        )
    if change.kind == "import" and change.probe == suite_names.NOTHING_IMPORTED:
        raise src.error(
            ("probe",),
            f"probe {change.probe!r} looks for nothing: an imported change's rows would read present on any vLLM",
            hint="name the probe that finds its code, or add one to PROBES in suites/engine/tracked.py",
        )
    if change.engine_options not in known.options:
        raise src.error(
            ("engine_options",),
            f"unknown engine options {change.engine_options!r}: suites/engine/tracked.py's OPTIONS has no such name",
            hint=f"name one of {', '.join(sorted(known.options))}, or add them to OPTIONS in suites/engine/tracked.py",
        )


def _check_history(src: Source, rows: tuple[HistoryRow, ...], models: dict[str, _Entry], backends: dict[str, _Entry]):
    seed_names = {m.seed_name for m, _, _ in models.values() if m.seed_name}
    for i, row in enumerate(rows):
        if row.model not in seed_names:
            raise _unknown(src, ("rows", i, "model"), "seed model name", row.model, seed_names)
        if row.backend not in backends:
            raise _unknown(src, ("rows", i, "backend"), "backend", row.backend, backends)
