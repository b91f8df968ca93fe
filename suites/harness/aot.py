"""Compile a kernel list ahead of time into the Triton cache, with the keys the runtime JIT computes.

Runs inside `docker build` (no GPU, no `ci/`): `python -m harness.aot bake LIST... --targets cuda:121,hip:gfx1151`.

Why warm-up through a fake driver rather than `triton.compile(ASTSource(...))`: a baked entry is only
found at run time if signature, constexprs, `str(attrs)` and options are exactly what the JIT builds
(every non-constexpr argument gets an attrs entry, ints equal to 1 become constexprs, HIP adds
`tt.pointer_range`). Letting `JITFunction.warmup` compute them gives identical hashes by construction;
a hand-written ASTSource gave different ones the moment one of these rules was missed.

The cache must be written at the runtime path (`TRITON_CACHE_DIR`): `__grp__*.json` stores absolute
paths, and for HIP the key hashes the absolute path of triton's bundled ocml/ockl bitcode.

`python -m harness.aot run LIST` goes through the same compile path in a fresh process: for baked
kernels every compile is a cache hit, which the JIT sentinel does not record.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MANIFEST = "/opt/stackgate/aot/manifest.json"
_DTYPES = {
    "fp32": "float32",
    "fp16": "float16",
    "bf16": "bfloat16",
    "fp64": "float64",
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "u8": "uint8",
    "u32": "uint32",
    "u64": "uint64",
    "i1": "int1",
    "u1": "int1",  # Triton 3.6 names bool pointers *u1
    "u16": "uint16",
    "fp8e4nv": "float8e4nv",
    "fp8e5": "float8e5",
}


def load_list(source: str) -> list[dict]:
    """A kernel list from a YAML file, or an inline YAML/JSON document starting with '{'."""
    import yaml

    doc = yaml.safe_load(source if source.lstrip().startswith("{") else Path(source).read_text())
    kernels = doc.get("kernels") if isinstance(doc, dict) else None
    if not isinstance(kernels, list):
        raise SystemExit(f"{source}: expected a mapping with a 'kernels' list")
    for i, k in enumerate(kernels):
        missing = {"name", "function", "signature"} - set(k)
        if missing:
            raise SystemExit(f"{source}: kernels[{i}] lacks {', '.join(sorted(missing))}")
    return kernels


def parse_target(text: str) -> Any:
    from triton.backends.compiler import GPUTarget

    backend, _, arch = text.partition(":")
    if backend not in ("cuda", "hip") or not arch:
        raise SystemExit(f"bad triton target {text!r}: expected cuda:<cc> or hip:gfx<id>")
    return GPUTarget(backend, int(arch) if backend == "cuda" else arch, 32)


class _FakeDriver:
    """Just enough of a Triton driver for `JITFunction.warmup` to compute keys and compile."""

    def __init__(self, target: Any, device: int) -> None:
        self.target, self.device = target, device

    def get_current_device(self) -> int:
        return self.device

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_current_target(self) -> Any:
        return self.target

    def is_active(self) -> bool:
        return True


def _stub_torch_if_absent() -> None:
    # HIP's specialisation (HIPBackend.is_within_2gb) imports torch before it looks at ptr_range.
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.modules["torch"] = types.SimpleNamespace(Tensor=type("Tensor", (), {}))  # type: ignore[assignment]


def _args(kernel: dict, values: dict) -> dict[str, Any]:
    """Every argument by name: a kernel's constexprs may sit between its runtime arguments."""
    import triton.language as tl
    from triton.runtime.jit import MockTensor

    class Tensor(MockTensor):  # data_ptr() == 0: 16-byte aligned; under 2 GiB like a real activation
        def ptr_range(self) -> int:
            return 1 << 20

    args: dict[str, Any] = {}
    for name, typ in kernel["signature"].items():
        if typ.startswith("*"):
            args[name] = Tensor(getattr(tl, _DTYPES.get(typ[1:], typ[1:])))
        elif name in values:
            args[name] = values[name]
        else:
            raise SystemExit(f"kernel {kernel['name']}: specialisation {values} gives no value for {name} ({typ})")
    constexprs = {k: _value(tl, v) for k, v in (kernel.get("constexprs") or {}).items()}
    return {**args, **constexprs}


def _value(tl: Any, value: Any) -> Any:
    """A recorded constexpr: dtypes are written as their name ("triton.language.bfloat16")."""
    if isinstance(value, str) and value.startswith("triton.language."):
        return getattr(tl, value.removeprefix("triton.language."))
    return value


