"""Why a kernel the bake compiled was compiled again: the same specialisation under another cache key.

The bakes log their compiles next to the caches they fill (`aot-bake-jit.jsonl` from the AOT bake,
`warm-bake-jit.jsonl` from the warm run, in the caches root that holds `triton/`), each with the parts of
its key (`jit_sentinel._key_parts`). A run's compile of a specialisation the bake compiled too, under
another key, differs from it in one of those parts: this names which, so a refused row says why the
artefact did not serve it rather than only that it did not.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

BAKE_LOGS = ("aot-bake-jit.jsonl", "warm-bake-jit.jsonl")
# what makes two compiles "the same specialisation": everything Triton keys on but the toolchain and options
_SPEC = ("function", "signature", "constants", "divisible_by_16", "num_warps", "num_stages", "target")


def caches_root() -> Path | None:
    """The root the bake filled: the folder above Triton's cache, where the bake logs lie."""
    triton = os.environ.get("TRITON_CACHE_DIR")
    return Path(triton).parent if triton else None


# read when the harness loads, before vLLM runs in this process: vLLM's inductor adaptor points
# $TRITON_CACHE_DIR into its own compile cache once an engine starts (compilation/compiler_interface.py)
_ROOT_AT_START = caches_root()


def baked(root: Path | None = None) -> list[dict]:
    """Every compile the bakes of this root logged (none where no bake log is there)."""
    top = root or _ROOT_AT_START
    events: list[dict] = []
    for name in BAKE_LOGS if top else ():
        path = top / name
        if path.is_file():
            events += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return events


def _spec(event: dict) -> str:
    return json.dumps({k: event.get(k) for k in _SPEC}, sort_keys=True, default=str)


def _moved(here: dict, bake: dict, keys: Iterable[str] | None = None, label: str = "") -> list[str]:
    """'<label>key <bake's value> in the bake, <this run's> here' for each key (default: all) whose values differ."""
    names = sorted({*here, *bake}) if keys is None else keys
    return [
        f"{label}{k} {bake.get(k)!r} in the bake, {here.get(k)!r} here" for k in names if here.get(k) != bake.get(k)
    ]


def differing(here: dict, bake: dict) -> list[str]:
    """The key parts in which a compile here differs from the bake's compile of the same specialisation."""
    a, b = here.get("key_parts") or {}, bake.get("key_parts") or {}
    if not a or not b:
        return ["its key parts were not recorded on both sides"]
    out = _moved(a, b, ("triton", "backend", "fn", "src"))
    out += _moved(a.get("options") or {}, b.get("options") or {}, label="option ")
    return out or ["every recorded part is equal (the difference is in what Triton hashes and the log does not)"]


def explain(compiles: Iterable[dict], bake: Iterable[dict]) -> list[str]:
    """One line per kernel compiled here whose specialisation the bake also compiled."""
    by_spec: dict[str, list[dict]] = {}
    for event in bake:
        by_spec.setdefault(_spec(event), []).append(event)
    lines: dict[str, None] = {}
    for event in compiles:
        same = by_spec.get(_spec(event))
        if not same:
            continue  # a specialisation the bake never reached: nothing to compare
        name, key = event.get("kernel", "?"), str(event.get("hash", ""))[:10]
        if any(b.get("hash") == event.get("hash") for b in same):
            lines[f"{name}: the bake made key {key} too, yet it was not in the cache here"] = None
        else:
            parts = "; ".join(differing(event, same[0]))
            made = str(same[0].get("hash", ""))[:10]
            lines[f"{name}: baked under key {made}, compiled here under {key}: {parts}"] = None
    return list(lines)


# --- vLLM's compile cache: a graph compiled again under a new cache directory ----------------------------
# vLLM names each compiled-graph cache directory by the hash of four factors and writes them beside it
# (vllm/compilation/backends.py: torch_compile_cache/<hash>/rank_<r>_<dp>/<prefix>/cache_key_factors.json):
# its env vars, the engine config's hash, the compiler's and the traced code's.
FACTORS = "cache_key_factors.json"


def _factors(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _factor_diff(here: dict, bake: dict) -> list[str]:
    return _moved(here, bake, ("config_hash", "compiler_hash", "code_hash")) + _moved(
        here.get("env") or {}, bake.get("env") or {}, label="env "
    )


def explain_compile_cache(new_files: Iterable[str]) -> list[str]:
    """One line per compiled-graph cache directory this run created: the baked directory of the same code
    and prefix nearest to it, and the factors in which the two differ."""
    new = {str(f) for f in new_files}
    lines = []
    for made in sorted(Path(f) for f in new if Path(f).name == FACTORS):
        here, prefix, top = _factors(made), made.parent.name, made.parents[3]
        baked_dirs = [p for p in top.glob(f"*/*/{prefix}/{FACTORS}") if str(p) not in new]
        where = f"{made.parents[2].name}/{prefix}"
        if not baked_dirs:
            lines.append(f"vLLM compile cache {where}: the bake compiled no {prefix} graph")
            continue
        diffs = min(((_factor_diff(here, _factors(p)), p.parents[2].name) for p in baked_dirs), key=lambda d: len(d[0]))
        lines.append(
            f"vLLM compile cache {where}: nearest baked {diffs[1]}/{prefix} differs in "
            + ("; ".join(diffs[0]) or "nothing recorded")
        )
    return lines
