"""The harness's command line, and the `docker run` a row's session is: made from rows.json's data alone, so that a
run (`ci.run.execute`) and a re-run from a results folder (`ci.run.rerun_lines`) make the very same container."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ci import contract, options
from ci import engine as container

ENV_MODEL_CACHE = "STACKGATE_MODEL_CACHE"
DEFAULT_SUITES = options.REPO / "suites"
# On a bare host the JIT sentinel is loaded in every Python process (EngineCore and workers are other
# processes) by this directory's sitecustomize, as the images' .pth file does.
STARTUP = DEFAULT_SUITES / "harness" / "startup"


def model_cache() -> Path | None:
    path = Path(os.environ.get(ENV_MODEL_CACHE) or Path.home() / ".cache" / "huggingface")
    return path if path.is_dir() else None


def pytest_command(
    python: str, suites_root: str, suite: str, junit: str, *extra: str, tests: Sequence[str] = ()
) -> list[str]:
    """`tests`: pytest node ids relative to the suites root (a re-run of one test); default the suite's folder."""
    chosen = [f"{suites_root}/{t}" for t in tests] or [f"{suites_root}/{suite}"]
    # no cache provider: a suites tree may be mounted read-only
    return [
        python,
        "-m",
        "pytest",
        *chosen,
        "--rootdir",
        suites_root,
        "-p",
        "harness.plugin",
        "-p",
        "no:cacheprovider",
        "--stackgate-junit",
        junit,
        *extra,
    ]


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
    """Built from rows.json's data alone, so `ci.run.rerun_lines` makes the very same container from a results
    folder."""
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
        contract.ENV_ROWS: container.ROWS,
        contract.ENV_JIT_LOG: f"{container.RESULTS}/jit-events.jsonl",
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
