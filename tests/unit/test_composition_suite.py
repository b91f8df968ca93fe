"""The composition suite's CPU-provable parts: a row's LLM(...) arguments for TP, DP, EP and DCP as vLLM
0.26.0 names them; graph counts gathered from every worker process through collective_rpc; DP rank processes
(a failing rank stops the others and names its cause); the crash-cause line read from a log."""

from __future__ import annotations

import multiprocessing
import pickle
import sys
import textwrap
from pathlib import Path

import pytest
from support.paths import SUITES
from test_gpu_suites_without_gpus import _row

from ci.stack import loader as stack


def test_composition_rows_become_vllm_arguments(engine_pkg):
    from engine import config

    st = stack.load()
    tp2 = config.llm_kwargs(_row(st, "composition", "tiny-llama-eagle", tp=2, backend="TRITON_ATTN"))
    assert tp2["tensor_parallel_size"] == 2 and tp2["attention_config"] == {"backend": "TRITON_ATTN"}
    assert "data_parallel_size" not in tp2 and "distributed_executor_backend" not in tp2
    assert tp2["speculative_config"]["method"] == "eagle" and tp2["speculative_config"]["num_speculative_tokens"] == 3
    dp2 = config.llm_kwargs(_row(st, "composition", "tiny-llama-eagle", dp=2, cudagraph_mode="PIECEWISE"))
    # offline DP: one process per rank under the external launcher (LLM refuses data_parallel_size > 1 otherwise)
    assert dp2["data_parallel_size"] == 2 and dp2["distributed_executor_backend"] == "external_launcher"
    assert dp2["tensor_parallel_size"] == 1 and dp2["compilation_config"]["cudagraph_mode"] == "PIECEWISE"
    dcp = config.llm_kwargs(_row(st, "composition", "tiny-deepseek-v32-mtp", tp=2, dcp=2))
    assert dcp["decode_context_parallel_size"] == 2 and dcp["kv_cache_dtype"] == "fp8_ds_mla"
    ep = config.llm_kwargs(_row(st, "composition", "tiny-deepseek-v32-mtp", dp=8, ep=True))
    assert ep["enable_expert_parallel"] is True and ep["data_parallel_size"] == 8
    # the 1-GPU rows of the other changes pass no DP arguments at all
    one = config.llm_kwargs(_row(st, "48804", "tiny-llama-eagle", target="cuda-sm90", backend="FLASH_ATTN", batch=1))
    assert "data_parallel_size" not in one and one["tensor_parallel_size"] == 1
    # several GPUs: no FlashInfer all-reduce fusion (a JIT module; its default backend allocates multicast memory)
    assert (
        tp2["compilation_config"]["pass_config"]
        == dp2["compilation_config"]["pass_config"]
        == {"fuse_allreduce_rms": False}
    )
    assert "pass_config" not in one["compilation_config"]
    # every row: no prefix cache, so a repeated request prefills as the first one did (warm samples do equal work)
    assert tp2["enable_prefix_caching"] is one["enable_prefix_caching"] is False


# --- graph counts from every worker, through a collective_rpc that works as vLLM's multiproc executor does ---

FAKE_TORCH = {
    "torch/__init__.py": "from . import cuda\n",
    "torch/cuda.py": "class CUDAGraph:\n    def replay(self):\n        pass\n\n"
    "    def capture_begin(self):\n        pass\n",
}


def _worker_loop(conn, rank: int) -> None:
    """One worker process: runs pickled callables on its worker object, or replays graphs when told."""
    import torch

    worker = type("Worker", (), {"rank": rank})()
    while True:
        kind, payload = conn.recv()
        if kind == "stop":
            return
        if kind == "work":  # a decode step: graphs replayed (and, on rank 1, one captured late)
            for _ in range(payload + rank):
                torch.cuda.CUDAGraph().replay()
            if rank == 1:
                torch.cuda.CUDAGraph().capture_begin()
            conn.send(None)
        else:
            conn.send(pickle.loads(payload)(worker))


