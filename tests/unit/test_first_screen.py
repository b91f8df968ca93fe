"""The report's first screen, as a fork maintainer acts on it: each change's verdict on each target in words and
numbers, what it lacks named with the command that gives it, and nothing failing hidden below the headline."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from support.paths import REPO
from support.report_helpers import rows, write_rows

from ci.bench import synthetic
from ci.cli import main


def _outside(junit: Path) -> None:
    foreign = [synthetic.FakeCase(row="", change="", target="cpu", suite="selftest", classname="tests.test_other",
                                  test=f"test_{i}", status="failure" if i % 2 else "pass", message="boom")
               for i in range(4)]  # fmt: skip
    synthetic.write(junit / "other-tool.xml", "cpu", "selftest", foreign)


def test_failing_tests_outside_the_plan_are_counted_under_what_was_judged(tmp_path, capsys) -> None:
    junit = tmp_path / "junit"
    write_rows(junit, rows("selftest", target="cpu"))
    _outside(junit)
    assert main(["report", str(junit), "--out", str(tmp_path / "r")]) == 1
    md = (tmp_path / "r" / "report.md").read_text().splitlines()
    assert md[2].startswith("**Judged: stock vLLM ")  # what was judged, then the headline
    assert "2 of 4 testcases outside the plan failed or errored" in md[4], md[:5]
    html = (tmp_path / "r" / "report.html").read_text()
    head = html[html.index("<header>") : html.index("</header>")]
    assert "2 of 4 testcases outside the plan failed or errored" in head and 'href="#outside"' in head
    assert 'id="outside"' in html
    assert main(["report", str(junit), "--out", str(tmp_path / "i"), "--outside-informational"]) == 0
    lines = (tmp_path / "i" / "report.md").read_text().splitlines()[:5]
    assert any("informational: 2 of 4 testcases outside the plan" in line for line in lines)
    capsys.readouterr()


def test_a_passing_run_without_a_baseline_needs_one_and_says_how_then_is_ready(tmp_path, capsys) -> None:
    """Every selftest row passes: what holds the change back is its baseline, named with the command; given one
    (4 runs a side, what the test over runs needs), the change is ready."""
    selftest = rows("selftest", target="cpu")
    now, before = tmp_path / "now", tmp_path / "before"
    for i in range(4):
        write_rows(now, selftest, prefix=f"run{i}-")
        write_rows(before, selftest, prefix=f"run{i}-")
    assert main(["report", str(before), "--out", str(tmp_path / "prev"), "--target", "cpu"]) == 0
    assert main(["report", str(now), "--out", str(tmp_path / "r"), "--target", "cpu"]) == 0
    md = (tmp_path / "r" / "report.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| #selftest |"))
    given = f"python -m ci report {now} --out {tmp_path / 'r'} --target cpu"
    want = f"{given} --baseline PREVIOUS/report.json"
    assert "✘ not ready" in row and "needs a baseline" in row and "the baseline line below the table" in row
    assert f"to judge allowed regression against): `{want}`" in md  # said once, below the table
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    (change,) = doc["changes"]
    assert change["lacks"] == [{"text": "needs a baseline", "command": want}]
    given = ["report", str(now), "--out", str(tmp_path / "b"), "--target", "cpu"]
    assert main([*given, "--baseline", str(tmp_path / "prev" / "report.json")]) == 0
    md = (tmp_path / "b" / "report.md").read_text()
    assert "**1 of 1 imported changes ready for default enablement.**" in md
    assert next(line for line in md.splitlines() if line.startswith("| #selftest |")).startswith(
        "| #selftest | ✔ ready"
    )
    capsys.readouterr()


def test_each_change_reads_per_target_in_words_and_numbers(tmp_path, capsys) -> None:
    """A change whose one H200 row ran with a cold/warm ratio over its bound: the H200 fails with that number; the
    GB10 and Strix Halo are not run, with their counts and the command (its lock first where a target has none)."""
    picked = rows("48407", target="cuda-sm90")[:1]

    def slow(r, c):
        return synthetic.with_metric(c, synthetic.metric("cold_warm_ratio", 3.1, "ratio", "none", [3.1]))

    write_rows(tmp_path / "junit", picked, slow)
    main(["report", str(tmp_path / "junit"), "--out", str(tmp_path / "r"), "--change", "48407"])
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    (change,) = doc["changes"]
    at = {t["target"]: t for t in change["targets"]}
    assert at["cuda-sm90"]["state"] == "fails" and "cold/warm: 3.10x > 1.2x on 1 row" in at["cuda-sm90"]["text"]
    assert at["cuda-sm121a"]["state"] == "not run" and at["cuda-sm121a"]["command"] == "nox -s sm121a_sparse_mla"
    assert at["rocm-gfx1151"]["state"] == "not run"
    assert at["rocm-gfx1151"]["command"] == "python -m ci lock rocm-gfx1151"  # no hashed lock yet: that first
    md = (tmp_path / "r" / "report.md").read_text()
    assert "cold\\_warm" not in md.split("## Verdicts")[0]  # words, never field names, on the first screen
    capsys.readouterr()


def test_a_change_closed_upstream_says_in_one_line_why_no_release_holds_it(tmp_path: Path) -> None:
    """#48804 was closed unmerged; upstream warms JIT kernels by #47451 and #49903 instead: its rows read "absent",
    and its section says why, where a merged change's says nothing of the kind."""
    from ci import cli

    run = REPO / "evidence" / "h200-bake-scheduled" / "run"
    assert cli.main(["report", str(run), "--target", "cuda-sm90", "--out", str(tmp_path)]) in (0, 1)
    text = (tmp_path / "report.md").read_text()
    line = next(x for x in text.splitlines() if x.startswith("vllm-project/vllm#48804: closed"))
    assert "never merged, so no release holds it: upstream reached its goal by #47451 and #49903 (" in line
    merged = next(x for x in text.splitlines() if x.startswith("vllm-project/vllm#46849: merged"))
    assert "never merged" not in merged


def test_a_target_names_the_card_its_rows_ran_on(tmp_path, capsys) -> None:
    """cuda-sm90 rows run on an H100 as on an H200: the target's label is what was planned for, the card is named
    from the rows' own record (stackgate.card), on the first screen and in report.json's cases."""
    picked = rows("48407", target="cuda-sm90")[:1]
    card = "NVIDIA H100 80GB HBM3 (81559 MiB, driver 580.159.04)"

    def on_h100(r, c):
        return replace(c, props=(*c.props, ("card", card)))

    write_rows(tmp_path / "junit", picked, on_h100)
    main(["report", str(tmp_path / "junit"), "--out", str(tmp_path / "r"), "--change", "48407"])
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    at = {t["target"]: t for t in doc["changes"][0]["targets"]}
    assert at["cuda-sm90"]["text"].endswith(f"; ran on {card}")
    assert "ran on" not in at["cuda-sm121a"]["text"]  # nothing ran there: no card is claimed
    (row,) = [r for r in doc["rows"] if r["id"] == picked[0].id]
    assert [run["card"] for run in row["runs"]] == [card]
    md = (tmp_path / "r" / "report.md").read_text()
    assert f"ran on {card}" in md and "H100 not run: " in md and "H200 not run" not in md
    capsys.readouterr()
