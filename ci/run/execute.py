"""`python -m ci run`: hand a target's rows for one suite to the harness, in the target's image or on this host.

The host side does three things only: choose the rows, write rows.json (each row self-contained, so
the container never reads stack/), and start pytest with the harness plugin where the rows must run.
The harness writes the JUnit file; this module reads it back for the exit status, because the
exit code of a process that vLLM or NCCL can os._exit(0) proves nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ci import contract, options, revision, signals
from ci import engine as container
from ci.errors import RunError, UsageError
from ci.images import build as images
from ci.run import caches, gpus, guard, host_aot

# made in ci.run.command; other modules and the tests name them through this one too
from ci.run.command import ENV_MODEL_CACHE, make_container_spec, model_cache, pytest_command
from ci.run.outcome import verdict
from ci.stack import plan, rows_json
from ci.stack.model import Stack, Target

DEFAULT_SUITES = options.REPO / "suites"


@dataclass(frozen=True, kw_only=True)
class RunSpec:
    target: Target
    suite: str
    rows: tuple[plan.Row, ...]
    out: Path
    suites_dir: Path | None  # None: the image's suites (docker) or this checkout's (host)
    timeout_s: float
    shard: int = 0
    caches: Path | None = None  # a bake artefact to install first (--host only)
    unbaked: bool = False  # --host only: no AOT bake, the rows start from empty JIT caches
    keep_caches: bool = False  # with unbaked: what earlier unbaked runs here compiled is reused ("as found")
    schedule: Schedule | None = None  # None: one harness session runs every row, one after another

    @property
    def junit(self) -> Path:
        return contract.ResultsDir(self.out, self.target.id, self.suite, self.shard).junit()

    @property
    def rows_json(self) -> Path:
        return self.out / "rows.json"


@dataclass(frozen=True, kw_only=True)
class Schedule:
    """`ci run` over the host's devices (ci.run.scheduled): each row its own session, packed by memory."""

    gpus: tuple[str, ...] = ()  # --gpus: these devices (default every GPU of the target on this host)
    gpu_memory_gib: float | None = None  # --gpu-memory: each device's, in place of what it reports
    resume: bool = False
    deadline_s: float | None = None
    isolate: bool = False  # --isolate: every row a process of its own (the control of shared processes)


def select_rows(st: Stack, target: str, suite: str, ids: list[str]) -> tuple[plan.Row, ...]:
    return plan.build(st).select(targets=[target], suites=[suite]).pick(ids, where=f"{target}/{suite}")


def _pytest_options(spec: RunSpec) -> tuple[str, ...]:
    return ("--stackgate-timeout", f"{spec.timeout_s:g}", "--stackgate-shard", str(spec.shard))