class FakeLLM:
    """collective_rpc as vLLM's multiproc executor: the callable pickled, run in each worker process (vLLM uses
    cloudpickle, which pickles a function of an importable module by reference, as pickle does)."""

    def __init__(self, workers: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conns, self.procs = [], []
        for rank in range(workers):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_worker_loop, args=(child, rank), daemon=True)
            proc.start()
            self.conns.append(parent)
            self.procs.append(proc)

    def collective_rpc(self, method):
        blob = pickle.dumps(method)
        for c in self.conns:
            c.send(("rpc", blob))
        return [c.recv() for c in self.conns]

    def step(self, replays: int) -> None:
        for c in self.conns:
            c.send(("work", replays))
        for c in self.conns:
            c.recv()

    def close(self) -> None:
        for c, p in zip(self.conns, self.procs, strict=True):
            c.send(("stop", None))
            p.join(10)


@pytest.fixture
def fake_torch(tmp_path, monkeypatch):
    for rel, text in FAKE_TORCH.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))  # spawned workers get this sys.path too
    monkeypatch.delitem(sys.modules, "torch", raising=False)


def test_graph_counts_come_from_every_worker_process(engine_pkg, fake_torch, monkeypatch):
    from engine import workers

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent))  # this module, for the spawned workers
    llm = FakeLLM(2)
    try:
        llm.step(5)  # before counting: start-up captures and replays are not the requests'
        with workers.graph_counts(llm) as graphs:
            llm.step(3)
            llm.step(3)
    finally:
        llm.close()
    assert graphs.workers == 2
    assert sorted(w["rank"] for w in graphs.per_worker) == [0, 1]
    assert len({w["pid"] for w in graphs.per_worker}) == 2  # two processes, not this one twice
    assert graphs.total("replays") == 3 + 3 + 4 + 4
    assert graphs.total("captures") == 2  # rank 1's late captures: the test process alone would see 0


def test_a_worker_that_cannot_count_makes_the_total_unknown_not_zero(engine_pkg):
    from engine import workers

    g = workers.WorkerGraphs([{"pid": 1, "rank": 0, "replays": 4}, {"pid": 2, "rank": 1, "replays": None}])
    assert g.total("replays") is None and g.total("captures") is None and g.workers == 2


# --- DP ranks --------------------------------------------------------------------------------------------------

RANK_SCRIPT = """
import json, os, sys, time
rank = int(os.environ["RANK"])
assert os.environ["WORLD_SIZE"] == "2" and os.environ["MASTER_ADDR"] == "127.0.0.1" and os.environ["MASTER_PORT"]
assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
mode = os.environ["FAKE_RANK_MODE"]
if mode == "crash" and rank == 1:
    print("RuntimeError: CUDA error: an illegal memory access was encountered", flush=True)
    sys.exit(1)
if mode == "crash":
    time.sleep(600)  # rank 0 waits on rank 1 forever, as a collective would
json.dump({"rank": rank, "tokens": [[rank]]}, open(sys.argv[2], "w"))
"""


@pytest.fixture
def fake_ranks(engine_pkg, tmp_path, monkeypatch):
    """`python -m engine.dp` replaced by a script that checks its torchrun variables."""
    from engine import dp

    script = tmp_path / "rank.py"
    script.write_text(textwrap.dedent(RANK_SCRIPT))
    real = dp.subprocess.Popen
    monkeypatch.setattr(dp.subprocess, "Popen", lambda argv, **kw: real([sys.executable, str(script), *argv[3:]], **kw))
    return dp


def _row_stub(tp: int, dp: int):
    return type("R", (), {"id": "composition.cuda-sm90.tiny-llama-eagle.c9fe9121",
                          "__getitem__": lambda self, k: {"tp": tp, "dp": dp}[k]})()  # fmt: skip


