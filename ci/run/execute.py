"""`python -m ci run`: hand a target's rows for one suite to the harness, in the target's image or on this host.

The host side does three things only: choose the rows, write rows.json (each row self-contained, so
the container never reads stack/), and start pytest with the harness plugin where the rows must run.
The harness writes the JUnit file; this module reads it back for the exit status, because the
exit code of a process that vLLM or NCCL can os._exit(0) proves nothing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ci import engine as container
from ci import options, revision, signals
from ci.errors import UsageError
from ci.images import build as images
from ci.run import caches, gpus, guard, host_aot
from ci.run.outcome import verdict
from ci.stack import loader as stack
from ci.stack import plan, rows_json
from ci.stack.model import Stack, Target

DEFAULT_SUITES = options.REPO / "suites"
ENV_MODEL_CACHE = "STACKGATE_MODEL_CACHE"


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

    @property
    def junit(self) -> Path:
        return self.out / f"junit-{self.target.id}-{self.suite}-{self.shard}.xml"

    @property
    def rows_json(self) -> Path:
        return self.out / "rows.json"


def select_rows(st: Stack, target: str, suite: str, ids: list[str]) -> tuple[plan.Row, ...]:
    return plan.build(st).select(targets=[target], suites=[suite]).pick(ids, where=f"{target}/{suite}")


def model_cache() -> Path | None:
    path = Path(os.environ.get(ENV_MODEL_CACHE) or Path.home() / ".cache" / "huggingface")
    return path if path.is_dir() else None


def pytest_command(
    python: str, suites_root: str, suite: str, junit: str, *extra: str, tests: Sequence[str] = ()
) -> list[str]:
    """`tests`: pytest node ids relative to the suites root (a re-run of one test); default the suite's folder."""
    chosen = [f"{suites_root}/{t}" for t in tests] or [f"{suites_root}/{suite}"]
    # no cache provider: a suites tree may be mounted read-only
    return [python, "-m", "pytest", *chosen, "--rootdir", suites_root, "-p", "harness.plugin",
            "-p", "no:cacheprovider", "--stackgate-junit", junit, *extra]  # fmt: skip


def _pytest_options(spec: RunSpec) -> tuple[str, ...]:
    return ("--stackgate-timeout", f"{spec.timeout_s:g}", "--stackgate-shard", str(spec.shard))


def container_spec(spec: RunSpec, image: str, available: list[str] | None = None) -> container.ContainerSpec:
    """`available`: this host's usable GPUs of the target (default: asked of nvidia-smi)."""
    cap = spec.target.detect.nvidia_compute_capability
    if available is None:
        available = gpus.nvidia_uuids(cap) if cap else []
    return make_container_spec(
        image=image, devices=asdict(spec.target.devices), target_env=spec.target.env, rows_json=spec.rows_json,
        out=spec.out, suites_dir=spec.suites_dir, suite=spec.suite, junit_name=spec.junit.name,
        extra=_pytest_options(spec), platform=spec.target.platform,
        gpu_ids=gpus.container_gpus(spec.target, (r.gpus for r in spec.rows), available),
    )  # fmt: skip


