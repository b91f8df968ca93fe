"""report.html as a person sees it, in a real headless Chromium (Debian's, driven by Playwright), at desktop
and phone widths: no console error, no network request, the verdicts above the fold, a failing row reached
by its anchor, nothing wider than the screen; and the re-run line it prints reproduces that failure."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import REPO

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _need_browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    if CHROMIUM and sync_playwright:
        return sync_playwright
    if os.environ.get("STACKGATE_REQUIRE_BROWSER") == "1":
        pytest.fail("STACKGATE_REQUIRE_BROWSER=1 and no chromium or playwright here")
    pytest.skip("needs Debian's chromium and the playwright package")


@pytest.fixture(scope="module")
def failing_run(tmp_path_factory: pytest.TempPathFactory, request) -> Path:
    """A real cpu self-test run on this host whose rows fail: a stack whose tolerance no float meets."""
    root = tmp_path_factory.mktemp("browser")
    stack = root / "stack"
    shutil.copytree(REPO / "stack", stack)
    change = stack / "changes" / "selftest.yaml"
    change.write_text(change.read_text().replace("    max: 1.0e-6\n", "    max: 1.0e-30\n", 1))
    out = root / "results" / "cpu-selftest"
    run = subprocess.run([sys.executable, "-m", "ci", "--stack", str(stack), "run", "cpu", "selftest", "--host",
                          "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-2000:]
    done = subprocess.run([sys.executable, "-m", "ci", "--stack", str(stack), "report", str(root / "results"),
                           "--out", str(root / "report")], cwd=REPO, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 1, done.stderr  # failing rows fail the report too
    return root


@pytest.mark.parametrize(("width", "height"), [(1366, 900), (390, 844)], ids=["desktop", "phone"])
def test_the_page_in_a_real_browser(failing_run: Path, width: int, height: int) -> None:
    sync_playwright = _need_browser()
    html = failing_run / "report" / "report.html"
    doc = json.loads((failing_run / "report" / "report.json").read_text())
    row = next(r["id"] for r in doc["rows"] if r["status"] == "failure")
    flags = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--no-first-run", "--disable-quic"]  # fmt: skip
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=flags)
        page = browser.new_page(viewport={"width": width, "height": height})
        errors, requests = [], []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(html.as_uri())
        assert errors == [] and requests == [html.as_uri()]  # the page and nothing else
        verdicts = page.locator("#verdicts").bounding_box()
        assert verdicts is not None, verdicts
        # the first screen: each change's verdict, its causes with their row counts and the next step
        table = page.locator("#summary table").bounding_box()
        assert table is not None and table["y"] < height / 3, table
        first = page.locator("#summary tbody tr", has_text="#selftest")
        box = first.bounding_box()
        assert box is not None and box["y"] + box["height"] <= height, box  # within the first viewport
        cells = first.locator("td").all_inner_texts()
        # the row count: "(4 rows)" after a cause on a desktop, "4 rows:" before it on a phone (one line a cause)
        assert "not ready" in cells[1] and "exceeds 1e-30" in cells[3] and re.search(r"\b\d+ rows?\b", cells[3])
        assert "CPU fails: 4 of 4 rows" in cells[2] and cells[4].startswith("python -m ci repro ")
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        page.goto(f"{html.as_uri()}#row-{row}")
        target = page.locator(f"[id='row-{row}']")
        assert target.count() == 1
        box = target.bounding_box()
        assert box is not None and -1 <= box["y"] < height  # scrolled to it
        assert "exceeds 1e-30" in target.inner_text()
        target.locator("summary").click()  # opened: the whole message, the log and the re-run line
        assert "Log:" in target.inner_text() and "--stackgate-row" in target.inner_text()
        browser.close()


def test_the_printed_rerun_line_reproduces_the_failure(failing_run: Path) -> None:
    doc = json.loads((failing_run / "report" / "report.json").read_text())
    row = next(r for r in doc["rows"] if r["status"] == "failure")
    line = row["repro_command"]
    assert line and "--stackgate-row" in line
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}  # python3 = this venv's
    # the line runs from the folder the report was made in (the checkout): paths below it read "$PWD"
    out = Path(line.split("mkdir -p ", 1)[1].split(" ", 1)[0].replace('"$PWD"', str(REPO)))
    shutil.rmtree(out, ignore_errors=True)  # no earlier run's file
    subprocess.run(["bash", "-c", line], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    again = [p for p in out.glob("junit-repro-*.xml")]
    assert again, f"no JUnit from {line}"
    text = again[0].read_text()
    assert row["id"] in text and "exceeds 1e-30" in text and "<failure" in text


FIFTH_RUN = REPO / "evidence" / "h200-shrunk" / "fifth-run" / "report" / "report.html"
NO_CAUSES = REPO / "evidence" / "fork-port" / "report" / "report.html"  # every change: not run, or absent


def test_with_no_cause_to_name_the_next_step_takes_the_causes_column(failing_run: Path) -> None:
    """A report where no row failed has no Causes column: its width goes to the next step, the line a user copies."""
    sync_playwright = _need_browser()
    with sync_playwright() as p:
        widths = {}
        for name, html in (("causes", failing_run / "report" / "report.html"), ("none", NO_CAUSES)):
            browser, page = _open(p, html, 1366, 900)
            headers = page.locator("#summary thead th").all_inner_texts()
            assert ("Causes of failing tests (rows)" in headers) == (name == "causes"), headers
            box = page.locator("#summary thead th", has_text="Next step").bounding_box()
            assert box is not None
            widths[name] = box["width"]
            browser.close()
    assert widths["none"] > 1.5 * widths["causes"], widths


FORK = REPO / "evidence" / "h200-fork" / "report" / "report.html"
SIZES = [(1366, 900), (390, 844)]


def _open(p, html: Path, width: int, height: int):
    """The page in Debian's chromium at one size (evidence/report-screens/shoot.py shoots the same)."""
    browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
    page = browser.new_page(viewport={"width": width, "height": height})
    page.goto(html.as_uri())
    return browser, page