def test_dp_ranks_run_as_torchrun_would_start_them(fake_ranks, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_RANK_MODE", "ok")
    results = fake_ranks.launch(_row_stub(1, 2), reference=False, poll_s=0.05)
    assert [r["rank"] for r in results] == [0, 1]
    assert "--- DP rank process 1 (speculative) ---" in capsys.readouterr().out


def test_a_crashed_rank_stops_the_others_and_names_its_cause(fake_ranks, monkeypatch):
    import time

    monkeypatch.setenv("FAKE_RANK_MODE", "crash")
    t0 = time.monotonic()
    with pytest.raises(fake_ranks.RankFailed) as info:
        fake_ranks.launch(_row_stub(1, 2), reference=True, poll_s=0.05)
    assert time.monotonic() - t0 < 60  # rank 0 was stopped, not waited for
    assert info.value.cause.startswith("illegal memory access: RuntimeError: CUDA error: an illegal memory access")
    assert "DP rank process 1 exited 1" in str(info.value)


def test_the_crash_cause_prefers_the_illegal_memory_access(engine_pkg):
    from harness.causes import cause

    log = "INFO ready\nAssertionError: should_attempt_dp_padding == should_dp_pad\n"
    assert cause(log) == "assertion: AssertionError: should_attempt_dp_padding == should_dp_pad"
    assert cause(log + "CUDA error: an illegal memory access was encountered\n").startswith("illegal memory access")
    assert cause("INFO all good\n") == ""


def test_a_hung_rows_processes_say_where_each_waited():
    from harness.causes import hang_sites

    dump = """INFO engine starting
Thread 0x00007f01 (most recent call first):
  File "/usr/lib/python3.12/threading.py", line 355 in wait
Current thread 0x00007f02 (most recent call first):
  File "/usr/lib/python3.12/selectors.py", line 415 in select
  File "/venv/lib/python3.12/site-packages/vllm/v1/executor/multiproc_executor.py", line 394 in get_response
  File "/work/suites/composition/test_composition.py", line 24 in _one_engine
(Worker_TP1 pid=7) INFO a log line between two dumps
Current thread 0xCurrent thread 0x00007f03 (most recent call first):
  File "/venv/lib/python3.12/site-packages/torch/distributed/distributed_c10d.py", line 4800 in barrier
Current thread 0x00007f04 (most recent call first):
  File "/venv/lib/python3.12/site-packages/torch/distributed/distributed_c10d.py", line 4800 in barrier
"""
    assert hang_sites(dump) == [
        # the stdlib wait under it says little; the suites' frame under it says what the test was doing
        "vllm/v1/executor/multiproc_executor.py:394 get_response <- composition/test_composition.py:24 _one_engine",
        "torch/distributed/distributed_c10d.py:4800 barrier",  # once, though two workers wait there
    ]
    assert len(hang_sites(dump, limit=1)) == 1
    assert hang_sites("no dump at all\n") == []


def test_stopping_a_multi_process_engine_does_not_hang_on_its_message_queues(tmp_path):
    """vLLM 0.26.0's TP engine leaves ZeroMQ sockets with unsent messages in a reference cycle (its message queues
    to dead workers); collected, their context's term() waits forever. `in_process.stop` must return anyway."""
    pytest.importorskip("zmq")
    child = tmp_path / "child.py"
    child.write_text(
        textwrap.dedent(f"""
        import sys, time, types, zmq
        sys.path.insert(0, {str(SUITES)!r})
        parallel_state = types.ModuleType("vllm.distributed.parallel_state")
        parallel_state.cleanup_dist_env_and_memory = lambda: None
        sys.modules.update({{"vllm": types.ModuleType("vllm"), "vllm.distributed": types.ModuleType("vllm.distributed"),
                            "vllm.distributed.parallel_state": parallel_state}})
        from engine import in_process

        class MessageQueue:  # shm_broadcast.MessageQueue's shape: own context, XPUB socket, never closed
            def __init__(self):
                self.context = zmq.Context()
                self.socket = self.context.socket(zmq.XPUB)
                self.socket.bind("tcp://127.0.0.1:*")
                self.cycle = self

        class Core:
            def __init__(self):
                self.mq = MessageQueue()
                self.reader = zmq.Context().socket(zmq.SUB)  # a worker that went away without reading
                self.reader.connect(self.mq.socket.getsockopt(zmq.LAST_ENDPOINT).decode())
                self.reader.subscribe(b"")
                time.sleep(0.3)
                for _ in range(3):
                    self.mq.socket.send(b"x" * 4096)

            def shutdown(self):
                self.mq = None  # the executor drops its queues, as vLLM's shutdown does

        core = Core()
        llm = types.SimpleNamespace(llm_engine=types.SimpleNamespace(engine_core=core))
        in_process.stop(in_process.Engine(llm=llm, ready_s=0.0))
        print("stopped")
        """)
    )
    import subprocess

    try:
        done = subprocess.run([sys.executable, str(child)], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("in_process.stop hung collecting a ZeroMQ context with unsent messages")
    assert done.returncode == 0 and "stopped" in done.stdout, done.stderr
