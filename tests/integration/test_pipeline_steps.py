"""`python -m ci pipeline`: Buildkite's own schema, a step per (target, suite) on the target's queue, distinct
JUnit artifacts, the report after a wait that continues on failure, retries only for a lost agent, soft-fail
for open upstream PRs, `$$`, and uploads of at most 500 jobs. The bootstrap file passes the same schema."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import yaml
from support.buildkite import REGISTRY, check_schema, run_step, stand_in_agent
from support.paths import REPO

from ci import cli
from ci.common.errors import GATE_CLOSED
from ci.stack import loader, plan


def pipeline(tmp_path: Path, *args: str, name: str = "pipeline.yml") -> tuple[Path, list[dict]]:
    env = {**os.environ, "STACKGATE_REGISTRY": REGISTRY}
    stock = () if "--fork" in args else ("--stock",)  # the stock pipeline, wherever a fork is configured
    done = subprocess.run([sys.executable, "-m", "ci", "pipeline", *stock, *args], cwd=REPO, capture_output=True,
                          text=True, check=False, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    path = tmp_path / name
    path.write_text(done.stdout)
    return path, yaml.safe_load(done.stdout)["steps"]


def _runs(steps: list[dict]) -> list[dict]:
    return [s for s in steps if str(s.get("key", "")).startswith("run-")]


def _rows_of(step: dict) -> tuple[str, str, int, list[str], str]:
    """target, suite, shard, rows and --out of a run step's `python -m ci run ...` command."""
    words = shlex.split(next(c for c in step["commands"] if " -m ci run " in c))
    args = words[words.index("run") + 1 :]
    args = args[2:] if args[0] == "--stack" else args
    return (args[0], args[1], int(args[args.index("--shard") + 1]), args[args.index("--rows") + 1].split(","),
            args[args.index("--out") + 1])  # fmt: skip