def make_container_spec(
    *,
    image: str,
    devices: Mapping[str, Any],
    target_env: Mapping[str, str],
    rows_json: Path,
    out: Path,
    suites_dir: Path | None,
    suite: str,
    junit_name: str,
    extra: tuple[str, ...] = (),
    platform: str | None = None,
    tests: Sequence[str] = (),
    gpu_ids: Sequence[str] = (),
) -> container.ContainerSpec:
    """Built from rows.json's data alone, so `ci.repro` makes the very same container from a results folder."""
    mounts = [
        container.Mount(source=str(rows_json), target=container.ROWS, read_only=True),
        container.Mount(source=str(out), target=container.RESULTS, read_only=False),
    ]
    suites_root = container.SUITES
    if suites_dir is not None:
        mounts.append(container.Mount(source=str(suites_dir), target=container.USER_SUITES, read_only=True))
        suites_root = container.USER_SUITES
    env = {
        **target_env,
        **container.GPU_ENV,
        "STACKGATE_ROWS": container.ROWS,
        "STACKGATE_JIT_LOG": f"{container.RESULTS}/jit-events.jsonl",
        "PYTHONPATH": container.SUITES,  # the harness always comes from the image
        "PYTHONDONTWRITEBYTECODE": "1",  # suites may be mounted read-only
    }
    cache = model_cache()
    if cache is not None:
        mounts.append(container.Mount(source=str(cache), target=container.MODELS, read_only=True))
        env.update({ENV_MODEL_CACHE: container.MODELS, "HF_HOME": container.MODELS, "HF_HUB_OFFLINE": "1"})
    junit = f"{container.RESULTS}/{junit_name}"
    return container.ContainerSpec(
        image=image,
        command=tuple(pytest_command("python3", suites_root, suite, junit, *extra, tests=tests)),
        env=env,
        mounts=tuple(mounts),
        gpus_all=devices.get("gpus") == "all",
        gpu_ids=tuple(gpu_ids),
        devices=tuple(devices.get("paths") or ()),
        groups=tuple(devices.get("groups") or ()),
        platform=platform,
    )


# On a bare host the JIT sentinel is loaded in every Python process (EngineCore and workers are other
# processes) by this directory's sitecustomize, as the images' .pth file does.
STARTUP = DEFAULT_SUITES / "harness" / "startup"


def host_env(spec: RunSpec) -> dict[str, str]:
    env = container.without_jit_refusal({**os.environ, **spec.target.env})
    env.update(container.GPU_ENV)
    env.update(caches.env(spec.target))  # every JIT cache in the target's root, at the paths its bake used
    path = [str(STARTUP), str(DEFAULT_SUITES), env.get("PYTHONPATH", "")]
    env.update({
        "PYTHONPATH": os.pathsep.join(p for p in path if p),
        "STACKGATE_ROWS": str(spec.rows_json),
        "STACKGATE_JIT_LOG": str(spec.out / "jit-events.jsonl"),
    })  # fmt: skip
    cache = model_cache()
    if cache is not None:
        env[ENV_MODEL_CACHE] = str(cache)
    return env


def run_host(spec: RunSpec) -> int:
    suites_root = spec.suites_dir or DEFAULT_SUITES
    cmd = pytest_command(sys.executable, str(suites_root), spec.suite, str(spec.junit), *_pytest_options(spec))
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
    proc = subprocess.Popen(cmd, env=env, cwd=suites_root, preexec_fn=signals.die_with_parent)
    with signals.forwarding(proc.send_signal) as received:
        code = proc.wait()
    if received:
        verdict(spec.junit, code)
        raise guard.Stopped(received[0], spec.junit)
    return code


def run_docker(spec: RunSpec, image: str) -> int:
    received: list[int] = []
    code = container.run(container_spec(spec, image), on_signal=received.append)
    if received:
        verdict(spec.junit, code)
        raise guard.Stopped(received[0], spec.junit)
    return code


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
        raise UsageError(f"--out {out}: cannot write there ({exc.strerror or exc})",
                         hint="name a folder you can write to") from None  # fmt: skip


