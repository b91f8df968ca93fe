"""Loads the JIT sentinel at every interpreter start on a bare host (PYTHONPATH=suites/harness/startup:suites).

The images do this with a .pth file in the venv; here `python -m ci run --host` (and `ci repro`'s host
line) put this directory first on PYTHONPATH, so EngineCore and worker processes load it too. Where no
sentinel is installed nothing happens, and the harness records the JIT properties as absent.
"""

try:
    import stackgate_jit_sentinel as _sentinel
except ImportError:
    try:
        from harness import jit_sentinel as _sentinel
    except ImportError:
        _sentinel = None
if _sentinel is not None and hasattr(_sentinel, "install"):
    _sentinel.install()
