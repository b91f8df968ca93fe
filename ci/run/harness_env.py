"""The environment of a harness session on this host (`ci run --host`, `ci main --host`, the host bake): the target's
env, every JIT cache in the target's runtime root, the suites and the startup hooks on the path, and, once per run,
those caches made ready (the artefact installed, or the AOT bake run)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ci import contract
from ci import engine as container
from ci.run import baked_rows, caches, host_aot
from ci.run.harness_command import DEFAULT_SUITES, ENV_MODEL_CACHE, STARTUP, model_cache
from ci.stack import plan

if TYPE_CHECKING:
    from ci.run.run_spec import RunSpec


def rows_env(spec: RunSpec) -> dict[str, str]:
    """What differs between the suites of one run in the harness's environment: its rows.json and JIT log."""
    return {contract.ENV_ROWS: str(spec.rows_json), contract.ENV_JIT_LOG: str(spec.out / "jit-events.jsonl")}


def host_env(spec: RunSpec) -> dict[str, str]:
    env = container.without_jit_refusal({**os.environ, **spec.target.env})
    env.update(container.GPU_ENV)
    env.update(caches.env(spec.target))  # every JIT cache in the target's root, at the paths its bake used
    path = [str(STARTUP), str(DEFAULT_SUITES), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in path if p)
    env.update(rows_env(spec))
    cache = model_cache()
    if cache is not None:
        env[ENV_MODEL_CACHE] = str(cache)
    return env


def host_session(spec: RunSpec, rows: Sequence[plan.Row] | None = None) -> dict[str, str]:
    """The environment of the harness on this host, its JIT caches made ready first (the artefact installed, or
    the AOT bake run): once per `ci run`, however many sessions run its rows (`rows`: all of them, where the run
    holds more specs than `spec`)."""
    env = host_env(spec)
    if spec.unbaked:
        env["STACKGATE_CACHES_FROM"] = caches.unbaked(spec.target, keep=spec.keep_caches)
    else:
        came = ""
        if spec.caches is not None:
            installed = caches.install(spec.target, spec.caches, env)
            env.update(installed.env)
            came = installed.came
            if note := baked_rows.unreached(spec.rows if rows is None else rows, installed.rows):
                print(note, flush=True)
        baked = host_aot.bake(spec.target, env, DEFAULT_SUITES)
        env.update(baked)
        # no artefact: "aot" only where the bake gave the rows a cache; else the root holds what earlier runs left
        env["STACKGATE_CACHES_FROM"] = came or ("aot" if baked else "as found (no AOT bake)")
    return env