def compile_list(kernels: list[dict], targets: Sequence[str]) -> list[dict]:
    """Warm every kernel x specialisation x target up; returns one record per compiled entry."""
    import triton

    _stub_torch_if_absent()
    out = []
    for device, text in enumerate(targets):
        # A distinct fake device per target: the JIT keeps one in-memory cache per device, with its target.
        triton.runtime.driver.set_active(_FakeDriver(parse_target(text), device))
        for kernel in kernels:
            module, _, attr = kernel["function"].partition(":")
            fn = getattr(importlib.import_module(module), attr)
            for values in kernel.get("specialisations") or [{}]:
                args = _args(kernel, values)
                t0 = time.perf_counter()
                stages = {"num_stages": kernel["num_stages"]} if "num_stages" in kernel else {}
                compiled = fn.warmup(grid=(1,), num_warps=kernel.get("num_warps", 4), **stages, **args)
                out.append(
                    {
                        "kernel": compiled.name,
                        "function": kernel["function"],
                        "target": text,
                        "specialisation": values,
                        "hash": compiled.hash,
                        "seconds": round(time.perf_counter() - t0, 3),
                    }
                )
                if compiled.name != kernel["name"]:
                    raise SystemExit(
                        f"{kernel['function']} compiled as {compiled.name!r}, list says {kernel['name']!r}"
                    )
    return out


DEFAULT_KERNEL_LIST = MANIFEST  # what the image baked: its manifest names the lists and targets


def load_baked(manifest: str = MANIFEST) -> list[tuple[str, str, bool]]:
    """Go through the compile path of every baked kernel again, in this process, and report for each
    (kernel, target) whether Triton found it in the cache. A miss is a compile the bake should have made. Once a
    process: Triton's in-memory cache then serves the kernels without the compile path, so a later row of a shared
    process (harness.shared) gets what its first row found."""
    if manifest in _loaded and os.environ.get("STACKGATE_SHARE_ENGINES") == "1":
        return _loaded[manifest]
    _loaded[manifest] = found = _load_baked(manifest)
    return found


_loaded: dict[str, list[tuple[str, str, bool]]] = {}


def _load_baked(manifest: str) -> list[tuple[str, str, bool]]:
    import triton

    doc = json.loads(Path(manifest).read_text())
    kernels = [k for source in doc["lists"] for k in load_list(source)]
    seen: list[tuple[str, bool]] = []
    previous = triton.knobs.compilation.listener

    def listener(*, src: Any, metadata: dict, metadata_group: Any, times: Any, cache_hit: bool) -> None:
        seen.append((str(metadata.get("name")), bool(cache_hit)))
        if previous is not None:  # the JIT sentinel, which records real compiles
            previous(src=src, metadata=metadata, metadata_group=metadata_group, times=times, cache_hit=cache_hit)

    triton.knobs.compilation.listener = listener
    try:
        records = compile_list(kernels, doc["targets"])
    finally:
        triton.knobs.compilation.listener = previous
    if len(seen) != len(records):
        raise RuntimeError(f"{len(records)} kernels went through the compile path but the listener saw {len(seen)}")
    return [(r["kernel"], r["target"], hit) for r, (_, hit) in zip(records, seen, strict=True)]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.aot")
    ap.add_argument("verb", choices=("bake", "run"), help="bake: compile and write the manifest; run: compile only")
    ap.add_argument("lists", nargs="+", help="kernel list files, or an inline document starting with '{'")
    ap.add_argument(
        "--targets",
        default=os.environ.get("STACKGATE_TRITON_TARGETS", ""),
        help="comma-separated triton targets (default: $STACKGATE_TRITON_TARGETS)",
    )
    ap.add_argument("--manifest", default=MANIFEST)
    args = ap.parse_args(argv)
    targets = [t for t in args.targets.split(",") if t]
    if not targets:
        raise SystemExit("no triton targets: pass --targets or set STACKGATE_TRITON_TARGETS")
    kernels = [k for source in args.lists for k in load_list(source)]
    records = compile_list(kernels, targets)
    if args.verb == "bake":
        Path(args.manifest).parent.mkdir(parents=True, exist_ok=True)
        doc = {
            "cache_dir": os.environ.get("TRITON_CACHE_DIR", ""),
            "targets": targets,
            "lists": [str(Path(s).resolve()) for s in args.lists if not s.lstrip().startswith("{")],
            # without the compile times: the image holds this file, and the same bake must give the same bytes
            "entries": [{k: v for k, v in r.items() if k != "seconds"} for r in records],
        }
        Path(args.manifest).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    json.dump(records, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
