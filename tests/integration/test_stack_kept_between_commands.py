"""A loaded stack kept between commands (ci/stack/cache.py): read back only while the folder and the loader are what
they were, never an error, never a stack that failed to load."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support.paths import REPO

from ci.common.errors import StackError
from ci.stack import cache, loader, plan


@pytest.fixture
def kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("STACKGATE_CACHE", str(folder))
    return folder / "stack"


def _loads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every stack validated from here on (not read back)."""
    done: list[Path] = []
    real = loader._load
    monkeypatch.setattr(loader, "_load", lambda root: done.append(root) or real(root))
    return done


def test_a_stack_loaded_again_is_read_back_equal_and_plans_the_same(stack_copy, kept, monkeypatch) -> None:
    validated = _loads(monkeypatch)
    first = loader.load(stack_copy)
    again = loader.load(stack_copy)
    assert validated == [stack_copy] and len(list(kept.glob("*.pickle"))) == 1
    fresh = loader.load(stack_copy, cached=False)
    assert again == first == fresh and again is not first
    assert plan.build(again).rows == plan.build(fresh).rows


def test_a_stack_read_back_imports_neither_pydantic_nor_yaml(stack_copy, kept) -> None:
    probe = (
        "import sys; from ci.stack import loader; st = loader.load(sys.argv[1]); "
        "import json; print(json.dumps(sorted(m for m in ('pydantic', 'yaml') if m in sys.modules)))"
    )
    env = {**os.environ, "STACKGATE_CACHE": str(kept.parent), "PYTHONPATH": str(REPO)}
    said = [
        json.loads(subprocess.check_output([sys.executable, "-c", probe, str(stack_copy)], env=env, text=True))
        for _ in range(2)
    ]
    assert said == [["pydantic", "yaml"], []]  # validated the first time, read back the second


def test_any_change_below_the_stack_folder_loads_it_anew(stack_copy, kept, monkeypatch, edit: Callable) -> None:
    validated = _loads(monkeypatch)
    loader.load(stack_copy)
    edit(stack_copy / "changes" / "48804.yaml", "title: Warm EAGLE", "title: Warmed EAGLE")
    assert loader.load(stack_copy).changes["48804"].title.startswith("Warmed EAGLE")
    (stack_copy / "changes" / "notes.yml").write_text("a stray file the loader refuses\n")
    with pytest.raises(StackError, match="notes"):
        loader.load(stack_copy)
    assert len(validated) == 3


def test_a_stack_that_fails_is_never_kept(stack_copy, kept) -> None:
    with (stack_copy / "changes" / "48804.yaml").open("a") as fh:
        fh.write('gating: "yes"\n')
    for _ in range(2):
        with pytest.raises(StackError, match="gating"):
            loader.load(stack_copy)
    assert not kept.exists() or not list(kept.glob("*.pickle"))


def test_a_changed_loader_loads_it_anew(stack_copy, kept, monkeypatch, tmp_path) -> None:
    validated = _loads(monkeypatch)
    loader.load(stack_copy)
    code = tmp_path / "code"
    code.mkdir()
    for path in Path(cache.__file__).parent.glob("*.py"):
        (code / path.name).write_bytes(path.read_bytes())
    (code / "model.py").write_text((code / "model.py").read_text() + "\n# a field added\n")
    monkeypatch.setattr(cache, "_CODE", code)
    loader.load(stack_copy)
    assert len(validated) == 2


def test_a_changed_module_in_a_concept_folder_loads_it_anew(stack_copy, kept, monkeypatch, tmp_path) -> None:
    """The key holds every module below ci/stack, a concept folder's (ci.stack.checks) included."""
    validated = _loads(monkeypatch)
    loader.load(stack_copy)
    code = tmp_path / "code"
    shutil.copytree(Path(cache.__file__).parent, code, ignore=shutil.ignore_patterns("__pycache__"))
    rule = code / "checks" / "provenance.py"
    rule.write_text(rule.read_text() + "\n# a rule changed\n")
    monkeypatch.setattr(cache, "_CODE", code)
    loader.load(stack_copy)
    assert len(validated) == 2


def test_a_cache_cut_short_or_unwritable_is_a_miss_never_an_error(stack_copy, kept, monkeypatch, tmp_path) -> None:
    validated = _loads(monkeypatch)
    loader.load(stack_copy)
    (pickled,) = kept.glob("*.pickle")
    pickled.write_bytes(pickled.read_bytes()[:-100])
    assert loader.load(stack_copy) == loader.load(stack_copy, cached=False)
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("STACKGATE_CACHE", str(tmp_path / "file" / "under"))  # no folder can be made there
    assert loader.load(stack_copy).digest == loader.load(stack_copy, cached=False).digest
    assert len(validated) == 5  # the cut file, then twice each where nothing can be kept


def test_the_cache_keeps_the_most_recent_stacks_only(stack_copy, kept, monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(cache, "KEPT", 3)
    for n in range(5):
        copy = tmp_path / f"copy{n}"
        shutil.copytree(stack_copy, copy)
        loader.load(copy)
    assert len(list(kept.glob("*.pickle"))) == 3