@pytest.mark.parametrize(("width", "height"), SIZES, ids=["desktop", "phone"])
def test_every_change_of_a_large_report_is_judged_on_the_first_screen(width: int, height: int) -> None:
    """The committed fifth shrunk run (seven changes, a dozen long causes): changes with failing rows first, each with
    its verdict per target, its causes with their row counts and its next step. A desktop's first viewport holds every
    change whose rows fail (the one never run, #49903, comes after them, below the fold); a phone's, the first two
    whole (each names three targets: seven do not fit 844 px); every change within two screens."""
    sync_playwright = _need_browser()
    with sync_playwright() as p:
        browser, page = _open(p, FIFTH_RUN, width, height)
        rows = page.locator("#summary tbody tr")
        assert rows.count() == 7
        for i in range(rows.count()):
            row = rows.nth(i)
            box = row.bounding_box()
            assert box is not None and box["y"] + box["height"] <= 2 * height, (i, box)
            failing = bool(row.locator("td.causes li").count())
            if i < 2 or (failing and width > 700):
                assert box["y"] + box["height"] <= height, (i, box)
            text = row.inner_text()
            assert "not ready" in text, text
            assert re.search(r"\b\d+ rows?\b", text), text
            step = row.locator("td.next code").inner_text().replace("\n", "")
            assert step.startswith(("python -m ci repro ", "nox -s ")), step
        failing = [bool(rows.nth(i).locator("td.causes li").count()) for i in range(rows.count())]
        assert failing == sorted(failing, reverse=True)  # the changes whose rows fail come first
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        browser.close()


@pytest.mark.parametrize(("width", "height"), SIZES, ids=["desktop", "phone"])
def test_the_fork_report_says_per_target_what_holds_each_change_back(width: int, height: int) -> None:
    """The committed fork report, first viewport: #48407 and #46849 each read per target, in words and numbers, the
    criterion that fails on the H200 with its number against its bound, and the rows not run on the GB10 and the
    Strix Halo; no field name, no emoji (Debian's chromium has no emoji font)."""
    sync_playwright = _need_browser()
    with sync_playwright() as p:
        browser, page = _open(p, FORK, width, height)
        for change in ("#48407", "#46849"):
            row = page.locator("#summary tbody tr", has_text=change)
            box = row.bounding_box()
            assert box is not None and box["y"] + box["height"] <= height, (change, box)
            said = {li.get_attribute("title"): li.inner_text() for li in row.locator("td.targets li[title]").all()}
            assert re.fullmatch(r"H200 fails: cold/warm: \d+\.\d\dx > 1\.2x on 1 row; \d+ not run", said["cuda-sm90"])
            assert re.fullmatch(r"GB10 not run: \d+ rows", said["cuda-sm121a"]), said
            assert re.fullmatch(r"Strix Halo not run: \d+ rows", said["rocm-gfx1151"]), said
            text = row.inner_text()
            assert "cold_warm" not in text and not re.search("[\u2705\u274c\u23f3]", text)
        browser.close()
