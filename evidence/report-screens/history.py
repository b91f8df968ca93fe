"""The report with its history, as a person sees it: python evidence/report-screens/history.py (from the repository
root).

Thirteen synthetic nightly builds of #48407's rows on cuda-sm90 (the shape tests/test_report_history.py checks), each
reported in turn into one history: one row flaky on one build's ids (quarantined at the fifth build, reinstated after
five passes, then quarantined again as it fails once more), then a rebase onto another fork commit where another row
breaks and warm requests slow down by 60%.
The twelfth build's report.html is shot in Debian's headless Chromium at a desktop's 1366x900 and a phone's 390x844:
its first screen (history-first-*.png) and its change's section across builds (history-across-*.png). Synthetic data:
the report's shape, not a measurement."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from lxml import etree
from playwright.sync_api import sync_playwright

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from ci import cli  # noqa: E402
from ci.bench import synthetic  # noqa: E402
from ci.stack import loader, plan  # noqa: E402

SIZES = ((1366, 900), (390, 844))


def _git(repo: Path, *args: str) -> str:
    who = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid"}  # fmt: skip
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, **who}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


def _fork(root: Path) -> list[str]:
    """A fork checkout with commit A, an imported change's cherry-pick, and the fork's own commit B."""
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    commits = []
    for name, message in (("a", "base of the fork"),
                          ("b", "[Attention] skip dense short prefills\n\n(cherry picked from commit 0d0504b54c73)"),
                          ("c", "fork: its own change")):  # fmt: skip
        (root / f"{name}.py").write_text(f"{name} = 1\n")
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "-m", message)
        commits.append(_git(root, "rev-parse", "HEAD").strip())
    return commits


def _build(folder: Path, day: int, commit: str, image: str, failing: set[str], warm: float, rows: list) -> None:
    st = loader.load()
    cases = []
    for i, row in enumerate(rows):
        c = synthetic.for_row(row, st.changes[row.change])
        c = synthetic.with_metric(c, synthetic.metric("warm_request_ms", warm + i % 3, "ms", "warm"))
        c = synthetic.with_metric(c, synthetic.metric("cold_first_request_ms", 900 + 3 * day + (i % 5), "ms", "cold"))
        failed = {"status": "failure", "message": "top-k mismatch, dense short prefill"} if row.id in failing else {}
        props = (("image_digest", image), ("fork", f"demo-fork main {commit}"))
        cases.append(replace(c, props=props, **failed))
    folder.mkdir(parents=True)
    path = synthetic.write(folder / "stackgate.cuda-sm90.sparse_mla.0.xml", "cuda-sm90", "sparse_mla", cases)
    tree = etree.parse(str(path))
    for suite in tree.getroot().iter("testsuite"):
        suite.set("timestamp", (datetime(2026, 12, 1, 2, 0, tzinfo=UTC) + timedelta(days=day)).isoformat())
    tree.write(str(path))


def main() -> None:
    rows = [r for r in plan.build(loader.load()).rows if r.change == "48407" and r.target == "cuda-sm90"]
    flaky, broke = rows[0].id, rows[1].id
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        a, _, b = _fork(work / "fork")
        os.environ["STACKGATE_FORK"] = str(work / "fork")
        one, two = "sha256:" + "1" * 64, "sha256:" + "2" * 64
        builds = [(a, one, set(), 50.0), (a, one, {flaky}, 51.0), (a, one, set(), 49.0), (a, one, {flaky}, 50.0),
                  (a, one, set(), 50.5), (a, one, {flaky}, 49.5), *[(a, one, set(), 50.0)] * 5,
                  (b, two, {broke, flaky}, 80.0)]  # fmt: skip
        for n, (commit, image, failing, warm) in enumerate(builds, start=1):
            _build(work / f"build-{n}", n, commit, image, failing, warm, rows)
            argv = ["report", str(work / f"build-{n}"), "--out", str(work / "report"), "--history",
                    str(work / "history.sqlite"), "--change", "48407", "--target", "cuda-sm90"]  # fmt: skip
            cli.main(argv)
        page_file = work / "report" / "report.html"
        shutil.copyfile(page_file, work / "report.html")
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            for width, height in SIZES:
                page = browser.new_page(viewport={"width": width, "height": height})
                page.goto(page_file.as_uri())
                page.screenshot(path=str(HERE / f"history-first-{width}x{height}.png"))
                page.goto(page_file.as_uri() + "#across-48407")
                page.screenshot(path=str(HERE / f"history-across-{width}x{height}.png"))
                page.close()
            browser.close()


if __name__ == "__main__":
    main()
