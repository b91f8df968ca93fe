"""The shape of ci/: one package per stage, imports flowing one way, no circles, small modules."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest
from support.paths import REPO

CI = REPO / "ci"
SUITES = CI.parent / "suites"
# Each stage may import only the stages before it (and the shared modules at ci/'s top). The docker engine
# module serves the images and the runs, and reads the stack's targets. ci.upstream reads a fork checkout's git
# history against the stack's changes; the report shows its document beside the verdicts. ci.history remembers each
# report's build (rows' results, verdicts) across builds; the report reads it back.
STAGES = ("stack", "upstream", "fork", "engine", "images", "run", "results", "history", "report")
ON_TOP = {
    "ci.flow", "ci.arms", "ci.cli", "ci.__main__", "ci.bench", "ci.buildkite", "ci.evidence", "ci.plan_command",
    "ci.subject",
}  # fmt: skip
# What a module on top may import beyond the shared ones, where it is held to less than every stage: the
# pipeline is made from the plan and gates on the report's verdicts; it never builds, runs or reads JUnit.
# With --fork the plan is the fork's (ci.fork.fork_plan: what its history holds, from git), still never a build.
# Its report step carries the history from build to build (ci.buildkite.history): it may join histories (ci.history).
TOP_MAY_IMPORT = {"ci.buildkite": ("stack", "upstream", "fork", "results", "history", "report", "top:ci.buildkite")}


def _module(path: Path) -> str:
    parts = path.relative_to(CI.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module -> the ci modules it imports anywhere in its body, function-level imports included."""
    modules = {_module(p): p for p in CI.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ci"):
                for alias in node.names:  # `from ci.stack import plan` imports the module ci.stack.plan
                    sub = f"{node.module}.{alias.name}"
                    targets.add(sub if sub in modules else node.module)
            elif isinstance(node, ast.Import):
                targets |= {a.name for a in node.names if a.name.startswith("ci.") and a.name in modules}
        graph[name] = targets - {name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def _stage(module: str) -> str:
    if module in ("ci", "ci.common") or module.startswith("ci.common."):
        return "shared"
    if module == "ci.engine":
        return "engine"
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in STAGES else ("top" if _top(module) else "?")


def _top(module: str) -> bool:
    return any(module == t or module.startswith(t + ".") for t in ON_TOP)


def test_the_import_graph_of_ci_has_no_circle() -> None:
    assert _cycle(import_graph()) is None, " -> ".join(_cycle(import_graph()) or [])


def _room(module: str) -> str:
    """Where a module stands: itself at a stage's top, else the concept folder it sits in (`ci.upstream.port`)."""
    parts = module.split(".")
    return ".".join(parts[:3]) if _stage(module) in STAGES and len(parts) > 3 else module


def test_a_stages_concept_folders_and_modules_import_each_other_in_no_circle() -> None:
    """A concept folder is one room: it may use its stage's modules, or they it, never both ways round."""
    rooms: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        rooms.setdefault(_room(module), set()).update(_room(t) for t in targets if _room(t) != _room(module))
    assert _cycle(rooms) is None, " -> ".join(_cycle(rooms) or [])


def test_the_cycle_finder_finds_one() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_every_module_belongs_to_a_stage_or_sits_on_top() -> None:
    assert [m for m in import_graph() if _stage(m) == "?"] == []


def test_stages_import_only_the_stages_before_them() -> None:
    order = {s: i for i, s in enumerate(STAGES)}
    wrong = []
    for module, targets in import_graph().items():
        stage = _stage(module)
        for t in targets:
            to = _stage(t)
            if to == "top" and stage != "top":
                wrong.append(f"{module} -> {t} (reaches up to the command line)")
            elif stage == "shared" and to in order:
                wrong.append(f"{module} -> {t} (a shared module depends on a stage)")
            elif stage in order and to in order and order[to] > order[stage]:
                wrong.append(f"{module} -> {t} ({stage} imports the later stage {to})")
    assert wrong == []


def test_modules_on_top_import_only_what_they_may() -> None:
    wrong = []
    for module, targets in import_graph().items():
        allowed = next((v for k, v in TOP_MAY_IMPORT.items() if module == k or module.startswith(k + ".")), None)
        if allowed is None:
            continue
        for t in targets:
            stage = _stage(t)
            own = f"top:{t}" in allowed or any(t.startswith(a[4:] + ".") for a in allowed if a.startswith("top:"))
            if stage != "shared" and stage not in allowed and not own:
                wrong.append(f"{module} -> {t} ({stage})")
    assert wrong == []


def test_the_report_imports_nothing_from_the_command_line() -> None:
    graph = import_graph()
    assert {
        t for m, ts in graph.items() if m.startswith("ci.report") for t in ts if t in ("ci.cli", "ci.flow")
    } == set()


def _exports(package: str) -> set[str] | None:
    """A package's `__all__`: the modules (and concept folders) it lets other stages import (None where it declares
    none). A stage's folder lists what it exports; a concept folder inside it lists its own."""
    init = CI.parent.joinpath(*package.split(".")) / "__init__.py"
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            return {ast.literal_eval(e) for e in node.value.elts}  # type: ignore[attr-defined]
    return None


def _packages(stage: str) -> list[str]:
    """The stage's folder and every concept folder in it, dotted."""
    root = CI / stage
    return [".".join(p.parent.relative_to(CI.parent).parts) for p in sorted(root.rglob("__init__.py"))]


@pytest.mark.parametrize("package", [p for s in STAGES if (CI / s / "__init__.py").exists() for p in _packages(s)])
def test_each_package_of_a_stage_exports_modules_it_has(package: str) -> None:
    exported = _exports(package)
    assert exported is not None, f"{package.replace('.', '/')}/__init__.py declares no __all__ (an empty one: none)"
    folder = CI.parent.joinpath(*package.split("."))
    assert {
        m for m in exported if not (folder / f"{m}.py").exists() and not (folder / m / "__init__.py").exists()
    } == set()


def _exported(module: str) -> bool:
    """Each package on the way from the stage to `module` lists the next step in its `__all__`."""
    parts = module.split(".")
    return all(parts[i] in (_exports(".".join(parts[:i])) or set()) for i in range(2, len(parts)))


def test_no_module_imports_another_stages_private_modules() -> None:
    """Across a stage's border only what its package exports: its other modules change without a reader elsewhere."""
    wrong = []
    for module, targets in import_graph().items():
        for t in targets:
            stage, parts = _stage(t), t.split(".")
            if stage in ("shared", "engine", "top", "?") or stage == _stage(module) or len(parts) < 3:
                continue
            if not _exported(t):
                wrong.append(f"{module} -> {t}")
    assert wrong == []


def _one_letter_apart(a: str, b: str) -> bool:
    if len(a) < len(b):
        a, b = b, a
    if len(a) - len(b) > 1:
        return False
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b, strict=True)) == 1
    return any(a[:i] + a[i + 1 :] == b for i in range(len(a)))


