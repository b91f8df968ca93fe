"""`python -m ci run`: hand a target's rows for one suite to the harness, in the target's image or on this host.

The host side does three things only: choose the rows, write rows.json (each row self-contained, so
the container never reads stack/), and start pytest with the harness plugin where the rows must run.
The harness writes the JUnit file; this module reads it back for the exit status, because the
exit code of a process that vLLM or NCCL can os._exit(0) proves nothing.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from ci import contract, revision, signals
from ci import engine as container
from ci.errors import RunError
from ci.images import build as images
from ci.run import gpus, guard, harness_command, harness_env

# made in ci.run.harness_command; other modules and the tests name them through this one too
from ci.run.harness_command import DEFAULT_SUITES, pytest_command
from ci.run.harness_command import ENV_MODEL_CACHE as ENV_MODEL_CACHE  # read by ci.evidence
from ci.run.outcome import verdict
from ci.run.run_spec import RunSpec
from ci.stack import plan, rows_json
from ci.stack.model import Stack
from ci.tables import counted


def select_rows(st: Stack, target: str, suite: str, ids: list[str]) -> tuple[plan.Row, ...]:
    return plan.build(st).select(targets=[target], suites=[suite]).pick(ids, where=f"{target}/{suite}")


def _pytest_options(spec: RunSpec) -> tuple[str, ...]:
    return ("--stackgate-timeout", f"{spec.timeout_s:g}", "--stackgate-shard", str(spec.shard))


def container_spec(spec: RunSpec, image: str, available: list[str] | None = None) -> container.ContainerSpec:
    """`available`: this host's usable GPUs of the target (default: asked of nvidia-smi)."""
    cap = spec.target.detect.nvidia_compute_capability
    if available is None:
        available = gpus.nvidia_uuids(cap) if cap else []
    return harness_command.make_container_spec(
        image=image,
        devices=asdict(spec.target.devices),
        target_env=spec.target.env,
        rows_json=spec.rows_json,
        out=spec.out,
        suites_dir=spec.suites_dir,
        suite=spec.suite,
        junit_name=spec.junit.name,
        extra=_pytest_options(spec),
        platform=spec.target.platform,
        gpu_ids=gpus.container_gpus(spec.target, (r.gpus for r in spec.rows), available),
    )


def host_command(spec: RunSpec, *extra: str, junit: Path | None = None) -> list[str]:
    suites_root = str(spec.suites_dir or DEFAULT_SUITES)
    junit_path = str(junit or spec.junit)
    return pytest_command(sys.executable, suites_root, spec.suite, junit_path, *_pytest_options(spec), *extra)


def run_host(spec: RunSpec, env: dict[str, str] | None = None) -> int:
    cmd, env = host_command(spec), env if env is not None else harness_env.host_session(spec)
    proc = subprocess.Popen(cmd, env=env, cwd=spec.suites_dir or DEFAULT_SUITES, preexec_fn=signals.die_with_parent)
    with signals.forwarding(lambda signum: signals.pass_on(proc, signum)) as received:
        code = proc.wait()
    if received:
        _stopped(spec, code, received[0])
    return code


def run_docker(spec: RunSpec, image: str) -> int:
    received: list[int] = []
    code = container.run(container_spec(spec, image), on_signal=received.append)
    if received:
        _stopped(spec, code, received[0])
    return code


def _stopped(spec: RunSpec, code: int, signum: int) -> None:
    """Told to stop, the run ends with 128 + the signal, a JUnit written or not (none while it still collected)."""
    try:
        verdict(spec.junit, code, stopped=True)
    except RunError as exc:
        print(f"{exc.message}: stopped before any row ran", flush=True)
    raise guard.Stopped(signum, spec.junit)


def run_rows(
    st: Stack,
    spec: RunSpec,
    *,
    host: bool,
    image: str | None = None,
) -> int:
    """Write rows.json, run the rows where they must run, and read the exit status back from the JUnit."""
    if spec.schedule is not None:
        return run_scheduled(st, [spec], host=host, image=image)
    guard.usable_folder(spec.out)
    with guard.exclusive(spec.out):
        env = harness_env.host_session(spec) if host else None
        ref, _ = _prepare(st, spec, env=env, image=image)
        status = run_host(spec, env) if env is not None else run_docker(spec, ref)
        return verdict(spec.junit, status, spec.rows)


def run_scheduled(
    st: Stack,
    specs: Sequence[RunSpec],
    *,
    host: bool,
    image: str | None = None,
    session_env: dict[str, str] | None = None,
    phase: str = "run",
) -> int:
    """Several suites of one target in one schedule (`ci main` on a GPU host): their rows share the host's devices,
    packed together, so a suite of few groups does not leave a GPU idle while the next suite waits. Each suite keeps
    its own results folder, rows.json and JUnit files, as `ci run` of that suite alone writes them. `session_env`:
    the host session's environment, made ready by the caller (the bake's: JIT allowed); `phase`: what the jobs'
    costs are recorded as (ci.run.costs)."""
    for spec in specs:
        guard.usable_folder(spec.out)
    with contextlib.ExitStack() as held:
        for spec in specs:
            held.enter_context(guard.exclusive(spec.out))
        # the JIT caches made ready once for the run (what can refuse it does so before --out is touched)
        shared_env = session_env
        if shared_env is None and host:
            shared_env = harness_env.host_session(specs[0], [r for s in specs for r in s.rows])
        prepared = []
        for spec in specs:
            env = {**shared_env, **harness_env.rows_env(spec)} if shared_env is not None else None
            prepared.append((spec, env, _prepare(st, spec, env=env, image=image)))
        return _scheduled(st, prepared, phase)


