"""One container invocation described once, then run through the docker SDK or printed as a `docker run` line.

The same `ContainerSpec` feeds `ci.run` (SDK) and `ci.repro` (a command a person can paste), so the
two cannot drift apart. Device flags come from the target's data (ci.model.Devices), never from
`if target == ...`.
"""

from __future__ import annotations

import shlex
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ci.errors import RunError

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
        if self.gpus_all:
            kw["device_requests"] = [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]
            kw["ipc_mode"] = "host"  # NCCL and vLLM's multiprocess executor share memory through /dev/shm
        if self.devices:
            kw["devices"] = [f"{d}:{d}:rwm" for d in self.devices]
        if self.groups:
            kw["group_add"] = list(self.groups)
        return kw


def client() -> Any:
    try:
        import docker
    except ImportError as exc:
        raise RunError("the docker SDK is not installed", hint="pip install docker, or pass --host") from exc
    try:
        c = docker.from_env()
        c.ping()
    except Exception as exc:  # the SDK raises several unrelated types for "no engine"
        raise RunError(f"no docker engine answers: {exc}", hint="start the docker engine, or pass --host") from None
    return c


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
