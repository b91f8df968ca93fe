"""The bake warm-up hook for this suite (python -m harness.warmup)."""

from engine.warmup import warm

__all__ = ["warm"]
