"""The bake warm-up hook for this suite (python -m harness.warm_run)."""

from engine.gpu_warmup import warm, warm_group

__all__ = ["warm", "warm_group"]
