"""The bake warm-up hook for this suite (python -m harness.warmup)."""

from engine.warmup import warm, warm_group

__all__ = ["warm", "warm_group"]