def _run_locked(st: Stack, spec: RunSpec, *, host: bool, image: str | None) -> int:
    spec.junit.unlink(missing_ok=True)  # a stale file from an earlier run must not stand in for this one
    if host:
        image_doc: dict[str, str | None] = {"ref": "host", "digest": None}
    else:
        ref = image or images.image_ref(spec.target)
        image_doc = container.image_identity(container.client(), ref)
    doc = rows_json.document(st, spec.target, spec.suite, spec.rows, image=image_doc,
                             git_revision=revision.git_revision(), timeout_s=spec.timeout_s,
                             suites_dir=str(spec.suites_dir) if spec.suites_dir else None)  # fmt: skip
    if host and os.environ.get("STACKGATE_REFUSE_JIT") == "0":  # the env the rows get, so a repro gets it too
        doc["target"]["env"] = container.without_jit_refusal({**spec.target.env, "STACKGATE_REFUSE_JIT": "0"})
    rows_json.write(spec.rows_json, doc)
    print(f"{len(spec.rows)} rows of {spec.target.id}/{spec.suite} -> {spec.rows_json}", flush=True)
    status = run_host(spec) if host else run_docker(spec, str(image_doc["ref"]))
    return verdict(spec.junit, status)


def main(args: argparse.Namespace) -> int:
    st = stack.load(args.stack)
    suites_root = args.suites_dir or DEFAULT_SUITES
    if not (suites_root / args.suite).is_dir():
        raise UsageError(f"no suite {args.suite!r} in {suites_root}", hint="name a folder of the suites tree")
    spec = RunSpec(
        target=st.targets[args.target], suite=args.suite, rows=select_rows(st, args.target, args.suite, args.rows),
        out=args.out.resolve(), suites_dir=args.suites_dir.resolve() if args.suites_dir else None,
        timeout_s=args.timeout, shard=args.shard, caches=args.caches, unbaked=args.unbaked,
        keep_caches=args.keep_caches,
    )  # fmt: skip
    for flag, given in (("--caches", args.caches is not None), ("--unbaked", args.unbaked)):
        if given and not args.host:
            raise UsageError(f"{flag} is about this host's JIT caches", hint="add --host (an image carries its caches)")
    if args.caches is not None and args.unbaked:
        raise UsageError("--caches and --unbaked contradict each other", hint="give one: the artefact, or none")
    if args.keep_caches and not args.unbaked:
        raise UsageError("--keep-caches is about an --unbaked run's caches", hint="add --unbaked --host")
    return run_rows(st, spec, host=args.host, image=args.image)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = options.verb(sub, "run", help="run a target's rows of one suite in its image (or --host) and write JUnit",
                     codes=(0, 1, 2, 4, 6, 130, 143))  # fmt: skip
    p.add_argument("target", help="a target id, e.g. cpu, cuda-sm121a")
    p.add_argument("suite", help="a suite the stack names (spec_decode, sparse_mla, selftest) or a --suites-dir folder")
    options.add_filters(p, "rows")
    p.add_argument("--image", help="image reference (default: the target's image as ci build or ci bake made it)")
    p.add_argument("--host", action="store_true", help="run on this host's Python, without docker")
    p.add_argument("--suites-dir", type=Path, help="another suites tree (default: the image's, or ./suites)")
    p.add_argument("--timeout", type=options.seconds, default=options.DEFAULT_TIMEOUT_S,
                   help="seconds per test item (default: %(default)s)")  # fmt: skip
    p.add_argument("--shard", type=int, default=0, help="shard index, part of the JUnit file and suite name")
    p.add_argument("--caches", type=Path, metavar="ARTEFACT",
                   help="with --host: install a bake artefact (ci bake TARGET --host --out DIR) first; refused "
                   "where it was made for another host")  # fmt: skip
    p.add_argument("--unbaked", action="store_true",
                   help="with --host: no AOT bake and no artefact; refused unless the target's runtime caches "
                   "root ($STACKGATE_RUNTIME_CACHES/<target>) is empty (the control of a bake A/B)")  # fmt: skip
    p.add_argument("--keep-caches", action="store_true",
                   help="with --unbaked: the root may hold what earlier --unbaked runs here compiled, reused "
                   "(the rows say their caches were 'as found'); for runs about anything but JIT")  # fmt: skip
    p.add_argument("--out", type=Path, required=True, help="results folder: rows.json, JUnit, logs")
    p.set_defaults(func=main)
