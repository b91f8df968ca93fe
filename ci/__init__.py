"""stackgate: CI that produces evidence for each upstream vLLM change a fork imports."""

__version__ = "0.1.0"