def _one_word_apart(a: str, b: str) -> bool:
    """Two forms of one word: a stem of 4 letters or more that both share, cut inside a word (not at `_`), each going
    on by at most 4 letters (`criterion`/`criteria`, `repro`/`reproduce`, `fork`/`forked`, `build`/`buildable`)."""
    n = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    stem, tails = a[:n], (a[n:], b[n:])
    if len(stem) < 4 or stem.endswith("_") or any(t.startswith("_") for t in tails):
        return False
    return all(len(t) <= 4 and "_" not in t for t in tails)


def _alike(a: str, b: str) -> bool:
    return a == b or _one_letter_apart(a, b) or _one_word_apart(a, b)


@pytest.mark.parametrize(("a", "b", "alike"), [
    ("command", "commands", True), ("step", "steps", True), ("repro", "reproduce", True),
    ("criterion", "criteria", True), ("fork", "forked", True), ("build", "buildable", True),
    ("bundle", "bundle_read", False), ("port_why", "port_make", False), ("comparison", "comparison_json", False),
    ("run", "runs", True), ("plan", "planned", True), ("state", "stats", True), ("merge", "metrics", False),
    ("bake", "bake", True), ("dp", "dp", True), ("bake", "make", True), ("startup", "start_log", False),
])  # fmt: skip
def test_names_alike_are_the_ones_a_newcomer_would_mix_up(a: str, b: str, alike: bool) -> None:
    assert _alike(a, b) is alike


@pytest.mark.parametrize("package", [CI, *sorted(p for p in CI.iterdir() if (p / "__init__.py").is_file())],
                         ids=lambda p: str(p.relative_to(CI.parent)))  # fmt: skip
def test_no_two_module_names_in_a_package_differ_by_one_letter_or_one_word_form(package: Path) -> None:
    """A newcomer chooses a module by its name: `command` beside `commands`, `step` beside `steps`, `criterion` beside
    `criteria`, the package `fork` beside the module `forked` were a guess."""
    names = sorted(p.stem if p.is_file() else p.name for p in package.iterdir()
                   if (p.suffix == ".py" or (p / "__init__.py").is_file()) and not p.name.startswith("__"))  # fmt: skip
    assert [(a, b) for i, a in enumerate(names) for b in names[i + 1 :] if _alike(a, b)] == []


def _named_by_a_tool(path: Path) -> bool:
    """A name another program looks the module up by, so every folder that has one spells it alike: pytest's
    `conftest.py`, and a suite's warm-up hook `<suite>/warmup.py` (suites/harness/warm_run.py imports `<suite>.warmup`;
    a suite is a folder of `test_*.py`)."""
    return path.name == "conftest.py" or (path.name == "warmup.py" and any(path.parent.glob("test_*.py")))


def test_no_two_modules_anywhere_in_ci_or_suites_differ_by_one_letter_or_one_word_form() -> None:
    """Across packages too: a newcomer looking a module up by its name had `bake.py` twice, a `commands.py` in every
    stage, `plan` beside `planned` and `planning`, `git` beside `jit`. Module stems, `__init__` aside."""
    modules = sorted(
        p for root in (CI, SUITES) for p in root.rglob("*.py") if p.stem != "__init__" and not _named_by_a_tool(p)
    )
    named = [(p.stem, str(p.relative_to(CI.parent))) for p in modules]
    assert [(a, b) for i, (x, a) in enumerate(named) for y, b in named[i + 1 :] if _alike(x, y)] == []


def test_no_folder_in_ci_holds_more_than_15_modules() -> None:
    """A folder holds one concept: past 15 modules it holds several (ci/upstream held 34, ci/run 26), and a newcomer
    reads a list, not a room."""
    counts = Counter(p.parent for p in CI.rglob("*.py") if p.stem != "__init__")
    assert {str(f.relative_to(CI.parent)): n for f, n in counts.items() if n > 15} == {}
