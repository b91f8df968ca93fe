"""A warm-up that silently does nothing fails its row: vLLM-shaped start-up logs read for a warm-up skipped because it
raised, and a synthetic vLLM-like package whose warm-up calls a function it never imported (a NameError swallowed by
`except Exception`, as a fork's warm-up file was seen to do) started through the harness's own `in_process.start`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.paths import SUITES

sys.path.insert(0, str(SUITES))

from engine import start_log

SPARSE = """\
(EngineCore_DP0 pid=4242) WARNING 12-04 10:00:01 [sparse_mla_triton_warmup.py:337] Skipping sparse MLA Triton warmup.
(EngineCore_DP0 pid=4242) Traceback (most recent call last):
(EngineCore_DP0 pid=4242)   File "/opt/venv/vllm/model_executor/warmup/sparse_mla_triton_warmup.py", line 320, in warm
(EngineCore_DP0 pid=4242)     _warm_topk(device)
(EngineCore_DP0 pid=4242) NameError: name '_warm_topk' is not defined
(EngineCore_DP0 pid=4242) INFO 12-04 10:00:02 [core.py:99] init engine (profile, create kv cache, warmup model) took 3 s
"""
NOT_APPLICABLE = """\
INFO 12-04 10:00:01 [qwen_triton_warmup.py:146] Skipping Qwen GDN Triton warmup: no Qwen GDN layer found.
INFO 12-04 10:00:01 [cutedsl_warmup.py:101] Skipping CuTeDSL warmup because no compile units were requested.
"""


def test_a_warmup_skipped_because_it_raised_is_named_with_its_exception() -> None:
    assert start_log.failed_warmups(SPARSE) == [
        "Skipping sparse MLA Triton warmup (NameError: name '_warm_topk' is not defined)"
    ]
    assert start_log.failed_warmups(NOT_APPLICABLE) == []  # vLLM's own "does not apply here": no failure
    warned = "WARNING 12-04 10:00:01 [warmup.py:69] Skipping V2 mixed prefill+decode warmup because only 3 KV blocks\n"
    assert start_log.failed_warmups(warned) == ["Skipping V2 mixed prefill+decode warmup"]


PACKAGE = """\
import logging
import subprocess
import sys

_out = logging.StreamHandler(sys.stdout)
_out.setFormatter(logging.Formatter("%(levelname)s 12-04 10:00:00 [%(filename)s:%(lineno)d] %(message)s"))
logger = logging.getLogger("vllm.model_executor.warmup.kernel_warmup")
logging.getLogger("vllm").addHandler(_out)
logging.getLogger("vllm").setLevel(logging.INFO)


def eagle_spec_decode_warmup(runner):
    return runner


def kernel_warmup(runner):
    try:
        {CALL}(runner)
    except Exception:
        logger.warning("Skipping EAGLE spec decode warmup.", exc_info=True)
    logger.info("Skipping Qwen GDN Triton warmup: no Qwen GDN layer found.")


class LLM:
    def __init__(self, **kwargs):
        # the engine core's process writes to the same output, its lines prefixed as vLLM's are
        subprocess.run([sys.executable, "-c", "print('(EngineCore_DP0 pid=7) INFO 12-04 10:00:00 [core.py:1] ready')"])
        kernel_warmup(self)
"""

START = """\
import json, sys
from engine import in_process
engine = in_process.start({})
print("RESULT " + json.dumps(engine.failed_warmups), file=sys.stderr)
"""


def _start(tmp_path: Path, call: str) -> tuple[list[str] | None, str]:
    """`in_process.start` in a process whose output is a log file, as the harness gives each row's."""
    site = tmp_path / call / "site"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text(PACKAGE.replace("{CALL}", call))
    log = tmp_path / call / "row.log"
    with log.open("w") as out:
        done = subprocess.run([sys.executable, "-c", START], stdout=out, stderr=subprocess.PIPE, text=True,
                              env={"PYTHONPATH": f"{site}:{SUITES}", "PATH": "/usr/bin:/bin"}, timeout=120)  # fmt: skip
    result = next((x for x in done.stderr.splitlines() if x.startswith("RESULT ")), None)
    assert result is not None, done.stderr[-2000:]
    return json.loads(result.removeprefix("RESULT ")), log.read_text()


def test_a_warmup_calling_what_it_never_imported_is_caught_at_engine_start(tmp_path: Path) -> None:
    failed, log = _start(tmp_path, "spec_decode_warmup")  # never defined: NameError inside `except Exception`
    assert "Skipping EAGLE spec decode warmup." in log and "ready" in log
    assert failed == ["Skipping EAGLE spec decode warmup (NameError: name 'spec_decode_warmup' is not defined)"]


def test_a_warmup_that_runs_passes(tmp_path: Path) -> None:
    failed, log = _start(tmp_path, "eagle_spec_decode_warmup")
    assert failed == [] and "Skipping Qwen GDN Triton warmup" in log  # a warm-up that does not apply is no failure


def test_output_that_is_no_file_is_said_unread(tmp_path: Path) -> None:
    """A plain pytest in a terminal or a pipe: nothing can be read back, and the engine says None, not "no failure"."""
    site = tmp_path / "site"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text(PACKAGE.replace("{CALL}", "spec_decode_warmup"))
    done = subprocess.run([sys.executable, "-c", START], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": f"{site}:{SUITES}", "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert "RESULT null" in done.stderr, done.stderr[-2000:]