def _prepare(st: Stack, spec: RunSpec, *, env: dict[str, str] | None, image: str | None) -> tuple[str, dict[str, str]]:
    """rows.json written for the run about to start (a stale JUnit removed first, unless resuming: it holds the rows
    done); the image's reference ("host"), and each row's content digest."""
    if spec.schedule is None or not spec.schedule.resume:
        spec.junit.unlink(missing_ok=True)  # a stale file from an earlier run must not stand in for this one
    if env is not None:
        image_doc: dict[str, str | None] = {"ref": "host", "digest": None}
    else:
        ref = image or images.image_ref(spec.target)
        image_doc = container.image_identity(container.client(), ref)
    doc = rows_json.document(
        st,
        spec.target,
        spec.suite,
        spec.rows,
        image=image_doc,
        git_revision=revision.git_revision(),
        timeout_s=spec.timeout_s,
        suites_dir=str(spec.suites_dir) if spec.suites_dir else None,
        # the env the rows get, so a repro too (and each row's content digest with it)
        target_env=container.without_jit_refusal({**spec.target.env, contract.ENV_REFUSE_JIT: "0"})
        if env is not None and env.get(contract.ENV_REFUSE_JIT) == "0"
        else None,
    )
    try:
        rows_json.write(spec.rows_json, doc)
    except OSError as exc:  # a full or read-only filesystem: said plainly, before any row starts
        raise RunError(f"{spec.rows_json}: {exc.strerror or exc}", hint="free space in --out") from None
    print(f"{counted(len(spec.rows), 'row')} of {spec.target.id}/{spec.suite} -> {spec.rows_json}", flush=True)
    return str(image_doc["ref"]), {r["id"]: r[contract.ROW_CONTENT] for r in doc["rows"]}


def _scheduled(
    st: Stack, prepared: Sequence[tuple[RunSpec, dict[str, str] | None, tuple[str, dict[str, str]]]], phase: str
) -> int:
    from ci.run import scheduled

    first = prepared[0][0]
    assert first.schedule is not None
    devices = gpus.host_devices(first.target, first.schedule.gpus, first.schedule.gpu_memory_gib)
    plans = {spec.suite: _plan(spec, env, made[0]) for spec, env, made in prepared}
    contents = {row: digest for _, _, made in prepared for row, digest in made[1].items()}
    rows = [r for spec, _, _ in prepared for r in spec.rows]
    what = " and ".join(f"{counted(len(spec.rows), 'row')} of {spec.suite}" for spec, _, _ in prepared)
    print(f"scheduling {what} on {len(devices)} device(s): {gpus.described(devices)}", flush=True)
    return scheduled.run(
        st,
        rows,
        devices,
        plans,
        resume=first.schedule.resume,
        deadline_s=first.schedule.deadline_s,
        share=not (first.schedule.isolate or first.schedule.alone),
        contents=contents,
        alone=first.schedule.alone,
        phase=phase,
    )


def _plan(spec: RunSpec, env: dict[str, str] | None, image: str) -> Any:
    """How one suite's jobs start (on this host when `env` is given, else in `image`) and where their JUnit goes."""
    from ci.run import scheduled

    junit = {r.id: scheduled.row_junit(spec.out, spec.target.id, spec.suite, spec.shard, r.id) for r in spec.rows}

    def command(job: Any, ids: tuple[str, ...], path: Path) -> tuple[list[str], dict[str, str] | None, Path | None]:
        one = tuple(a for r in job.rows for a in ("--stackgate-row", r.id))
        if len(job.rows) > 1:  # one process for the job's rows, sharing imports and engines (harness.shared)
            one = (*one, "--stackgate-share")
        # each row its own JIT log: rows side by side would otherwise count each other's compiles as their own
        jit_log = contract.ResultsDir(spec.out, spec.target.id, spec.suite, spec.shard).jit_log(job.row.id).name
        if env is not None:
            visible = {"CUDA_VISIBLE_DEVICES": ",".join(ids)} if any(ids) else {}
            row_env = {**env, **visible, contract.ENV_JIT_LOG: str(spec.out / jit_log)}
            return host_command(spec, *one, junit=path), row_env, spec.suites_dir or DEFAULT_SUITES
        c = harness_command.make_container_spec(
            image=image,
            devices=asdict(spec.target.devices),
            target_env=spec.target.env,
            rows_json=spec.rows_json,
            out=spec.out,
            suites_dir=spec.suites_dir,
            suite=spec.suite,
            junit_name=path.name,
            extra=(*_pytest_options(spec), *one),
            platform=spec.target.platform,
            gpu_ids=[i for i in ids if i],
        )
        return replace(c, env={**c.env, contract.ENV_JIT_LOG: f"{container.RESULTS}/{jit_log}"}).argv(), None, None

    return scheduled.Plan(command=command, junit=lambda job: junit[job.row.id], out=spec.out)