def container_spec(spec: RunSpec, image: str, available: list[str] | None = None) -> container.ContainerSpec:
    """`available`: this host's usable GPUs of the target (default: asked of nvidia-smi)."""
    cap = spec.target.detect.nvidia_compute_capability
    if available is None:
        available = gpus.nvidia_uuids(cap) if cap else []
    return make_container_spec(
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


# On a bare host the JIT sentinel is loaded in every Python process (EngineCore and workers are other
# processes) by this directory's sitecustomize, as the images' .pth file does.
STARTUP = DEFAULT_SUITES / "harness" / "startup"


def host_env(spec: RunSpec) -> dict[str, str]:
    env = container.without_jit_refusal({**os.environ, **spec.target.env})
    env.update(container.GPU_ENV)
    env.update(caches.env(spec.target))  # every JIT cache in the target's root, at the paths its bake used
    path = [str(STARTUP), str(DEFAULT_SUITES), env.get("PYTHONPATH", "")]
    env.update(
        {
            "PYTHONPATH": os.pathsep.join(p for p in path if p),
            "STACKGATE_ROWS": str(spec.rows_json),
            "STACKGATE_JIT_LOG": str(spec.out / "jit-events.jsonl"),
        }
    )
    cache = model_cache()
    if cache is not None:
        env[ENV_MODEL_CACHE] = str(cache)
    return env


def host_session(spec: RunSpec) -> dict[str, str]:
    """The environment of the harness on this host, its JIT caches made ready first (the artefact installed, or
    the AOT bake run): once per `ci run`, however many sessions run its rows."""
    env = host_env(spec)
    if spec.unbaked:
        env["STACKGATE_CACHES_FROM"] = caches.unbaked(spec.target, keep=spec.keep_caches)
    else:
        if spec.caches is not None:
            env.update(caches.install(spec.target, spec.caches, env))
        baked = host_aot.bake(spec.target, env, DEFAULT_SUITES)
        env.update(baked)
        # "aot" only where the bake gave the rows a cache; else the root holds whatever earlier runs left
        made = "aot" if baked else "as found (no AOT bake)"
        env["STACKGATE_CACHES_FROM"] = f"artefact:{spec.caches.name}" if spec.caches is not None else made
    return env


def host_command(spec: RunSpec, *extra: str, junit: Path | None = None) -> list[str]:
    suites_root = str(spec.suites_dir or DEFAULT_SUITES)
    junit_path = str(junit or spec.junit)
    return pytest_command(sys.executable, suites_root, spec.suite, junit_path, *_pytest_options(spec), *extra)


def run_host(spec: RunSpec, env: dict[str, str] | None = None) -> int:
    cmd, env = host_command(spec), env if env is not None else host_session(spec)
    proc = subprocess.Popen(cmd, env=env, cwd=spec.suites_dir or DEFAULT_SUITES, preexec_fn=signals.die_with_parent)
    with signals.forwarding(proc.send_signal) as received:
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
    _usable_folder(spec.out)
    with guard.exclusive(spec.out):
        return _run_locked(st, spec, host=host, image=image)


def _usable_folder(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file", hint="name a folder for the results")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".stackgate-write-test"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise UsageError(
            f"--out {out}: cannot write there ({exc.strerror or exc})", hint="name a folder you can write to"
        ) from None


def _run_locked(st: Stack, spec: RunSpec, *, host: bool, image: str | None) -> int:
    # what can refuse the run (an artefact made for another host, a caches root that is not empty) does so before
    # anything in --out is touched: a refused run leaves the previous run's results as they were
    env = host_session(spec) if host else None
    spec.junit.unlink(missing_ok=True)  # a stale file from an earlier run must not stand in for this one
    if host:
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
    )
    if host and os.environ.get("STACKGATE_REFUSE_JIT") == "0":  # the env the rows get, so a repro gets it too
        doc["target"]["env"] = container.without_jit_refusal({**spec.target.env, "STACKGATE_REFUSE_JIT": "0"})
    try:
        rows_json.write(spec.rows_json, doc)
    except OSError as exc:  # a full or read-only filesystem: said plainly, before any row starts
        raise RunError(f"{spec.rows_json}: {exc.strerror or exc}", hint="free space in --out") from None
    print(f"{len(spec.rows)} rows of {spec.target.id}/{spec.suite} -> {spec.rows_json}", flush=True)
    if spec.schedule is not None:
        return _scheduled(st, spec, env=env, image=str(image_doc["ref"]))
    status = run_host(spec, env) if env is not None else run_docker(spec, str(image_doc["ref"]))
    return verdict(spec.junit, status, spec.rows)


def _scheduled(st: Stack, spec: RunSpec, *, env: dict[str, str] | None, image: str) -> int:
    from ci.run import scheduled

    assert spec.schedule is not None
    devices = gpus.host_devices(spec.target, spec.schedule.gpus, spec.schedule.gpu_memory_gib)
    host = env is not None
    junit = {r.id: scheduled.row_junit(spec.out, spec.target.id, spec.suite, spec.shard, r.id) for r in spec.rows}

    def command(job: Any, ids: tuple[str, ...], path: Path) -> tuple[list[str], dict[str, str] | None, Path | None]:
        one = tuple(a for r in job.rows for a in ("--stackgate-row", r.id))
        if len(job.rows) > 1:  # one process for the job's rows, sharing imports and engines (harness.shared)
            one = (*one, "--stackgate-share")
        # each row its own JIT log: rows side by side would otherwise count each other's compiles as their own
        jit_log = contract.ResultsDir(spec.out, spec.target.id, spec.suite, spec.shard).jit_log(job.row.id).name
        if host:
            visible = {"CUDA_VISIBLE_DEVICES": ",".join(ids)} if any(ids) else {}
            row_env = {**(env or {}), **visible, "STACKGATE_JIT_LOG": str(spec.out / jit_log)}
            return host_command(spec, *one, junit=path), row_env, spec.suites_dir or DEFAULT_SUITES
        c = make_container_spec(
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
        return replace(c, env={**c.env, "STACKGATE_JIT_LOG": f"{container.RESULTS}/{jit_log}"}).argv(), None, None

    print(f"scheduling {len(spec.rows)} rows on {len(devices)} device(s): {gpus.described(devices)}", flush=True)
    plan = scheduled.Plan(command=command, junit=lambda job: junit[job.row.id], out=spec.out)
    return scheduled.run(
        st,
        spec.rows,
        devices,
        plan,
        resume=spec.schedule.resume,
        deadline_s=spec.schedule.deadline_s,
        share=not spec.schedule.isolate,
    )
