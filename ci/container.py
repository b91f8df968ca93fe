"""Containers through the docker SDK: one invocation described once, run or printed as a `docker run` line.

The same `ContainerSpec` feeds `ci.run` (SDK) and `ci.repro` (a command a person can paste), so the
two cannot drift apart. Device flags come from the target's data (ci.model.Devices), never from
`if target == ...`. `capture` runs a short command and returns its output (verify's probe, bake).
"""

from __future__ import annotations

import shlex
import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ci.errors import BuildError, RunError, StackgateError
from ci.model import Target

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
    devices: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    workdir: str = ROOT
    name: str = field(default_factory=lambda: f"{NAME_PREFIX}{uuid.uuid4().hex[:12]}")

    def cli(self) -> str:
        """The equivalent `docker run` line, one line, shell-quoted."""
        args = ["docker", "run", "--rm", "--network", "none", "-w", self.workdir]
        if self.gpus_all:
            args += ["--gpus", "all", "--ipc", "host"]
        for d in self.devices:
            args += ["--device", d]
        for g in self.groups:
            args += ["--group-add", g]
        for m in self.mounts:
            args += ["-v", f"{m.source}:{m.target}:{'ro' if m.read_only else 'rw'}"]
        for k, v in self.env.items():
            args += ["-e", f"{k}={v}"]
        return shlex.join([*args, self.image, *self.command])

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
        kw.update(device_options(self.gpus_all, self.devices, self.groups))
        if self.gpus_all:
            kw["ipc_mode"] = "host"  # NCCL and vLLM's multiprocess executor share memory through /dev/shm
        return kw


def device_options(gpus_all: bool, devices: Sequence[str], groups: Sequence[str]) -> dict[str, Any]:
    """The docker SDK's arguments for a target's devices: all NVIDIA GPUs, device nodes, groups."""
    opts: dict[str, Any] = {}
    if gpus_all:
        import docker.types

        opts["device_requests"] = [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]
    if devices:
        opts["devices"] = [f"{d}:{d}:rwm" for d in devices]
    if groups:
        opts["group_add"] = list(groups)
    return opts


def target_devices(target: Target) -> dict[str, Any]:
    d = target.devices
    return device_options(d.gpus == "all", d.paths, d.groups)


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
    box = client(BuildError).containers.create(image, argv, network_disabled=True, **options)
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


def run(spec: ContainerSpec, echo: Any = None) -> int:
    """Start the container, stream its output, and return its exit status; the container is always removed."""
    echo = echo or sys.stdout  # looked up per call: sys.stdout may have been replaced since import
    c = client()
    container = c.containers.run(spec.image, **spec.sdk_kwargs())
    try:
        for chunk in container.logs(stream=True, follow=True):
            echo.write(chunk.decode(errors="replace"))
            echo.flush()
        return int(container.wait().get("StatusCode", -1))
    except KeyboardInterrupt:
        container.kill()
        raise
    finally:
        container.remove(force=True)
