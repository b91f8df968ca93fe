"""`ci report` with its history (ci/report/across.py): a sequence of synthetic builds of one branch (passing, one row
flaky on one build's ids, a rebase onto another fork commit, a row failing on two commits), each reported in turn,
and what each report says: the flaky row found and quarantined by stack/flaky.yaml's rule and counted per target on
the first screen, the verdict as the other gate setting would give it, the row reinstated after 5 passes in a row, a
failure "new, unconfirmed" on one commit and confirmed on two, the bisect range listed from the fork's checkout with
the command that runs the row on a commit, and the trends with their 7-day mean, 30-day best and A/A floor."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from lxml import etree
from support.git_repos import Repo
from support.report_helpers import STACK, rows

from ci import cli
from ci.bench import synthetic
from ci.history import past

ROWS = rows("48407", "cuda-sm90")
FLAKY, BROKE = ROWS[0].id, ROWS[1].id
DAY0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
IMAGES = {c: "sha256:" + c * 64 for c in "123"}


def results(folder: Path, day: int, commit: str, image: str, failing: set[str], warm: float) -> Path:
    """One build's JUnit: every row of #48407 on cuda-sm90, `failing` failed, `warm` ms its warm requests (a row's
    own offset beside it), on the fork commit and image given, run on day `day`."""

    def case(row):
        c = synthetic.for_row(row, STACK.changes[row.change])
        c = synthetic.with_metric(c, synthetic.metric("warm_request_ms", warm + ROWS.index(row) % 3, "ms", "warm"))
        props = (("image_digest", image), ("fork", f"demo-fork main {commit}"))
        return replace(
            c, props=props, **({"status": "failure", "message": "top-k mismatch"} if row.id in failing else {})
        )

    folder.mkdir(parents=True)
    path = synthetic.write(folder / "stackgate.cuda-sm90.sparse_mla.0.xml", "cuda-sm90", "sparse_mla",
                           [case(r) for r in ROWS])  # fmt: skip
    tree = etree.parse(str(path))
    for suite in tree.getroot().iter("testsuite"):
        suite.set("timestamp", (DAY0 + timedelta(days=day)).isoformat())
    tree.write(str(path))
    return path


def report(tmp_path: Path, n: int, folder: Path, *extra: str) -> dict:
    out = tmp_path / f"report-{n}"
    argv = ["report", str(folder), "--out", str(out), "--history", str(tmp_path / "history.sqlite"),
            "--change", "48407", "--target", "cuda-sm90", *extra]  # fmt: skip
    assert cli.main(argv) in (0, 1)
    doc = json.loads((out / "report.json").read_text())
    doc["md"] = (out / "report.md").read_text()
    doc["html"] = (out / "report.html").read_text()
    return doc


@pytest.fixture(scope="module")
def fork(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The fork's checkout: commit A, then an imported change's cherry-pick and the fork's own commit B."""
    repo = Repo(tmp_path_factory.mktemp("fork") / "fork")
    a = repo.commit("base of the fork", {"vllm/a.py": "a = 1\n"})
    picked = repo.commit(
        "[Attention] skip dense short prefills\n\n(cherry picked from commit 0d0504b54c73)", {"vllm/b.py": "b = 1\n"}
    )
    b = repo.commit("fork: its own change", {"vllm/c.py": "c = 1\n"})
    return repo.path, [a, picked, b]


@pytest.fixture(scope="module")
def sequence(tmp_path_factory: pytest.TempPathFactory, fork) -> tuple[Path, list[dict]]:
    """Thirteen builds, one a day, each reported in turn into one history."""
    checkout, (a, _, b) = fork
    c = "c" * 40  # a later fork commit the checkout does not hold
    tmp = tmp_path_factory.mktemp("builds")
    mp = pytest.MonkeyPatch()
    mp.setenv("STACKGATE_FORK", str(checkout))  # the fork's checkout: the bisect range is listed from it
    plan = [  # (commit, image, failing rows, warm ms)
        (a, IMAGES["1"], set(), 50.0),
        (a, IMAGES["1"], {FLAKY}, 51.0),
        (a, IMAGES["1"], set(), 49.0),
        (a, IMAGES["1"], {FLAKY}, 50.0),
        (a, IMAGES["1"], set(), 50.5),  # 5: 2 of 5 failed on one build's ids: quarantined
        (a, IMAGES["1"], {FLAKY}, 49.5),  # 6: it fails again, quarantined
        *[(a, IMAGES["1"], set(), 50.0)] * 5,  # 7-11: 5 passes in a row reinstate it at 11
        (b, IMAGES["2"], {BROKE}, 80.0),  # 12: a rebase onto B: a row breaks, warm requests 60% slower
        (c, IMAGES["3"], {BROKE}, 81.0),  # 13: still failing, on a second commit: confirmed
    ]
    docs = []
    try:
        for n, (commit, image, failing, warm) in enumerate(plan, start=1):
            docs.append(report(tmp, n, results(tmp / f"build-{n}", n, commit, image, failing, warm)))
    finally:
        mp.undo()
    return tmp, docs


