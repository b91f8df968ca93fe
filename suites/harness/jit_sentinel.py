"""Record every real Triton compile in every Python process of an image.

Installed in images as the top-level module `stackgate_jit_sentinel`, loaded by a `.pth` file in the
venv's site-packages so that it runs at the start of every interpreter, children included (vLLM runs
its EngineCore and workers in other processes). A venv `sitecustomize.py` is not used because Debian's
`/usr/lib/python3.11/sitecustomize.py` shadows it.

Standard library only, and it imports neither `ci` nor the rest of `harness`: it must load before
anything else. It does not import triton at start-up (that costs 0.13-0.33 s per process); a meta-path
hook installs Triton's compilation listener the moment triton itself is imported.

Each real compile (`cache_hit=False`) becomes one JSON line appended to `$STACKGATE_JIT_LOG`:
`{"pid", "kernel", "target", "hash", "cache_hit", "time_s", "wall"}`. The file is opened with O_APPEND
and each line is written with a single write(), so lines from concurrent processes do not interleave.

Triton's listener does not fire when a process's in-memory kernel cache serves a launch, nor for
compilers other than Triton (Inductor C++, FlashInfer, AITER, MIOpen, the CUDA driver's PTX JIT):
`harness.jit_log` diffs the cache directories as a backstop across all of them, and reads the log.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

DEFAULT_LOG = "/var/log/stackgate/jit.jsonl"
# Cache directories a JIT writes into; the env var wins, the value here is the default where unset.
CACHE_ENV = {
    "TRITON_CACHE_DIR": "~/.triton/cache",
    "VLLM_CACHE_ROOT": "~/.cache/vllm",
    "TORCHINDUCTOR_CACHE_DIR": "/tmp/torchinductor_{user}",
    "FLASHINFER_WORKSPACE_BASE": "~/.cache/flashinfer",
    "AITER_JIT_DIR": "~/.aiter",
    "MIOPEN_USER_DB_PATH": "~/.cache/miopen",
    "CUDA_CACHE_PATH": "~/.nv/ComputeCache",
    "NUMBA_CACHE_DIR": "~/.cache/numba",
    "TILELANG_CACHE_DIR": "~/.tilelang/cache",  # tilelang/env.py
    "CUTE_DSL_CACHE_DIR": "/tmp/{user}/cutlass_python_cache",  # cutlass/base_dsl/cache_helpers.py (under $TMPDIR)
}

_MARK = "_stackgate_jit_sentinel"


def log_path() -> str:
    """The JSON-lines file this process appends compiles to."""
    return os.environ.get("STACKGATE_JIT_LOG") or DEFAULT_LOG  # contract.ENV_JIT_LOG (it loads before harness)


def _target_name(target: Any) -> str:
    backend, arch = getattr(target, "backend", None), getattr(target, "arch", None)
    return f"{backend}:{arch}" if backend is not None else str(target)


def _record(event: dict[str, Any]) -> None:
    import json  # only paid when a compile actually happens

    path = log_path()
    line = (json.dumps(event, sort_keys=True) + "\n").encode()
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    except OSError as exc:  # never break the program being watched; say why on stderr
        sys.stderr.write(f"stackgate_jit_sentinel: cannot write {path}: {exc}\n")
        return
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def _key_inputs(src: Any, metadata: dict) -> dict[str, Any]:
    """What reproduces the compile's cache key (`ci kernels record` turns it into a kernel list): the
    function, every argument's type, the constexpr values, the specialisation attributes (divisibility
    by 16 per argument; ints equal to 1 become constexprs), warps and stages. Empty where the source is
    not a @triton.jit function (IR given directly, inductor's generated modules still have one)."""
    try:
        fn = src.fn
        names = list(fn.arg_names)
        return {
            "function": f"{fn.fn.__module__}:{fn.fn.__qualname__}",
            "signature": [[k, str(v)] for k, v in src.signature.items()],  # in argument order
            "declared_constexprs": [names[i] for i in fn.constexprs],
            "constants": {names[k[0]]: _plain(v) for k, v in src.constants.items() if len(k) == 1},
            "divisible_by_16": sorted(
                names[k[0]]
                for k, v in src.attrs.items()
                if len(k) == 1 and ["tt.divisibility", 16] in [list(a) for a in v]
            ),
            "num_warps": metadata.get("num_warps"),
            "num_stages": metadata.get("num_stages"),
        }
    except Exception:  # never break the program being watched: the event is still recorded, without these
        return {}


def _key_parts(src: Any, metadata: dict) -> dict[str, Any]:
    """The parts Triton hashes into the cache key besides the specialisation: the function's own key (its
    source and what it depends on), the source's key, and every compile option and cache-invalidating
    environment variable (the metadata carries both). Two compiles of one specialisation under different
    keys differ in one of these."""
    try:
        options = {
            k: _plain(v)
            for k, v in sorted(metadata.items())
            if k not in _NOT_OPTIONS and not isinstance(v, (bytes, bytearray))
        }
        parts = {"fn": str(src.fn.cache_key)[:16], "src": str(src.hash())[:16], "options": options}
    except Exception:  # never break the program being watched
        return {}
    return {**parts, **_toolchain(metadata.get("target"))}


_TOOLCHAINS: dict[str, dict[str, str]] = {}


def _toolchain(target: Any) -> dict[str, str]:
    """The key's two other parts, once per target and process: Triton's own key (its compiler, backends and
    libtriton, hashed) and the backend's (the ptxas or LLVM version and the arch)."""
    name = _target_name(target)
    if name not in _TOOLCHAINS:
        try:
            import hashlib

            from triton.compiler.compiler import make_backend
            from triton.runtime.cache import triton_key

            _TOOLCHAINS[name] = {
                "triton": hashlib.sha256(triton_key().encode()).hexdigest()[:16],
                "backend": str(make_backend(target).hash()),
            }
        except Exception:  # an older triton, or a target it cannot make a backend for
            _TOOLCHAINS[name] = {}
    return _TOOLCHAINS[name]


# what the compiled kernel's metadata holds beyond the options: results of the compile, not its inputs
_NOT_OPTIONS = {
    "hash",
    "name",
    "target",
    "shared",
    "tmem_size",
    "global_scratch_size",
    "global_scratch_align",
    "profile_scratch_size",
    "profile_scratch_align",
    "num_ctas_used",
    "tensordesc_meta",
    "triton_version",
}


def _plain(value: Any) -> Any:
    return value if isinstance(value, (bool, int, float, str)) or value is None else repr(value)


def _make_listener(previous: Any) -> Any:
    def listener(*, src: Any, metadata: dict, metadata_group: dict, times: Any, cache_hit: bool) -> None:
        if not cache_hit:
            _record(
                {
                    "pid": os.getpid(),
                    "kernel": metadata.get("name") or getattr(src, "name", "?"),
                    "target": _target_name(metadata.get("target")),
                    "hash": metadata.get("hash", ""),
                    "cache_hit": False,
                    "time_s": round(getattr(times, "total", 0) / 1e6, 6),  # CompileTimes are microseconds
                    "wall": time.time(),
                    "row": os.environ.get("STACKGATE_ROW_ID", ""),
                    **_key_inputs(src, metadata),
                    "key_parts": _key_parts(src, metadata),
                }
            )
        if previous is not None:  # keep a listener someone else set (vLLM's jit monitor, a test)
            previous(src=src, metadata=metadata, metadata_group=metadata_group, times=times, cache_hit=cache_hit)

    setattr(listener, _MARK, True)
    return listener


def _attach(triton_module: Any) -> None:
    compilation = triton_module.knobs.compilation
    current = compilation.listener
    if not getattr(current, _MARK, False):
        compilation.listener = _make_listener(current)


class _TritonImportHook(importlib.abc.MetaPathFinder):
    """Finds `triton` through the normal finders, then attaches the listener once it has executed."""

    def find_spec(self, name: str, path: Sequence[str] | None, target: Any = None) -> Any:
        if name != "triton":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _AttachingLoader(spec.loader)
                return spec
            if spec is not None:
                return spec
        return None


class _AttachingLoader(importlib.abc.Loader):
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        return self._inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._inner.exec_module(module)
        try:
            _attach(module)
        except Exception as exc:  # a triton without knobs.compilation: say so, do not break the import
            sys.stderr.write(f"stackgate_jit_sentinel: cannot register the Triton listener: {exc!r}\n")

    def __getattr__(self, name: str) -> Any:  # get_resource_reader, is_package, ... of the real loader
        return getattr(self._inner, name)


def pin_ptxas() -> str | None:
    """Point $TRITON_PTXAS_PATH at Triton's own ptxas where nothing set it, before any kernel compiles.

    Triton hashes the ptxas version into every cache key, and reads it once per process (at the first
    compile). torch's inductor sets $TRITON_PTXAS_PATH to torch's own ptxas (CUDA 13.0 for torch 2.11+cu130)
    the first time it compiles or reloads a Triton kernel, unless it is set already. So a process that
    compiles a kernel of its own first keys everything with Triton's ptxas (12.8), one that reloads a
    cached inductor graph first keys everything with torch's: the same kernel, two keys, and a bake made
    one way is missed by a run that starts the other way (seen on the H200 with DeepSeek-V3.2 rows).
    Pinned at interpreter start, every process of a bake and of its runs keys alike. Returns the path set."""
    if os.environ.get("TRITON_PTXAS_PATH"):
        return None
    import importlib.util

    try:
        spec = importlib.util.find_spec("triton")  # the package's location, without importing it
    except (ImportError, ValueError):
        return None
    for top in (spec.submodule_search_locations or []) if spec else []:
        ptxas = os.path.join(top, "backends", "nvidia", "bin", "ptxas")
        if os.path.isfile(ptxas) and os.access(ptxas, os.X_OK):
            os.environ["TRITON_PTXAS_PATH"] = ptxas
            return ptxas
    return None


def install() -> None:
    """Register the listener now if triton is loaded, else when it is first imported; pin Triton's ptxas
    (`pin_ptxas`); let a hung row's runner ask this process for its stacks (`dump_stacks_on_signal`). Idempotent."""
    pin_ptxas()
    dump_stacks_on_signal()
    if "triton" in sys.modules and hasattr(sys.modules["triton"], "knobs"):
        _attach(sys.modules["triton"])
        return
    if not any(isinstance(f, _TritonImportHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _TritonImportHook())


def dump_stacks_on_signal() -> None:
    """On SIGUSR1 (harness.isolate.STACK_DUMP_SIGNAL) write every thread's Python stack to stderr, which a row's
    processes share with its log; the process goes on (a handler it sets for SIGUSR1 later takes the signal)."""
    import contextlib
    import faulthandler
    import signal

    with contextlib.suppress(AttributeError, ValueError, OSError, RuntimeError):  # no stderr, or no SIGUSR1 here
        faulthandler.register(signal.SIGUSR1, file=sys.__stderr__, all_threads=True)


def installed() -> bool:
    """Whether this process records compiles: the import hook waits for triton, or the listener is attached."""
    triton = sys.modules.get("triton")
    if triton is not None and hasattr(triton, "knobs"):
        return bool(getattr(triton.knobs.compilation.listener, _MARK, False))
    return any(isinstance(f, _TritonImportHook) for f in sys.meta_path)
