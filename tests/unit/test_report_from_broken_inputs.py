"""python -m ci report: broken inputs still give a report, untrusted text stays inert, writes are atomic."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from support.report_helpers import rows, write_rows

from ci.bench import synthetic
from ci.cli import main
from ci.report import html as report_html
from ci.report import markdown as report_md
from ci.report import write as report
from ci.stack.loader import DEFAULT_STACK

TARGET = "cuda-sm121a"
EVIL = 'assert 1 == 2 | <script>alert("x")</script> & `rm -rf` |'


def _cells(line: str) -> int:
    """Cells in a Markdown table line, counting only pipes that are not escaped."""
    return len(re.findall(r"(?<!\\)\|", line)) - 1


def _assert_tables_intact(text: str) -> None:
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            width = _cells(lines[i])
            assert _cells(lines[i + 1]) == width
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                assert _cells(lines[i]) == width, lines[i]
                i += 1
        else:
            assert not lines[i].startswith("|"), f"table line outside a table: {lines[i]}"
            i += 1


@pytest.fixture
def messy(tmp_path: Path) -> tuple[Path, list]:
    """Every problem the report must survive, in one folder of inputs."""
    junit = tmp_path / "junit"
    selected = rows(target=TARGET)
    evil, dup, skipped_over = selected[0], selected[1], selected[2]
    ran = [r for r in selected if r != skipped_over]

    def edit(r, c):
        return replace(c, status="failure", message=EVIL) if r == evil else c

    good = write_rows(junit, ran, edit)
    write_rows(junit / "rerun", [dup], lambda r, c: replace(c, status="error", message="signal 11 (SIGSEGV)"))
    text = good[0].read_text()
    (junit / "truncated.xml").write_text(text[: len(text) // 3])
    (junit / "empty.xml").write_text("")
    (junit / "notxml.xml").write_text("Traceback (most recent call last):\n")
    return junit, [evil, dup, skipped_over]


def test_messy_inputs_give_a_full_report_that_shows_every_problem(tmp_path: Path, messy) -> None:
    junit, (evil, dup, skipped_over) = messy
    out = tmp_path / "out"
    assert main(["report", str(junit), "--out", str(out)]) == 1  # a failing, a disagreeing and a cut-short row

    doc = json.loads((out / "report.json").read_text())
    inputs = {Path(i["path"]).name: i["status"] for i in doc["inputs"]}
    assert inputs["truncated.xml"] == "truncated" and inputs["empty.xml"] == "empty"
    assert inputs["notxml.xml"] == "not XML"
    by_id = {r["id"]: r for r in doc["rows"]}
    assert by_id[evil.id]["status"] == "failure" and by_id[evil.id]["message"] == EVIL
    assert by_id[evil.id]["repro"] == f"python -m ci repro {evil.id}"
    assert by_id[dup.id]["status"] == "conflict" and len(by_id[dup.id]["runs"]) >= 2
    assert by_id[skipped_over.id]["status"] in ("not run", "incomplete")
    gpu_rows = [r for r in doc["rows"] if r["target"] != TARGET]
    assert gpu_rows and {r["status"] for r in gpu_rows} == {"not run"}
    assert {c["id"] for c in doc["changes"]} == {"46514", "46849", "48407", "48804", "49903", "selftest", "composition"}
    assert all(not c["ready"] and c["blocked_by"] for c in doc["changes"])

    md = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    for text in (md, html):
        for needle in ("truncated.xml", "empty.xml", "notxml.xml", "not run", dup.id, f"python -m ci repro {evil.id}"):
            assert needle in text, needle
    assert "<script" not in html and "&lt;script&gt;" in html
    # the release a positive control needs
    assert "vllm-project/vllm#46514: merged on 2026-08-19, first in vLLM 0.29.0 (as of" in md
    assert "<script" not in md and "\\|" in md
    _assert_tables_intact(md)
    # every planned row of the target is listed in its status matrix
    section = md.split(f"## Status matrix: {TARGET}", 1)[1].split("\n## ", 1)[0]
    assert all(r.id in section for r in rows(target=TARGET))


def test_html_is_self_contained(tmp_path: Path, messy) -> None:
    junit, _ = messy
    main(["report", str(junit), "--out", str(tmp_path / "out")])
    html = (tmp_path / "out" / "report.html").read_text()
    assert "<svg" in html and "cold (dark), warm (light)" in html and 'name="viewport"' in html
    assert not re.search(r"<(script|link|img|iframe)\b|src=|@import|url\(", html)
    assert re.findall(r"https?://[^\"' ]+", html) == ["http://www.w3.org/2000/svg"] * html.count("<svg")


def test_a_failed_run_leaves_the_previous_report_intact(tmp_path: Path, messy, monkeypatch) -> None:
    junit, _ = messy
    out = tmp_path / "out"
    assert main(["report", str(junit), "--out", str(out)]) == 1
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def broken(*_args):
        raise RuntimeError("renderer bug")

    monkeypatch.setattr(report_html, "render", broken)
    with pytest.raises(RuntimeError):
        main(["report", str(junit / "empty.xml"), "--out", str(out)])
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_an_unwritable_output_is_a_report_error(tmp_path: Path, messy, capsys) -> None:
    junit, _ = messy
    (tmp_path / "file").write_text("not a directory")
    assert main(["report", str(junit), "--out", str(tmp_path / "file" / "out")]) == 5
    assert "cannot write the report" in capsys.readouterr().err


def test_the_templates_compiled_code_is_cached_and_a_cache_it_cannot_write_is_no_error(tmp_path, monkeypatch) -> None:
    import jinja2

    fresh = report_html.template.__wrapped__  # the template as a new process makes it, not this one's
    monkeypatch.setenv("STACKGATE_CACHE", str(tmp_path / "cache"))
    compiled = fresh()  # compiled, and its code written to the cache
    assert [p.suffix for p in (tmp_path / "cache" / "jinja").iterdir()] == [".cache"]

    def no_compiling(*_a, **_k):
        raise AssertionError("compiled again: the cache was not used")

    with monkeypatch.context() as m:
        m.setattr(jinja2.Environment, "compile", no_compiling)
        assert fresh().name == compiled.name  # a second process's: its code read from the cache
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("STACKGATE_CACHE", str(tmp_path / "file" / "under"))  # no folder can be made there
    assert fresh().name == compiled.name  # compiled in memory


def test_markdown_over_budget_drops_passing_rows_then_cuts_outside_tables(tmp_path: Path, messy) -> None:
    junit, _ = messy
    rep = report.build(DEFAULT_STACK, [junit], None)
    full = report_md.render(rep)
    shrunk = report_md.render(rep, budget=len(full.encode()) - 1)
    assert "passing rows left out" in shrunk and len(shrunk) < len(full)
    _assert_tables_intact(shrunk)
    for budget in (3000, 5000, 20000):
        cut = report_md.render(rep, budget=budget)
        assert "**Truncated:**" in cut and len(cut.encode()) < budget + 300
        _assert_tables_intact(cut)


def test_the_previous_report_json_serves_as_baseline(tmp_path: Path) -> None:
    junit = tmp_path / "junit"
    write_rows(junit, rows("48804"))
    assert main(["report", str(junit), "--out", str(tmp_path / "a")]) == 0
    argv = ["report", str(junit), "--out", str(tmp_path / "b"), "--baseline", str(tmp_path / "a" / "report.json")]
    assert main(argv) == 0
    change = next(c for c in json.loads((tmp_path / "b" / "report.json").read_text())["changes"] if c["id"] == "48804")
    # the allowed regression is judged against the earlier report; the effect only against the fork without it
    assert {k["id"]: k["status"] for k in change["criteria"]}["allowed_regression"] == "pass"
    assert change["blocked_by"] == ["the change's effect on what it acts on, against the fork without it"]


def test_an_unusable_baseline_is_listed_and_the_report_still_written(tmp_path: Path) -> None:
    junit = tmp_path / "junit"
    write_rows(junit, rows("48804")[:2])
    (tmp_path / "old.json").write_text("{}")
    assert main(["report", str(junit), "--out", str(tmp_path / "o"), "--baseline", str(tmp_path / "old.json")]) == 0
    doc = json.loads((tmp_path / "o" / "report.json").read_text())
    base = next(i for i in doc["inputs"] if i["role"] == "baseline")
    assert base["status"] == "unreadable" and "not a stackgate report.json" in base["problem"]


def test_a_failed_testcase_outside_the_plan_fails_the_report_unless_declared_informational(tmp_path, capsys) -> None:
    """A harness test, a suite of one's own or another tool's JUnit: counted in the headline, and a failure there is
    a failing report (exit 1), as a failing row is; --outside-informational keeps it shown but out of the status."""
    selftest = rows("selftest", target="cpu")
    junit = tmp_path / "junit"
    write_rows(junit, selftest)
    foreign = [synthetic.FakeCase(row="", change="", target="cpu", suite="selftest", classname="tests.test_other",
                                  test=f"test_{i}", status="failure" if i % 2 else "pass", message="boom")
               for i in range(4)]  # fmt: skip
    synthetic.write(junit / "other-tool.xml", "cpu", "selftest", foreign)
    assert main(["report", str(junit), "--out", str(tmp_path / "r")]) == 1
    out = capsys.readouterr().out
    assert f"({len(selftest)} pass, " in out and "4 testcases outside the plan (2 failed or errored)," in out
    assert main(["report", str(junit), "--out", str(tmp_path / "r"), "--outside-informational"]) == 0
    assert "4 testcases outside the plan (2 failed or errored; informational)" in capsys.readouterr().out


def test_report_json_validates_against_its_published_schema(tmp_path) -> None:
    """ci/report/report.schema.json is the contract of report.json: a report with failures, a comparison with a fork
    side and the side without a change, and the generator, stack digest and stable criterion ids it names."""
    import jsonschema

    from ci.report import json_doc

    schema = json.loads(json_doc.SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    picked = rows("48407", target="cuda-sm90")[:2]
    for name, props in (("fork", (("fork_changes", "48407"),)), ("without", (("fork_without", "48407"),
                                                                          ("fork_changes", "")))):  # fmt: skip
        write_rows(tmp_path / name, picked, lambda r, c, props=props: replace(c, props=props, status="failure"))
    assert (
        main(["report", str(tmp_path / "fork"), "--compare", str(tmp_path / "without"), "--out", str(tmp_path / "r")])
        == 1
    )
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    jsonschema.validate(doc, schema)
    assert doc["generator"]["name"] == "stackgate" and doc["stack"]["digest"].startswith("sha256:")
    ids = [c["id"] for c in doc["changes"][0]["criteria"]]
    assert ids == ["tied", "cold_warm", "no_jit", "matrix", "tolerance", "graph_replay", "effect", "allowed_regression"]
    assert doc["comparison"]["ported"][0]["change"] == "48407"
    run = next(r for r in doc["rows"] if r["id"] == picked[0].id)["runs"][0]
    assert run["fork_changes"] == ["48407"]


def test_failure_text_cannot_make_links_or_images_in_the_annotation(tmp_path) -> None:
    """A failure message is untrusted: in report.md it stays text, whatever Markdown it holds."""
    evil = "boom ![x](https://example.invalid/p.png) [click](https://example.invalid) <img src=x>"
    selftest = rows("selftest", target="cpu")
    write_rows(tmp_path / "j", selftest[:1], lambda r, c: replace(c, status="failure", message=evil))
    main(["report", str(tmp_path / "j"), "--out", str(tmp_path / "r")])
    md = (tmp_path / "r" / "report.md").read_text()
    assert "](https://" not in md.replace("\\](https://", "") and "<img" not in md and "!\\[x\\]" in md


def test_charts_read_at_any_width_log_where_values_span_decades() -> None:
    """Plain numbers with units (no scientific notation), each row's name on its own line (never clipped), and a log
    axis once a cold bar is decades above its warm one, so the warm bar stays visible."""
    from ci.report import plot
    from ci.report.sections.triage import Pair

    def m(name: str, value: float, phase: str) -> synthetic.Metric:
        return synthetic.metric(name, value, "ms", phase, [value * 0.98, value, value * 1.02])  # type: ignore[arg-type]

    row = "46514.cuda-sm90.deepseek-v4-flash-shrunk.8283bff9"
    cold, warm = m("cold_first_request_ms", 54503.0, "cold"), m("warm_request_ms", 179.0, "warm")
    wide = [Pair(row=row, target="cuda-sm90", quantity="request_ms", cold=cold, warm=warm)]
    svg = plot.chart("request_ms", "ms", wide)
    assert "log scale" in svg and "54,503 ms" in svg and "179 ms" in svg and "e+" not in svg
    assert ">100,000<" in svg and ">100<" in svg  # decade ticks
    assert f'class="l">{wide[0].row}</text>' in svg
    near = [
        Pair(row="r", target="cpu", quantity="q", cold=m("cold_q_ms", 12.0, "cold"), warm=m("warm_q_ms", 10.0, "warm"))
    ]
    assert "linear scale" in plot.chart("q", "ms", near)
    assert [plot.num(v) for v in (1496.2, 0.2746, 12.345, 0.0)] == ["1,496", "0.275", "12.3", "0"]


def test_one_cause_worded_per_row_is_one_cause_with_its_rows_and_the_names_most_listed(tmp_path) -> None:
    """ "N Triton compile(s) after engine ready: <kernels>" names other kernels on each row: one cause, its count the
    range the rows span, the kernels most rows list first; the next step re-runs a row of the commonest cause."""
    from ci.report.sections import first_screen

    selected = rows("48804", target=TARGET)[:4]
    said = {
        selected[0].id: "9 Triton compile(s) after engine ready: _a_kernel, _b_kernel",
        selected[1].id: "2 Triton compile(s) after engine ready: _b_kernel",
        selected[2].id: "change absent; 4 Triton compile(s) after engine ready: _c_kernel, _b_kernel",
        selected[3].id: "change absent",
    }
    write_rows(tmp_path / "junit", selected, lambda r, c: replace(c, status="failure", message=said[r.id]))
    built = report.build(DEFAULT_STACK, [tmp_path / "junit"], None, changes=["48804"])
    ((_, _, _, causes, step),) = first_screen.table(built).rows
    assert causes.startswith(
        "2–9 Triton compile(s) after engine ready: _b_kernel (3 rows), _a_kernel, _c_kernel (3 rows)"
    )
    assert "change absent (2 rows)" in causes
    assert step in {f"`python -m ci repro {selected[i].id}`" for i in range(3)}  # a code span: pasteable as it reads


def test_a_cause_with_a_version_in_it_is_said_once_without_failing() -> None:
    """A dotted version ("12.8.93") looks like a number to the folding: it is kept as the first row says it."""
    from ci.report.sections.triage import said_once

    assert (
        said_once(["needs CUDA 12.8.93 (3 calls)", "needs CUDA 12.9.1 (4 calls)"]) == "needs CUDA 12.8.93 (3–4 calls)"
    )


def test_a_cause_ending_in_a_record_of_what_was_seen_is_one_cause() -> None:
    """The #52512 guard names the reads it saw ("[{'read': 1, 'tokens': 512, ...}]"): one cause whatever the
    record, shown with the first row's record as an example."""
    from ci.report.sections.triage import cause_key, said_once

    texts = ["read all -1 top-k rows [{'read': 1, 'tokens': 512}]", "read all -1 top-k rows [{'read': 1}, {'read': 2}]"]
    assert len({cause_key(t) for t in texts}) == 1
    assert said_once(texts) == "read all -1 top-k rows, e.g. [{'read': 1, 'tokens': 512}]"


def test_a_markdown_table_escapes_each_cell_as_md_cell_does() -> None:
    """ci.common.tables.markdown escapes a whole table in one pass: the same cells as escaping each alone, a cell
    holding the character it splits on and a row of another width included."""
    import random

    from ci.common.tables import markdown, md_cell

    def one_by_one(headers, rows) -> str:
        lines = ["| " + " | ".join(md_cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
        return "\n".join(lines + ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]) + "\n"

    rng = random.Random(7)
    alphabet = "ab &|<>\n\r`_*[]\x00é✔"
    word = lambda: "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))  # noqa: E731
    for _ in range(500):
        width = rng.randint(1, 5)
        rows = [tuple(word() for _ in range(width if rng.random() < 0.9 else rng.randint(0, 6))) for _ in range(4)]
        headers = tuple(word() for _ in range(width))
        assert markdown(headers, rows) == one_by_one(headers, rows), (headers, rows)
    assert markdown(("a|b",), [("[x](http://y)",), (3,)]) == "| a\\|b |\n|---|\n| \\[x\\](http://y) |\n| 3 |\n"
