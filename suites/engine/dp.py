"""Data-parallel rows offline: one process per rank, as vLLM 0.26.0 supports it.

`LLM(data_parallel_size=N)` in one process is refused (vllm/entrypoints/llm.py) and the VLLM_DP_* route refuses
dense models (vllm/config/parallel.py). The external launcher takes any model: each of the tp x dp ranks is
its own process with torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), builds
`LLM(..., data_parallel_size=dp, distributed_executor_backend="external_launcher")`, and the ranks of one DP
group share its prompts while DP groups step in lock-step (dummy batches where one has nothing to do: the path
the seed table saw hang). Every DP rank gets the row's batch of its own prompts.

`launch` starts the ranks (children of the row's process: a row timeout kills them with it), waits, and stops
the others as soon as one rank fails, raising with that rank's cause. `python -m engine.dp ROW_ID OUT` is one
rank: it writes its tokens, timings, spec-decode counters and its worker's graph counts to OUT.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

WARM_REPEATS = 3


class RankFailed(Exception):
    def __init__(self, rank: int, code: int, cause: str) -> None:
        super().__init__(f"DP rank process {rank} exited {code}: {cause or 'no cause found in its log'}")
        self.cause = cause


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rank_env(rank: int, world: int, port: int) -> dict[str, str]:
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(world),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",  # the external launcher's requirement: deterministic scheduling
    }


def launch(row: Any, *, reference: bool, poll_s: float = 1.0) -> list[dict[str, Any]]:
    """Run the row's ranks to the end; their results in rank order. Each rank's log is copied to stdout."""
    world = int(row["tp"]) * int(row["dp"])
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="stackgate-dp-") as tmp:
        outs = [Path(tmp) / f"rank{r}.json" for r in range(world)]
        logs = [Path(tmp) / f"rank{r}.log" for r in range(world)]
        procs = []
        for r in range(world):
            argv = [sys.executable, "-m", "engine.dp", row.id, str(outs[r]), *(["--reference"] if reference else [])]
            with logs[r].open("wb") as log:
                procs.append(
                    subprocess.Popen(
                        argv, env={**os.environ, **rank_env(r, world, port)}, stdout=log, stderr=subprocess.STDOUT
                    )
                )
        failed = _wait(procs, poll_s)
        for r, log in enumerate(logs):
            print(f"--- DP rank process {r} ({'reference' if reference else 'speculative'}) ---")
            print(log.read_text(errors="replace"), flush=True)
        if failed is not None:
            from harness.causes import cause

            raise RankFailed(failed, procs[failed].returncode, cause(logs[failed].read_text(errors="replace")))
        return [json.loads(o.read_text()) for o in outs]


def _wait(procs: list[subprocess.Popen], poll_s: float) -> int | None:
    """Wait for every rank; the first that fails stops the rest (they would wait on it forever)."""
    while True:
        codes = [p.poll() for p in procs]
        bad = next((r for r, c in enumerate(codes) if c not in (None, 0)), None)
        if bad is not None:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            return bad
        if all(c == 0 for c in codes):
            return None
        time.sleep(poll_s)


def _rank(row_id: str, out: Path, reference: bool) -> None:
    from harness.rows import ENV_ROWS
    from harness.rows import load as load_rows

    from engine import config, in_process, workers

    doc = load_rows(os.environ[ENV_ROWS])
    row = next(r for r in doc.rows if r.id == row_id)
    dp_rank = int(os.environ["RANK"]) // int(row["tp"])
    kwargs = config.llm_kwargs(row, **({"speculative_config": None} if reference else {}))
    engine = in_process.start(kwargs)
    prompts = config.prompts(row, salt=f"dp{dp_rank}")
    params = in_process.greedy(config.MAX_TOKENS)
    with workers.graph_counts(engine.llm) as graphs:
        before = in_process.spec_stats(engine)
        cold_ms, outputs = in_process.timed_ms(engine, prompts, params)
        warm_ms = [in_process.timed_ms(engine, prompts, params)[0] for _ in range(WARM_REPEATS)]
        after = in_process.spec_stats(engine)
    result = {
        "rank": int(os.environ["RANK"]),
        "dp_rank": dp_rank,
        "ready_s": engine.ready_s,
        "cold_ms": cold_ms,
        "warm_ms": warm_ms,
        "tokens": in_process.token_ids(outputs),
        "spec_before": before,
        "spec_after": after,
        "graphs": graphs.per_worker,
    }
    out.write_text(json.dumps(result))
    sys.stdout.flush()
    # Done: every rank ran the same requests, so none waits on this one. Leave without the distributed teardown,
    # which can block on ranks that have already gone; the process's exit frees its GPU memory.
    os._exit(0)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="one rank of a data-parallel row (started by engine.dp.launch)")
    p.add_argument("row_id")
    p.add_argument("out", type=Path)
    p.add_argument("--reference", action="store_true", help="without speculative decoding")
    a = p.parse_args()
    _rank(a.row_id, a.out, a.reference)
