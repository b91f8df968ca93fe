"""`python -m ci bake <target>`: fill the runtime caches on the target and commit them as the last layer.

`docker build` has no GPU, so the warm run happens in a container started from the built image with the
target's devices, the image's own env and paths (cache keys embed both), running the suites' warm-up
entry point (`python -m harness.warm_run` unless --command says otherwise). The container is committed
with its config unchanged; /tmp and the JIT log are tmpfs mounts so only the cache writes land in the layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ci.common.errors import BuildError
from ci.stack.model import Target

WARMUP = ("python", "-m", "harness.warm_run")
BAKED_FROM = "stackgate.baked_from"  # the id of the image the bake ran in: a later build makes the bake stale
_TMPFS = {"/tmp": "rw,exec", "/var/log/stackgate": "rw"}


@dataclass(frozen=True, kw_only=True)
class Baked:
    image_id: str
    tag: str
    log: str


ROWS_DIR = "/opt/stackgate/bake"


def bake(
    target: Target, image: str, *, command: list[str] | None = None, tag: str | None = None, rows: Path | None = None
) -> Baked:
    """Run the warm-up in the image on the target's devices and commit the result as one more layer.

    `rows`: a rows.json with every row of the target, mounted read-only (not committed) for the warm-up.
    """
    from docker.errors import ImageNotFound

    from ci import engine as container

    client = container.client(BuildError)
    try:
        img = client.images.get(image)
    except ImageNotFound:
        raise BuildError(f"image {image} not found", hint=f"python -m ci build {target.id}") from None
    argv = list(command or WARMUP)
    volumes = {}
    if rows is not None:
        volumes[str(rows.resolve().parent)] = {"bind": ROWS_DIR, "mode": "ro"}
        if command is None:
            argv += ["--rows", f"{ROWS_DIR}/{rows.name}"]
    # the rows' switches (no multicast; vLLM's env-keyed compile cache alike in the bake and its runs), given to
    # the warm-up's processes, not to the container's config: a commit would keep them in the image's env
    switches = ["env", *(f"{k}={v}" for k, v in container.GPU_ENV.items())]
    container = client.containers.create(
        img.id,
        [*switches, *argv],
        network_mode="none",  # no network, and no endpoint on the default bridge either
        tmpfs=_TMPFS,
        volumes=volumes,
        **container.target_devices(target),
    )
    try:
        container.start()
        code = container.wait()["StatusCode"]
        log = container.logs().decode(errors="replace")
        if code != 0:
            if command is None and "No module named harness.warm_run" in log:
                raise BuildError(
                    f"{image}: the warm-up entry point `python -m harness.warm_run` is not in the image "
                    "(an image built before suites/harness/warm_run.py existed?)",
                    hint=f"rebuild it: python -m ci build {target.id}; or pass --command",
                )
            raise BuildError(f"{image}: warm-up {' '.join(argv)} exited {code}:\n{log[-2000:]}")
        repo, _, _ = image.rpartition(":") if ":" in image.split("/")[-1] else (image, "", "")
        final = tag or f"{repo}:baked"
        name, _, version = final.rpartition(":")
        labels = {**(img.labels or {}), "stackgate.baked": " ".join(argv), BAKED_FROM: img.id}
        committed = container.commit(
            repository=name, tag=version, conf={"Labels": labels}, message=f"stackgate bake: {' '.join(argv)}"
        )
    finally:
        container.remove(force=True)
    return Baked(image_id=committed.id, tag=final, log=log)