def test_every_build_is_in_the_history(sequence) -> None:
    tmp, docs = sequence
    got = past.read(tmp / "history.sqlite", since=DAY0, last=0)
    assert [b.at for b in got.builds] == [DAY0 + timedelta(days=n) for n in range(1, 14)]
    assert [d["history"]["earlier_builds"] for d in docs] == list(range(13))


def test_the_flaky_row_is_quarantined_once_the_rule_holds(sequence) -> None:
    _, docs = sequence
    quarantined = [[f["row"] for f in d["history"]["flaky"] if f["quarantined"]] for d in docs]
    assert quarantined[:4] == [[], [], [], []]  # 4 runs: fewer than 5
    assert quarantined[4:10] == [[FLAKY]] * 6
    five = docs[4]["history"]["flaky"][0]
    assert (five["runs"], five["fails"], five["both_on"]) == (
        5,
        2,
        [IMAGES["1"], docs[0]["history"]["build"]["commit"]],
    )
    said = "Quarantined as flaky (at least 5 runs in 7 days, 10% to 90% failed, passed and failed on one build; back " \
           "after 5 passes in a row): H200: 1 row (" + FLAKY  # fmt: skip
    assert said in docs[5]["md"]
    assert "they still hold their changes back (stack/flaky.yaml gate: hold)" in docs[5]["md"]
    assert f"H200: 1 row quarantined as flaky ({FLAKY})" in docs[5]["md"]  # counted per target on the first screen


def test_a_quarantined_row_never_disappears_and_the_verdict_says_what_it_would_be_without_it(sequence) -> None:
    _, docs = sequence
    six = docs[5]
    row = next(r for r in six["rows"] if r["id"] == FLAKY)
    assert row["status"] == "failure"  # still shown, still counted (gate: hold)
    (other,) = six["history"]["otherwise"]
    assert other["change"] == "48407" and other["if"] == "not counted"
    held = next(c for c in six["changes"] if c["id"] == "48407")
    matrix = next(c for c in held["criteria"] if c["id"] == "matrix")
    assert matrix["status"] == "fail" and "without its quarantined rows: not ready" in six["md"]
    assert other["verdict"] != held["verdict"]
    assert "flaky, quarantined: 3 of 6 runs failed in the 7 days up to this build (50%)" in six["md"]
    assert 'id="across-48407"' in six["html"] and "Rows quarantined as flaky, or reinstated" in six["html"]


def test_passes_in_a_row_reinstate_it(sequence) -> None:
    _, docs = sequence
    ten, eleven = docs[9]["history"]["flaky"], docs[10]["history"]["flaky"]
    assert [(f["quarantined"], f["reinstated"]) for f in ten] == [(True, False)]  # 4 passes in a row
    assert [(f["quarantined"], f["reinstated"]) for f in eleven] == [(False, True)]  # the 5th
    assert f"Reinstated after 5 passes in a row: {FLAKY}." in docs[10]["md"]


def test_a_failure_on_one_commit_is_new_and_unconfirmed_and_on_two_confirmed(sequence, fork) -> None:
    _, docs = sequence
    _, (a, picked, b) = fork
    (new,) = docs[11]["history"]["failing"]
    assert (new["row"], new["new"], new["confirmed"], new["commits"]) == (BROKE, True, False, [b])
    assert new["said"] == "new since build #11 (passed there); seen on 1 fork commit: new, unconfirmed"
    assert new["bisect"] == [a, b]
    command = f"python -m ci main --fork {fork[0]} --ref {b} --target cuda-sm90 --rows {BROKE}"
    assert new["bisect_command"] == command  # the middle of the range's two commits
    html = docs[11]["html"]
    assert f"2 commits between: {picked[:12]} [Attention] skip dense short prefills (cherry picked from commit " \
           f"0d0504b54c73); {b[:12]} fork: its own change" in html  # fmt: skip
    (confirmed,) = docs[12]["history"]["failing"]
    assert (confirmed["new"], confirmed["confirmed"], confirmed["builds"]) == (False, True, 2)
    assert confirmed["said"] == "failing since build #12 (2 builds); seen on 2 fork commits"
    assert confirmed["since"]["build"] == 12