@pytest.fixture(scope="module")
def default(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    return pipeline(tmp_path_factory.mktemp("bk"))


def test_the_pipeline_and_the_bootstrap_pass_buildkites_schema(default) -> None:
    check_schema(default[0])
    check_schema(REPO / ".buildkite" / "pipeline.yml")


def test_every_target_and_suite_runs_its_rows_once_on_the_targets_queue(default) -> None:
    st = loader.load()
    steps = default[1]
    planned: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in plan.build(st).rows:
        planned[(r.target, r.suite)].append(r.id)
    ran: dict[tuple[str, str], list[str]] = defaultdict(list)
    for step in _runs(steps):
        target, suite, _, rows, _ = _rows_of(step)
        assert step["agents"]["queue"] == st.targets[target].queue
        assert step["depends_on"] == [f"build-{target}"]
        ran[(target, suite)] += rows
    assert {k: sorted(v) for k, v in ran.items()} == {k: sorted(v) for k, v in planned.items()}
    builds = {s["key"]: s for s in steps if s.get("key", "").startswith("build-")}
    assert {k: b["agents"]["queue"] for k, b in builds.items()} == {f"build-{t.id}": t.queue for t in
                                                                   st.targets.values()}  # fmt: skip


def test_each_shard_uploads_its_junit_under_its_own_name(default) -> None:
    names = []
    for step in _runs(default[1]):
        target, suite, shard, _, out = _rows_of(step)
        # the name `ci run --shard` gives it, and the names of one JUnit per row where the agent schedules them
        junit = f"{out}/junit-{target}-{suite}-{shard}*.xml"
        assert junit in step["artifact_paths"] and f"{out}/rows.json" in step["artifact_paths"]
        names.append(Path(junit).name)
    assert len(names) == len(set(names)) > 4


def test_the_report_follows_a_wait_that_continues_on_failure(default) -> None:
    steps = default[1]
    wait = next(i for i, s in enumerate(steps) if "wait" in s)
    assert steps[wait] == {"wait": None, "continue_on_failure": True}
    keys = [s.get("key") for s in steps]
    assert max(keys.index(s["key"]) for s in _runs(steps)) < wait < keys.index("report") < keys.index("gate")
    report = steps[keys.index("report")]
    assert any("artifact download" in c and "junit-" in c for c in report["commands"])
    assert any("buildkite-agent annotate --context acceptance --style" in c for c in report["commands"])
    assert steps[keys.index("gate")]["depends_on"] == ["report"]


def test_retries_only_where_the_agent_was_lost(default) -> None:
    for step in default[1]:
        if "wait" in step:
            continue
        assert step["retry"] == {"automatic": [{"exit_status": -1, "limit": 2}]}, step["key"]
        assert "soft_fail" not in step  # no change of the stack is open upstream today


def test_every_dollar_is_left_to_the_steps_shell(default) -> None:
    text = default[0].read_text()
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    assert "$$(.nox/run/bin/python -m ci gate report/report.json --style || echo error)" in body
    assert '"$$style"' in body
    assert re.findall(r"(?<!\$)\$(?!\$)", body.replace("$$", "")) == []


def test_the_report_step_carries_the_history_from_the_last_builds_of_its_branch(default) -> None:
    """Pulled (the last builds' history artifacts, joined), added to by the report, uploaded again: no agent shares a
    file system with another."""
    report = next(s for s in default[1] if s.get("key") == "report")
    commands = report["commands"]
    pull = next(i for i, c in enumerate(commands) if " -m ci history pull history/history.sqlite" in c)
    made = next(i for i, c in enumerate(commands) if " -m ci report " in c)
    assert pull < made and "--history history/history.sqlite" in commands[made]
    assert "history/history.sqlite" in report["artifact_paths"]


def test_test_engine_adds_the_collector_to_every_run_step_and_the_pipeline_passes_the_schema(tmp_path, default) -> None:
    path, steps = pipeline(tmp_path, "--test-engine", name="test-engine.yml")
    check_schema(path)
    for step in _runs(steps):
        (plugin,) = step["plugins"]
        assert plugin == {"test-collector#v1.7.0": {"files": step["artifact_paths"][0], "format": "junit"}}
    assert not any("plugins" in s for s in default[1] if isinstance(s, dict))  # only where asked for
    # Test Engine keys a test by its testcase's classname and name; a row's testcase also names its row and change:
    # so the JUnit the harness wrote on the GPU hosts, committed with the evidence, reads
    from lxml import etree

    cases = [
        tc for f in sorted((REPO / "evidence").rglob("junit-*.xml")) for tc in etree.parse(str(f)).iter("testcase")
    ]
    assert cases
    for tc in cases:
        assert tc.get("classname") and tc.get("name"), etree.tostring(tc)[:200]
        props = {p.get("name"): p.get("value") for p in tc.iter("property")}
        if "stackgate.row" in props:
            assert props["stackgate.row"] in tc.get("name") and props["stackgate.change"]


def test_rows_of_a_change_open_upstream_soft_fail_and_say_why(tmp_path: Path, stack_copy, edit) -> None:
    edit(stack_copy / "changes" / "48804.yaml", "  state: closed\n", "  state: open\n")
    path, steps = pipeline(tmp_path, "--stack", str(stack_copy), "--target", "cpu,cuda-sm90")
    check_schema(path)
    text = path.read_text()
    for step in _runs(steps):
        rows = _rows_of(step)[3]
        if any(r.startswith("48804.") for r in rows):
            assert all(r.startswith("48804.") for r in rows)  # open-upstream rows shard apart
            assert step["soft_fail"] == [{"exit_status": 1}]
            before = text[: text.index(f"key: {step['key']}\n")].rstrip().splitlines()
            assert "is still open (vllm-project/vllm#48804 as of 2026-11-29)" in before[-3] + before[-2]
        else:
            assert "soft_fail" not in step


def test_more_than_500_jobs_are_uploaded_in_parts(tmp_path: Path, stack_copy, edit) -> None:
    edit(stack_copy / "changes" / "48804.yaml", "  batch: [1, 8]\n", "  batch: [1, 8, 32, 64]\n")
    rows = plan.build(loader.load(stack_copy)).rows
    assert len(rows) > 500
    args = ["--stack", str(stack_copy), "--shard-size", "1"]
    seen: list[str] = []
    part, parts = 1, []
    while True:
        path, steps = pipeline(tmp_path, *args, "--part", str(part), name=f"part{part}.yml")
        check_schema(path)
        jobs = [s for s in steps if "wait" not in s]
        assert len(jobs) <= 500
        parts.append(steps)
        seen += [r for s in _runs(steps) for r in _rows_of(s)[3]]
        last = jobs[-1]
        if last["key"] != f"pipeline-part-{part + 1}":
            break
        assert f"--part {part + 1} | buildkite-agent pipeline upload" in last["commands"][-1]
        part += 1
    assert len(parts) >= 2 and sorted(seen) == sorted(r.id for r in rows)
    assert [any("wait" in s for s in p) for p in parts] == [False] * (len(parts) - 1) + [True]
    assert cli.main(["--stack", str(stack_copy), "pipeline", *args[2:], "--part", str(len(parts) + 1)]) == 2


def test_filters_narrow_the_pipeline_and_its_report(tmp_path: Path) -> None:
    _, steps = pipeline(tmp_path, "--target", "cpu", "--change", "selftest")
    assert [s.get("key") for s in steps] == ["build-cpu", "run-cpu-selftest-0", None, "report", "gate"]
    report = next(c for c in steps[3]["commands"] if " -m ci report" in c)  # the venv's python: its exit reaches here
    assert report.endswith(
        "report results --out report --history history/history.sqlite --target cpu --change selftest || status=$$?"
    )  # $ escaped
    assert steps[3]["commands"][-1] == 'exit "$$status"'  # a failing row fails the step after its annotation


def test_no_row_to_run_is_a_usage_error(capsys) -> None:
    assert cli.main(["pipeline", "--target", "cpu", "--change", "48804"]) == 2
    assert "no planned row matches these filters" in capsys.readouterr().err


def test_the_bootstrap_uploads_the_generated_pipeline_from_the_report_queue() -> None:
    boot = yaml.safe_load((REPO / ".buildkite" / "pipeline.yml").read_text())["steps"]
    fallback = next(t for t in loader.load().targets.values() if t.detect.fallback)
    assert boot[0]["agents"] == {"queue": fallback.queue}
    assert boot[0]["commands"] == ["source .buildkite/tools.sh",
                                   "set -o pipefail && nox -s pipeline | buildkite-agent pipeline upload"]  # fmt: skip
    assert subprocess.run(["bash", "-n", str(REPO / ".buildkite" / "tools.sh")], check=False).returncode == 0


@pytest.fixture(scope="module")
def cpu_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cpu self-test run on this host's Python, as the pipeline's cpu run step names its artefacts (and three
    more runs of it beside, as further run steps would: a regression is judged over 4 runs a side at least); its JIT
    caches in a root of its own, so that no other process's compiles land in its rows' evidence."""
    store = tmp_path_factory.mktemp("artifacts")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STACKGATE_RUNTIME_CACHES", str(tmp_path_factory.mktemp("runtime-caches")))
        for folder in ("cpu-selftest-0", "cpu-selftest-run2", "cpu-selftest-run3", "cpu-selftest-run4"):
            argv = ["run", "cpu", "selftest", "--host", "--out", str(store / "results" / folder)]
            assert cli.main(argv) == 0
    return store


@pytest.mark.parametrize(
    ("gating", "baseline", "gate_passes", "style"),
    [(True, False, False, "error"), (True, True, True, "success"), (False, False, True, "warning")],
    ids=["gating-not-ready", "gating-ready", "nothing-gating"],
)
def test_the_report_and_gate_steps_run_here_on_cpu_results(
    tmp_path: Path, stack_copy, edit, cpu_results: Path, gating: bool, baseline: bool, gate_passes: bool, style: str
) -> None:
    import json
    import shutil

    store = tmp_path / "store"
    shutil.copytree(cpu_results, store)
    if gating:
        edit(
            stack_copy / "changes" / "selftest.yaml",
            "track: harness-selftest\n",
            "track: harness-selftest\ngating: true\n",
        )
    args = ["--stack", str(stack_copy), "--target", "cpu"]
    if baseline:  # the same results as the baseline: the regression criterion can pass, and the change be ready
        assert (
            cli.main(["--stack", str(stack_copy), "report", str(store / "results"), "--out", str(tmp_path / "b")]) == 0
        )
        args += ["--baseline", str(tmp_path / "b" / "report.json")]
    _, steps = pipeline(tmp_path, *args)
    by_key = {s.get("key"): s for s in steps}
    run = by_key["run-cpu-selftest-0"]
    assert all(list(store.glob(p)) for p in run["artifact_paths"][:2])  # the run step's JUnit and rows.json

    work, env = stand_in_agent(tmp_path, store)
    assert run_step(by_key["report"], work, env, store) == 0
    assert (store / "history" / "history.sqlite").is_file()  # this build's history, uploaded for the next
    annotations = [json.loads(line) for line in (tmp_path / "annotations.jsonl").read_text().splitlines()]
    change = json.loads((store / "report" / "report.json").read_text())["changes"]
    why = [(c["name"], c["status"], c["evidence"]) for c in change[0]["criteria"] if c["status"] != "pass"]
    assert [(c["id"], c["gating"], c["ready"]) for c in change] == [("selftest", gating, baseline)], why
    assert [a["args"] for a in annotations] == [["--context", "acceptance", "--style", style]]
    assert annotations[0]["body"] == (work / "report" / "report.md").read_text()

    gate_work = tmp_path / "gate"
    shutil.copytree(work / ".buildkite", gate_work / ".buildkite")  # a fresh checkout: only report.json downloaded
    gate = run_step(by_key["gate"], gate_work, env, store)
    assert gate == (0 if gate_passes else GATE_CLOSED)  # the gate's own exit reaches the agent, not nox's 1


def test_every_step_has_a_timeout_and_a_run_step_asks_for_the_gpus_of_its_rows(tmp_path: Path) -> None:
    """A hung job holds an agent only until its timeout: every row at its whole item timeout, one after another.
    Each run step's rows need one GPU count, and its job asks for an agent with that many."""
    from ci.buildkite import steps as bk
    from ci.common.options import DEFAULT_TIMEOUT_S

    _, made = pipeline(tmp_path, "--target", "cuda-sm90")
    st = loader.load(REPO / "stack")
    by_id = {r.id: r for r in plan.build(st).rows}
    assert all(isinstance(s.get("timeout_in_minutes"), int) and s["timeout_in_minutes"] > 0 for s in made if "key" in s)
    runs = _runs(made)
    counts = set()
    for step in runs:
        ids = _rows_of(step)[3]
        need = {by_id[i].gpus for i in ids}
        assert len(need) == 1, (step["key"], need)  # a shard never mixes GPU counts
        assert step["agents"]["gpus"] == str(need.pop())
        assert step["timeout_in_minutes"] == bk.RUN_SETUP_MIN + -(-len(ids) * DEFAULT_TIMEOUT_S // 60)
        counts.add(step["agents"]["gpus"])
    assert {"1", "2", "8"} <= counts


def test_without_a_registry_the_pipeline_is_refused_at_upload_unless_it_is_for_one_agent(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "STACKGATE_REGISTRY"}
    argv = [sys.executable, "-m", "ci", "pipeline", "--target", "cpu"]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False, env=env)
    assert done.returncode == 2 and not done.stdout  # nothing for `buildkite-agent pipeline upload` to take
    assert "no registry: $STACKGATE_REGISTRY is unset" in done.stderr and "fix: set STACKGATE_REGISTRY=" in done.stderr
    bad = subprocess.run([*argv, "--registry", "Not A Registry"], cwd=REPO, capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "is not a registry location" in bad.stderr
    one = subprocess.run([*argv, "--one-agent"], cwd=REPO, capture_output=True, text=True, check=True, env=env)
    (tmp_path / "one.yml").write_text(one.stdout)
    check_schema(tmp_path / "one.yml")
    steps = yaml.safe_load(one.stdout)["steps"]
    assert all("nox -s build -- cpu" in s["commands"] for s in _runs(steps))  # each run step builds where it runs
    assert "--one-agent" in one.stdout.splitlines()[0]  # the later parts' uploads repeat it


def test_with_a_registry_the_build_step_pushes_and_every_run_step_pulls_that_digest(default) -> None:
    _, steps = default
    builds = [s for s in steps if str(s.get("key", "")).startswith("build-")]
    for b in builds:
        target = b["key"].removeprefix("build-")
        assert f".nox/run/bin/python -m ci push {target} --registry {REGISTRY} --digest-file " in "\n".join(
            b["commands"]
        )
        assert f"buildkite-agent meta-data set stackgate-image-{target}" in "\n".join(b["commands"])
    for run in _runs(steps):
        text = "\n".join(run["commands"])
        assert "nox -s build" not in text and " ci build" not in text
        assert '-m ci pull "$$ref"' in text and text.rstrip().endswith('--image "$$ref"')


def test_a_host_targets_bake_artefact_goes_from_its_bake_step_to_run_steps_on_other_agents(
    tmp_path: Path, stack_copy: Path, edit
) -> None:
    """A target whose agents are bare hosts (runs_on: host): the bake step packs an artefact (ci bake --host) into
    the artifact store and names it in meta-data; a run step on another agent downloads and installs it (--host
    --caches) and runs the rows; an artefact made for another host is refused, naming the part that differs."""
    import io
    import json
    import shutil
    import tarfile

    edit(stack_copy / "targets.yaml", "  - id: cpu\n", "  - id: cpu\n    runs_on: host\n")
    env0 = {k: v for k, v in os.environ.items() if k != "STACKGATE_REGISTRY"}  # a host target needs no registry
    argv = [
        sys.executable,
        "-m",
        "ci",
        "pipeline",
        "--stack",
        str(stack_copy),
        "--target",
        "cpu",
        "--suite",
        "selftest",
    ]
    made = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=True, env=env0)
    (tmp_path / "host.yml").write_text(made.stdout)
    check_schema(tmp_path / "host.yml")
    by_key = {s.get("key"): s for s in yaml.safe_load(made.stdout)["steps"]}
    bake, run = by_key["build-cpu"], by_key["run-cpu-selftest-0"]
    assert not any("docker" in c or "nox -s build" in c or " ci pull" in c for c in bake["commands"] + run["commands"])

    store = tmp_path / "store"
    store.mkdir()
    root = tmp_path / "runtime-caches"  # each agent's caches root: one path on every host (compiled code names it)
    baker, env1 = stand_in_agent(tmp_path / "agent1", store)
    env1["STACKGATE_RUNTIME_CACHES"] = str(root)
    assert run_step(bake, baker, env1, store, tmp_path / "bake.log") == 0, (tmp_path / "bake.log").read_text()
    name = json.loads((store / "meta-data.json").read_text())["stackgate-caches-cpu"]
    assert name.startswith("caches-cpu-warm-") and (store / "caches" / name).is_file()

    shutil.rmtree(root)  # another host: nothing in its caches root
    runner, env2 = stand_in_agent(tmp_path / "agent2", store)
    env2["STACKGATE_RUNTIME_CACHES"] = str(root)
    log = tmp_path / "run.log"
    assert run_step(run, runner, env2, store, log) == 0, log.read_text()
    assert f"caches/{name}" in log.read_text() and any(root.rglob("*"))  # installed from the artefact
    junit = (runner / "results" / "cpu-selftest-0" / "junit-cpu-selftest-0.xml").read_text()
    assert junit.count("<testcase") == 5 and "<failure" not in junit and "<error" not in junit

    artefact = store / "caches" / name  # another host's artefact under the same name: its key names other parts
    with tarfile.open(artefact, "r:gz") as src:
        members = [(m, src.extractfile(m).read() if m.isfile() else None) for m in src.getmembers()]
    with tarfile.open(artefact, "w:gz") as dst:
        for member, data in members:
            if member.name == "stackgate-caches.json":
                doc = json.loads(data)
                doc["key"]["triton"] = "9.9.9"
                data = json.dumps(doc).encode()
                member.size = len(data)
            dst.addfile(member, io.BytesIO(data) if data is not None else None)
    shutil.rmtree(root)
    other, env3 = stand_in_agent(tmp_path / "agent3", store)
    env3["STACKGATE_RUNTIME_CACHES"] = str(root)
    assert run_step(run, other, env3, store, log) == 2
    assert "made for another host: triton '9.9.9' in the artefact" in log.read_text()
