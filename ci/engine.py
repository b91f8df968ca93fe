"""The docker engine, one module for every stage that talks to it: the CLI that builds (BuildKit), and the
SDK that inspects, runs, captures and commits containers.

Builds need BuildKit (`--network none`, `RUN --mount`), which the docker SDK cannot drive. Client 23+
hands `docker build` to the buildx plugin and refuses BuildKit without it; the Debian docker.io 20.10
client builds with the engine's own BuildKit when DOCKER_BUILDKIT=1. So: $STACKGATE_DOCKER if set,
else the first client on the candidate list whose `buildx version` works, else a pre-23 client.

One invocation is described once (`ContainerSpec`) and either run through the SDK (`ci.run`) or printed
as a `docker run` line a person can paste (`ci.run.rerun_lines`), so the two cannot drift apart. Device flags
come from the target's data (ci.stack.model.Devices), never from `if target == ...`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from ci import contract
from ci.errors import BuildError, RunError, StackgateError
from ci.escape import command
from ci.signals import forwarding
from ci.stack.model import Target

ENV_CLIENT = "STACKGATE_DOCKER"
_CANDIDATES = ("docker", "/usr/bin/docker", "/usr/local/bin/docker")


@dataclass(frozen=True, kw_only=True)
class DockerCli:
    path: str
    how: str  # "buildx" or "engine BuildKit (client 20.10)": printed so a user knows which one ran

    def env(self) -> dict[str, str]:
        return {**os.environ, "DOCKER_BUILDKIT": "1"}


def _ok(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def find() -> DockerCli:
    """The docker client that builds here, found once per engine address and client override: which engine answers
    depends on $DOCKER_HOST (and the client on $STACKGATE_DOCKER), so a process that changes either asks again."""
    return _find(os.environ.get("DOCKER_HOST"), os.environ.get(ENV_CLIENT))


@cache
def _find(docker_host: str | None, forced: str | None) -> DockerCli:
    if forced:
        if not shutil.which(forced):
            raise BuildError(f"${ENV_CLIENT}={forced} is not an executable", hint="point it at a docker client")
        return DockerCli(path=forced, how=f"${ENV_CLIENT}")
    paths = list(dict.fromkeys(p for c in _CANDIDATES if (p := shutil.which(c))))
    if paths and not any(_ok([p, "info", "--format", "{{.ServerVersion}}"]) for p in paths):
        # without an engine every client check below fails too, and would blame the client
        raise BuildError(
            f"no docker engine answers ({paths[0]} info failed; DOCKER_HOST={docker_host or 'unset'})",
            hint="start it (as .ci/run does: dockerd --iptables=false --ip-masq=false &), or set DOCKER_HOST",
        )
    for path in paths:
        if _ok([path, "buildx", "version"]):
            return DockerCli(path=path, how="buildx")
    for path in paths:
        version = _ok([path, "version", "--format", "{{.Client.Version}}"]) or ""
        if version and version.split(".")[0].isdigit() and int(version.split(".")[0]) < 23:
            return DockerCli(path=path, how=f"engine BuildKit (client {version})")
    raise BuildError(
        f"no docker client that can build with BuildKit (tried {', '.join(paths) or 'none on PATH'})",
        hint="apt-get install docker.io (its 20.10 client uses the engine's BuildKit), install the buildx "
        f"plugin, or set {ENV_CLIENT} to a client that can",
    )


def unreachable() -> str | None:
    """Why no docker engine (or no client that can build) answers here, or None when one does."""
    try:
        find()
    except BuildError as exc:
        return exc.message
    return None


def image_id(cli: DockerCli, ref: str) -> str | None:
    """The local image id `ref` resolves to, or None where the engine holds no such image."""
    done = subprocess.run([cli.path, "image", "inspect", "--format", "{{.Id}}", ref], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


ROOT = "/opt/stackgate"  # where images keep suites/ and the venv (containers/ of the images work)
SUITES = f"{ROOT}/suites"
USER_SUITES = f"{ROOT}/user-suites"
ROWS = f"{ROOT}/rows.json"
RESULTS = f"{ROOT}/results"
MODELS = f"{ROOT}/models"
NAME_PREFIX = "stackgate-run-"


@dataclass(frozen=True, kw_only=True)
class Mount:
    source: str
    target: str
    read_only: bool


@dataclass(frozen=True, kw_only=True)
class ContainerSpec:
    image: str
    command: tuple[str, ...]
    env: Mapping[str, str]
    mounts: tuple[Mount, ...]
    gpus_all: bool = False
    gpu_ids: tuple[str, ...] = ()  # with gpus_all: only these NVIDIA GPUs (UUIDs or indices), not every one
    devices: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    workdir: str = ROOT
    platform: str | None = None  # the target's (linux/arm64): the engine refuses an image of another
    name: str = field(default_factory=lambda: f"{NAME_PREFIX}{uuid.uuid4().hex[:12]}")

    def cli(self) -> str:
        """The equivalent `docker run` line, one line, shell-quoted."""
        return command(self.argv())

    def argv(self) -> list[str]:
        """The equivalent `docker run` command as arguments."""
        args = ["docker", "run", "--rm", "--network", "none", "-w", self.workdir]
        if self.platform:
            args += ["--platform", self.platform]
        if self.gpus_all:
            args += ["--gpus", f'"device={",".join(self.gpu_ids)}"' if self.gpu_ids else "all", "--ipc", "host"]
        for d in self.devices:
            args += ["--device", d]
        for g in self.groups:
            args += ["--group-add", g]
        for m in self.mounts:
            args += ["--mount", _mount(m)]
        for k, v in self.env.items():
            args += ["-e", f"{k}={v}"]
        return [*args, self.image, *self.command]

    def sdk_kwargs(self) -> dict[str, Any]:
        import docker.types

        kw: dict[str, Any] = {
            "command": list(self.command),
            "environment": dict(self.env),
            "mounts": [docker.types.Mount(m.target, m.source, type="bind", read_only=m.read_only) for m in self.mounts],
            "network_mode": "none",  # rows read models from the mounted cache; nothing is fetched
            "working_dir": self.workdir,
            "name": self.name,
            "detach": True,
        }
        if self.platform:
            kw["platform"] = self.platform
        kw.update(device_options(self.gpus_all, self.devices, self.groups, self.gpu_ids))
        if self.gpus_all:
            kw["ipc_mode"] = "host"  # NCCL and vLLM's multiprocess executor share memory through /dev/shm
        return kw


def device_options(
    gpus_all: bool, devices: Sequence[str], groups: Sequence[str], gpu_ids: Sequence[str] = ()
) -> dict[str, Any]:
    """The docker SDK's arguments for a target's devices: NVIDIA GPUs (all, or those named), device nodes, groups."""
    opts: dict[str, Any] = {}
    if gpus_all:
        import docker.types

        which = {"device_ids": list(gpu_ids)} if gpu_ids else {"count": -1}
        opts["device_requests"] = [docker.types.DeviceRequest(**which, capabilities=[["gpu"]])]
    if devices:
        opts["devices"] = [f"{d}:{d}:rwm" for d in devices]
    if groups:
        opts["group_add"] = list(groups)
    return opts


# Every process on the target's GPUs, a bake's included: multicast objects (NVLS, symmetric memory, NVSHMEM, and
# FlashInfer's default all-reduce backend, mnnvl) can leave a shared host's GPUs out of service. The same set in a
# bake and in its runs also keeps vLLM's compile-cache key alike (its env vars are part of it). The harness keeps
# the same switches (suites/harness/hardware.py, NO_MULTICAST): a test holds the two equal.
GPU_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
    "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm",  # vLLM's default, mnnvl, allocates NVSwitch multicast memory
}

# The target env's switches that make a JIT fail loudly instead of compiling: part of JIT refused. A host run
# that allows JIT ($STACKGATE_REFUSE_JIT=0: the empty-caches control, the shrunk architectures) leaves them unset,
# or a FlashInfer row fails on a module missing from the prebuilt cache instead of compiling it. Unset, not "0":
# FlashInfer refuses JIT for any value of its switch (flashinfer/jit/core.py, JitSpec.build).
JIT_FAIL_SWITCHES = ("CUDA_DISABLE_PTX_JIT", "FLASHINFER_DISABLE_JIT")


def without_jit_refusal(env: Mapping[str, str]) -> dict[str, str]:
    """`env` less the JIT-failing switches where it allows JIT ($STACKGATE_REFUSE_JIT=0); else `env` as it is."""
    if env.get(contract.ENV_REFUSE_JIT) != "0":
        return dict(env)
    return {k: v for k, v in env.items() if k not in JIT_FAIL_SWITCHES}


def target_devices(target: Target) -> dict[str, Any]:
    d = target.devices
    return device_options(d.gpus == "all", d.paths, d.groups)


def _mount(m: Mount) -> str:
    """`--mount`'s value for a bind mount: `-v SRC:DST:ro` cannot carry a path holding ':'; --mount reads its fields
    as CSV, so a field holding a comma or a quote is quoted."""
    fields = ["type=bind", f"source={m.source}", f"target={m.target}", *(["readonly"] if m.read_only else [])]
    return ",".join(f'"{f.replace(chr(34), chr(34) * 2)}"' if any(c in f for c in ',"\n') else f for f in fields)


def client(error: type[StackgateError] = RunError) -> Any:
    """The engine's client; `error` is what the caller's verb raises when none answers."""
    try:
        import docker
    except ImportError as exc:
        raise error("the docker SDK is not installed", hint="pip install docker, or pass --host") from exc
    try:
        c = docker.from_env()
        c.ping()
    except Exception as exc:  # the SDK raises several unrelated types for "no engine"
        raise error(f"no docker engine answers: {exc}", hint="start the docker engine (.ci/run does)") from None
    return c


@dataclass(frozen=True, kw_only=True)
class Ran:
    code: int
    stdout: str
    stderr: str


def capture(image: str, argv: list[str], **options: Any) -> Ran:
    """Run a short command offline and return its exit code and output.

    `containers.run(..., remove=True)` lost the whole output of fast-exiting containers about half the
    time on engine 20.10 (seen with the verify probe: 0 bytes instead of 9.5 kB); create, start, wait,
    then read the logs of the stopped container is reliable.
    """
    box = client(BuildError).containers.create(image, argv, network_mode="none", **options)
    try:
        box.start()
        code = box.wait()["StatusCode"]
        out = box.logs(stdout=True, stderr=False).decode(errors="replace")
        err = box.logs(stdout=False, stderr=True).decode(errors="replace")
    finally:
        box.remove(force=True)
    return Ran(code=code, stdout=out, stderr=err)


def image_identity(c: Any, ref: str) -> dict[str, str | None]:
    """rows.json's image block: the reference asked for, its registry manifest digest where it has one
    (else its image id), and the image id (the config digest: the same on every machine holding the image)."""
    import docker.errors

    try:
        img = c.images.get(ref)
    except docker.errors.ImageNotFound:
        raise RunError(f"image {ref} not found locally", hint="build it (ci.images) or pass --image REF") from None
    repo_digests = img.attrs.get("RepoDigests") or []
    digest = repo_digests[0].split("@", 1)[1] if repo_digests else img.id
    return {"ref": ref, "digest": digest, "id": img.id}


def run(spec: ContainerSpec, echo: Any = None, on_signal: Callable[[int], None] | None = None) -> int:
    """Start the container, stream its output, and return its exit status; the container is always removed.

    A SIGTERM, SIGINT or SIGHUP meanwhile is passed to the container's first process (the harness, which
    ends the row in flight and writes its JUnit) and reported to `on_signal`; the container is waited for."""
    echo = echo or sys.stdout  # looked up per call: sys.stdout may have been replaced since import
    c = client()
    container = c.containers.run(spec.image, **spec.sdk_kwargs())
    try:
        with forwarding(lambda signum: container.kill(signal=signum)) as received:
            for chunk in container.logs(stream=True, follow=True):
                echo.write(chunk.decode(errors="replace"))
                echo.flush()
            code = int(container.wait().get("StatusCode", -1))
        if received and on_signal is not None:
            on_signal(received[0])
        return code
    finally:
        container.remove(force=True)