def test_the_trend_shows_the_move_past_the_aa_floor(sequence) -> None:
    _, docs = sequence
    (trend,) = [t for t in docs[11]["history"]["trends"] if t["metric"] == "warm_request_ms"]
    values = [p["value"] for p in trend["points"]]
    assert values == [51.0, 52.0, 50.0, 51.0, 51.5, 50.5, 51.0, 51.0, 51.0, 51.0, 51.0, 81.0]  # medians of the rows
    assert trend["points"][-1]["build"] == 0  # this build
    assert trend["mean_7_days"] == pytest.approx((51.5 + 50.5 + 51.0 * 5 + 81.0) / 8)  # day 5 is exactly 7 days old
    assert trend["best_30_days"] == 50.0
    assert trend["floor_pct"] == pytest.approx(100 * 1.0 / 51.0)  # build 2's 52 against the A builds' median
    assert trend["moved_pct"] == pytest.approx(100 * 30 / 51) and trend["headline"]
    assert (
        "Moved past its A/A floor since the last build: #48407 on H200: warm_request_ms 51 → 81 ms" in docs[11]["html"]
    )
    assert '<polyline points="' in docs[11]["html"] and "7-day mean" in docs[11]["html"]


def test_waived_quarantined_rows_leave_the_verdict_and_it_says_what_counting_them_would_give(
    sequence, tmp_path: Path, stack_copy: Path, edit
) -> None:
    tmp, _ = sequence
    edit(stack_copy / "flaky.yaml", "gate: hold", "gate: waive")
    history = tmp_path / "history.sqlite"
    shutil.copyfile(tmp / "history.sqlite", history)
    out = tmp_path / "r"
    argv = ["report", str(tmp / "build-6"), "--out", str(out), "--history", str(history), "--stack", str(stack_copy),
            "--change", "48407", "--target", "cuda-sm90"]  # fmt: skip
    cli.main(argv)
    doc = json.loads((out / "report.json").read_text())
    change = next(c for c in doc["changes"] if c["id"] == "48407")
    assert next(c for c in change["criteria"] if c["id"] == "matrix")["status"] == "missing"  # judged without it
    assert doc["history"]["otherwise"][0]["if"] == "counted"
    md = (out / "report.md").read_text()
    assert "their changes are judged without them (stack/flaky.yaml gate: waive)" in md
    assert "were its quarantined rows counted: not ready" in md


def test_the_same_results_reported_again_are_one_build(sequence, tmp_path: Path) -> None:
    tmp, _ = sequence
    history = tmp_path / "history.sqlite"
    shutil.copyfile(tmp / "history.sqlite", history)
    for _ in range(2):
        cli.main(["report", str(tmp / "build-13"), "--out", str(tmp_path / "r"), "--history", str(history)])
    assert len(past.read(history, since=DAY0, last=0).builds) == 13


def test_no_history_reads_and_writes_none(tmp_path: Path, sequence) -> None:
    tmp, _ = sequence
    out = tmp_path / "report"
    assert cli.main(["report", str(tmp / "build-1"), "--out", str(out), "--no-history"]) in (0, 1)
    assert "history" not in json.loads((out / "report.json").read_text())
    assert not (tmp_path / "history.sqlite").exists()
    cli.main(["report", str(tmp / "build-1"), "--out", str(out)])  # the default: beside the report's folder
    assert len(past.read(tmp_path / "history.sqlite", since=DAY0, last=0).builds) == 1


def test_the_next_step_reruns_a_row_that_broke_before_one_quarantined_as_flaky(sequence, fork, tmp_path: Path) -> None:
    tmp, _ = sequence
    _, (_, _, b) = fork
    history = tmp_path / "history.sqlite"
    shutil.copyfile(tmp / "history.sqlite", history)
    folder = results(tmp_path / "both", 12, b, IMAGES["2"], {FLAKY, BROKE}, 80.0)
    out = tmp_path / "r"
    cli.main(["report", str(folder), "--out", str(out), "--history", str(history), "--change", "48407"])
    doc = json.loads((out / "report.json").read_text())
    assert [f["row"] for f in doc["history"]["flaky"] if f["quarantined"]] == [FLAKY]
    summary = next(line for line in (out / "report.md").read_text().splitlines() if line.startswith("| #48407 |"))
    assert summary.endswith(f"| `python -m ci repro {BROKE}` |")  # the first screen's next step
