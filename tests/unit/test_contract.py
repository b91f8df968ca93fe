"""One contract per boundary: the host side (`ci/common/contract.py`) and the harness (`suites/harness/boundary.py`)
spell a row id, the <testsuite> name and the property prefix alike, and the plan makes ids the contract parses."""

from __future__ import annotations

import sys
from pathlib import Path

from support.paths import REPO, SUITES

from ci.common import contract
from ci.stack import loader, plan

sys.path.insert(0, str(SUITES))  # the harness, as the images import it
from harness import boundary


def test_both_sides_spell_the_same_names() -> None:
    assert contract.ROW_ID.pattern == boundary.ROW_ID.pattern
    assert (contract.PREFIX, contract.METRIC, contract.CARD) == (boundary.PREFIX, boundary.METRIC, boundary.CARD)
    assert contract.WORKLOAD == boundary.WORKLOAD
    assert contract.ROW_CONTENT == boundary.ROW_CONTENT
    assert contract.ROW_MEANING == boundary.ROW_MEANING
    names = ("ENV_ROWS", "ENV_JIT_LOG", "ENV_REFUSE_JIT")
    assert [getattr(contract, n) for n in names] == [getattr(boundary, n) for n in names]
    for args in (("cuda-sm121a", "sparse_mla", 0), ("cpu", "selftest", "3")):
        assert contract.suite_name(*args) == boundary.suite_name(*args)
        assert contract.parse_suite_name(boundary.suite_name(*args)) == tuple(map(str, args))


def test_the_boundarys_environment_is_spelled_in_the_contract_pair_alone() -> None:
    """Every other module names the contract's constants; the two that may import nothing (the image probe, the JIT
    sentinel that loads before the harness) spell the one name they read, and the test holds them to it."""
    repo = REPO
    standalone = {repo / "ci/images/image_probe.py", repo / "suites/harness/jit_sentinel.py"}
    pair = (repo / "ci/common/contract.py", repo / "suites/harness/boundary.py")
    for name in (contract.ENV_ROWS, contract.ENV_JIT_LOG, contract.ENV_REFUSE_JIT):
        spelled = [
            p
            for p in [*(repo / "ci").rglob("*.py"), *(repo / "suites").rglob("*.py")]
            if f'"{name}"' in p.read_text() and p not in pair
        ]
        assert set(spelled) <= standalone, (name, spelled)


def test_every_planned_row_id_is_a_row_id_of_the_contract() -> None:
    for row in plan.build(loader.load()).rows:
        parsed = contract.RowId.parse(row.id)
        assert parsed is not None and str(parsed) == row.id
        assert (parsed.change, parsed.target) == (row.change, row.target)
        assert contract.RowId.find(f"test_x[{row.id}]") == parsed
        assert contract.change_of(row.id) == row.change


def test_one_results_layout() -> None:
    d = contract.ResultsDir(Path("out"), "cpu", "selftest", 2)
    assert d.junit() == Path("out/junit-cpu-selftest-2.xml")
    assert d.junit("selftest.cpu.cpu-selftest.3578dc7d") == Path("out/junit-cpu-selftest-2.3578dc7d.xml")
    assert d.jit_log("selftest.cpu.cpu-selftest.3578dc7d") == Path("out/jit-events.3578dc7d.jsonl")
    assert Path(d.junit("selftest.cpu.cpu-selftest.3578dc7d")).match(contract.junit_glob("cpu", "selftest", 2))
    assert (d.rows_json.name, d.not_run.name) == ("rows.json", "not-run.json")


def test_rows_that_differ_in_workload_alone_share_their_engine_as_rows_json_carries_them(tmp_path: Path) -> None:
    """The harness builds one engine for the rows of a shared process that are equal but for their workload
    (harness.rows Row.engine): each row's own digests (content, meaning) in rows.json must not part them, or every
    row of a group builds an engine of its own."""
    from harness.rows import load

    from ci.stack import rows_json

    st = loader.load()
    rows = [r for r in plan.build(st).rows if r.target == "cuda-sm90" and r.model == "tiny-llama-eagle"]
    doc = rows_json.document(st, st.targets["cuda-sm90"], "*", rows, image={"ref": "host"}, git_revision="x",
                             timeout_s=60)  # fmt: skip
    loaded = load(str(rows_json.write(tmp_path / "rows.json", doc))).rows
    engines = {r.engine for r in loaded}
    by_host = {tuple(v for k, v in r.to_json().items() if k not in contract.WORKLOAD) for r in rows}
    assert len({r[contract.ROW_CONTENT] for r in loaded}) == len(loaded)  # every row its own digest
    assert 1 < len(engines) == len(by_host) < len(loaded)  # the engines as the host's scheduler counts them


def test_a_rows_engine_is_sized_by_the_plan_whichever_rows_a_run_holds(tmp_path: Path, monkeypatch) -> None:
    """Seen on the H200: a run of the rows a deadline-cut bake finished built its engines for the largest of those
    rows alone, vLLM's compile cache keyed them apart from the bake's (config_hash), and every graph compiled again.
    An engine's size comes from the plan's rows of its configuration, in a shared process and alone alike."""
    from engine.config import ENV_SHARE, engine_size
    from harness.rows import load

    from ci.stack import rows_json

    st = loader.load()
    rows = [r for r in plan.build(st).rows if r.target == "cuda-sm90" and r.model == "tiny-llama-eagle"]
    peers = [r for r in rows if rows_json.engine(r) == rows_json.engine(rows[0])]
    assert len({(r.context, r.batch) for r in peers}) > 1
    want = (max(r.context for r in peers), max(r.batch for r in peers))
    smallest = min(peers, key=lambda r: (r.context, r.batch))
    sizes = []
    for n, held in enumerate(([smallest], rows)):
        doc = rows_json.document(st, st.targets["cuda-sm90"], "*", held, image={"ref": "host"}, git_revision="x",
                                 timeout_s=60)  # fmt: skip
        row = next(r for r in load(str(rows_json.write(tmp_path / f"{n}.json", doc))).rows if r.id == smallest.id)
        for share in ("1", "0"):
            monkeypatch.setenv(ENV_SHARE, share)
            sizes.append(engine_size(row))
    assert sizes == [want] * 4
