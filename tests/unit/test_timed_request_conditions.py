"""engine.steady: the conditions a timed request runs under (every thread on the named CPUs, the garbage collected
before the window), and the CPU list checked against what the process may run on."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from support.paths import SUITES

sys.path.insert(0, str(SUITES))

from engine import steady


def test_a_cpu_list_is_read_as_ranges_and_numbers() -> None:
    assert steady.parse_cpus("4-7", set(range(16))) == (4, 5, 6, 7)
    assert steady.parse_cpus("2, 4-5,9", set(range(16))) == (2, 4, 5, 9)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("4-x", "'4-x' is not a CPU number"),
        ("7-4", "runs backwards"),
        ("", "'' is not a CPU number"),
        ("0-40", "CPU 16, 17"),
    ],
)
def test_a_bad_cpu_list_names_the_variable_and_what_to_do(text: str, said: str) -> None:
    with pytest.raises(steady.BadCpuList) as err:
        steady.parse_cpus(text, set(range(16)))
    assert said in str(err.value) and steady.ENV_CPUS in str(err.value)


def test_every_thread_of_the_process_is_pinned_and_recorded() -> None:
    """Threads started before the pin move too (sched_setaffinity(0) alone would move only the caller)."""
    cpu = min(os.sched_getaffinity(0))
    probe = textwrap.dedent(
        f"""
        import os, sys, threading, time
        sys.path.insert(0, {str(SUITES)!r})
        from engine import steady
        ready, stop = threading.Event(), threading.Event()
        seen = {{}}
        def worker():
            ready.set(); stop.wait()
            seen['worker'] = os.sched_getaffinity(0)
        t = threading.Thread(target=worker); t.start(); ready.wait()
        pinned = steady.pin()
        stop.set(); t.join()
        print(sorted(pinned), sorted(seen['worker']), sorted(os.sched_getaffinity(0)), steady.pinned())
        """
    )
    env = {**os.environ, steady.ENV_CPUS: str(cpu)}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == [f"[{cpu}]", f"[{cpu}]", f"[{cpu}]", str(cpu)], out


def test_unset_pins_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(steady.ENV_CPUS, raising=False)
    before = os.sched_getaffinity(0)
    assert steady.pin() == () and steady.pinned() == ""
    assert os.sched_getaffinity(0) == before
