"""python -m ci report A --compare B: each row's metrics side by side, repeated runs pooled within a side, the
Hodges-Lehmann shift with its exact interval, each side's verdicts, and a side mixing vLLM builds refused."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from support.paths import REPO
from support.report_helpers import rows, write_rows

from ci.bench import synthetic
from ci.cli import main
from ci.common.errors import ResultsError
from ci.common.tables import md_cell
from ci.report import write as report
from ci.report.sections import comparison
from ci.results.sides import Comparison, Line
from ci.results.stat_tests import shift
from ci.stack.loader import DEFAULT_STACK
from ci.stack.plan import Row

ROW, ROW2, ROW3 = rows("48804", target="cuda-sm121a")[:3]
COLD, WARM = "cold_first_request_ms", "warm_request_ms"
Samples = Mapping[str, Sequence[float]]


def _run(folder: Path, measured: Mapping[Row, Samples], *, version: str = "0.26.0", caches: str = "",
         keep_others: bool = False, compiles: int = 0) -> None:  # fmt: skip
    """One run of each row as the harness writes it, into `folder`: the named metrics with these samples."""

    def edit(r: Row, c: synthetic.FakeCase) -> synthetic.FakeCase:
        phases = {m.name: (m.unit, m.phase) for m in c.metrics}
        mine = tuple(synthetic.metric(n, sorted(s)[len(s) // 2], *phases[n], s) for n, s in measured[r].items())
        kept = tuple(m for m in c.metrics if m.name not in measured[r]) if keep_others else ()
        return replace(c, metrics=(*kept, *mine), vllm_version=version, jit_compiles=compiles)

    write_rows(folder, list(measured), edit, caches=caches)


def _runs(side: Path, row: Row, per_run: Sequence[Samples], **kw: object) -> None:
    """Repeated runs of one row within a side, one sub-folder each (c1-ROW/, c2-ROW/, ...)."""
    for i, samples in enumerate(per_run, 1):
        _run(side / f"c{i}-{row.id}", {row: samples}, **kw)  # type: ignore[arg-type]


def _compare(a: Path, *others: Path, labels: Sequence[str] = ()) -> Comparison:
    rep = report.build(DEFAULT_STACK, [a], None, compare_paths=list(others), labels=labels)
    assert rep.comparison is not None
    return rep.comparison


def _line(c: Comparison, row: Row, metric: str) -> Line:
    return next(ln for ln in c.lines if ln.row == row.id and ln.metric == metric)


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ci", "report", *argv], cwd=REPO, capture_output=True, text=True)


def test_the_shift_of_three_against_three_is_the_pairwise_range_at_90_percent() -> None:
    s = shift([10, 11, 12], [20, 21, 22])
    # differences 8, 9, 9, 10, 10, 10, 11, 11, 12: the median is 10; P(U = 0) = 1 / C(6, 3) = 1/20 each tail
    assert (s.estimate, s.interval, s.method) == (10.0, (8.0, 12.0), "exact")
    assert s.confidence == pytest.approx(0.9)
    assert shift([12, 11, 10], [22, 20, 21]) == s  # order of the samples does not matter
    # not the difference of the medians (4 - 1 = 3): differences -1, 1, 1, 2, 2, 3, 4, 4, 5 have median 2
    skew = shift([0, 1, 3], [2, 4, 5])
    assert (skew.estimate, skew.interval) == (2.0, (-1.0, 5.0))


def test_the_interval_is_the_largest_confidence_not_above_95_percent() -> None:
    # 5 vs 5: C(10, 5) = 252; k=3 would give 1 - 2*4/252 = 96.8% (above), k=4 gives 1 - 2*7/252 = 94.4%
    s = shift([1, 2, 3, 4, 5], [11, 12, 13, 14, 15])
    assert s.confidence == pytest.approx(1 - 14 / 252)
    diffs = sorted(b - a for b in (11, 12, 13, 14, 15) for a in (1, 2, 3, 4, 5))
    assert s.interval == (diffs[3], diffs[-4]) and s.estimate == 10.0
    # 2 vs 3: C(5, 2) = 10, the widest interval is 80%; 1 vs 1 offers none
    assert shift([1, 2], [5, 6, 7]).confidence == pytest.approx(0.8)
    one = shift([10], [20])
    assert (one.estimate, one.interval, one.confidence, one.method) == (10.0, None, None, "n too small")


def test_large_samples_use_the_normal_approximation_near_95_percent() -> None:
    a = [float(i) for i in range(30)]
    s = shift(a, [x + 100 for x in a])
    assert s.method == "normal approximation" and 0.94 < s.confidence <= 0.95  # type: ignore[operator]
    assert s.interval is not None and s.interval[0] < 100.0 < s.interval[1] and s.estimate == 100.0


def test_medians_deltas_ratio_and_interval_in_every_output(tmp_path: Path) -> None:
    a, b = tmp_path / "upstream", tmp_path / "fork"
    _runs(a, ROW, [{COLD: [v]} for v in (10, 11, 12)], caches="empty")  # three runs (engine processes) a side
    _runs(b, ROW, [{COLD: [v]} for v in (20, 21, 22)], version="0.27.0.dev1+fork", caches="aot")
    c = _compare(a, b)
    assert c.labels == ("upstream", "fork")
    line = _line(c, ROW, COLD)
    sa, sb = line.sides
    assert sa and sb and (sa.median, sa.n, sa.low, sa.high) == (11.0, 3, 10.0, 12.0) and sb.median == 21.0
    vs = line.versus[1]
    assert line.versus[0] is None and vs is not None
    assert vs.delta == 10.0 and vs.ratio == pytest.approx(21 / 11)
    assert vs.shift.interval == (8.0, 12.0) and vs.shift.confidence == pytest.approx(0.9)

    out = tmp_path / "out"
    done = _cli(str(a), "--compare", str(b), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "compared upstream vs fork" in done.stdout
    doc = json.loads((out / "report.json").read_text())["comparison"]
    assert [s["label"] for s in doc["sides"]] == ["upstream", "fork"]
    assert [s["vllm_versions"] for s in doc["sides"]] == [["0.26.0"], ["0.27.0.dev1+fork"]]
    assert [s["caches"] for s in doc["sides"]] == [["empty"], ["aot"]]
    m = next(x for x in doc["metrics"] if x["row"] == ROW.id and x["metric"] == COLD)
    assert m["sides"]["upstream"]["median"] == 11.0 and m["sides"]["fork"]["n"] == 3
    vs_json = m["versus_reference"]["fork"]
    assert (vs_json["delta"], vs_json["hodges_lehmann"], vs_json["interval"]) == (10.0, 10.0, [8.0, 12.0])
    assert vs_json["confidence"] == pytest.approx(0.9) and vs_json["ratio"] == pytest.approx(21 / 11)
    md, html = (out / "report.md").read_text(), (out / "report.html").read_text()
    want = f"| {ROW.id} | {md_cell(COLD)} | fork | 21 ms | 3 | 20–22 | +10 ms | 1.909 | +10 ms | \\[8, 12\\] ms | 90.0%"
    assert want in md
    assert "## Comparison: upstream vs fork" in md and "0.27.0.dev1+fork" in md and "| aot |" in md
    assert "Comparison: upstream vs fork" in html and "[8, 12]" in html and "90.0%" in html
    assert md.index("## Verdicts") < md.index("## Comparison")  # below the verdicts: the statistics a reader checks


def test_the_run_is_the_unit_within_a_side(tmp_path: Path) -> None:
    """Each run counts once, as its samples' median: three runs of five samples are n = 3, never 15; the shift and
    its interval are over runs."""
    a, b = tmp_path / "a", tmp_path / "b"
    warm = [[50, 51, 52, 53, 54], [55, 56, 57, 58, 59], [60, 61, 62, 63, 64]]
    _runs(a, ROW, [{COLD: [900], WARM: w} for w in warm])
    _runs(b, ROW, [{COLD: [700], WARM: [40, 41, 42, 43, 44]}])
    c = _compare(a, b)
    cold, hot = _line(c, ROW, COLD), _line(c, ROW, WARM)
    assert [(s.n, s.runs) for s in cold.sides if s] == [(3, 3), (1, 1)]
    assert [(s.n, s.runs, len(s.samples)) for s in hot.sides if s] == [(3, 3, 15), (1, 1, 5)]
    assert hot.sides[0] and (hot.sides[0].median, hot.sides[0].low, hot.sides[0].high) == (57.0, 52.0, 62.0)
    vs = hot.versus[1]
    assert vs is not None and vs.delta == 42.0 - 57.0 and vs.shift.method == "exact"
    assert vs.shift.interval == (-20.0, -10.0) and vs.shift.confidence == 0.5  # all 3 runs against 1 allow
    # the report itself keeps the three runs apart, as before
    out = tmp_path / "out"
    assert main(["report", str(a), "--compare", str(b), "--out", str(out)]) == 0
    row = next(r for r in json.loads((out / "report.json").read_text())["rows"] if r["id"] == ROW.id)
    assert len(row["runs"]) == 3 and row["duplicates"] and row["metrics"][WARM]["samples"] == warm[0]


def test_compile_counts_are_compared_one_sample_per_run(tmp_path: Path) -> None:
    """What each run compiled (the JIT sentinel's count for the row's processes) sits beside the timings: an
    unbaked side against a baked one, one release against another."""
    unbaked, baked = tmp_path / "unbaked", tmp_path / "baked"
    for i, n in enumerate((149, 150, 148), 1):
        _run(unbaked / f"a{i}", {ROW: {COLD: [9000 + i]}}, compiles=n)
    _runs(baked, ROW, [{COLD: [300]}] * 3)
    line = _line(_compare(unbaked, baked), ROW, "jit.compiles")
    assert line.unit == "count" and [(s.n, s.runs, s.median) for s in line.sides if s] == [(3, 3, 149.0), (3, 3, 0.0)]
    vs = line.versus[1]
    assert vs is not None and vs.delta == -149.0 and vs.shift.interval == (-150.0, -148.0)


def test_one_sample_against_one_says_n_too_small(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _run(a, {ROW: {COLD: [900]}})
    _run(b, {ROW: {COLD: [450]}})
    vs = _line(_compare(a, b), ROW, COLD).versus[1]
    assert vs is not None and vs.delta == -450.0 and vs.ratio == 0.5
    assert vs.shift.interval is None and comparison.interval(vs.shift) == "n too small"
    out = tmp_path / "out"
    assert main(["report", str(a), "--compare", str(b), "--out", str(out)]) == 0
    assert (
        f"| {ROW.id} | {md_cell(COLD)} | b | 450 ms | 1 | 450–450 | -450 ms | 0.500 | -450 ms | n too small | — |"
        in (out / "report.md").read_text()
    )
    m = json.loads((out / "report.json").read_text())["comparison"]["metrics"][0]["versus_reference"]["b"]
    assert (m["interval"], m["confidence"], m["method"]) == (None, None, "n too small")


def test_a_side_holding_a_row_under_two_vllm_versions_is_refused(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _run(a, {ROW: {COLD: [900]}})
    _run(b / "c1", {ROW: {COLD: [800]}}, version="0.26.0")
    _run(b / "c2", {ROW: {COLD: [700]}}, version="0.27.0")
    with pytest.raises(ResultsError) as err:
        _compare(a, b)
    assert err.value.exit_code == 2
    out = tmp_path / "out"
    done = _cli(str(a), "--compare", str(b), "--out", str(out))
    assert done.returncode == 2 and not out.exists()
    for needle in (f"side b: row {ROW.id}", "0.26.0", "0.27.0", str(b / "c1"), str(b / "c2"), "fix: "):
        assert needle in done.stderr, needle
    # the same runs, one build a side, compare; and A alone (no --compare) is reported as before
    assert _cli(str(b / "c1"), "--compare", str(b / "c2"), "--out", str(out)).returncode == 0
    assert _cli(str(b), "--out", str(tmp_path / "plain")).returncode == 0


def test_rows_on_one_side_only_are_listed(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _run(a, {ROW: {COLD: [900]}, ROW2: {COLD: [910]}})
    _run(b, {ROW: {COLD: [800]}, ROW3: {COLD: [810]}})
    c = _compare(a, b)
    assert c.partial == ((ROW2.id, (True, False)), (ROW3.id, (False, True)))
    assert {ln.row for ln in c.lines} == {ROW.id}
    out = tmp_path / "out"
    assert main(["report", str(a), "--compare", str(b), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    section = md.split("### Rows missing from a side", 1)[1].split("\n## ", 1)[0]
    assert f"| {ROW2.id} | ✔ pass | absent |" in section and f"| {ROW3.id} | absent | ✔ pass |" in section
    assert ROW.id not in section
    missing = json.loads((out / "report.json").read_text())["comparison"]["missing"]
    assert missing == [{"row": ROW2.id, "on": ["a"], "absent_from": ["b"]},
                       {"row": ROW3.id, "on": ["b"], "absent_from": ["a"]}]  # fmt: skip


def test_three_cache_conditions_with_labels_and_a_verdict_per_side(tmp_path: Path) -> None:
    every = rows("48804")
    sides = {"empty": tmp_path / "empty", "aot": tmp_path / "aot", "artefact": tmp_path / "baked"}
    colds = {"empty": [3000, 3100, 3200], "aot": [1500, 1550, 1600], "artefact": [900, 905, 910]}
    for name, folder in sides.items():
        measured = {r: {COLD: colds[name]} if r == ROW else {} for r in every}
        _run(folder, measured, caches=name if name != "artefact" else "artefact:caches-x.tar.gz", keep_others=True)
    # the same judgement as a report's: against a baseline every side passes but the one with a failing row
    assert main(["report", str(sides["artefact"]), "--out", str(tmp_path / "base")]) == 0
    bad = sides["empty"] / "failing"
    write_rows(bad, [ROW2], lambda r, c: replace(c, status="failure", message="2 Triton compiles after ready"))
    out = tmp_path / "out"
    argv = [str(sides["empty"]), "--compare", str(sides["aot"]), "--compare", str(sides["artefact"]),
            "--label", "a-empty", "--label", "b-aot", "--label", "c-artefact", "--out", str(out),
            "--baseline", str(tmp_path / "base" / "report.json"), "--change", "48804"]  # fmt: skip
    done = _cli(*argv)
    assert done.returncode == 1, done.stderr  # side A holds a failing row
    doc = json.loads((out / "report.json").read_text())["comparison"]
    assert [s["label"] for s in doc["sides"]] == ["a-empty", "b-aot", "c-artefact"]
    assert [s["caches"] for s in doc["sides"]] == [["empty"], ["aot"], ["artefact:caches-x.tar.gz"]]
    # no side ran the fork without #48804, so its effect is missing everywhere: the sides differ in what else blocks
    effect = "the change's effect on what it acts on, against the fork without it"
    blocked = [[v["blocked_by"] for v in s["verdicts"]] for s in doc["sides"]]
    assert blocked[1:] == [[[effect]], [[effect]]]
    assert "model/context/batch matrix covered on every target" in blocked[0][0]
    m = next(x for x in doc["metrics"] if x["row"] == ROW.id and x["metric"] == COLD)
    assert set(m["versus_reference"]) == {"b-aot", "c-artefact"}
    assert [m["versus_reference"][k]["delta"] for k in ("b-aot", "c-artefact")] == [-1550.0, -2195.0]
    md = (out / "report.md").read_text()
    verdicts = md.split("### Verdict per side", 1)[1].split("###", 1)[0]
    assert "| Change | Verdict or criterion | a-empty | b-aot | c-artefact |" in verdicts
    assert "| #48804 | verdict | ✘ not ready | ✘ not ready | ✘ not ready |" in verdicts
    assert f"| #48804 | {effect} | ⚠ missing | ⚠ missing | ⚠ missing |" in verdicts
    regression = "regression within the allowed bound versus the baseline"
    assert f"| #48804 | {regression} | ⚠ missing | ✔ pass | ✔ pass |" in verdicts
    assert "| #48804 | tied to a focused regression or benchmark | ✘ fail | ✔ pass | ✔ pass |" in verdicts


def test_labels_must_match_the_sides(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _run(a, {ROW: {COLD: [900]}})
    _run(b, {ROW: {COLD: [800]}})
    out = str(tmp_path / "out")
    done = _cli(str(a), "--compare", str(b), "--label", "only-one", "--out", out)
    assert done.returncode == 2 and "1 --label for 2 sides" in done.stderr
    assert _cli(str(a), "--label", "x", "--out", out).returncode == 2
    assert _cli(str(a), "--compare", str(b), "--label", "x", "--label", "x", "--out", out).returncode == 2
    # two folders of one name are told apart by their paths
    (tmp_path / "one").mkdir(), (tmp_path / "two").mkdir()
    _run(tmp_path / "one" / "run", {ROW: {COLD: [1]}})
    _run(tmp_path / "two" / "run", {ROW: {COLD: [2]}})
    assert _compare(tmp_path / "one" / "run", tmp_path / "two" / "run").labels == (
        str(tmp_path / "one" / "run"),
        str(tmp_path / "two" / "run"),
    )


def test_a_compared_side_that_cannot_be_read_is_warned_about_and_strict_fails(tmp_path: Path) -> None:
    a = tmp_path / "a"
    _run(a, {ROW: {COLD: [900]}})
    missing = tmp_path / "fokr"
    out = tmp_path / "out"
    done = _cli(str(a), "--compare", str(missing), "--out", str(out))
    assert done.returncode == 0
    assert f"side fokr: input {missing}: not found" in done.stderr
    assert md_cell(f"side fokr: input {missing}: not found") in (out / "report.md").read_text()
    assert json.loads((out / "report.json").read_text())["comparison"]["missing"] == [
        {"row": ROW.id, "on": ["a"], "absent_from": ["fokr"]}
    ]
    assert _cli(str(a), "--compare", str(missing), "--out", str(out), "--strict").returncode == 7
    assert _cli(str(a), "--compare", str(a), "--out", str(out), "--strict").returncode == 0


def test_changes_no_side_ran_are_one_line_not_a_table_of_missing(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _run(a, {ROW: {COLD: [900]}})
    _run(b, {ROW: {COLD: [700]}})
    table = comparison.verdicts_table(_compare(a, b))
    assert {r[0] for r in table.rows[:-1]} == {"#48804"}  # its verdict and criteria, side by side
    none = "#46514, #46849, #48407, #49903, composition, selftest"
    assert table.rows[-1] == (none, "no row on any side: not compared", "—", "—")


FORK_SOURCE = "test-fork@" + "c" * 40 + " over 0.26.0@" + "d" * 40


def _fork_side(folder: Path, selected: Sequence[Row], *, changes: str, without: str = "", present: bool,
               build: str, prefill: Sequence[float], source: str = FORK_SOURCE) -> None:  # fmt: skip
    """Rows as a fork build records them: its changes, the change it dropped, the probe, the tree's id, and the fork
    and base it was built from."""
    props = (("fork_changes", changes), ("change_present", "true" if present else "false"), ("vllm_build", build),
             *((("fork_without", without),) if without else ()),
             *((("fork_source", source),) if source else ()))  # fmt: skip

    def edit(r: Row, c: synthetic.FakeCase) -> synthetic.FakeCase:
        m = synthetic.metric("prefill_ms", sorted(prefill)[len(prefill) // 2], "ms", "warm", prefill)
        return replace(synthetic.with_metric(c, m), props=props, vllm_version="0.26.0")

    write_rows(folder, list(selected), edit)


def test_each_change_as_ported_is_judged_against_the_fork_without_it(tmp_path: Path) -> None:
    picked = rows("48407", target="cuda-sm90")[:2]
    fork, without = tmp_path / "fork", tmp_path / "without-48407"
    _fork_side(fork, picked, changes="46514,46849,48407", present=True, build="sha256:" + "a" * 64,
               prefill=[10.0, 10.1, 10.2, 10.0, 10.1])  # fmt: skip
    _fork_side(without, picked, changes="46514,46849", without="48407", present=False, build="sha256:" + "b" * 64,
               prefill=[10.0, 10.1, 10.2, 10.0, 10.1])  # fmt: skip
    c = _compare(fork, without)
    (p,) = c.ported
    assert (p.change, p.fork, p.without, p.seen, p.isolated) == ("48407", "fork", "without-48407",
                                                                 ("present", "absent"), True)  # fmt: skip
    assert p.builds == ("a" * 12, "b" * 12) and set(p.rows) == {r.id for r in picked}
    status = {k.name: k.status for k in p.verdict.criteria}
    # one run a side of each row: tight samples, but no test over runs can judge it
    assert status["regression within the allowed bound versus the baseline"] == "missing"
    assert status["model/context/batch matrix covered on every target"] == "missing"  # GB10, Strix Halo never ran
    assert not p.verdict.ready and "matrix" in p.verdict.text

    out = tmp_path / "out"
    assert _cli(str(fork), "--compare", str(without), "--out", str(out)).returncode == 0
    md = (out / "report.md").read_text()
    assert "Each change as ported: the fork against the fork without it" in md
    assert f"| #48407 | fork ({'a' * 12}) | without-48407 ({'b' * 12}) | 2 | present / absent | ✘ not ready; " in md
    doc = json.loads((out / "report.json").read_text())["comparison"]["ported"]
    assert doc[0]["change"] == "48407" and doc[0]["presence"] == ["present", "absent"] and doc[0]["isolated"]


def test_a_change_the_ablated_build_still_holds_is_not_credited(tmp_path: Path) -> None:
    picked = rows("48407", target="cuda-sm90")[:1]
    fork, without = tmp_path / "fork", tmp_path / "without"
    _fork_side(fork, picked, changes="48407", present=True, build="sha256:" + "a" * 64, prefill=[10.0] * 4)
    _fork_side(without, picked, changes="", without="48407", present=True, build="sha256:" + "a" * 64,
               prefill=[10.0] * 4)  # fmt: skip
    (p,) = _compare(fork, without).ported
    assert not p.isolated
    assert "reads present, not absent" in p.problems[0] and "same vLLM build" in p.problems[1]


@pytest.mark.parametrize(
    ("without_source", "without_changes", "said"),
    [
        ("other-fork@" + "e" * 40 + " over 0.26.0@" + "d" * 40, "", "not one fork at one base"),
        ("test-fork@" + "c" * 40 + " over 0.27.0@" + "f" * 40, "46514,46849", "not one fork at one base"),
        ("", "46514,46849", "'without' from not recorded"),
        (FORK_SOURCE, "46514", "differ by #46849, #48407, not by #48407 alone"),
    ],
    ids=["another-fork", "another-base", "source-not-recorded", "more-than-the-change"],
)
def test_a_without_side_that_is_not_the_same_fork_less_the_change_is_not_credited(
    tmp_path: Path, without_source: str, without_changes: str, said: str
) -> None:
    """The case seen: a "without" side recorded by another fork (its name, no fork_changes) was taken as the
    ablation, isolated: true."""
    picked = rows("48407", target="cuda-sm90")[:2]
    fork, without = tmp_path / "fork", tmp_path / "without"
    _fork_side(fork, picked, changes="46514,46849,48407", present=True, build="sha256:" + "a" * 64,
               prefill=[10.0] * 4)  # fmt: skip
    _fork_side(without, picked, changes=without_changes, without="48407", present=False, build="sha256:" + "b" * 64,
               prefill=[10.0] * 4, source=without_source)  # fmt: skip
    (p,) = _compare(fork, without).ported
    assert not p.isolated
    assert any(said in problem for problem in p.problems), p.problems
