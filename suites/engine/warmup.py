"""Warm one GPU row: its engine configuration started once, one request served, engine stopped."""

from __future__ import annotations

from typing import Any

from engine import config, engines


def warm(row: Any) -> None:
    config.set_engine_env(runner=config.runner_for(row))
    engine = engines.start(config.llm_kwargs(row))
    try:
        engines.generate(engine, config.prompts(row), engines.greedy(config.MAX_TOKENS))
    finally:
        engines.stop(engine)
